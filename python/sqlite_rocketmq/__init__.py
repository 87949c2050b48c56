"""sqlite_rocketmq: the sqlite-rocketmq SQLite extension (Apache RocketMQ's
message store as virtual tables), shipped inside this package.

    import sqlite3
    import sqlite_rocketmq

    conn = sqlite3.connect('app.db', isolation_level=None)
    sqlite_rocketmq.load(conn)
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS mq USING rocketmq(dir='app-store')")

The Python must be one whose sqlite3 module can load extensions (Debian's
/usr/bin/python3 can; a Python built without
--enable-loadable-sqlite-extensions cannot).
"""
import os


def loadable_path():
    """The extension's path without its .so suffix, as SQLite's
    load_extension() and the sqlite3 shell's .load take it."""
    return os.path.normpath(os.path.join(os.path.dirname(__file__), 'rocketmq'))


def load(conn):
    """Loads the extension into the sqlite3.Connection conn. Extension
    loading is enabled for this call only."""
    if not hasattr(conn, 'enable_load_extension'):
        raise RuntimeError('sqlite_rocketmq: this Python\'s sqlite3 module cannot load '
                           'extensions (it was built without '
                           '--enable-loadable-sqlite-extensions)')
    conn.enable_load_extension(True)
    try:
        conn.load_extension(loadable_path())
    finally:
        conn.enable_load_extension(False)
