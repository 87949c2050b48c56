"""multi_process_crash.py: processes of one store killed at random.

Three processes write one store with flush='sync', each in a loop of
autocommit INSERTs and transactions of 2 to 6 rows, over four queues. One of
them runs the services (the owner); the others append themselves under the
shared put lock and send it the rest of their writes. A
fourth process reads it with readonly=1, long-polling each queue in turn and
checking that the queue offsets it is given follow each other, never
skipping nor repeating one. Every KILL_EVERY seconds one of the four, chosen
at random (the owner as often as the others), gets SIGKILL in the middle of
whatever it does, and a new one starts in its place; the survivors carry on.
At the end a fresh open of the store must hold:
  - every row of every transaction that a writer saw COMMIT (or an
    autocommit INSERT) return, each once;
  - no part of a transaction without the rest of it: each transaction is
    all there or not at all (a writer killed, or whose owner was killed,
    before its COMMIT returned may have it either way);
  - in each queue, the queue offsets 0..n-1, each once.
Settings: RMQ_MP_KILLS (default 6), RMQ_MP_KILL_EVERY (seconds, default 0.4),
RMQ_MP_WRITERS (default 3), RMQ_MP_TARGET ('any', the default, or 'owner':
the owner is the one killed each time), RMQ_MP_FLUSH ('sync', the default,
or 'async'), RMQ_MP_SEED. Ends with the counts of test/checks.py.
"""
import os
import random
import re
import signal
import subprocess
import sqlite3
import sys
import tempfile
import time

from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq')
KILLS = int(os.environ.get('RMQ_MP_KILLS', '6'))
KILL_EVERY = float(os.environ.get('RMQ_MP_KILL_EVERY', '0.4'))
SEED = int(os.environ.get('RMQ_MP_SEED') or random.randrange(1 << 30))
WRITERS = int(os.environ.get('RMQ_MP_WRITERS', '3'))
TARGET = os.environ.get('RMQ_MP_TARGET', 'any')
ARGS = os.environ.get('RMQ_MP_ARGS') or (
    "commitlog_file_size=65536, consumequeue_entries=64, index_slots=64, "
    "index_entries=256, flush='%s'" % os.environ.get('RMQ_MP_FLUSH', 'sync'))
TXN_SHARE = float(os.environ.get('RMQ_MP_TXN', '0.5'))

CHECKS = Checks(max_shown=30)

WRITER = r'''
import random, sqlite3, sys
ext, store, args, name, seed, txn_share = sys.argv[1:7]
txn_share = float(txn_share)
rnd = random.Random(int(seed))
c = sqlite3.connect(':memory:', isolation_level=None)
c.enable_load_extension(True)
c.load_extension(ext)
c.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', %s)" % (store, args))
print('open', flush=True)
txn = 0
while True:
    txn += 1
    rows = 1 if rnd.random() >= txn_share else rnd.randint(2, 6)
    key = '%s-%d' % (name, txn)
    try:
        if rows > 1:
            c.execute('BEGIN')
        for j in range(rows):
            c.execute("INSERT INTO mq(topic, queue_id, keys, body) VALUES ('T', ?, ?, ?)",
                      (rnd.randrange(4), '%s.%d' % (key, j), '%s %d' % (key, rows)))
        if rows > 1:
            c.execute('COMMIT')
        print('acked %s %d' % (key, rows), flush=True)
    except sqlite3.Error as e:
        print('error %s: %s' % (key, e), flush=True)
        if c.in_transaction:
            c.execute('ROLLBACK')
'''

READER = r'''
import sqlite3, sys
ext, store = sys.argv[1:3]
c = sqlite3.connect(':memory:', isolation_level=None)
c.enable_load_extension(True)
c.load_extension(ext)
c.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', readonly=1)" % store)
print('open', flush=True)
nxt = [0, 0, 0, 0]
while True:
    for q in range(4):
        try:
            rows = c.execute("SELECT queue_offset FROM mq WHERE topic = 'T' AND queue_id = ? AND "
                             "queue_offset >= ? AND wait_ms = 100 LIMIT 64", (q, nxt[q])).fetchall()
        except sqlite3.Error as e:
            print('error reading %d: %s' % (q, e), flush=True)
            continue
        for (o,) in rows:
            if o != nxt[q]:
                print('gap in queue %d: %d after %d' % (q, o, nxt[q] - 1), flush=True)
            nxt[q] = o + 1
        if rows:
            print('read %d' % len(rows), flush=True)
'''


