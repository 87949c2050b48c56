#!/usr/bin/python3
"""engine_store_decode.py: a store written by our engine, read back by the
independent decoder test/spec_decoder.py (written from the format, not from
the engine).

    engine_store_decode.py [<write_store binary>]   (default: $RMQ_BUILD/test/write_store)

Runs test/engine/write_store into a fresh temporary directory. It puts about
3000 varied messages (4 MiB segments, IPv4 and IPv6 hosts, 1 MiB and empty
bodies, a batch, a transaction, delayed messages, two reopens) and prints
one JSON line per put, made from what it put and the put results. Then
spec_decoder.walk_commitlog() walks <dir>/commitlog and this checks:
  * every reported record is decoded at its offset, each field equal (one
    check per field);
  * the decoder finds no record that was not reported;
  * every full segment ends with a BLANK right after its last record, whose
    size is the bytes left in the segment;
  * the log ends (zeros, BAD_MAGIC) right after the last reported record.
Prints the failures, then the counts of test/checks.py; exits 1 if any failed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import spec_decoder  # noqa: E402
from checks import Checks  # noqa: E402

FIELDS = ('physicalOffset', 'size', 'topic', 'queueId', 'queueOffset', 'sysFlag', 'flag',
          'bodyCRC', 'bornTimestamp', 'bornHost', 'storeTimestamp', 'storeHost',
          'reconsumeTimes', 'preparedTransactionOffset', 'bodyLength', 'bodyHex',
          'propertiesHex', 'msgId', 'tagsCode', 'blank')
MAX_FAILURES_SHOWN = 50


def run_writer(c, binary, store_dir):
    try:
        out = subprocess.run([binary, store_dir], stdout=subprocess.PIPE, timeout=300,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        c.eq('run %s (%s)' % (binary, e), False, True)
        return []
    c.eq('write_store exit status', out.returncode, 0)
    reported = []
    for i, text in enumerate(out.stdout.decode('ascii', 'replace').splitlines()):
        try:
            reported.append(json.loads(text))
        except ValueError as e:
            c.eq('write_store line %d is JSON (%s)' % (i + 1, e), False, True)
    return reported


def check_store(c, store_dir, reported):
    c.eq('write_store reported records', len(reported) > 2000, True)
    offsets = [r.get('physicalOffset') for r in reported]
    c.eq('reported offsets strictly increase',
         all(isinstance(o, int) for o in offsets) and
         all(a < b for a, b in zip(offsets, offsets[1:])), True)

    lines = spec_decoder.walk_commitlog(store_dir)
    records = [l for l in lines if l.get('blank') is False]
    blanks = [l for l in lines if l.get('blank') is True]
    ends = [l for l in lines if 'end' in l]
    decoded = {l['physicalOffset']: l for l in records}
    c.eq('decoded offsets unique', len(decoded), len(records))

    # Every reported record, field by field.
    for rep in reported:
        off = rep.get('physicalOffset')
        where = 'record@%s' % off
        dec = decoded.get(off)
        if not c.eq(where + ' decoded at its offset', dec is not None, True):
            continue
        c.eq(where + ' key set', sorted(rep), sorted(dec))
        for field in FIELDS:
            c.eq('%s %s' % (where, field), rep.get(field), dec.get(field))

    # No record the writer did not report.
    reported_offsets = set(offsets)
    c.eq('decoded records not reported',
         [l['physicalOffset'] for l in records if l['physicalOffset'] not in reported_offsets], [])
    c.eq('decoded record count', len(records), len(reported))
    c.eq('lines are records, blanks or one end',
         len(records) + len(blanks) + len(ends), len(lines))
    if not reported:
        return

    # A BLANK right after the last record of every full segment, filling it.
    segments = spec_decoder.segment_files(os.path.join(store_dir, 'commitlog'))
    last = reported[-1]
    log_end = last['physicalOffset'] + last['size']
    expected_blanks = []
    for start, path in segments:
        size = os.path.getsize(path)
        if start + size > last['physicalOffset']:
            break  # the segment being written, and any after it
        in_seg = [r for r in reported if start <= r['physicalOffset'] < start + size]
        if not c.eq('segment %d holds reported records' % start, bool(in_seg), True):
            continue
        after = in_seg[-1]['physicalOffset'] + in_seg[-1]['size']
        expected_blanks.append((after, start + size - after))
    c.eq('full segments', len(expected_blanks) >= 2, True)
    got_blanks = [(b['physicalOffset'], b['size']) for b in blanks]
    c.eq('blank count', len(got_blanks), len(expected_blanks))
    for i, exp in enumerate(expected_blanks):
        c.eq('blank %d (offset, size)' % i, got_blanks[i] if i < len(got_blanks) else None, exp)

    # The log ends right after the last record.
    c.eq('one end line, last', len(ends) == 1 and lines[-1] is ends[0], True)
    if ends:
        c.eq('end offset', ends[0]['end'], log_end)
        c.eq('end status', ends[0]['status'], 'BAD_MAGIC')


def main(argv):
    if len(argv) > 2:
        sys.stderr.write(__doc__)
        return 2
    repo_root = os.path.dirname(HERE)
    build = os.environ.get('RMQ_BUILD') or os.path.join(repo_root, 'build')
    binary = argv[1] if len(argv) == 2 else os.path.join(build, 'test', 'write_store')
    c = Checks(max_shown=MAX_FAILURES_SHOWN, max_repr=300)
    tmp = tempfile.mkdtemp(prefix='rmq-store-decode-')
    try:
        store_dir = os.path.join(tmp, 'store')
        reported = run_writer(c, binary, store_dir)
        check_store(c, store_dir, reported)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return c.report()


if __name__ == '__main__':
    sys.exit(main(sys.argv))
