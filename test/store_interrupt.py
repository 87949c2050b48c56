"""store_interrupt.py: a long poll (wait_ms) stops on sqlite3_interrupt(),
through Debian's /usr/bin/python3, whose Connection.interrupt() calls it
from another thread.

The wait sleeps in slices of 50 ms and, between two, learns of an interrupt
by stepping a trivial statement: SQLite interrupts a statement started after
sqlite3_interrupt() while others still run (documented; SQLite 3.40 has no
sqlite3_is_interrupted). The query then fails with SQLITE_INTERRUPT
("interrupted") and the connection works as before. SQLite holds a
connection for as long as one of its statements runs, so closing it from
another thread waits for the statement: interrupt() first, then close(),
returns at once. Closing another connection of the store, even its last
other table, never waits for the poll. Ends with the counts of
test/checks.py.
"""
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq')

CHECKS = Checks()
check, ok = CHECKS.eq, CHECKS.ok

POLL = ("SELECT body_text FROM mq WHERE topic = 'W' AND queue_id = 0 AND queue_offset >= ? "
        "AND wait_ms = ?")


def connect(store):
    conn = sqlite3.connect(':memory:', isolation_level=None, check_same_thread=False)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    conn.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', commitlog_file_size=65536, "
                 "consumequeue_entries=64, index_slots=64, index_entries=256)" % store)
    return conn


class Poll(threading.Thread):
    """Runs one long poll on conn; result: ('rows', rows) or ('error', class name, message)."""

    def __init__(self, conn, offset, wait_ms):
        super().__init__()
        self.conn, self.args = conn, (offset, wait_ms)
        self.result = self.seconds = None

    def run(self):
        t0 = time.monotonic()
        try:
            self.result = ('rows', self.conn.execute(POLL, self.args).fetchall())
        except sqlite3.Error as e:
            self.result = ('error', type(e).__name__, str(e))
        self.seconds = time.monotonic() - t0


def started(conn, offset=0, wait_ms=8000):
    p = Poll(conn, offset, wait_ms)
    p.start()
    time.sleep(0.3)
    ok(p.is_alive(), 'the poll is waiting')
    return p


def interrupt(store):
    conn = connect(store)
    p = started(conn)
    t0 = time.monotonic()
    conn.interrupt()
    p.join(10)
    check('interrupted poll', p.result, ('error', 'OperationalError', 'interrupted'))
    ok(time.monotonic() - t0 < 2, 'the poll stops soon after interrupt(): %.3f s' % p.seconds)
    # The connection works as before, and a later poll is not interrupted.
    conn.execute("INSERT INTO mq(topic, queue_id, body) VALUES ('W', 0, 'm0')")
    check('next query', conn.execute(POLL, (0, 10)).fetchall(), [('m0',)])
    p = Poll(conn, 1, 300)
    p.run()
    check('next poll times out', p.result, ('rows', []))
    ok(p.seconds >= 0.29, 'and waits its wait_ms: %.3f s' % p.seconds)
    conn.close()


def interrupt_then_close(store):
    conn = connect(store)
    p = started(conn, 1)
    t0 = time.monotonic()
    conn.interrupt()
    conn.close()
    closed = time.monotonic() - t0
    p.join(10)
    ok(closed < 2, 'interrupt() then close() from another thread: %.3f s' % closed)
    check('the poll failed', p.result[0], 'error')


def other_connection_closes(store):
    poller, other = connect(store), connect(store)
    p = started(poller, 1, 5000)
    t0 = time.monotonic()
    other.execute("INSERT INTO mq(topic, queue_id, body) VALUES ('W', 0, 'm1')")
    other.close()
    closed = time.monotonic() - t0
    p.join(10)
    ok(closed < 2, 'closing the store\'s other connection: %.3f s' % closed)
    check('the poll got the message', p.result, ('rows', [('m1',)]))
    ok(p.seconds < 4, 'without waiting out wait_ms: %.3f s' % p.seconds)
    poller.close()


def main():
    tmp = tempfile.mkdtemp(prefix='rmq-py-')
    store = os.path.join(tmp, 'store')
    try:
        interrupt(store)
        interrupt_then_close(store)
        other_connection_closes(store)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
