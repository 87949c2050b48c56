#!/usr/bin/python3
"""golden_queues.py: the engine's ConsumeQueue and IndexFile code against
stores written by Apache RocketMQ 4.9.7 itself (the golden stores).

For every store in $RMQ_GOLDEN/expected.json this runs
$RMQ_BUILD/test/golden_queues_dump (test/engine/golden_queues_dump.c) on the
store, read-only, with every index key of expected.json on stdin, and checks:
  - every consume queue and every entry (cqOffset, commitLogOffset, size,
    tagsCode) equals stores[*].consumequeue.queues, and no other queue exists;
  - after truncating the queues at the CommitLog end (what RocketMQ's
    recovery does), min/max of each queue equal rocketmqVerify.queues;
  - every index file header equals index.files[*];
  - every lookup over all index files equals index.lookups[*].phyOffsets;
  - no file of the store changed (sha256 as in expected.json);
  - for a store without torn records: writing its records again through the
    engine (golden_queues_dump --rebuild) gives consume-queue files and index
    files byte-identical to RocketMQ's (index files compared in name order,
    as their names are creation times).
Environment: RMQ_BUILD (default build), RMQ_GOLDEN (default test/golden,
relative to the repository root). Ends with the counts of test/checks.py; exit 1 on
any failure.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from checks import Checks

CHECKS = Checks()
check = CHECKS.ok


def finish():
    sys.exit(CHECKS.report())


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_dump(dump, store_dir, cfg, keys, end_phy):
    args = [dump, store_dir,
            str(cfg["mappedFileSizeConsumeQueue"] // 20),
            str(cfg["maxHashSlotNum"]), str(cfg["maxIndexNum"]), str(end_phy)]
    proc = subprocess.run(args, input="".join(k + "\n" for k in keys).encode("utf-8"),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if proc.returncode != 0:
        check(False, "%s exited with %d: %s" % (" ".join(args), proc.returncode,
                                                 proc.stderr.decode("utf-8", "replace")))
        return None
    return [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines() if line]


def check_queues(name, expected, dumped):
    got = {d["queue"]: d for d in dumped if "queue" in d}
    want = expected["consumequeue"]["queues"]
    check(sorted(got) == sorted(want),
          "%s: queues %s, expected %s" % (name, sorted(got), sorted(want)))
    for q, entries in want.items():
        if q not in got:
            continue
        want_e = [[e["cqOffset"], e["commitLogOffset"], e["size"], e["tagsCode"]]
                  for e in entries]
        check(got[q]["entries"] == want_e,
              "%s %s: entries %s, expected %s" % (name, q, got[q]["entries"], want_e))
        check(got[q]["max"] == len(entries),
              "%s %s: max offset %d, expected %d" % (name, q, got[q]["max"], len(entries)))


def check_recovered(name, expected, dumped):
    """Queue bounds after truncation at the CommitLog end, as RocketMQ reported them."""
    got = {d["truncated"]: d for d in dumped if "truncated" in d}
    for v in expected["rocketmqVerify"]["queues"]:
        q = "%s/%d" % (v["topic"], v["queueId"])
        if q not in got:
            # RocketMQ lists queues of its topic config that have no files.
            check(v["maxOffset"] == 0, "%s %s: no files, but RocketMQ reports max %d"
                  % (name, q, v["maxOffset"]))
            continue
        check((got[q]["min"], got[q]["max"]) == (v["minOffset"], v["maxOffset"]),
              "%s %s: [%d, %d) after truncation, RocketMQ reports [%d, %d)"
              % (name, q, got[q]["min"], got[q]["max"], v["minOffset"], v["maxOffset"]))


HEADER = ["beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset",
          "hashSlotCount", "indexCount"]


def check_index(name, expected, dumped):
    got = {d["indexFile"]: d for d in dumped if "indexFile" in d}
    want = {f["file"]: f for f in expected["index"]["files"]}
    check(sorted(got) == sorted(want),
          "%s: index files %s, expected %s" % (name, sorted(got), sorted(want)))
    for f, w in want.items():
        if f in got:
            for field in HEADER:
                check(got[f][field] == w[field], "%s %s: %s %d, expected %d"
                      % (name, f, field, got[f][field], w[field]))
    lookups = {d["lookup"]: d["phyOffsets"] for d in dumped if "lookup" in d}
    for key, w in expected["index"]["lookups"].items():
        check(lookups.get(key) == w["phyOffsets"], "%s lookup %s: %s, expected %s"
              % (name, key, lookups.get(key), w["phyOffsets"]))


def record_line(m):
    """One dispatched record in the tab-separated form golden_queues_dump --rebuild reads."""
    fields = [m["topic"], m["queueId"], m["queueOffset"], m["physicalOffset"], m["size"],
              m["tagsCode"], m["storeTimestamp"], m["sysFlag"],
              1 if m["goesToConsumeQueue"] else 0,
              "-" if m.get("keys") is None else m["keys"],
              "-" if m.get("uniqKey") is None else m["uniqKey"]]
    return "\t".join(str(f) for f in fields) + "\n"


def check_rebuild(name, store, dump, cfg):
    out = tempfile.mkdtemp(prefix="rmq-golden-rebuild-")
    try:
        args = [dump, "--rebuild", out, str(cfg["mappedFileSizeConsumeQueue"] // 20),
                str(cfg["maxHashSlotNum"]), str(cfg["maxIndexNum"])]
        records = "".join(record_line(m) for m in store["commitlog"]["messages"])
        proc = subprocess.run(args, input=records.encode("utf-8"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=120)
        check(proc.returncode == 0,
              "%s rebuild: %s" % (name, proc.stderr.decode("utf-8", "replace")))
        if proc.returncode != 0:
            return
        want = {f["path"]: f["sha256"] for f in store["files"]}
        cq = sorted(p for p in want if p.startswith("consumequeue/"))
        for p in cq:
            path = os.path.join(out, p)
            check(os.path.exists(path) and sha256(path) == want[p],
                  "%s rebuild: %s differs from RocketMQ's" % (name, p))
        got_cq = sorted(os.path.relpath(os.path.join(d, f), out)
                        for d, _, fs in os.walk(os.path.join(out, "consumequeue")) for f in fs)
        check(got_cq == cq, "%s rebuild: consume-queue files %s, expected %s" % (name, got_cq, cq))
        index = sorted(p for p in want if p.startswith("index/"))
        got_index = sorted(os.listdir(os.path.join(out, "index")))
        check(len(got_index) == len(index),
              "%s rebuild: %d index files, expected %d" % (name, len(got_index), len(index)))
        for mine, theirs in zip(got_index, index):
            check(sha256(os.path.join(out, "index", mine)) == want[theirs],
                  "%s rebuild: index/%s differs from RocketMQ's %s" % (name, mine, theirs))
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    build = os.environ.get("RMQ_BUILD", "build")
    golden = os.environ.get("RMQ_GOLDEN", os.path.join("test", "golden"))
    dump = os.path.join(build, "test", "golden_queues_dump")
    try:
        with open(os.path.join(golden, "expected.json"), encoding="utf-8") as f:
            spec = json.load(f)
    except OSError as e:
        check(False, "cannot read the golden stores: %s" % e)
        finish()
    if not os.access(dump, os.X_OK):
        check(False, "%s is not built (test/engine/golden_queues_dump.c)" % dump)
        finish()
    cfg = spec["storeConfig"]
    for name, store in spec["stores"].items():
        store_dir = os.path.join(golden, store["directory"])
        end_phy = store["commitlog"]["summary"]["maxPhysicalOffset"]
        dumped = run_dump(dump, store_dir, cfg, list(store["index"]["lookups"]), end_phy)
        if dumped is None:
            continue
        check_queues(name, store, dumped)
        check_recovered(name, store, dumped)
        check_index(name, store, dumped)
        for f in store["files"]:
            path = os.path.join(store_dir, f["path"])
            check(os.path.exists(path) and sha256(path) == f["sha256"],
                  "%s: %s changed or vanished" % (name, f["path"]))
        if not store["commitlog"]["invalidRecords"]:
            check_rebuild(name, store, dump, cfg)
    finish()


if __name__ == "__main__":
    main()
