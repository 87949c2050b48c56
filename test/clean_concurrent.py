"""clean_concurrent.py: producers, consumers and the periodic clean pass at
the same time, for a bounded time, through Debian's /usr/bin/python3 (its
sqlite3 module lets go of the GIL while a statement runs, so the threads'
connections really run at once; they share the store's one engine).

The store has small segments, file_reserved_hours=0 and delete_when the
current hour: every segment but the current one is deleted as soon as a pass
runs (every 200 ms). Two producers INSERT into their own queue with unique
keys and remember each acknowledged offset; a consumer reads each queue by
queue offset; a checker looks keys up. Every row read must be the one
produced for its key; a key that is not found must have expired (its offset
below the commit log's minimum after the look-up); no statement may fail. At
the end every acknowledged message at or above the final minimum offset is
there, in its queue, without a gap. Ends with the counts of test/checks.py.
"""
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq')
SECONDS = 8
PRODUCERS = 2
RATE = 300  # messages a second per producer: some 4 segments a second, which the passes keep up with

CHECKS = Checks(max_shown=20, max_repr=300)
check, ok = CHECKS.eq, CHECKS.ok


def hours_now():
    """delete_when for now: this hour and the next, so that a run across the hour keeps it."""
    h = time.localtime().tm_hour
    return '%02d;%02d' % (h, (h + 1) % 24)


def connect(store):
    conn = sqlite3.connect(':memory:', isolation_level=None, check_same_thread=False)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    conn.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', commitlog_file_size=65536, "
                 "consumequeue_entries=64, index_slots=64, index_entries=256, "
                 "file_reserved_hours=0, delete_when='%s', clean_first_delay_ms=100, "
                 "clean_interval_ms=200)" % (store, hours_now()))
    return conn


def body_for(key):
    return 'body of %s %s' % (key, 'x' * 300)


def stat(conn, store, name):
    return conn.execute('SELECT value FROM rocketmq_stats(?) WHERE name = ?',
                        (store, name)).fetchone()[0]


class Run:
    """What the threads share: the acknowledged messages and what went wrong."""

    def __init__(self, store):
        self.store = store
        self.lock = threading.Lock()
        self.acked = {}  # key -> (queue_id, commit-log offset)
        self.keys = []
        self.errors = []
        self.wrong = []
        self.lost = []
        self.read = self.looked_up = self.expired = 0
        self.stop = threading.Event()

    def failed(self, what, e):
        with self.lock:
            self.errors.append('%s: %s: %s' % (what, type(e).__name__, e))


def produce(run, conn, queue_id):
    i = 0
    while not run.stop.is_set():
        key = 'p%d-%d' % (queue_id, i)
        try:
            cur = conn.execute("INSERT INTO mq(topic, queue_id, keys, body) VALUES ('C', ?, ?, ?)",
                               (queue_id, key, body_for(key)))
        except sqlite3.Error as e:
            run.failed('INSERT ' + key, e)
            return
        with run.lock:
            run.acked[key] = (queue_id, cur.lastrowid)
            run.keys.append(key)
        i += 1
        time.sleep(1.0 / RATE)


def consume(run, conn, queue_id):
    """Read the queue by offset, as a pull consumer does, 100 at a time."""
    nxt = 0
    while not run.stop.is_set():
        try:
            rows = conn.execute(
                "SELECT queue_offset, keys, body_text FROM mq WHERE topic = 'C' AND queue_id = ? "
                'AND queue_offset >= ? AND queue_offset < ?', (queue_id, nxt, nxt + 100)).fetchall()
            if not rows:
                # Below the queue's minimum a read finds nothing: go on from there.
                qmin = conn.execute('SELECT min_offset FROM rocketmq_queues(?) WHERE topic = ? '
                                    'AND queue_id = ?', (run.store, 'C', queue_id)).fetchone()
                nxt = max(nxt, qmin[0] if qmin else 0)
                time.sleep(0.001)
                continue
        except sqlite3.Error as e:
            run.failed('consumer of queue %d at %d' % (queue_id, nxt), e)
            return
        for qoff, key, body in rows:
            if qoff < nxt or body != body_for(key) or not key.startswith('p%d-' % queue_id):
                with run.lock:
                    run.wrong.append((queue_id, qoff, key))
            nxt = qoff + 1
        with run.lock:
            run.read += len(rows)


