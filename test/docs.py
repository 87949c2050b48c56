#!/usr/bin/python3
"""docs.py: the documentation says what the extension does.

- Every argument of CREATE VIRTUAL TABLE ... USING rocketmq(...) that
  ext/args.c accepts (its arg_specs table, and dir) is named as `name` in
  docs/reference.md.
- Every column of the store table and of each companion table, hidden ones
  included (PRAGMA table_xinfo of the extension's own tables; the modules
  are those of PRAGMA module_list named rocketmq*), is named in a code span
  (`...`) of that table's section of docs/reference.md: the section under
  the heading whose code span names the table. Every SQL function
  rocketmq_* (PRAGMA function_list) is named in a code span there.
- Every ```sql block of README.md and docs/*.md runs. Each file's blocks run
  in order, in one fresh temporary directory (the current directory) on one
  fresh connection (a database file app.db there, autocommit) that loaded
  the extension, so a block may build on the blocks above it in the same
  file. In a block:
    * `.load ...` is skipped (the extension is loaded already);
    * `.param set NAME VALUE` (or `.parameter set`) binds NAME as the sqlite3
      shell does: VALUE as an SQL expression, or as text when it is none;
      an unset parameter is NULL, as in the shell; other dot-commands fail;
    * `-- ...` lines right below a statement's last line (no blank line
      between) are its output in the shell's list mode: one row per line,
      values joined by |, NULL empty; EXPLAIN QUERY PLAN as the shell draws
      it. They are compared with the rows the statement returns.
  A block whose info string is `sql skip` is not run (it needs outside
  state: a broker's store, a replication peer). In a `sql error` block
  every statement but the last must run and the last must fail; the lines
  below it hold text its error message must contain.

Prints each failure, then "tests: 0 passed, 0 failed; checks: N passed,
N failed"; exits 1 when something failed. The extension is RMQ_EXT (its
path without .so).
"""
import glob
import os
import re
import shlex
import shutil
import sqlite3
import sys
import tempfile

from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.path.abspath(os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq'))
REFERENCE = os.path.join(ROOT, 'docs', 'reference.md')

CHECKS = Checks()


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def rel(path):
    return os.path.relpath(path, ROOT)


def connect(path):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    conn.enable_load_extension(False)
    return conn


# ---------------------------------------------------------------------------
# The reference names every argument, column and function.

def arguments():
    """The argument names of ext/args.c's arg_specs table, and dir."""
    text = read(os.path.join(ROOT, 'ext', 'args.c'))
    m = re.search(r'arg_specs\[\]\s*=\s*\{(.*?)\n\};', text, re.S)
    CHECKS.ok(m is not None, 'ext/args.c: no arg_specs table found')
    if m is None:
        return ['dir']
    body = m.group(1)
    names = re.findall(r'\b(?:INT_ARG|TEXT_ARG)\((\w+)\)', body)
    names += re.findall(r'\{\s*"(\w+)"', body)
    CHECKS.ok(len(names) >= 30, 'ext/args.c: only %d arguments parsed from arg_specs' % len(names))
    return ['dir'] + names


def code_spans(text):
    # Fenced blocks are not code spans; drop them first.
    text = re.sub(r'^ *```.*?^ *```', '', text, flags=re.S | re.M)
    return re.findall(r'`([^`\n]+)`', text)


def sections(text):
    """(heading line, level, section text up to the next heading of its level or higher)."""
    lines = text.split('\n')
    heads = []
    fence = False
    for i, line in enumerate(lines):
        if line.lstrip(' ').startswith('```'):
            fence = not fence
        elif not fence:
            m = re.match(r'^(#+)\s', line)
            if m:
                heads.append((i, len(m.group(1))))
    out = []
    for k, (i, level) in enumerate(heads):
        end = len(lines)
        for j, lv in heads[k + 1:]:
            if lv <= level:
                end = j
                break
        out.append((lines[i], level, '\n'.join(lines[i:end])))
    return out


def named_in(spans, name):
    word = re.compile(r'(?<![\w%])' + re.escape(name) + r'(?!\w)')
    return any(s == name or word.search(s) for s in spans)


def table_section(secs, module):
    """The section whose heading has a code span naming module (module or module(...))."""
    for head, level, text in secs:
        for span in re.findall(r'`([^`]+)`', head):
            if span == module or span.startswith(module + '('):
                return text
    return None


def check_reference(tmp):
    if not CHECKS.ok(os.path.exists(REFERENCE), 'docs/reference.md is missing'):
        return
    text = read(REFERENCE)
    spans = code_spans(text)
    for name in arguments():
        CHECKS.ok('`%s`' % name in text, 'docs/reference.md: no `%s` (an argument of ext/args.c)' % name)

    conn = connect(':memory:')
    try:
        conn.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s')"
                     % os.path.join(tmp, 'columns-store').replace("'", "''"))
        modules = [r[0] for r in conn.execute(
            "SELECT name FROM pragma_module_list WHERE name LIKE 'rocketmq%' ORDER BY name")]
        CHECKS.ok('rocketmq' in modules and len(modules) > 5,
                  'PRAGMA module_list: rocketmq modules %r' % modules)
        secs = sections(text)
        for module in modules:
            table = 'mq' if module == 'rocketmq' else module
            columns = [r[1] for r in conn.execute('PRAGMA table_xinfo(%s)' % table)]
            CHECKS.ok(columns, 'PRAGMA table_xinfo(%s) lists no column' % table)
            sec = table_section(secs, module)
            if not CHECKS.ok(sec is not None,
                             'docs/reference.md: no section whose heading names `%s`' % module):
                continue
            sec_spans = code_spans(sec)
            for col in columns:
                CHECKS.ok(named_in(sec_spans, col),
                          'docs/reference.md: column %s of %s is not named in `...` in its section'
                          % (col, module))
        functions = sorted({r[0] for r in conn.execute(
            "SELECT name FROM pragma_function_list WHERE name LIKE 'rocketmq%'")})
        CHECKS.ok(len(functions) >= 5, 'PRAGMA function_list: rocketmq functions %r' % functions)
        for fn in functions:
            CHECKS.ok(named_in(spans, fn), 'docs/reference.md: function %s is not named in `...`' % fn)
        conn.execute('DROP TABLE mq')
    finally:
        conn.close()


