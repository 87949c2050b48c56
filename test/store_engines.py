"""store_engines.py: one owner per store, however the process reaches it.

The store is its directory's device and inode, and its `lock` file carries open
file description locks, which conflict inside one process too: the owner, which
runs the services, holds byte 1. Each case gets a second writer on one store
and checks that it gets the shared engine (appends land one after the other in
one log) or follows the owner (its appends land in the owner's log), and that
a third process, or a broker, never runs the services beside the owner:
  bind      the store reached through a bind mount (root only; skipped otherwise)
  rename    the directory renamed while open, then opened by its new name
  recreate  the directory removed and made again while open
  fork      a forked child cannot use the connection it inherited (an error
            that says so) and opens a new one (and the parent can close and
            reopen while the child lives: the child does not keep the lock)
  copies    two copies of rocketmq.so in one process
  java      the POSIX lock on byte 0 of `lock` that a Java broker takes
            (FileChannel.tryLock) excludes us, and ours excludes it

RMQ_TORTURE_ENGINES=N runs every case N times (default 1). Ends with the counts
of test/checks.py.
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq')
ROUNDS = int(os.environ.get('RMQ_TORTURE_ENGINES', '1'))

CHECKS = Checks(max_shown=40)
check = CHECKS.eq
SMALL = "commitlog_file_size=65536, consumequeue_entries=64, index_slots=64, index_entries=256"


def locked(store):
    return 'store %s is locked by another process' % store


FOLLOWS = 'opened; put at an offset'


def connect(store, ext=EXT):
    conn = sqlite3.connect(':memory:', isolation_level=None)
    conn.enable_load_extension(True)
    conn.load_extension(ext)
    conn.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', %s)" % (store, SMALL))
    return conn


def try_connect(store, ext=EXT):
    """The connection, or the error text."""
    try:
        return connect(store, ext)
    except sqlite3.Error as e:
        return str(e)


def put(conn, body):
    return conn.execute("INSERT INTO mq(topic, queue_id, body) VALUES ('E', 0, ?)",
                        (body,)).lastrowid


def bodies(conn):
    return [r[0] for r in conn.execute(
        "SELECT body_text FROM mq WHERE topic = 'E' AND queue_id = 0 AND queue_offset >= 0")]


def one_log(what, a, b):
    """Two appends through two handles went to one engine: one record after the other."""
    off_a, off_b = put(a, what + '-a'), put(b, what + '-b')
    size = a.execute('SELECT size FROM mq WHERE commitlog_offset = ?', (off_a,)).fetchone()[0]
    check(what + ': one log', off_b, off_a + size)


OTHER_PROCESS = r'''
import sqlite3, sys
c = sqlite3.connect(':memory:', isolation_level=None)
c.enable_load_extension(True)
c.load_extension(sys.argv[1])
try:
    c.execute("CREATE VIRTUAL TABLE m USING rocketmq(dir='%s', %s)" % (sys.argv[2], sys.argv[3]))
    off = c.execute("INSERT INTO m(topic, queue_id, body) VALUES ('E', 0, 'third')").lastrowid
    print('opened; put at an offset' if off > 0 else 'opened; put at %d' % off)
except sqlite3.Error as e:
    print(e)
'''


def other_process(store):
    """What another process gets when it opens the store for writing and puts a message."""
    out = subprocess.run([sys.executable, '-c', OTHER_PROCESS, EXT, store, SMALL],
                         capture_output=True, text=True, timeout=120)
    return out.stdout.strip() or out.stderr.strip()


def case_bind(tmp):
    store, mnt = os.path.join(tmp, 'store'), os.path.join(tmp, 'mnt')
    os.mkdir(store)
    os.mkdir(mnt)
    if subprocess.run(['mount', '--bind', store, mnt], capture_output=True).returncode != 0:
        return False
    try:
        a = connect(store)
        b = try_connect(mnt)
        check('bind: the mount opens the same engine', isinstance(b, sqlite3.Connection), True)
        if isinstance(b, sqlite3.Connection):
            one_log('bind', a, b)
            b.close()
        check('bind: third process after the second closed', other_process(store), FOLLOWS)
        put(a, 'bind-after')
        a.close()
        check('bind: all there', bodies(connect(store)), ['bind-a', 'bind-b', 'third', 'bind-after'])
    finally:
        subprocess.run(['umount', mnt])
    return True


def case_rename(tmp):
    store, moved = os.path.join(tmp, 'store'), os.path.join(tmp, 'moved')
    a = connect(store)
    put(a, 'before')
    # Dispatched before the rename: the engine makes new files by its path (its queue's files
    # exist now).
    check('rename: dispatched', bodies(a), ['before'])
    os.rename(store, moved)
    b = try_connect(moved)
    check('rename: the new name opens the same engine', isinstance(b, sqlite3.Connection), True)
    if isinstance(b, sqlite3.Connection):
        one_log('rename', a, b)
        b.close()
    check('rename: third process', other_process(moved), FOLLOWS)
    os.rename(moved, store)
    a.close()
    check('rename: all there', bodies(connect(store)), ['before', 'rename-a', 'rename-b', 'third'])


def case_recreate(tmp):
    store = os.path.join(tmp, 'store')
    a = connect(store)
    put(a, 'old')
    check('recreate: dispatched', bodies(a), ['old'])
    shutil.rmtree(store)
    os.mkdir(store)
    b = try_connect(store)
    check('recreate: refused while the old engine is open', b,
          'store %s is locked by an engine of this process opened on the directory this path '
          'named before it was removed or renamed; close that store\'s tables first' % store)
    if isinstance(b, sqlite3.Connection):
        put(b, 'new')
        b.close()
    a.close()
    b = connect(store)
    put(b, 'new')
    b.close()
    check('recreate: the new store holds its own message', bodies(connect(store)), ['new'])


def case_fork(tmp):
    store = os.path.join(tmp, 'store')
    a = connect(store)
    put(a, 'parent')
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(go_w)
        # The connection it inherited is refused, by name, rather than half working.
        refused = []
        for sql in ("INSERT INTO mq(topic, body) VALUES ('T', 'lost')", 'SELECT count(*) FROM mq'):
            try:
                a.execute(sql).fetchall()
                refused.append('accepted: ' + sql)
            except sqlite3.Error as e:
                refused.append("forked child cannot use its parent's connection" in str(e) or str(e))
        b = try_connect(store)
        ok = isinstance(b, sqlite3.Connection) and put(b, 'child') > 0 and refused == [True, True]
        if ok:
            b.close()
        os.write(ready_w, b'1' if ok else ('child got: %r %r' % (b, refused)).encode())
        os.read(go_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(go_r)
    answer = os.read(ready_r, 1000).decode()
    check('fork: the child follows its parent', answer, '1')
    # The child still lives: closing here releases the lock all the same.
    a.close()
    a = try_connect(store)
    check('fork: the parent reopens while the child lives', isinstance(a, sqlite3.Connection) or a,
          True)
    os.write(go_w, b'x')
    os.waitpid(pid, 0)
    os.close(ready_r)
    os.close(go_w)
    if isinstance(a, sqlite3.Connection):
        put(a, 'parent-again')
        check('fork: all there', bodies(a), ['parent', 'child', 'parent-again'])
        a.close()


def case_copies(tmp):
    store = os.path.join(tmp, 'store')
    copy = os.path.join(tmp, 'copy')
    os.mkdir(copy)
    shutil.copy(EXT + '.so', os.path.join(copy, 'rocketmq.so'))
    a = connect(store)
    put(a, 'first')
    b = try_connect(store, os.path.join(copy, 'rocketmq'))
    check('copies: the second copy follows the first', isinstance(b, sqlite3.Connection), True)
    if isinstance(b, sqlite3.Connection):
        put(b, 'second')
        b.close()
    check('copies: third process after the second closed', other_process(store), FOLLOWS)
    put(a, 'first-again')
    a.close()
    check('copies: all there', bodies(connect(store)), ['first', 'second', 'third', 'first-again'])


BROKER_LOCK = r'''
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
except OSError:
    print('refused', flush=True)
    sys.exit(0)
print('held', flush=True)
sys.stdin.readline()
'''


def broker(store):
    """A process that takes the broker's lock (F_SETLK on byte 0) and holds it until told."""
    return subprocess.Popen([sys.executable, '-c', BROKER_LOCK, os.path.join(store, 'lock')],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def case_java(tmp):
    store = os.path.join(tmp, 'store')
    connect(store).close()
    holder = broker(store)
    check('java: the broker holds the lock', holder.stdout.readline().strip(), 'held')
    check('java: a broker\'s lock excludes us', try_connect(store), locked(store))
    holder.communicate('\n', timeout=60)
    a = connect(store)
    holder = broker(store)
    check('java: our lock excludes a broker', holder.stdout.readline().strip(), 'refused')
    holder.communicate('', timeout=60)
    a.close()


def sanitizer_preloaded():
    """A sanitizer runtime preloaded into this (uninstrumented) interpreter: its
    allocator is not fork-safe there, so a forked child can hang in malloc on a
    lock an engine thread held at the fork."""
    preload = os.environ.get('LD_PRELOAD', '')
    return 'libasan' in preload or 'libtsan' in preload


def main():
    bind_skipped = False
    cases = [case_bind, case_rename, case_recreate, case_fork, case_copies, case_java]
    if sanitizer_preloaded():
        cases.remove(case_fork)
        print('# fork: skipped under a preloaded sanitizer runtime (make check runs it)')
    for _ in range(ROUNDS):
        for case in cases:
            tmp = tempfile.mkdtemp(prefix='rmq-engines-')
            try:
                if case(tmp) is False:
                    bind_skipped = True
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    if bind_skipped:
        print('# bind: skipped (mount --bind is not allowed here)')
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
