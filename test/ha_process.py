"""ha_process.py: replication through SQL between two processes on loopback,
with SIGKILL. The program runs itself as the other node:

  ha_process.py master <dir>   a sync_master on 127.0.0.1:0: prints
      "address <ip:port>", waits for a slave to report, then INSERTs rows in
      autocommit mode, printing "acked <commitlog_offset>" after each INSERT
      that returned, until killed
  ha_process.py slave <dir> <master>   a slave: prints "ready", waits to be
      killed

- sync master killed: every row whose INSERT returned is on the slave (this
  process), found by its offset with its body.
- slave killed mid-stream and started again, while this process (the async
  master) commits transactions: it resumes from its own end, and in the end
  the slave's rows are the master's.

Ends with the counts of test/checks.py.
"""
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq')
SMALL = "commitlog_file_size=65536, consumequeue_entries=64, index_slots=64, index_entries=256"

CHECKS = Checks(max_shown=40)
check = CHECKS.eq


def connect():
    conn = sqlite3.connect(':memory:', isolation_level=None)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    return conn


def create(conn, name, store, extra):
    conn.execute("CREATE VIRTUAL TABLE %s USING rocketmq(dir='%s', %s, %s)"
                 % (name, store, SMALL, extra))


def stat(conn, store, name):
    return conn.execute("SELECT value FROM rocketmq_stats(?) WHERE name = ?",
                        (store, name)).fetchone()[0]


def wait_for(fn, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if fn():
            return True
        time.sleep(0.01)
    return fn()


def reported(conn, store):
    rows = conn.execute("SELECT state FROM rocketmq_ha(?)", (store,)).fetchall()
    return rows == [('connected',)]


def run_master(store):
    conn = connect()
    create(conn, 'mq', store, "role='sync_master', ha_listen='127.0.0.1:0'")
    address = re.search(r'listening on (\S+),', stat(conn, store, 'ha_state')).group(1)
    print('address', address, flush=True)
    wait_for(lambda: reported(conn, store), 30)
    i = 0
    while True:
        i += 1
        try:
            conn.execute("INSERT INTO mq(topic, queue_id, body) VALUES ('HaSql', ?, ?)",
                         (i % 4, 'row-%d' % i))
        except sqlite3.Error:
            continue
        print('acked', conn.execute('SELECT last_insert_rowid()').fetchone()[0], flush=True)


def run_slave(store, master):
    conn = connect()
    create(conn, 'mq', store, "role='slave', ha_master='%s'" % master)
    print('ready', flush=True)
    while True:
        time.sleep(60)


def acked_offset(line):
    m = re.fullmatch(r'acked (\d+)\n', line)
    return [int(m.group(1))] if m else []


def start(*args):
    return subprocess.Popen([sys.executable, os.path.abspath(__file__)] + list(args),
                            stdout=subprocess.PIPE, text=True)


def kill(p):
    p.send_signal(signal.SIGKILL)
    p.wait()


def test_kill_sync_master(root):
    mdir, sdir = os.path.join(root, 'm1'), os.path.join(root, 's1')
    p = start('master', mdir)
    address = p.stdout.readline().split()[1]
    conn = connect()
    create(conn, 'slave', sdir, "role='slave', ha_master='%s'" % address)
    acked = []
    while len(acked) < 200:
        line = p.stdout.readline()
        if not line:
            break
        acked += acked_offset(line)
    kill(p)
    for line in p.stdout:  # acknowledged before the kill; a line the kill cut is no ack
        acked += acked_offset(line)
    check('rows acknowledged before the kill', len(acked) >= 200, True)
    missing = [o for o in acked if conn.execute(
        "SELECT body_text FROM slave WHERE commitlog_offset = ?", (o,)).fetchone() is None]
    check('acknowledged rows missing on the slave', missing, [])
    last = conn.execute("SELECT body_text FROM slave WHERE commitlog_offset = ?",
                        (acked[-1],)).fetchone()
    check('the last acknowledged row', last, ('row-%d' % len(acked),))
    conn.close()


def test_kill_slave(root):
    mdir, sdir = os.path.join(root, 'm2'), os.path.join(root, 's2')
    conn = connect()
    create(conn, 'mq', mdir, "ha_listen='127.0.0.1:0'")
    address = re.search(r'listening on (\S+),', stat(conn, mdir, 'ha_state')).group(1)
    p = start('slave', sdir, address)
    check('slave ready', p.stdout.readline(), 'ready\n')
    check('slave reported', wait_for(lambda: reported(conn, mdir)), True)
    for batch in range(20):
        conn.execute('BEGIN')
        for i in range(100):
            conn.execute("INSERT INTO mq(topic, queue_id, body) VALUES ('HaSql', ?, ?)",
                         (i % 4, 'b%d-%d-' % (batch, i) + 'x' * 500))
        conn.execute('COMMIT')
        if batch == 10:
            kill(p)
            p = start('slave', sdir, address)
            check('slave ready again', p.stdout.readline(), 'ready\n')
    end = stat(conn, mdir, 'commitlog_max_offset')

    def caught_up():
        rows = conn.execute("SELECT acked_offset FROM rocketmq_ha(?)", (mdir,)).fetchall()
        return rows == [(end,)]
    check('slave caught up', wait_for(caught_up), True)
    kill(p)
    create(conn, 'copy', sdir, '')
    ours = conn.execute('SELECT commitlog_offset, body FROM copy ORDER BY 1').fetchall()
    theirs = conn.execute('SELECT commitlog_offset, body FROM mq ORDER BY 1').fetchall()
    check('rows on the slave', len(ours), 2000)
    check('the slave has the master\'s rows', ours == theirs, True)
    conn.close()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == 'master':
        return run_master(sys.argv[2])
    if len(sys.argv) == 4 and sys.argv[1] == 'slave':
        return run_slave(sys.argv[2], sys.argv[3])
    root = tempfile.mkdtemp(prefix='rmq-ha-process-')
    try:
        test_kill_sync_master(root)
        test_kill_slave(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
