"""consumer.py: a consumer group's loop over one queue of a store, as a
RocketMQ push consumer runs it: read a batch of up to 32 messages from the
group's committed offset, process them, commit the group's new position,
and long-poll (wait_ms) for more. A crash between processing and commit
hands the batch over again at the next start: at-least-once, as RocketMQ.

    .venv/bin/python examples/consumer.py STORE GROUP TOPIC QUEUE_ID [ARGUMENTS]

(ARGUMENTS: more arguments of the rocketmq table, such as
commitlog_file_size=65536 for a store made with it) prints each message of
the queue that GROUP has not consumed, waits for more, and stops at SIGINT
or SIGTERM. A STORE that is not a store is refused (nothing is created). It imports the package sqlite_rocketmq, so it runs with the
python of the venv the package is installed in (docs/clients.md).
test/python_package.py runs consume() with a producer beside it.
"""
import os
import signal
import sqlite3
import sys
import threading

import sqlite_rocketmq


def consume(conn, store, group, topic, queue_id, handle, stop, batch=32, wait_ms=1000):
    row = conn.execute('SELECT "offset" FROM rocketmq_consumer_offsets(?) '
                       'WHERE "group" = ? AND topic = ? AND queue_id = ?',
                       (store, group, topic, queue_id)).fetchone()
    offset = row[0] if row else 0
    while not stop.is_set():
        rows = conn.execute('SELECT queue_offset, keys, body FROM mq '
                            'WHERE topic = ? AND queue_id = ? AND queue_offset >= ? '
                            'AND wait_ms = ? LIMIT ?',
                            (topic, queue_id, offset, wait_ms, batch)).fetchall()
        if not rows:
            continue  # nothing arrived within wait_ms
        for queue_offset, keys, body in rows:
            handle(queue_offset, keys, body)
        offset = rows[-1][0] + 1
        conn.execute('SELECT rocketmq_commit_offset(?, ?, ?, ?, ?)',
                     (store, group, topic, queue_id, offset))


def main(store, group, topic, queue_id, arguments=''):
    # Opening a directory that does not exist would make an empty store and wait on it.
    if not os.path.isdir(os.path.join(store, 'commitlog')):
        sys.exit('consumer.py: %s is not a store (no commitlog/ in it): '
                 'name the directory a producer writes to' % store)
    conn = sqlite3.connect(':memory:', isolation_level=None)
    sqlite_rocketmq.load(conn)
    conn.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s'%s)"
                 % (store.replace("'", "''"), ', ' + arguments if arguments else ''))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    def show(queue_offset, keys, body):
        print(queue_offset, keys, body.decode(errors='replace'), flush=True)

    consume(conn, store, group, topic, int(queue_id), show, stop)


if __name__ == '__main__':
    if len(sys.argv) not in (5, 6):
        sys.exit('usage: consumer.py STORE GROUP TOPIC QUEUE_ID [ARGUMENTS]')
    main(*sys.argv[1:])
