"""store_utf8.py: text that is not UTF-8, through Debian's /usr/bin/python3,
whose sqlite3 module decodes every TEXT value as UTF-8 and fails on the
whole row when one cannot be decoded.

Writing: INSERT refuses tags, keys and property values that are not UTF-8
(sqlite3.IntegrityError naming the column and the byte offset), and the
message can be decoded; so can every error message that quotes such bytes
(a value, a path), which shows them as \\xHH.

Reading: a store written by another producer may hold any bytes in a topic,
tags, keys or properties; the rocketmq table and the companion tables
return such a value as a BLOB of its bytes, so that SELECT * works and
nothing is lost; valid text stays TEXT. The store is made with the
extension and its bytes then changed in place (a record's CRC covers only
the body), as a producer that sends Latin-1 would write them.
Ends with the counts of test/checks.py.
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


def connect():
    conn = sqlite3.connect(':memory:', isolation_level=None)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    return conn


def create(conn, store, extra=''):
    conn.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', commitlog_file_size=65536, "
                 "consumequeue_entries=64, index_slots=64, index_entries=256%s)" % (store, extra))


def insert_error(conn, sql):
    try:
        conn.execute(sql)
    except sqlite3.IntegrityError as e:
        return str(e)
    return None


def patch(path, old, new):
    with open(path, 'rb') as f:
        data = f.read()
    check('marker %r in %s' % (old, os.path.basename(path)), data.count(old), 1)
    with open(path, 'wb') as f:
        f.write(data.replace(old, new))


def writing(store):
    conn = connect()
    create(conn, store)
    check('tags', insert_error(conn, "INSERT INTO mq(topic, tags, body) "
                                     "VALUES ('T', CAST(x'6162ff' AS TEXT), 'b')"),
          'tags: invalid UTF-8 at byte offset 2')
    check('property value', insert_error(conn, "INSERT INTO mq(topic, properties, body) VALUES "
                                               "('T', '{\"p\": \"' || CAST(x'c3' AS TEXT) || '\"}', 'b')"),
          'properties: p: invalid UTF-8 at byte offset 0')
    check('nothing appended', conn.execute('SELECT count(*) FROM mq').fetchone()[0], 0)
    conn.close()


def error_of(conn, sql):
    try:
        conn.execute(sql)
    except sqlite3.Error as e:
        return str(e)
    return None


def messages(store):
    """An error that quotes bytes which are not UTF-8 shows them as \\xHH."""
    conn = connect()
    create(conn, store)
    check('queue_id quoted', error_of(conn, "INSERT INTO mq(topic, queue_id, body) "
                                            "VALUES ('T', CAST(x'41ff' AS TEXT), 'b')"),
          'queue_id A\\xFF is not a non-negative integer')
    check('delay_level quoted', error_of(conn, "INSERT INTO mq(topic, delay_level, body) "
                                               "VALUES ('T', CAST(x'ffc3a9' AS TEXT), 'b')"),
          'delay_level \\xFF\u00e9 is unknown: delay_levels defines levels 1 to 18')
    check('a path quoted', error_of(conn, "SELECT * FROM rocketmq_commitlog(CAST(x'2f6e6fff' AS TEXT))"),
          'rocketmq_commitlog: no store at /no\\xFF: not a directory')
    conn.close()


def reading(store):
    conn = connect()
    create(conn, store)
    conn.execute("INSERT INTO mq(topic, queue_id, tags, keys, properties, body) VALUES "
                 "('TopicQ', 0, 'tagQ', 'keyQ', '{\"p\": \"valQ\"}', 'body')")
    conn.execute("INSERT INTO mq(topic, queue_id, tags, body) VALUES ('Plain', 0, 'ok', 'b2')")
    conn.close()

    log = os.path.join(store, 'commitlog', '%020d' % 0)
    patch(log, b'TopicQ', b'Topic\xff')
    patch(log, b'tagQ', b'tag\xe9')
    patch(log, b'keyQ', b'key\xc0')
    patch(log, b'valQ', b'val\x80')

    # Read as another producer's store is read: the queue and index files no
    # longer match the bytes changed under them, which a writable open would
    # take for damage and dispatch again.
    conn = connect()
    create(conn, store, ', readonly=1')
    rows = conn.execute('SELECT * FROM mq ORDER BY commitlog_offset').fetchall()
    check('rows', len(rows), 2)
    cols = [d[0] for d in conn.execute('SELECT * FROM mq').description]
    first = dict(zip(cols, rows[0]))
    check('topic as BLOB', first['topic'], b'Topic\xff')
    check('tags as BLOB', first['tags'], b'tag\xe9')
    check('keys as BLOB', first['keys'], b'key\xc0')
    check('properties as BLOB', first['properties'],
          b'{"p":"val\x80","TAGS":"tag\xe9","KEYS":"key\xc0","UNIQ_KEY":"%s"}'
          % first['uniq_key'].encode())
    check('body_text still TEXT', first['body_text'], 'body')
    second = dict(zip(cols, rows[1]))
    check('valid text stays TEXT', (second['topic'], second['tags']), ('Plain', 'ok'))
    check('typeof', conn.execute("SELECT typeof(topic), typeof(tags), typeof(uniq_key) FROM mq "
                                 "WHERE commitlog_offset = 0").fetchone(), ('blob', 'blob', 'text'))

    cl = conn.execute("SELECT topic, properties FROM rocketmq_commitlog('%s') WHERE kind = 'message' "
                      "ORDER BY offset" % store).fetchall()
    check('rocketmq_commitlog topic', [r[0] for r in cl], [b'Topic\xff', 'Plain'])
    check('rocketmq_commitlog properties type', [type(r[1]).__name__ for r in cl], ['bytes', 'str'])
    queues = conn.execute("SELECT topic FROM rocketmq_queues('%s') ORDER BY topic"
                          % store).fetchall()
    check('rocketmq_queues topics', queues, [('Plain',), ('TopicQ',)])
    conn.close()


def main():
    tmp = tempfile.mkdtemp(prefix='rmq-py-')
    try:
        writing(os.path.join(tmp, 'w'))
        messages(os.path.join(tmp, 'm'))
        reading(os.path.join(tmp, 'r'))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return CHECKS.report()


if __name__ == '__main__':
    sys.exit(main())
