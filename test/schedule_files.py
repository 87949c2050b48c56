"""schedule_files.py: what delayed delivery writes, read back by decoders
independent of the engine.

A store with levels '1s 2s' gets delayed messages on both levels; once
they are delivered the store is closed and its files are read: the commit log by test/spec_decoder.py, and
config/delayOffset.json by a reader of fastjson's text written here (it
quotes the integer keys and hands the text to Python's json). Each delayed
record must have one copy in its REAL_TOPIC / REAL_QID with its flag, body,
born host and time, reconsume times and properties string, transaction bits
cleared and a new offset; delayOffset.json must name, for each level, the
end of its schedule queue.
"""
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time

import spec_decoder
from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq')
SCHEDULE = 'SCHEDULE_TOPIC_XXXX'
TRANSACTION_MASK = 0xC

CHECKS = Checks()
check = CHECKS.eq


def fastjson_loads(text):
    """fastjson's map text, whose integer keys are not quoted, as a dict."""
    return json.loads(re.sub(r'([{,]\s*)(-?\d+)(\s*:)', r'\1"\2"\3', text))


def produce(store):
    conn = sqlite3.connect(':memory:', isolation_level=None)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    conn.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', commitlog_file_size=65536, "
                 "delay_levels='1s 2s')" % store)
    for i in range(6):
        conn.execute("INSERT INTO mq(topic, queue_id, tags, keys, flag, body, born_timestamp, "
                     "delay_level) VALUES ('Py', ?, 'T', ?, ?, ?, ?, ?)",
                     (i % 3, 'k%d' % i, i, b'body-%d' % i, 1700000000000 + i, 1 + i % 2))
    deadline = time.time() + 10
    while time.time() < deadline:
        left = conn.execute("SELECT count(*) FROM rocketmq_scheduled('%s')" % store).fetchone()[0]
        if left == 0:
            break
        time.sleep(0.1)
    conn.close()


def prop(record, name):
    v = spec_decoder.property_value(bytes.fromhex(record['propertiesHex']), name)
    return v.decode() if v is not None else None


def check_copies(records):
    delayed = [r for r in records if r['topic'] == SCHEDULE]
    copies = {}
    for r in records:
        if r['topic'] != SCHEDULE:
            copies.setdefault(prop(r, 'UNIQ_KEY'), []).append(r)
    check('delayed records', len(delayed), 6)
    for d in delayed:
        uniq = prop(d, 'UNIQ_KEY')
        got = copies.get(uniq, [])
        if not CHECKS.ok(len(got) == 1, 'one copy of %s, got %d' % (uniq, len(got))):
            continue
        c = got[0]
        check('topic', c['topic'], prop(d, 'REAL_TOPIC'))
        check('queue', c['queueId'], int(prop(d, 'REAL_QID')))
        for field in ('flag', 'bornTimestamp', 'bornHost', 'reconsumeTimes', 'bodyHex',
                      'bodyCRC', 'propertiesHex', 'storeHost'):
            check(field, c[field], d[field])
        check('sysFlag', c['sysFlag'], d['sysFlag'] & ~TRANSACTION_MASK)
        check('preparedTransactionOffset', c['preparedTransactionOffset'], 0)
        check('later', c['physicalOffset'] > d['physicalOffset'], True)
        check('due', c['storeTimestamp'] >= d['storeTimestamp'] + 1000 * int(prop(d, 'DELAY')),
              True)
    return delayed


def main():
    tmp = tempfile.mkdtemp(prefix='rmq-py-')
    store = os.path.join(tmp, 'store')
    try:
        produce(store)
        records = [r for r in spec_decoder.walk_commitlog(store) if 'topic' in r]
        delayed = check_copies(records)
        ends = {}
        for d in delayed:
            level = d['queueId'] + 1
            ends[str(level)] = max(ends.get(str(level), 0), d['queueOffset'] + 1)
        with open(os.path.join(store, 'config', 'delayOffset.json')) as fh:
            text = fh.read()
        check('delayOffset.json', fastjson_loads(text), {'offsetTable': ends})
        check('unquoted keys', re.search(r'[{,]\s*\d+:', text) is not None, True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