# ---------------------------------------------------------------------------
# Every ```sql block runs, and shows what it returns.

def sql_blocks(text):
    """(first line number, flags, lines) of each ```sql block."""
    out = []
    lines = text.split('\n')
    i = 0
    while i < len(lines):
        m = re.match(r'^( *)(`{3,})\s*(\S*)\s*(.*)$', lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, rest = m.groups()
        j = i + 1
        while j < len(lines) and not lines[j].lstrip(' ').startswith(fence):
            j += 1
        if lang == 'sql':
            # A block inside a list item is indented: its lines lose that indent.
            body = [l[len(indent):] if l.startswith(indent) else l.lstrip(' ') for l in lines[i + 1:j]]
            out.append((i + 2, set(rest.split()), body))
        i = j + 1
    return out


class Statement:
    def __init__(self, line, sql):
        self.line = line      # line number in the file of its first line
        self.sql = sql
        self.expected = []    # the shell's output lines shown below it
        self.dot = None       # a dot-command's arguments, instead of sql


def parse_block(first, lines):
    """Statements and dot-commands of a block, each with the output lines shown below it."""
    items, pending, start, last = [], [], None, None
    for n, line in enumerate(lines, first):
        stripped = line.strip()
        if not pending and last is not None and stripped.startswith('--'):
            last.expected.append(re.sub(r'^--\s?', '', stripped))
            continue
        last = None
        if not pending and stripped.startswith('.'):
            st = Statement(n, line)
            st.dot = shlex.split(stripped)
            items.append(st)
            continue
        if not stripped and not pending:
            continue
        if not pending:
            start = n
        pending.append(line)
        if not stripped:
            continue
        sql = '\n'.join(pending)
        if sqlite3.complete_statement(sql):
            last = Statement(start, sql)
            items.append(last)
            pending = []
    rest = '\n'.join(pending)
    if re.sub(r'--[^\n]*', '', rest).strip():
        st = Statement(start, rest)
        st.dot = ['(incomplete)']
        items.append(st)
    return items


class Params(dict):
    """Named parameters by name without its prefix; an unset one is NULL."""
    def __missing__(self, key):
        return None


def value_text(v):
    if v is None:
        return ''
    if isinstance(v, float):
        s = '%.15g' % v
        if re.fullmatch(r'-?\d+', s):
            s += '.0'
        return s
    if isinstance(v, bytes):
        return v.decode('utf-8', errors='replace')
    return str(v)


def query_plan(rows):
    """EXPLAIN QUERY PLAN's rows drawn as the sqlite3 shell draws them."""
    children = {}
    for node, parent, _, detail in rows:
        children.setdefault(parent, []).append((node, detail))
    out = ['QUERY PLAN']

    def walk(parent, prefix):
        kids = children.get(parent, [])
        for k, (node, detail) in enumerate(kids):
            last = k == len(kids) - 1
            out.append(prefix + ('`--' if last else '|--') + detail)
            walk(node, prefix + ('   ' if last else '|  '))
    walk(0, '')
    return out


def is_eqp(sql):
    body = re.sub(r'^(\s*--[^\n]*\n)*\s*', '', sql)
    return re.match(r'EXPLAIN\s+QUERY\s+PLAN\b', body, re.I) is not None


def run_dot(conn, params, st, where):
    args = st.dot
    if args and args[0] == '.load':
        return True
    if len(args) == 4 and args[0] in ('.param', '.parameter') and args[1] == 'set':
        name, value = args[2], args[3]
        if not CHECKS.ok(re.match(r'^[:$@]\w+$', name) is not None,
                         '%s: .param set needs a named parameter (:name, $name or @name), not %s'
                         % (where, name)):
            return False
        try:
            bound = conn.execute('SELECT ' + value).fetchone()[0]
        except sqlite3.Error:
            bound = value
        params[name[1:]] = bound
        return True
    CHECKS.ok(False, '%s: unsupported in a sql block: %s' % (where, ' '.join(args)))
    return False


def run_file(path):
    text = read(path)
    blocks = sql_blocks(text)
    if not blocks:
        return 0, 0
    tmp = tempfile.mkdtemp(prefix='rmq-docs-')
    cwd = os.getcwd()
    skipped = 0
    try:
        os.chdir(tmp)
        conn = connect('app.db')
        params = Params()
        for first, flags, lines in blocks:
            if 'skip' in flags:
                skipped += 1
                continue
            items = parse_block(first, lines)
            error_block = 'error' in flags
            for k, st in enumerate(items):
                where = '%s:%d' % (rel(path), st.line)
                if st.dot is not None:
                    if not run_dot(conn, params, st, where):
                        break
                    continue
                expect_error = error_block and k == len(items) - 1
                try:
                    cur = conn.execute(st.sql, params)
                    rows = cur.fetchall()
                except sqlite3.Error as e:
                    if expect_error:
                        msg = str(e)
                        want = ' '.join(st.expected)
                        CHECKS.ok(bool(want), '%s: a sql error block shows no message below its '
                                  'last statement' % where)
                        CHECKS.ok(want in msg, '%s: error %r does not contain %r' % (where, msg, want))
                    else:
                        CHECKS.ok(False, '%s: %s\n    in: %s' % (where, e, st.sql.strip()))
                        break
                    continue
                if expect_error:
                    CHECKS.ok(False, '%s: a sql error block whose last statement did not fail: %s'
                              % (where, st.sql.strip()))
                    continue
                CHECKS.ok(True, where)
                if st.expected:
                    got = query_plan(rows) if is_eqp(st.sql) else \
                        ['|'.join(value_text(v) for v in row) for row in rows]
                    CHECKS.eq('%s: the output shown below %s' % (where, st.sql.strip().split('\n')[-1]),
                              got, st.expected)
            if error_block and items and items[-1].dot is not None:
                CHECKS.ok(False, '%s:%d: a sql error block must end with a statement' % (rel(path), first))
        conn.close()
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)
    return len(blocks), skipped


