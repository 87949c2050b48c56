#!/usr/bin/python3
"""layering.py: the layers of the source tree hold.

- ext/ reaches the engine through engine/rmq.h alone: no file of ext/
  includes another engine header.
- engine/rmq.h, the public header, includes no other engine header: the
  component headers include it, never the other way.
- The #include graph among engine/ headers has no cycle.
- No file of engine/ includes a SQLite header: the engine builds and is
  tested without SQLite.
- No two source files call each other in a circle, in engine/ or in ext/:
  read from the built objects (nm: what each object defines and what it
  uses from others), so a file's callers sit above it. A circle fails with
  the files in it and the names that tie each to the next.

Prints each failure, then "tests: 0 passed, 0 failed; checks: N passed, N failed"
(each check counts one rule on one file); exits 1 when something failed.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)

passed = 0
failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAILED: " + what)


def sources(subdir, exts=(".c", ".h")):
    d = os.path.join(ROOT, subdir)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(exts))


def includes(path):
    """(kind, name) of every #include: kind is '"' or '<'."""
    with open(path, encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def rel(path):
    return os.path.relpath(path, ROOT)


engine_headers = {os.path.basename(p) for p in sources("engine", (".h",))}

# ext/ includes no engine header but rmq.h.
for path in sources("ext"):
    for kind, name in includes(path):
        if kind == '"' and os.path.basename(name) in engine_headers:
            check(name == "rmq.h", "%s includes engine header %s; ext/ uses rmq.h alone"
                  % (rel(path), name))

# rmq.h includes no component header.
for kind, name in includes(os.path.join(ROOT, "engine", "rmq.h")):
    check(kind == "<" or name not in engine_headers,
          "engine/rmq.h includes the component header %s" % name)

# No include cycle among engine headers.
graph = {}
for path in sources("engine", (".h",)):
    graph[os.path.basename(path)] = [n for k, n in includes(path)
                                     if k == '"' and n in engine_headers]


def find_cycle():
    state = {}  # 1: on the current path, 2: done
    path = []

    def visit(h):
        state[h] = 1
        path.append(h)
        for n in graph.get(h, []):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if state.get(n) is None:
                c = visit(n)
                if c:
                    return c
        path.pop()
        state[h] = 2
        return None

    for h in sorted(graph):
        if state.get(h) is None:
            c = visit(h)
            if c:
                return c
    return None


cycle = find_cycle()
check(cycle is None, "#include cycle among engine headers: %s" % " -> ".join(cycle or []))

# No SQLite header in engine/.
for path in sources("engine"):
    for kind, name in includes(path):
        check(not os.path.basename(name).startswith("sqlite3"),
              "%s includes the SQLite header %s" % (rel(path), name))



def nm_symbols(obj, *flags, kinds=None):
    """Names nm lists for obj; with kinds, only those of these symbol types."""
    out = subprocess.run(["nm", *flags, obj], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return {r[-1] for r in rows if kinds is None or (len(r) >= 2 and r[-2] in kinds)}


def call_graph(objdir):
    """file -> {file it calls: [the names]} over the objects of objdir."""
    objs = sorted(f for f in os.listdir(objdir) if f.endswith(".o"))
    owner = {}
    for o in objs:
        # Functions only: a shared variable (the extension's sqlite3_api) is no call.
        for sym in nm_symbols(os.path.join(objdir, o), "-g", "--defined-only", kinds="TW"):
            owner[sym] = o[:-2] + ".c"
    graph = {}
    for o in objs:
        me = o[:-2] + ".c"
        uses = graph.setdefault(me, {})
        for sym in nm_symbols(os.path.join(objdir, o), "-u"):
            other = owner.get(sym)
            if other and other != me:
                uses.setdefault(other, []).append(sym)
    return graph


def circles(graph):
    """The strongly connected groups of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


build = os.environ.get("RMQ_BUILD", os.path.join(ROOT, "build"))
for layer in ("engine", "ext"):
    objdir = os.path.join(build, "obj", layer)
    check(os.path.isdir(objdir), "no objects of %s/ in %s: build first" % (layer, objdir))
    if not os.path.isdir(objdir):
        continue
    graph = call_graph(objdir)
    check(len(graph) > 1, "%s: no objects read" % objdir)
    for group in circles(graph):
        ties = ["%s/%s -> %s/%s: %s" % (layer, a, layer, b, ", ".join(sorted(graph[a][b])[:6]))
                for a in group for b in group if b in graph[a]]
        check(False, "%s/ files call each other in a circle: %s\n  %s"
              % (layer, ", ".join(group), "\n  ".join(ties)))

print("tests: 0 passed, 0 failed; checks: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