def start(store, name, seed):
    """A writer, or the reader when name starts with 'reader'."""
    argv = ([sys.executable, '-c', READER, EXT, store] if name.startswith('reader') else
            [sys.executable, '-c', WRITER, EXT, store, ARGS, name, str(seed), str(TXN_SHARE)])
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = p.stdout.readline().strip()
    if line != 'open':
        line += p.stdout.read()
        p.wait()
    CHECKS.eq('writer %s opens the store' % name, line, 'open')
    return p


def owner_pid(store):
    """The pid the shared page names as the owner (bytes 32..35, as shared_state.c lays it out)."""
    with open(os.path.join(store, 'sqlite-rocketmq.shm'), 'rb') as f:
        page = f.read(64)
    return int.from_bytes(page[32:36], sys.byteorder, signed=True)


def collect(p, acked, errors, reads):
    out = p.stdout.read()
    p.wait()
    for line in out.splitlines():
        m = re.match(r'acked (\S+) (\d+)$', line)
        if m:
            acked[m.group(1)] = int(m.group(2))
        elif line.startswith('read '):
            reads[0] += int(line.split()[1])
        elif line.startswith('gap'):
            reads[1].append(line)
        elif line.startswith('error'):
            errors.append(line)


def verify(store, acked):
    c = sqlite3.connect(':memory:', isolation_level=None)
    c.enable_load_extension(True)
    c.load_extension(EXT)
    c.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', %s)" % (store, ARGS))
    rows = c.execute("SELECT keys, body_text, queue_id, queue_offset FROM mq WHERE topic = 'T'"
                     ).fetchall()
    seen, txns = {}, {}
    for keys, body, _, _ in rows:
        seen[keys] = seen.get(keys, 0) + 1
        key, n = body.split()
        txns.setdefault(key, [int(n), 0])[1] += 1
    CHECKS.eq('no row twice', [k for k, n in seen.items() if n > 1][:5], [])
    CHECKS.eq('every acknowledged transaction whole',
              [k for k, n in acked.items() if txns.get(k, [n, 0])[1] != n][:5], [])
    CHECKS.eq('no partial transaction', [k for k, (n, got) in txns.items() if got != n][:5], [])
    for q in range(4):
        offs = sorted(r[3] for r in rows if r[2] == q)
        CHECKS.eq('queue %d offsets 0..n-1' % q, offs == list(range(len(offs))), True)
    c.close()
    return len(rows)


def main():
    rnd = random.Random(SEED)
    print('multi_process_crash: RMQ_MP_SEED=%d RMQ_MP_KILLS=%d' % (SEED, KILLS))
    tmp = tempfile.mkdtemp(prefix='rmq-mp-')
    store = os.path.join(tmp, 'store')
    procs = [start(store, 'w%d' % i, rnd.randrange(1 << 30)) for i in range(WRITERS)]
    procs.append(start(store, 'reader0', 0))
    acked, errors, reads, kills_of_owner = {}, [], [0, []], 0
    for k in range(KILLS):
        time.sleep(KILL_EVERY * (0.5 + rnd.random()))
        owner = owner_pid(store)
        victim = rnd.randrange(len(procs))
        for _ in range(100 if TARGET == 'owner' else 0):  # until a live process took over
            if owner in [p.pid for p in procs]:
                victim = [p.pid for p in procs].index(owner)
                break
            time.sleep(0.01)
            owner = owner_pid(store)
        kills_of_owner += procs[victim].pid == owner
        procs[victim].send_signal(signal.SIGKILL)
        collect(procs[victim], acked, errors, reads)
        name = 'reader%d' % (k + 1) if victim == WRITERS else 'r%d' % k
        procs[victim] = start(store, name, rnd.randrange(1 << 30))
    time.sleep(KILL_EVERY)
    for p in procs:
        p.send_signal(signal.SIGKILL)
        collect(p, acked, errors, reads)
    n = verify(store, acked)
    print('%d kills (%d of the owner), %d transactions acknowledged, %d rows stored, %d rows '
          'read by the readers, %d errors' % (KILLS, kills_of_owner, len(acked), n, reads[0],
                                               len(errors)))
    for e in errors[:5]:
        print('  ' + e[:300])
    CHECKS.ok(len(acked) > KILLS, 'the writers made progress (%d acknowledged)' % len(acked))
    CHECKS.ok(reads[0] > 0, 'the readers read (%d rows)' % reads[0])
    CHECKS.eq('the readers saw each queue in order', reads[1][:5], [])
    subprocess.run(['rm', '-rf', tmp])
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