# ---------------------------------------------------------------------------
# Every relative link leads to a file, and to a heading of it.

def anchors(path):
    """The anchors GitHub gives the headings of a Markdown file."""
    out, seen = set(), {}
    for head, _, _ in sections(read(path)):
        title = re.sub(r'^#+\s*', '', head).strip().lower()
        slug = re.sub(r'[^\w\- ]', '', title).replace(' ', '-')
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else '%s-%d' % (slug, n))
    return out


def check_links(path):
    text = re.sub(r'^ *```.*?^ *```', '', read(path), flags=re.S | re.M)
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
        if re.match(r'^[a-z]+:', target):
            continue
        file, _, anchor = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not CHECKS.ok(os.path.exists(dest), '%s: link to a missing file: %s' % (rel(path), target)):
            continue
        if anchor:
            CHECKS.ok(dest.endswith('.md') and anchor in anchors(dest),
                      '%s: link to a missing heading: %s' % (rel(path), target))


def main():
    tmp = tempfile.mkdtemp(prefix='rmq-docs-ref-')
    try:
        check_reference(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    files = [os.path.join(ROOT, 'README.md')] + sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md')))
    for path in files:
        check_links(path)
    for path in files:
        n, skipped = run_file(path)
        print('%s: %d sql blocks, %d skipped' % (rel(path), n, skipped))
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
