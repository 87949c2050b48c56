"""python_api.py: the README's Python example, run through Debian's /usr/bin/python3,
whose sqlite3 module can load extensions.

Loads the extension with conn.load_extension(), creates a store, produces in
a transaction, consumes by queue offset, looks up by key, and checks that two
connections of one process share the store. Ends with the counts of test/checks.py.
"""
import os
import shutil
import sqlite3
import sys
import tempfile

from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq')

CHECKS = Checks()
check = CHECKS.eq


def connect(store):
    conn = sqlite3.connect(':memory:', isolation_level=None)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    conn.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir=?, commitlog_file_size=65536)"
                 .replace('?', "'%s'" % store))
    return conn


def main():
    tmp = tempfile.mkdtemp(prefix='rmq-py-')
    store = os.path.join(tmp, 'store')
    try:
        conn = connect(store)
        check('version', conn.execute('SELECT rocketmq_version()').fetchone()[0] != '', True)

        cur = conn.execute("INSERT INTO mq(topic, queue_id, tags, keys, body) "
                           "VALUES ('Orders', 0, 'created', 'order-1', ?)", (b'\xff\xfebinary',))
        check('lastrowid is the commit-log offset', cur.lastrowid, 0)

        conn.execute('BEGIN')
        for i in range(10):
            conn.execute("INSERT INTO mq(topic, queue_id, tags, keys, body) VALUES (?, 0, ?, ?, ?)",
                         ('Orders', 'paid' if i % 2 else 'created', 'order-%d' % (i + 2),
                          'message %d' % i))
        conn.execute('COMMIT')

        rows = conn.execute("SELECT queue_offset, body_text FROM mq WHERE topic = 'Orders' "
                            "AND queue_id = 0 AND queue_offset >= ? AND queue_offset < ?",
                            (1, 4)).fetchall()
        check('consume by offset', rows, [(1, 'message 0'), (2, 'message 1'), (3, 'message 2')])

        row = conn.execute("SELECT body, body_text FROM mq WHERE topic = 'Orders' AND key = ?",
                           ('order-1',)).fetchone()
        check('binary body', row, (b'\xff\xfebinary', None))

        count = conn.execute("SELECT count(*) FROM mq WHERE topic = 'Orders' AND queue_id = 0 "
                             "AND queue_offset >= 0 AND tags = 'paid'").fetchone()[0]
        check('tag filter', count, 5)

        other = connect(store)
        check('a second connection shares the store',
              other.execute('SELECT count(*) FROM mq').fetchone()[0], 11)
        other.close()

        try:
            conn.execute("INSERT INTO mq(topic, body) VALUES ('bad/topic', 'x')")
            check('bad topic refused', 'no error', 'error')
        except sqlite3.DatabaseError as e:
            check('bad topic refused', 'is not a valid RocketMQ topic' in str(e), True)
        conn.close()
        check('abort file removed at the last close', os.path.exists(os.path.join(store, 'abort')),
              False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
