#!/usr/bin/python3
"""golden_commitlog.py: our record decoders against the CommitLogs that
Apache RocketMQ 4.9.7 wrote (test/golden, see its MANIFEST.md).

    golden_commitlog.py [<golden_dump binary> [<golden dir>]]   (default: $RMQ_BUILD/test/golden_dump, $RMQ_GOLDEN)

The golden dir defaults to test/golden in the repository. For
store-normal and store-crash this runs test/engine/golden_dump (the C codec)
and test/spec_decoder.py (an independent Python decoder) over the read-only
store, checks that both print the same lines, and checks each against
expected.json: every field of every record, the BLANK records and where the
log ends. Every comparison is one check. Prints the failures, then
the counts of test/checks.py; exits 1 if any failed.
"""
import hashlib
import ipaddress
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import spec_decoder  # noqa: E402
from checks import Checks  # noqa: E402

STORES = ('store-normal', 'store-crash')
# Fields that expected.json holds under the same name and meaning.
SAME_FIELDS = ('physicalOffset', 'size', 'queueId', 'queueOffset', 'sysFlag', 'flag', 'bodyCRC',
               'bornTimestamp', 'storeTimestamp', 'reconsumeTimes',
               'preparedTransactionOffset', 'bodyLength', 'msgId')


def host_key(text):
    """'a.b.c.d:port' or '[v6]:port' -> (address, port), whatever the v6 spelling."""
    addr, _, port = text.rpartition(':')
    return ipaddress.ip_address(addr.strip('[]')), int(port)


def check_record(c, where, line, exp):
    for field in SAME_FIELDS:
        c.eq('%s %s' % (where, field), line.get(field), exp[field])
    c.eq(where + ' topic', line.get('topic', '').encode('latin-1').decode('utf-8', 'replace'),
         exp['topic'])
    c.eq(where + ' bornHost', host_key(line['bornHost']), host_key(exp['bornHost']))
    c.eq(where + ' storeHost', host_key(line['storeHost']), host_key(exp['storeHost']))
    c.eq(where + ' body sha256', hashlib.sha256(bytes.fromhex(line['bodyHex'])).hexdigest(),
         exp['bodySha256'])
    c.eq(where + ' properties', bytes.fromhex(line['propertiesHex']),
         exp['propertiesString'].encode('utf-8'))
    # A delayed message's CQ tagsCode is its delivery time, not the TAGS hash.
    if exp['topic'] != 'SCHEDULE_TOPIC_XXXX':
        c.eq(where + ' tagsCode', line['tagsCode'], exp['tagsCode'])


def check_end(c, where, line, commitlog):
    exp_end = commitlog['end'][0]
    c.eq(where + ' end offset', line.get('end'), exp_end['physicalOffset'])
    invalid = commitlog['invalidRecords']
    if invalid:  # a torn record: the CRC or the length check fails
        c.eq(where + ' end is the invalid record', line.get('end'), invalid[0]['recordOffset'])
        c.eq(where + ' end status', line.get('status') in ('BAD_CRC', 'BAD_LENGTH'), True)
    else:        # zeros after the last record
        c.eq(where + ' end status', line.get('status'), 'BAD_MAGIC')


def check_against_expected(c, decoder, store, lines, commitlog):
    where = '%s/%s' % (decoder, store)
    records = [l for l in lines if l.get('blank') is False]
    blanks = [l for l in lines if l.get('blank') is True]
    ends = [l for l in lines if 'end' in l]
    c.eq(where + ' record count', len(records), len(commitlog['messages']))
    for line, exp in zip(records, commitlog['messages']):
        check_record(c, '%s record@%s' % (where, exp['physicalOffset']), line, exp)
    c.eq(where + ' blanks', [(b['physicalOffset'], b['size']) for b in blanks],
         [(b['physicalOffset'], b['totalSize']) for b in commitlog['blankRecords']])
    c.eq(where + ' one end line, last', len(ends) == 1 and lines[-1] is ends[0], True)
    if ends:
        check_end(c, where, ends[0], commitlog)


def run_golden_dump(c, binary, store_dir):
    out = subprocess.run([binary, store_dir], stdout=subprocess.PIPE, check=False)
    c.eq('golden_dump %s exit status' % store_dir, out.returncode, 0)
    text = out.stdout.decode('ascii', 'replace').splitlines()
    lines = []
    for i, t in enumerate(text):
        try:
            lines.append(json.loads(t))
        except ValueError as e:
            c.eq('golden_dump line %d is JSON (%s)' % (i + 1, e), False, True)
    return text, lines


def main(argv):
    """Arguments win; otherwise RMQ_BUILD and RMQ_GOLDEN, as test/run.sh sets them."""
    if len(argv) > 3:
        sys.stderr.write(__doc__)
        return 2
    repo_root = os.path.dirname(HERE)
    build = os.environ.get('RMQ_BUILD') or os.path.join(repo_root, 'build')
    binary = argv[1] if len(argv) > 1 else os.path.join(build, 'test', 'golden_dump')
    golden = argv[2] if len(argv) == 3 else (
        os.environ.get('RMQ_GOLDEN') or os.path.join(repo_root, 'test', 'golden'))
    with open(os.path.join(golden, 'expected.json'), encoding='utf-8') as fh:
        expected = json.load(fh)
    c = Checks()
    for store in STORES:
        store_dir = os.path.join(golden, store)
        commitlog = expected['stores'][store]['commitlog']
        c_text, c_lines = run_golden_dump(c, binary, store_dir)
        py_lines = spec_decoder.walk_commitlog(store_dir)
        py_text = [spec_decoder.dumps(l) for l in py_lines]
        c.eq(store + ' line count, C vs Python', len(c_text), len(py_text))
        for i, (a, b) in enumerate(zip(c_text, py_text)):
            c.eq('%s line %d, C vs Python' % (store, i + 1), a, b)
        check_against_expected(c, 'golden_dump', store, c_lines, commitlog)
        check_against_expected(c, 'spec_decoder', store, py_lines, commitlog)
    return c.report()


if __name__ == '__main__':
    sys.exit(main(sys.argv))
