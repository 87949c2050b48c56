"""consumer_files.py: the config files and records that consumer groups
write, read back with decoders independent of the engine.

config/consumerOffset.json and config/topics.json are read with a small
fastjson reader written here (integer keys without quotes turned into
strings, then Python's json module), and their layout is checked against
RocketMQ's (tab indentation, unquoted integer keys, an integer-keyed map
closed on its own line). A message given back with rocketmq_send_back is
decoded from the commit log with test/spec_decoder.py: the record a
broker's SendMessageProcessor.consumerSendMsgBack would store.
Ends with the counts of test/checks.py.
"""
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile

import spec_decoder
from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq')

CHECKS = Checks()
check = CHECKS.eq


def read_fastjson(path):
    """fastjson's text as Python objects: {0:250} has integer keys without quotes."""
    with open(path, encoding='utf-8') as fh:
        text = fh.read()
    return text, json.loads(re.sub(r'([{,]\s*)(-?\d+):', r'\1"\2":', text))


def main():
    tmp = tempfile.mkdtemp(prefix='rmq-consumer-files-')
    store = os.path.join(tmp, 's')
    try:
        db = sqlite3.connect(':memory:', isolation_level=None)
        db.enable_load_extension(True)
        db.load_extension(EXT)
        db.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', commitlog_file_size=65536, "
                   "consumequeue_entries=64, index_slots=64, index_entries=256)" % store)
        for i in range(6):
            db.execute("INSERT INTO mq(topic, queue_id, body, keys) VALUES ('Orders', ?, ?, ?)",
                       (i % 3, 'body %d' % i, 'k%d' % i))
        db.execute("SELECT rocketmq_commit_offset(?, 'billing', 'Orders', 0, 2)", (store,))
        db.execute("SELECT rocketmq_commit_offset(?, 'billing', 'Orders', 2, 1)", (store,))
        db.execute("SELECT rocketmq_commit_offset(?, 'audit', 'Orders', 1, 0)", (store,))
        first, msg_id = db.execute(
            "SELECT commitlog_offset, msg_id FROM mq WHERE topic = 'Orders' AND key = 'k4'"
        ).fetchone()
        retry = db.execute("SELECT rocketmq_send_back(?, 'billing', ?)",
                           (store, first)).fetchone()[0]
        db.execute("SELECT rocketmq_flush(?)", (store,))

        text, offsets = read_fastjson(os.path.join(store, 'config', 'consumerOffset.json'))
        check('consumerOffset.json', offsets,
              {'offsetTable': {'Orders@billing': {'0': 2, '2': 1}, 'Orders@audit': {'1': 0}}})
        check('unquoted integer keys, tabs, map closed on its own line',
              '\t\t"Orders@billing":{0:2,2:1\n\t\t}' in text, True)

        text, topics = read_fastjson(os.path.join(store, 'config', 'topics.json'))
        table = topics['topicConfigTable']
        check('topics', sorted(table), ['Orders', 'SCHEDULE_TOPIC_XXXX'])
        check('Orders', table['Orders'],
              {'order': False, 'perm': 6, 'readQueueNums': 3, 'topicFilterType': 'SINGLE_TAG',
               'topicName': 'Orders', 'topicSysFlag': 0, 'writeQueueNums': 3})
        check('schedule topic queues', table['SCHEDULE_TOPIC_XXXX']['readQueueNums'], 18)
        check('dataVersion counter', topics['dataVersion']['counter'] >= 1, True)
        check('tab indentation', text.startswith('{\n\t"dataVersion":{\n\t\t"counter":'), True)

        db.close()  # the last user: the store closes, its files are final
        records = {r['physicalOffset']: r for r in spec_decoder.walk_commitlog(store)
                   if 'topic' in r}
        r = records.get(retry)
        check('retry record decoded', r is not None, True)
        if r:
            props = dict(spec_decoder.parse_properties(bytes.fromhex(r['propertiesHex'])))
            check('retry topic', r['topic'], 'SCHEDULE_TOPIC_XXXX')
            check('retry queue (level 3)', r['queueId'], 2)
            check('reconsume times', r['reconsumeTimes'], 1)
            check('body', bytes.fromhex(r['bodyHex']), b'body 4')
            check('properties', {k: props.get(k) for k in
                                 ('DELAY', 'REAL_TOPIC', 'REAL_QID', 'RETRY_TOPIC',
                                  'ORIGIN_MESSAGE_ID', 'KEYS')},
                  {'DELAY': '3', 'REAL_TOPIC': '%RETRY%billing', 'REAL_QID': '0',
                   'RETRY_TOPIC': 'Orders', 'ORIGIN_MESSAGE_ID': msg_id, 'KEYS': 'k4'})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