def look_up(run, conn):
    """A key found is the message produced for it; one not found has expired."""
    rnd = random.Random(7)
    while not run.stop.is_set():
        with run.lock:
            key = run.keys[rnd.randrange(len(run.keys))] if run.keys else None
            queue_id, offset = run.acked[key] if key else (0, 0)
        if key is None:
            time.sleep(0.01)
            continue
        try:
            rows = conn.execute("SELECT commitlog_offset, queue_id, body_text FROM mq "
                                "WHERE topic = 'C' AND key = ?", (key,)).fetchall()
            cl_min = stat(conn, run.store, 'commitlog_min_offset')
        except sqlite3.Error as e:
            run.failed('look-up of ' + key, e)
            return
        with run.lock:
            run.looked_up += 1
            if not rows:
                run.expired += 1
                if offset >= cl_min:
                    run.lost.append((key, offset, cl_min))
            elif rows != [(offset, queue_id, body_for(key))]:
                run.wrong.append((key, rows[:1]))


def final_check(run, conn):
    """Producers stopped: each queue holds, from where expiry left it to its end, every message."""
    for q in range(PRODUCERS):
        qmin, qmax = conn.execute('SELECT min_offset, max_offset FROM rocketmq_queues(?) '
                                  "WHERE topic = 'C' AND queue_id = ?", (run.store, q)).fetchone()
        rows = conn.execute("SELECT queue_offset, keys, body_text FROM mq "
                            "WHERE topic = 'C' AND queue_id = ? AND queue_offset >= 0",
                            (q,)).fetchall()
        cl_min = stat(conn, run.store, 'commitlog_min_offset')  # after the read: it only grows
        offsets = [r[0] for r in rows]
        first = offsets[0] if offsets else qmax
        ok(first >= qmin, 'queue %d: the read starts at or above the min offset %d: %d'
           % (q, qmin, first))
        check('queue %d: its rows up to its max offset, without a gap' % q,
              offsets, list(range(first, qmax)))
        check('queue %d: every row is the message produced for its key' % q,
              [r[1] for r in rows if r[2] != body_for(r[1])], [])
        found = {r[1] for r in rows}
        missing = sorted(k for k, (qid, off) in run.acked.items()
                         if qid == q and off >= cl_min and k not in found)
        check('queue %d: acknowledged messages at or above the min offset %d that are gone'
              % (q, cl_min), missing[:5], [])
        check('queue %d: rows that were never acknowledged' % q,
              [k for k in found if k not in run.acked], [])


def main():
    tmp = tempfile.mkdtemp(prefix='rmq-py-')
    store = os.path.join(tmp, 'store')
    run = Run(store)
    conns = [connect(store) for _ in range(2 * PRODUCERS + 2)]
    threads = [threading.Thread(target=produce, args=(run, conns[q], q)) for q in range(PRODUCERS)]
    threads += [threading.Thread(target=consume, args=(run, conns[PRODUCERS + q], q))
                for q in range(PRODUCERS)]
    threads.append(threading.Thread(target=look_up, args=(run, conns[2 * PRODUCERS])))
    try:
        for t in threads:
            t.start()
        time.sleep(SECONDS)
        run.stop.set()
        for t in threads:
            t.join(60)
        main_conn = conns[-1]
        check('statements that failed', run.errors[:5], [])
        check('rows read that are not the message produced for their key', run.wrong[:5], [])
        check('keys not found although not expired', run.lost[:5], [])
        ok(run.read > 0 and run.looked_up > 0,
           'the consumers read %d rows, the checker looked %d keys up (%d expired)'
           % (run.read, run.looked_up, run.expired))
        deleted = stat(main_conn, store, 'files_deleted')
        ok(deleted > 0 and run.expired > 0,
           'the clean passes deleted files while the others ran: %d' % deleted)
        final_check(run, main_conn)
    finally:
        run.stop.set()
        for c in conns:
            c.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
