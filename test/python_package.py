"""python_package.py: the Python package sqlite_rocketmq as a user installs
and uses it, offline.

Makes a venv (Debian's /usr/bin/python3, --system-site-packages for
setuptools and wheel, --without-pip: the system's pip installs into it),
runs `pip install --no-build-isolation --no-index` on the checkout, and
checks that the wheel is a platform wheel of the extension's version. In
the venv's python, with the standard sqlite3 module: sqlite_rocketmq.load(),
a store, INSERT, a read by queue, a look-up by key, rocketmq_version(); then
examples/consumer.py's consume() beside a producer thread, restarted from the
committed offset, and its command line stopped by SIGTERM. A build that
cannot run make, or whose compiler fails, ends with a message that says so.
The checkout's `git status` is the same afterwards: the package build
writes only under build/python.

Under a sanitizer run (RMQ_PRELOAD) it runs nothing: the package builds its
own uninstrumented extension, and pip, make and the compiler would run with
the sanitizer runtime preloaded.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from checks import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIP_INSTALL = ['-m', 'pip', 'install', '--no-build-isolation', '--no-index', '--no-cache-dir',
               '--disable-pip-version-check']
# What the package build needs of the checkout, for a copy that fails.
BUILD_FILES = ['Makefile', 'pyproject.toml', 'setup.py', 'engine', 'ext', 'python']
BUILD_FAILED = 'sqlite_rocketmq: cannot build the SQLite extension rocketmq.so'

CHECKS = Checks()
check = CHECKS.eq

# Run by the venv's python: ROOT STORE; prints one JSON object.
USE = r'''
import importlib.metadata, importlib.util, json, os, sqlite3, sys, threading, time
import sqlite_rocketmq

root, store = sys.argv[1], sys.argv[2]
out = {'path': sqlite_rocketmq.loadable_path()}
conn = sqlite3.connect(':memory:', isolation_level=None)
sqlite_rocketmq.load(conn)
out['version'] = conn.execute('SELECT rocketmq_version()').fetchone()[0]
out['dist_version'] = importlib.metadata.version('sqlite-rocketmq')
try:
    conn.execute("SELECT load_extension('nothing')")
except sqlite3.OperationalError as e:
    out['load_after'] = str(e)
args = "dir='%s', commitlog_file_size=65536" % store
conn.execute('CREATE VIRTUAL TABLE mq USING rocketmq(%s)' % args)
conn.execute('BEGIN')
for i in range(5):
    conn.execute("INSERT INTO mq(topic, queue_id, keys, body) VALUES ('Orders', 1, ?, ?)",
                 ('order-%d' % i, 'message %d' % i))
conn.execute('COMMIT')
out['by_queue'] = conn.execute("SELECT queue_offset, body_text FROM mq WHERE topic = 'Orders' "
                               "AND queue_id = 1 AND queue_offset >= 1 AND queue_offset < 3"
                               ).fetchall()
out['by_key'] = conn.execute("SELECT queue_offset, body_text FROM mq WHERE topic = 'Orders' "
                             "AND key = 'order-3'").fetchall()

spec = importlib.util.spec_from_file_location('consumer', os.path.join(root, 'examples',
                                                                        'consumer.py'))
consumer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(consumer)

def produce(first, n, caught_up):
    p = sqlite3.connect(':memory:', isolation_level=None)
    sqlite_rocketmq.load(p)
    p.execute('CREATE VIRTUAL TABLE mq USING rocketmq(%s)' % args)
    put = "INSERT INTO mq(topic, queue_id, keys, body) VALUES ('Orders', 0, ?, ?)"
    p.execute('BEGIN')  # more than one batch at once
    for i in range(first, first + n // 2):
        p.execute(put, ('order-%d' % i, b'body %d' % i))
    p.execute('COMMIT')
    caught_up.wait(30)  # then one at a time, to a consumer that waits
    for i in range(first + n // 2, first + n):
        time.sleep(0.005)
        p.execute(put, ('order-%d' % i, b'body %d' % i))
    p.close()

def run_consumer(first, n):
    got, stop, caught_up = [], threading.Event(), threading.Event()
    def handle(queue_offset, keys, body):
        got.append([queue_offset, keys, body.decode()])
        if len(got) == n // 2:
            caught_up.set()
        if len(got) == n:
            stop.set()
    producer = threading.Thread(target=produce, args=(first, n, caught_up))
    producer.start()
    watchdog = threading.Timer(60, stop.set)
    watchdog.start()
    start = time.monotonic()
    consumer.consume(conn, store, 'billing', 'Orders', 0, handle, stop, wait_ms=200)
    watchdog.cancel()
    caught_up.set()
    producer.join()
    return got, time.monotonic() - start

def committed():
    return conn.execute('SELECT "offset", lag FROM rocketmq_consumer_offsets(?) '
                        'WHERE "group" = \'billing\' AND topic = \'Orders\' AND queue_id = 0',
                        (store,)).fetchall()

out['consumed'], out['consume_secs'] = run_consumer(0, 100)
out['committed'] = committed()
out['restarted'], _ = run_consumer(100, 6)
out['committed_after_restart'] = committed()
for i in range(106, 109):  # left for the command line
    conn.execute("INSERT INTO mq(topic, queue_id, keys, body) VALUES ('Orders', 0, ?, ?)",
                 ('order-%d' % i, 'body %d' % i))
conn.close()
print(json.dumps(out))
'''

# Run by the venv's python on the closed store: STORE.
COMMITTED = r'''
import sqlite3, sys
import sqlite_rocketmq
conn = sqlite3.connect(':memory:')
sqlite_rocketmq.load(conn)
print(conn.execute('SELECT "offset" FROM rocketmq_consumer_offsets(?) WHERE "group" = ?',
                   (sys.argv[1], 'billing')).fetchall())
'''


def run(cmd, env, cwd=ROOT):
    return subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def git_status():
    try:
        return subprocess.run(['git', '-C', ROOT, 'status', '--porcelain'],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout
    except OSError:
        return None


def check_build_fails(py, env, tmp):
    """make missing, then a compiler that fails (in a copy of the checkout,
    so that its flags do not force the next build of build/python)."""
    r = run([py] + PIP_INSTALL + [ROOT], dict(env, PATH='/nonexistent'))
    check('without make, pip fails', r.returncode != 0, True)
    check('without make, the message says so', BUILD_FAILED + ': cannot run make' in r.stdout,
          True)
    src = os.path.join(tmp, 'src')
    for name in BUILD_FILES:
        p = os.path.join(ROOT, name)
        if os.path.isdir(p):
            shutil.copytree(p, os.path.join(src, name),
                            ignore=shutil.ignore_patterns('__pycache__'))
        else:
            os.makedirs(src, exist_ok=True)
            shutil.copy(p, src)
    r = run([py] + PIP_INSTALL + [src], dict(env, CC='false'))
    check('a failing compiler fails pip', r.returncode != 0, True)
    check('a failing compiler: the message says so', BUILD_FAILED in r.stdout
          and 'failed with status' in r.stdout and 'libsqlite3-dev' in r.stdout, True)
    r = run([py, '-c', 'import sqlite_rocketmq'], env)
    check('nothing installed by the failed builds', r.returncode != 0, True)


def check_wheel(venv_site):
    dist = os.path.join(venv_site, 'sqlite_rocketmq-%s.dist-info' % version())
    try:
        with open(os.path.join(dist, 'WHEEL'), encoding='utf-8') as f:
            wheel = f.read().splitlines()
    except OSError as e:
        check('the dist-info of the version of engine/rmq.h', str(e), '')
        return
    check('platform wheel', 'Root-Is-Purelib: false' in wheel, True)
    tags = [w for w in wheel if w.startswith('Tag: ')]
    check('any Python 3, this platform', len(tags) == 1 and tags[0].startswith('Tag: py3-none-')
          and not tags[0].endswith('-any'), True)
    check('the extension is in the package',
          os.path.isfile(os.path.join(venv_site, 'sqlite_rocketmq', 'rocketmq.so')), True)


def version():
    with open(os.path.join(ROOT, 'engine', 'rmq.h'), encoding='utf-8') as f:
        for line in f:
            if line.startswith('#define RMQ_VERSION '):
                return line.split('"')[1]
    return None


def check_use(py, env, tmp, venv_site):
    store = os.path.join(tmp, 'store')
    script = os.path.join(tmp, 'use.py')
    with open(script, 'w', encoding='utf-8') as f:
        f.write(USE)
    r = run([py, script, ROOT, store], env)
    if not check('the venv uses the package', r.returncode, 0):
        print(r.stdout)
        return None
    out = json.loads(r.stdout.splitlines()[-1])
    check('loadable_path is in the venv', out['path'],
          os.path.join(venv_site, 'sqlite_rocketmq', 'rocketmq'))
    check('rocketmq_version()', out['version'], version())
    check('the package version is the extension version', out['dist_version'], out['version'])
    check('loading is disabled again after load()', out.get('load_after'), 'not authorized')
    check('read by queue', out['by_queue'], [[1, 'message 1'], [2, 'message 2']])
    check('look-up by key', out['by_key'], [[3, 'message 3']])
    check('consumer: every message once, in order', out['consumed'],
          [[i, 'order-%d' % i, 'body %d' % i] for i in range(100)])
    check('consumer: the group committed its position', out['committed'], [[100, 0]])
    check('consumer: a restart resumes at the committed offset', out['restarted'],
          [[i, 'order-%d' % i, 'body %d' % i] for i in range(100, 106)])
    check('consumer: committed after the restart', out['committed_after_restart'], [[106, 0]])
    print('consumed 100 messages in %.2f s' % out['consume_secs'])
    return store


def check_command_line(py, env, store):
    """consumer.py's command line prints what the group has not consumed and
    stops at SIGTERM after committing."""
    cmd = [py, os.path.join(ROOT, 'examples', 'consumer.py'), store, 'billing', 'Orders', '0',
           'commitlog_file_size=65536']
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    lines = [p.stdout.readline().strip() for _ in range(3)]
    p.send_signal(signal.SIGTERM)
    try:
        rest = p.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        p.kill()
        rest = p.communicate()[0]
    check('consumer.py prints the pending messages', lines,
          ['%d order-%d body %d' % (i, i, i) for i in range(106, 109)])
    check('consumer.py stops at SIGTERM', (p.returncode, rest), (0, ''))
    r = run([py, '-c', COMMITTED, store], env)
    check('consumer.py committed', r.stdout.strip(), '[(109,)]')
    missing = store + '-missing'
    r = subprocess.run(cmd[:2] + [missing] + cmd[3:], env=env, capture_output=True, text=True,
                       timeout=60)
    check('consumer.py refuses a store that does not exist',
          (r.returncode, r.stdout, 'is not a store' in r.stderr, os.path.exists(missing)),
          (1, '', True, False))


def main():
    if os.environ.get('RMQ_PRELOAD'):
        print('skipped under a sanitizer (RMQ_PRELOAD): the package builds its own extension')
        return CHECKS.report()
    start = time.monotonic()
    status_before = git_status()
    tmp = tempfile.mkdtemp(prefix='rmq-pkg-')
    # No enclosing make's flags, no .pyc files in the checkout (consumer.py).
    env = {k: v for k, v in os.environ.items()
           if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'MAKEOVERRIDES')}
    env['PYTHONDONTWRITEBYTECODE'] = '1'
    try:
        venv = os.path.join(tmp, 'venv')
        subprocess.run(['/usr/bin/python3', '-m', 'venv', '--system-site-packages',
                        '--without-pip', venv], check=True)
        py = os.path.join(venv, 'bin', 'python')
        venv_site = subprocess.run([py, '-c', 'import sysconfig; print(sysconfig.get_path('
                                    '"platlib"))'], stdout=subprocess.PIPE, text=True,
                                   check=True).stdout.strip()
        check_build_fails(py, env, tmp)
        t = time.monotonic()
        r = run([py] + PIP_INSTALL + [ROOT], env)
        if not check('pip install', r.returncode, 0):
            print(r.stdout)
            return CHECKS.report()
        print('pip install: %.1f s' % (time.monotonic() - t))
        check_wheel(venv_site)
        store = check_use(py, env, tmp, venv_site)
        if store:
            check_command_line(py, env, store)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if status_before is not None:
        check('git status unchanged', git_status(), status_before)
    print('python_package: %.1f s' % (time.monotonic() - start))
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
