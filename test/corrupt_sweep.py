"""corrupt_sweep.py: random byte flips in a store's files, each judged by the
promise of rocketmq_verify: a damaged store is reported, never served wrong.

One store is built (and closed cleanly) with a small geometry, so that every
kind of file exists and is small: commit-log segments, consume queues of
several files, index files, the checkpoint and the config files. Then, for
each flip, a copy of that store gets one byte XORed with a non-zero mask,
and

    either  SELECT * FROM rocketmq_verify(dir)  returns at least one row,
    or      every read below returns the rows it returned before the flip,
            on a read-only open (readonly=1) and on a writable open of a
            further copy (which may rebuild consume queues, the index and
            topics.json from the commit log).

A read that fails counts as a different result: its error must come with a
report. The reads are: the full scan of the store table, each queue by
queue offset, each queue filtered by each of its tags, the key look-up of
every KEYS entry and UNIQ_KEY (key = ?) and the uniq_key plan, and the
companion tables rocketmq_queues, rocketmq_scheduled and
rocketmq_consumer_offsets. The raw companions (rocketmq_commitlog,
_consumequeue, _index, _files, _stats) show the bytes as they are by design
and are not compared. Each flip is one check; a crash or a hang of the
verify or of either open is a failed check whatever verify said.

Which bytes are flipped, and why not every byte. A file format can only be
checked where it holds redundancy. RocketMQ's record protects its BODY with
a CRC and nothing else: timestamps, hosts, FLAG, SYSFLAG, RECONSUMETIMES,
PREPAREDTRANSACTIONOFFSET and most property bytes are stored once, so a
flip there yields another valid record that no verify could tell apart. In
commit-log segments the sweep therefore flips only what is cross-checked:
the body bytes (CRC), TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, QUEUEOFFSET,
PHYSICALOFFSET (against the consume queue and the record's place), the
BODY, TOPIC and PROPERTIES lengths (against TOTALSIZE), the topic bytes
(the consume queue the entry is in), the name, separator and value bytes of
the TAGS (tags code), KEYS and UNIQ_KEY (index hashes) properties, a
segment's end-of-file BLANK and the zeros after the end of the log. TAGS of
records in SCHEDULE_TOPIC_XXXX are left out: there the consume queue's tags
code is the due time, not a hash of the tags.

In config files a flip that gives another file the store could have
written (a digit into another digit, a letter of a topic into another
letter) is just as undetectable, so such flips are drawn again. The flips
kept there break the file's syntax or encoding, or its layout (a key
renamed or twice, a topicName unlike its key), or put a character no topic
or group may hold into a name, or change nothing.

Consume queues, index files and the checkpoint are flipped anywhere, with a
bias toward the bytes in use (entries, the index header, slots and items,
the checkpoint's three timestamps). Half the flips of a commit-log offset
in a consume-queue entry or an index item take, where one exists, a mask
that makes it the offset of another record: such an entry leads to a sound
record, only the wrong one.

Settings (environment):
    RMQ_SWEEP_FLIPS    flips to run (default 150)
    RMQ_SWEEP_SECONDS  stop after this long, printing how many ran (default 600)
    RMQ_SWEEP_SEED     the random seed (default: random; printed first)
    RMQ_SWEEP_ONLY     'file:offset:mask' replays one flip, e.g.
                       'consumequeue/Orders/0/00000000000000000640:12:0x10'
                       (mask and offset as Python integers, 0x... allowed).
                       Index files are named by their timestamps, which
                       change with every build, so they are given by rank:
                       'index/#1' is the second index file in name order.
                       Several flips: separate them with commas.
    RMQ_SWEEP_TIMEOUT  seconds each child process may take (default 30)
    RMQ_SWEEP_VERBOSE  1: print every flip and its outcome

The store's layout (record sizes, file names but the index files') is the
same at every build, so a seed or an RMQ_SWEEP_ONLY string printed by one
run replays the same flips in another. Ends with the counts of
test/checks.py and a table of the failures by class.
"""
import json
import os
import pickle
import random
import re
import select
import shutil
import signal
import sqlite3
import struct
import sys
import tempfile
import time
import traceback

from checks import Checks
import spec_decoder as spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.environ.get('RMQ_EXT') or os.path.join(ROOT, 'build', 'rocketmq')

FLIPS = int(os.environ.get('RMQ_SWEEP_FLIPS') or 150)
SECONDS = float(os.environ.get('RMQ_SWEEP_SECONDS') or 600)
TIMEOUT = float(os.environ.get('RMQ_SWEEP_TIMEOUT') or 30)
VERBOSE = os.environ.get('RMQ_SWEEP_VERBOSE') == '1'
ONLY = os.environ.get('RMQ_SWEEP_ONLY') or ''

# Small files of every kind: 16 KiB segments (5 of them), 32 entries per
# consume-queue file (queue Orders/0 spans 5 files), index files of 32 slots
# and 128 items (7 files; rocketmq_verify reads a closed store's index files
# by RocketMQ's ratio of 4 items per slot). The delay levels are
# RocketMQ's default, which rocketmq_verify assumes for a closed store: the
# pending messages are at level 18 (2 h), so that no writable open delivers
# them while the sweep runs.
GEOMETRY = ("commitlog_file_size=16384, consumequeue_entries=32, index_slots=32, "
            "index_entries=128, max_reconsume_times=1")
CQ_ENTRY = 20
INDEX_HEADER = 40
INDEX_SLOTS = 32
INDEX_ENTRIES = 128
INDEX_ITEM = 20
CHECKPOINT_FIELDS = ('physicMsgTimestamp', 'logicsMsgTimestamp', 'indexMsgTimestamp')

# The store table's stored columns; the hidden ones (delay_level, key,
# wait_ms) are search inputs, not values.
COLUMNS = ('commitlog_offset', 'size', 'msg_id', 'uniq_key', 'topic', 'queue_id',
           'queue_offset', 'tags', 'keys', 'body', 'body_text', 'properties', 'flag',
           'sys_flag', 'body_crc', 'born_timestamp', 'born_host', 'store_timestamp',
           'store_host', 'reconsume_times', 'prepared_transaction_offset')
SELECT = 'SELECT %s FROM mq' % ', '.join(COLUMNS)

CHECKS = Checks(max_shown=200, max_repr=300)


# ------------------------------------------------------------------ SQLite

def connect(store, readonly):
    conn = sqlite3.connect(':memory:', isolation_level=None)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    conn.execute("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%s', %s%s)"
                 % (store, GEOMETRY, ', readonly=1' if readonly else ''))
    return conn


def build_store(store):
    """The store the flips start from. Its layout must not depend on timing:
    the level-1 messages are inserted last of their phase and delivered
    before anything else is appended, and every variable-length value is
    chosen here, so every build puts the same records at the same offsets."""
    conn = connect(store, readonly=False)
    ins = ('INSERT INTO mq(topic, queue_id, tags, keys, uniq_key, body, properties, '
           'delay_level) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')

    def put(topic, qid, tags, keys, body, uniq=None, props=None, delay=None):
        conn.execute(ins, (topic, qid, tags, keys, uniq, body, props, delay))

    tags = ('created', 'paid', 'shipped', None, 'cancelled')
    for i in range(160):
        qid = 0 if i < 100 else i % 3
        keys = None if i % 11 == 5 else 'order-%d cust-%d' % (i, i % 7)
        if i % 9 == 0:
            keys = 'order-%d cust-%d region-%d' % (i, i % 7, i % 2)
        put('Orders', qid, tags[i % 5], keys, 'order %d %s' % (i, 'x' * (i * 7 % 90)),
            uniq='uniq-order-%04d' % i if i % 4 == 0 else None)
    for i in range(8):
        put('Audit', 0, 'raw', 'audit-%d' % i, bytes([0xff, 0xfe, i]) + b'\x00binary' * (i + 1))
    conn.execute('BEGIN')
    for i in range(40):
        put('Payments', i % 2, 'settled' if i % 3 else 'refund', 'pay-%d order-%d' % (i, i),
            'payment %d %s' % (i, 'y' * (i * 13 % 70)), props='{"region":"eu","n":%d}' % i)
    conn.execute('COMMIT')
    for i in range(6):
        put('Orders', 1, 'reminder', 'remind-%d' % i, 'reminder %d' % i, delay=1)
    for qoff in (3, 17):
        off = conn.execute("SELECT commitlog_offset FROM mq WHERE topic = 'Orders' AND "
                           "queue_id = 0 AND queue_offset = ?", (qoff,)).fetchone()[0]
        conn.execute("SELECT rocketmq_send_back(?, 'billing', ?)", (store, off))
    # Level 1 (1 s) and the retries' level 3 (10 s) are delivered now, while
    # nothing else is appended; level 18 (2 h) below stays pending.
    deadline = time.time() + 120
    while conn.execute('SELECT count(*) FROM rocketmq_scheduled(?)', (store,)).fetchone()[0]:
        if time.time() > deadline:
            raise RuntimeError('delayed messages not delivered within 120 s')
        time.sleep(0.05)
    # and dispatched: a consume-queue read waits for the dispatcher
    retry = conn.execute("SELECT commitlog_offset FROM mq WHERE topic = '%RETRY%billing' AND "
                         "queue_id = 0 AND queue_offset >= 0").fetchall()
    if len(retry) != 2:
        raise RuntimeError('%d retries delivered, expected 2' % len(retry))
    # A second failure: past max_reconsume_times=1, into %DLQ%billing.
    conn.execute("SELECT rocketmq_send_back(?, 'billing', ?)", (store, retry[0][0]))
    for i in range(60):
        put('Orders', i % 3, tags[i % 5], 'late-%d cust-%d' % (i, i % 7),
            'late order %d %s' % (i, 'z' * (i * 11 % 120)))
    for i in range(5):
        put('Payments', 0, 'later', 'pending-%d' % i, 'pending %d' % i, delay=18)
    for group, topic, qid, offset in (('billing', 'Orders', 0, 10), ('billing', 'Orders', 0, 40),
                                      ('audit', 'Payments', 1, 3), ('billing', 'Orders', 2, 7)):
        conn.execute('SELECT rocketmq_commit_offset(?, ?, ?, ?, ?)',
                     (store, group, topic, qid, offset))
    for i in range(20):
        put('Orders', 0, 'tail', 'tail-%d' % i, 'tail %d' % i)
    conn.execute('SELECT rocketmq_flush(?)', (store,))
    conn.close()


def make_plan(store):
    """The reads, derived from the pristine store: (name, columns, sql, params)
    where a parameter None stands for the store directory."""
    conn = connect(store, readonly=True)
    rows = conn.execute(SELECT).fetchall()
    queues = conn.execute('SELECT topic, queue_id FROM rocketmq_queues(?) ORDER BY 1, 2',
                          (store,)).fetchall()
    conn.close()
    plan = [('scan', COLUMNS, SELECT, ())]
    cq = SELECT + ' WHERE topic = ? AND queue_id = ? AND queue_offset >= 0'
    for topic, qid in queues:
        plan.append(('cq %s/%d' % (topic, qid), COLUMNS, cq, (topic, qid)))
        qtags = sorted({r[7] for r in rows if r[4] == topic and r[5] == qid and r[7] is not None})
        for t in qtags:
            plan.append(('tags %s/%d %s' % (topic, qid, t), COLUMNS, cq + ' AND tags = ?',
                         (topic, qid, t)))
    keys, uniqs = set(), set()
    for r in rows:
        if r[8]:
            keys.update((r[4], k) for k in r[8].split(' ') if k)
        if r[3]:
            uniqs.add((r[4], r[3]))
    for topic, k in sorted(keys | uniqs):
        plan.append(('key %s %s' % (topic, k), COLUMNS,
                     SELECT + ' WHERE topic = ? AND key = ? ORDER BY commitlog_offset',
                     (topic, k)))
    for topic, u in sorted(uniqs):
        plan.append(('uniq_key %s %s' % (topic, u), COLUMNS,
                     SELECT + ' WHERE topic = ? AND uniq_key = ? ORDER BY commitlog_offset',
                     (topic, u)))
    for name, cols in (('rocketmq_queues', ('topic', 'queue_id', 'min_offset', 'max_offset',
                                            'message_count')),
                       ('rocketmq_scheduled', ('level', 'due_time', 'queue_offset',
                                               'commitlog_offset', 'real_topic', 'real_queue_id',
                                               'keys', 'uniq_key')),
                       ('rocketmq_consumer_offsets', ('group', 'topic', 'queue_id', 'offset',
                                                      'max_offset', 'lag'))):
        plan.append((name, cols, 'SELECT %s FROM %s(?)' % (', '.join('"%s"' % c for c in cols),
                                                            name), (None,)))
    return plan


def reads(store, readonly, plan):
    """{read name: rows or 'ERROR: …'}; an open that fails gives every read its error."""
    try:
        conn = connect(store, readonly)
    except sqlite3.Error as e:
        return {name: 'ERROR: open: %s' % e for name, _, _, _ in plan}
    out = {}
    try:
        for name, _, sql, params in plan:
            params = tuple(store if p is None else p for p in params)
            try:
                out[name] = conn.execute(sql, params).fetchall()
            except sqlite3.Error as e:
                out[name] = 'ERROR: %s' % e
    finally:
        conn.close()
    return out


def verify(store):
    conn = sqlite3.connect(':memory:', isolation_level=None)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    # A detail may quote a damaged topic's bytes as they are.
    conn.text_factory = lambda b: b.decode('utf-8', 'backslashreplace')
    try:
        return conn.execute('SELECT file, offset, kind, detail FROM rocketmq_verify(?)',
                            (store,)).fetchall()
    finally:
        conn.close()


# ------------------------------------------------------------------ children

def in_child(fn, timeout=None):
    """Runs fn() in a forked child and returns ('ok', value), ('error', traceback
    text), ('crash', how) or ('hang', seconds). The parent never loads the
    extension, so each child starts without an engine, a thread or a mapping
    of a store, and a crash or a hang is one flip's outcome, not the sweep's end."""
    timeout = timeout or TIMEOUT
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            data = pickle.dumps(('ok', fn()))
        except BaseException:
            data = pickle.dumps(('error', traceback.format_exc()))
        with os.fdopen(w, 'wb') as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    chunks, deadline = [], time.time() + timeout
    with os.fdopen(r, 'rb') as f:
        while True:
            left = deadline - time.time()
            if left <= 0 or not select.select([f], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return ('hang', timeout)
            chunk = os.read(f.fileno(), 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ('crash', 'killed by signal %d (%s)'
                % (os.WTERMSIG(status), signal.Signals(os.WTERMSIG(status)).name))
    if os.WEXITSTATUS(status) != 0 or not chunks:
        return ('crash', 'exit status %d' % os.WEXITSTATUS(status))
    return pickle.loads(b''.join(chunks))


# ------------------------------------------------------------------ the store's map

def index_files(store):
    return sorted(n for n in os.listdir(os.path.join(store, 'index')) if n.isdigit())


def stable_name(store, rel):
    """rel with an index file given by rank, which does not change between builds."""
    if rel.startswith('index/'):
        return 'index/#%d' % index_files(store).index(rel[len('index/'):])
    return rel


def real_name(store, name):
    m = re.fullmatch(r'index/#(\d+)', name)
    if m:
        return 'index/' + index_files(store)[int(m.group(1))]
    return name


class Region:
    """Bytes [start, start + length) of a file, named for the report."""

    def __init__(self, name, start, length):
        self.name, self.start, self.length = name, start, length


def commitlog_regions(store):
    """{segment: [Region]}: the cross-checked fields of every record (see the
    top of this file), each BLANK's head, and the unused zeros after a
    segment's last record, found with the independent decoder."""
    out = {}
    for start, path in spec.segment_files(os.path.join(store, 'commitlog')):
        with open(path, 'rb') as fh:
            buf = fh.read()
        regions, pos = [], 0
        while pos < len(buf):
            status, f = spec.decode_record(buf, pos, len(buf), check_crc=True)
            if status == 'BLANK':
                regions.append(Region('BLANK@%d head' % pos, pos, 8))
                if pos + 8 < len(buf):
                    regions.append(Region('after BLANK@%d' % pos, pos + 8, len(buf) - pos - 8))
                break
            if status != 'OK':
                regions.append(Region('after the log end', pos, len(buf) - pos))
                break
            regions += record_regions(buf, pos, f)
            pos += f['size']
        out['commitlog/%020d' % start] = regions
    return out


def record_regions(buf, pos, f):
    at = 'record@%d ' % pos
    body_len = len(f['body'])
    topic_at = pos + 88 + body_len  # IPv4 hosts: the store writes no other
    topic_len = len(f['topic'])
    props_at = topic_at + 1 + topic_len + 2
    regions = [Region(at + name, pos + o, n) for name, o, n in (
        ('TOTALSIZE', 0, 4), ('MAGICCODE', 4, 4), ('BODYCRC', 8, 4), ('QUEUEID', 12, 4),
        ('QUEUEOFFSET', 20, 8), ('PHYSICALOFFSET', 28, 8), ('BODY length', 84, 4))]
    if body_len:
        regions.append(Region(at + 'BODY', pos + 88, body_len))
    regions += [Region(at + 'TOPIC length', topic_at, 1),
                Region(at + 'TOPIC', topic_at + 1, topic_len),
                Region(at + 'PROPERTIES length', topic_at + 1 + topic_len, 2)]
    names = ('KEYS', 'UNIQ_KEY') if f['topic'] == b'SCHEDULE_TOPIC_XXXX' else (
        'TAGS', 'KEYS', 'UNIQ_KEY')
    props = f['properties']
    p = 0
    while p < len(props):
        end = props.find(b'\x02', p)
        end = len(props) if end < 0 else end
        sep = props.find(b'\x01', p, end)
        name = props[p:sep].decode('latin-1') if sep > 0 else None
        if name in names:
            # the name, its separator, the value and the 0x02 after it
            regions.append(Region(at + 'property %s' % name, props_at + p,
                                  min(end + 1, len(props)) - p))
        p = end + 1
    return regions


def cq_used(path):
    """Entries in use: up to the first all-zero entry."""
    with open(path, 'rb') as fh:
        buf = fh.read()
    n = 0
    while n * CQ_ENTRY < len(buf) and buf[n * CQ_ENTRY:(n + 1) * CQ_ENTRY] != bytes(CQ_ENTRY):
        n += 1
    return n, len(buf)


def index_used(path):
    with open(path, 'rb') as fh:
        head = fh.read(INDEX_HEADER)
    return struct.unpack('>i', head[36:40])[0]


class StoreMap:
    """The pristine store's files by kind, and where in them to flip."""

    def __init__(self, store):
        self.store = store
        self.files = {'commitlog': [], 'consumequeue': [], 'index': [], 'checkpoint': [],
                      'config': []}
        self.commitlog = commitlog_regions(store)
        self.record_starts = {int(rel[len('commitlog/'):]) + r.start
                              for rel, regions in self.commitlog.items()
                              for r in regions if r.name.endswith(' TOTALSIZE')}
        self.files['commitlog'] = sorted(self.commitlog)
        for dirpath, _, names in os.walk(os.path.join(store, 'consumequeue')):
            for n in names:
                self.files['consumequeue'].append(
                    os.path.relpath(os.path.join(dirpath, n), store))
        self.files['consumequeue'].sort()
        self.files['index'] = ['index/' + n for n in index_files(store)]
        self.files['checkpoint'] = ['checkpoint']
        self.files['config'] = sorted(
            'config/' + n for n in os.listdir(os.path.join(store, 'config'))
            if n.endswith('.json') or n.endswith('.json.bak'))

    def aim(self, rng, path, start, off, mask):
        """Half the time, a mask that turns the commit-log offset at start (8
        bytes) into the offset of another record, where one byte can: an
        entry or item that leads to a real record, but the wrong one, is the
        damage a check must compare fields to see."""
        with open(path, 'rb') as fh:
            fh.seek(start)
            raw = bytearray(fh.read(8))
        aimed = []
        for m in range(1, 256):
            raw[off - start] ^= m
            if int.from_bytes(raw, 'big', signed=True) in self.record_starts:
                aimed.append(m)
            raw[off - start] ^= m
        if aimed and rng.random() < 0.5:
            return rng.choice(aimed)
        return mask

    def leads_to(self, phy):
        if phy < 0:
            return ' -> negative'
        return ' -> another record' if phy in self.record_starts else ''

    @staticmethod
    def kind_of(rel):
        for kind in ('commitlog', 'consumequeue', 'index', 'config'):
            if rel.startswith(kind + '/'):
                return kind
        return 'checkpoint' if rel == 'checkpoint' else 'other'

    def size(self, rel):
        return os.path.getsize(os.path.join(self.store, rel))

    def choose(self, rng, kind):
        """(rel, offset, mask) of one flip of a file of this kind."""
        rel = rng.choice(self.files[kind])
        mask = rng.randrange(1, 256)
        path = os.path.join(self.store, rel)
        size = self.size(rel)
        if kind == 'commitlog':
            regions = self.commitlog[rel]
            tail = [r for r in regions if r.name.startswith('after')]
            if tail and rng.random() < 0.08:
                r = tail[0]
                # mostly just past the end, where a reader might still look
                off = r.start + min(int(rng.expovariate(1 / 64.0)), r.length - 1)
            else:
                r = rng.choice([r for r in regions if not r.name.startswith('after')])
                off = r.start + rng.randrange(r.length)
        elif kind == 'consumequeue':
            used, _ = cq_used(path)
            if used and rng.random() < 0.85:
                off = rng.randrange(used * CQ_ENTRY)
                if off % CQ_ENTRY < 8:
                    mask = self.aim(rng, path, off - off % CQ_ENTRY, off, mask)
            else:
                off = used * CQ_ENTRY + min(int(rng.expovariate(1 / 30.0)),
                                            size - used * CQ_ENTRY - 1)
        elif kind == 'index':
            used = index_used(path)
            items = INDEX_HEADER + 4 * INDEX_SLOTS
            x = rng.random()
            if x < 0.3:
                off = rng.randrange(INDEX_HEADER)
            elif x < 0.6:
                off = INDEX_HEADER + rng.randrange(4 * INDEX_SLOTS)
            elif x < 0.95 and used > 1:
                off = items + INDEX_ITEM + rng.randrange((used - 1) * INDEX_ITEM)
                if 4 <= (off - items) % INDEX_ITEM < 12:
                    mask = self.aim(rng, path, off - (off - items) % INDEX_ITEM + 4, off, mask)
            else:
                off = items + rng.randrange(size - items)
        elif kind == 'checkpoint':
            off = rng.randrange(24) if rng.random() < 0.8 else rng.randrange(size)
        else:
            with open(path, 'rb') as fh:
                text = fh.read()
            # Draw again while the flip leaves a well-formed file with other
            # values: no check can tell such a file from a real one.
            for _ in range(1000):
                off, mask = rng.randrange(len(text)), rng.randrange(1, 256)
                if not config_undetectable(text, off, mask):
                    break
        return rel, off, mask

    def describe(self, rel, off, mask):
        """(where off lies in the file's structure, e.g. 'cq entry 3 tagsCode byte 7',
        and its class: the same without numbers, with what the flip did to a
        field whose value leads elsewhere, e.g. 'index slot -> past indexCount')."""
        kind = self.kind_of(rel)
        path = os.path.join(self.store, rel)
        if kind == 'commitlog':
            for r in self.commitlog.get(rel, []):
                if r.start <= off < r.start + r.length:
                    return ('%s byte %d' % (r.name, off - r.start),
                            re.sub(r'@\d+', '', r.name))
            return 'byte %d (not a swept field)' % off, 'not swept'
        if kind == 'consumequeue':
            used, _ = cq_used(path)
            n, b = divmod(off, CQ_ENTRY)
            field, fb = (('phyOffset', b) if b < 8 else ('size', b - 8) if b < 12
                         else ('tagsCode', b - 12))
            unused = '' if n < used else ' (unused)'
            how = ''
            if field == 'phyOffset' and not unused:
                _, new = field_values(path, n * CQ_ENTRY, 8, off, mask)
                how = self.leads_to(new)
            return ('cq entry %d%s %s byte %d' % (n, unused, field, fb),
                    'cq entry%s %s%s' % (unused, field, how))
        if kind == 'index':
            used = index_used(path)
            if off < INDEX_HEADER:
                for name, o, n in (('beginTimestamp', 0, 8), ('endTimestamp', 8, 8),
                                   ('beginPhyOffset', 16, 8), ('endPhyOffset', 24, 8),
                                   ('hashSlotCount', 32, 4), ('indexCount', 36, 4)):
                    if o <= off < o + n:
                        old, new = field_values(path, o, n, off, mask)
                        how = ''
                        if name == 'indexCount':
                            how = 'raised' if new > old else 'lowered'
                        return ('index header %s byte %d: %d -> %d' % (name, off - o, old, new),
                                ('index header %s %s' % (name, how)).strip())
            if off < INDEX_HEADER + 4 * INDEX_SLOTS:
                slot, b = divmod(off - INDEX_HEADER, 4)
                old, new = field_values(path, INDEX_HEADER + 4 * slot, 4, off, mask)
                return ('index slot %d byte %d: item %d -> %d' % (slot, b, old, new),
                        'index %sslot -> %s' % ('' if old else 'empty ', item_ref(new, used)))
            base = INDEX_HEADER + 4 * INDEX_SLOTS
            n, b = divmod(off - base, INDEX_ITEM)
            field, fo, fn = (('keyHash', 0, 4) if b < 4 else ('phyOffset', 4, 8) if b < 12
                             else ('timeDiff', 12, 4) if b < 16 else ('prevIndex', 16, 4))
            if not 0 < n < used:
                return ('index item %d (unused) %s byte %d' % (n, field, b - fo),
                        'index item (unused)')
            old, new = field_values(path, base + n * INDEX_ITEM + fo, fn, off, mask)
            how = ''
            if field == 'prevIndex':
                how = ' -> %s' % item_ref(new, used)
            elif field == 'timeDiff':
                how = ' -> negative' if new < 0 else ' raised' if new > old else ' lowered'
            elif field == 'phyOffset':
                how = self.leads_to(new) or (' raised' if new > old else ' lowered')
            return ('index item %d %s byte %d: %d -> %d' % (n, field, b - fo, old, new),
                    'index item %s%s' % (field, how))
        if kind == 'checkpoint':
            if off < 24:
                old, new = field_values(path, off // 8 * 8, 8, off, mask)
                name = CHECKPOINT_FIELDS[off // 8]
                return ('checkpoint %s byte %d: %d -> %d' % (name, off % 8, old, new),
                        'checkpoint %s %s' % (name, 'raised' if new > old else 'lowered'))
            return 'checkpoint unused byte %d' % off, 'checkpoint unused'
        with open(path, 'rb') as fh:
            text = fh.read()
        token = config_token(text, off)
        return ('%s %s byte %d (%r in %r)' % (rel, token, off, chr(text[off]),
                                              text[max(0, off - 12):off + 12].decode('latin-1')),
                '%s %s' % (rel[len('config/'):], token))


def field_values(path, start, size, off, mask):
    """The signed big-endian field at start, before and after the flip at off."""
    with open(path, 'rb') as fh:
        fh.seek(start)
        raw = bytearray(fh.read(size))
    old = int.from_bytes(raw, 'big', signed=True)
    raw[off - start] ^= mask
    return old, int.from_bytes(raw, 'big', signed=True)


def item_ref(n, used):
    """Where an item number leads, in an index file with used items 1..used-1."""
    if n == 0:
        return '0 (none)'
    if n < 0:
        return 'negative'
    return 'another item' if n < used else 'past indexCount'


# ------------------------------------------------------------------ config texts

class Malformed(ValueError):
    pass


def no_duplicates(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        raise Malformed('a key twice')
    return d


def not_integer(text):
    raise Malformed('not an integer: ' + text)


def config_value(text):
    """The value of a config file in fastjson's layout (integer keys are not
    quoted), or None when it is not well-formed: not UTF-8, not JSON, a key
    twice in an object, a number that is not an integer."""
    try:
        s = text.decode('utf-8')
        s = re.sub(r'([{,]\s*)(-?\d+)(\s*:)', r'\1"\2"\3', s)
        return json.loads(s, object_pairs_hook=no_duplicates, parse_float=not_integer,
                          parse_constant=not_integer)
    except (UnicodeDecodeError, ValueError):
        return None


NAME = re.compile(r'[A-Za-z0-9_%|-]{1,255}\Z')


def data_key(k):
    """A key that is data, not layout: a queue id or level, a topic, topic@group."""
    if k.isdigit():
        return True
    return all(NAME.match(part) for part in k.split('@', 1))


def config_plausible(old, new, parent=None):
    """True when new, a well-formed value, could have been written by a store
    as well as old: the same layout (keys, types), names made of the
    characters topics and groups allow, topicName equal to its key, integers
    not negative. The keys of offsetTable and topicConfigTable, and of each
    topic@group's table, are data."""
    if type(old) is not type(new):
        return False
    if isinstance(old, dict):
        data = parent in ('offsetTable', 'topicConfigTable', '@')
        if not data and set(old) != set(new):
            return False
        if 'topicName' in new and new['topicName'] != parent:
            return False
        for k, v in new.items():
            if data and not data_key(k):
                return False
            like = old[k] if k in old else next(iter(old.values()))
            if not config_plausible(like, v, '@' if parent == 'offsetTable' and '@' in k else k):
                return False
        return True
    if isinstance(old, bool):
        return True
    if isinstance(old, int):
        return new >= 0
    if isinstance(old, str):
        return bool(NAME.match(new))
    return old == new


def config_token(text, off):
    """What the byte at off is part of: a 'name' (inside quotes, with them), a
    'number', 'space' or 'syntax' (braces, colons, commas)."""
    quoted = False
    for i in range(off):
        if text[i] == 0x22 and (i == 0 or text[i - 1] != 0x5c):
            quoted = not quoted
    c = text[off]
    if quoted or c == 0x22:
        return 'name'
    if c in b'0123456789-':
        return 'number'
    if c in b' \t\r\n':
        return 'space'
    return 'syntax'


def config_undetectable(text, off, mask):
    """A flip that gives another file the store could have written."""
    flipped = bytearray(text)
    flipped[off] ^= mask
    before, after = config_value(text), config_value(bytes(flipped))
    return after is not None and after != before and config_plausible(before, after)


# ------------------------------------------------------------------ comparing

def short_diff(columns, want, got):
    if isinstance(got, str):
        return got[:300]
    if isinstance(want, str):
        return 'expected %s, got %d rows' % (want[:200], len(got))
    for i in range(max(len(want), len(got))):
        if i >= len(got):
            return '%d rows instead of %d: row %d missing: %s' % (len(got), len(want), i,
                                                                   brief_row(columns, want[i]))
        if i >= len(want):
            return '%d rows instead of %d: extra row %d: %s' % (len(got), len(want), i,
                                                                 brief_row(columns, got[i]))
        if got[i] != want[i]:
            cols = ['%s %s -> %s' % (c, short(a), short(b))
                    for c, a, b in zip(columns, want[i], got[i]) if a != b]
            return 'row %d of %d/%d (%s): %s' % (i, len(got), len(want),
                                                 brief_row(columns, want[i]), '; '.join(cols))
    return 'same'


def short(v):
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + '...'


def brief_row(columns, row):
    d = dict(zip(columns, row))
    keys = [k for k in ('commitlog_offset', 'topic', 'queue_id', 'queue_offset', 'group', 'level')
            if k in d]
    return ' '.join('%s=%s' % (k, short(d[k])) for k in keys)


def compare(plan, baseline, got):
    """[(read name, short diff)] of the reads that differ."""
    out = []
    for name, cols, _, _ in plan:
        if got.get(name) != baseline[name]:
            out.append((name, short_diff(cols, baseline[name], got.get(name, 'ERROR: no result'))))
    return out


# ------------------------------------------------------------------ one flip

def flip_file(path, off, mask):
    with open(path, 'r+b') as fh:
        fh.seek(off)
        old = fh.read(1)[0]
        fh.seek(off)
        fh.write(bytes([old ^ mask]))
    return old, old ^ mask


def judge(work, rel, off, mask, plan, baseline):
    """Flips one byte of a copy of the pristine store; returns old and new byte
    and, for 'verify', 'ro' and 'rw' (the writable open), (status, value) as
    in_child gives them, with the reads turned into [(read, short diff)]."""
    flipped = os.path.join(work, 'flipped')
    shutil.rmtree(flipped, ignore_errors=True)
    shutil.copytree(os.path.join(work, 'pristine'), flipped)
    old, new = flip_file(os.path.join(flipped, rel), off, mask)
    out = {'old': old, 'new': new, 'verify': in_child(lambda: verify(flipped))}
    st, val = in_child(lambda: reads(flipped, True, plan))
    out['ro'] = (st, compare(plan, baseline, val) if st == 'ok' else val)
    # The writable open gets its own copy: it may rewrite derived files.
    writable = os.path.join(work, 'writable')
    shutil.rmtree(writable, ignore_errors=True)
    shutil.copytree(flipped, writable)
    st, val = in_child(lambda: reads(writable, False, plan))
    out['rw'] = (st, compare(plan, baseline, val) if st == 'ok' else val)
    return out


def read_class(name):
    return name.split(' ')[0]


def main():
    seed = os.environ.get('RMQ_SWEEP_SEED')
    seed = int(seed) if seed else random.randrange(1 << 32)
    print('corrupt_sweep: RMQ_SWEEP_SEED=%d RMQ_SWEEP_FLIPS=%d RMQ_SWEEP_SECONDS=%g%s'
          % (seed, FLIPS, SECONDS, ' RMQ_SWEEP_ONLY=%s' % ONLY if ONLY else ''))
    sys.stdout.flush()
    rng = random.Random(seed)
    # Each flip copies the store twice: on tmpfs that is 2 ms, on ext4 50.
    shm = '/dev/shm'
    tmp = tempfile.mkdtemp(prefix='rmq-sweep-', dir=shm if os.access(shm, os.W_OK) else None)
    try:
        return sweep(tmp, seed, rng)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sweep(tmp, seed, rng):
    pristine = os.path.join(tmp, 'pristine')
    st, val = in_child(lambda: build_store(pristine), timeout=120)
    if not CHECKS.eq('build the store', (st, val), ('ok', None)):
        return CHECKS.report()

    st, val = in_child(lambda: (make_plan(pristine), verify(pristine)))
    if not CHECKS.eq('plan the reads', st, 'ok'):
        print(val)
        return CHECKS.report()
    plan, sound = val
    CHECKS.eq('rocketmq_verify of the pristine store', sound, [])
    st, baseline = in_child(lambda: reads(pristine, True, plan))
    CHECKS.eq('baseline reads', st, 'ok')
    errors = [n for n, v in baseline.items() if isinstance(v, str)]
    CHECKS.eq('baseline reads without errors', errors, [])
    copy = os.path.join(tmp, 'copy')
    shutil.copytree(pristine, copy)
    st, rw = in_child(lambda: reads(copy, False, plan))
    CHECKS.eq('a writable open reads what a read-only one does',
              compare(plan, baseline, rw) if st == 'ok' else rw, [])
    shutil.rmtree(copy)
    smap = StoreMap(pristine)
    print('store: %s; %d reads per open' % (
        ', '.join('%d %s' % (len(v), k) for k, v in smap.files.items()), len(plan)))
    if CHECKS.failed:
        return CHECKS.report()

    if ONLY:
        flips = []
        for spec_ in ONLY.split(','):
            name, off, mask = spec_.rsplit(':', 2)
            flips.append((real_name(pristine, name), int(off, 0), int(mask, 0)))
    else:
        flips = None
    rotation = ('commitlog', 'consumequeue', 'index', 'commitlog', 'consumequeue', 'index',
                'checkpoint', 'config')
    by_kind, by_field, classes = {}, {}, {}
    start = time.time()
    n = 0
    total = len(flips) if flips is not None else FLIPS
    while n < total:
        if time.time() - start > SECONDS:
            print('time is up (RMQ_SWEEP_SECONDS=%g): %d of %d flips ran' % (SECONDS, n, total))
            break
        if flips is not None:
            rel, off, mask = flips[n]
            kind = smap.kind_of(rel)
        else:
            kind = rotation[n % len(rotation)]
            rel, off, mask = smap.choose(rng, kind)
        n += 1
        out = judge(tmp, rel, off, mask, plan, baseline)
        where, cls = smap.describe(rel, off, mask)
        replay = '%s:%d:0x%02x' % (stable_name(pristine, rel), off, mask)
        line = ('flip %d: %s offset %d (%s) 0x%02x -> 0x%02x [RMQ_SWEEP_ONLY=%s]'
                % (n, stable_name(pristine, rel), off, where, out['old'], out['new'], replay))
        outcome, detail, mode_results = assess(out)
        field = '%s | %s' % (kind, cls)
        for table, key in ((by_kind, kind), (by_field, field)):
            s = table.setdefault(key, {'flips': 0, 'reported': 0, 'harmless': 0, 'failed': 0})
            s['flips'] += 1
            s[outcome] += 1
        if outcome == 'failed':
            c = classes.setdefault(field, {'count': 0, 'modes': set(), 'what': set(),
                                           'verify': set(), 'example': None})
            c['count'] += 1
            vst, rows = out['verify']
            c['verify'].add('reported' if vst == 'ok' and rows else 'silent' if vst == 'ok'
                            else vst)
            for mode, what in mode_results:
                c['modes'].add(mode)
                c['what'].update(what)
            if c['example'] is None:
                c['example'] = (replay, detail[0].strip() if detail else '')
            CHECKS.ok(False, '%s: %s\n%s' % (
                line, 'verify reported %d rows, but' % len(rows) if vst == 'ok' and rows
                else 'verify reported nothing, but' if vst == 'ok' else 'verify failed:',
                '\n'.join(detail)))
        else:
            CHECKS.ok(True, line)
            if VERBOSE:
                print('%s: %s' % (line, 'reported %s' % (out['verify'][1][0],)
                                  if outcome == 'reported' else 'harmless'))
        sys.stdout.flush()

    elapsed = time.time() - start
    print('\n%d flips in %.1f s (%.1f s per 100 flips), RMQ_SWEEP_SEED=%d'
          % (n, elapsed, 100 * elapsed / max(n, 1), seed))
    print_table('kind', by_kind, ('commitlog', 'consumequeue', 'index', 'checkpoint', 'config'))
    print_table('kind | field', by_field, sorted(by_field))
    if classes:
        print('\nfailures by class: count | kind | field | where it showed | reads that '
              'differed, or crash, hang, error | what verify said; one replay each')
        for field, c in sorted(classes.items(), key=lambda kv: -kv[1]['count']):
            print('%4d | %s | %s | %s | %s\n       RMQ_SWEEP_ONLY=%s\n       %s'
                  % (c['count'], field, ' and '.join(sorted(c['modes'])),
                     ' '.join(sorted(c['what'])), '/'.join(sorted(c['verify'])),
                     c['example'][0], c['example'][1][:300]))
    return CHECKS.report()


def assess(out):
    """('reported' | 'harmless' | 'failed', detail lines, [(who, {what went wrong})])."""
    detail, modes = [], []
    vst, rows = out['verify']
    silent = vst == 'ok' and not rows
    for mode, key in (('verify', 'verify'), ('read-only', 'ro'), ('writable', 'rw')):
        status, val = out[key]
        if status != 'ok':
            # Whatever verify said: damage may fail a read, never the process.
            text = val if status != 'hang' else 'no answer within %g s' % val
            detail.append('  %s: %s: %s' % (mode, status, str(text)[-400:]))
            modes.append((mode, {status}))
        elif key != 'verify' and silent and val:
            detail += ['  %s open: %s: %s' % (mode, rn, d) for rn, d in val[:4]]
            if len(val) > 4:
                detail.append('  %s open: ... %d reads differ in all' % (mode, len(val)))
            modes.append((mode, {read_class(rn) for rn, _ in val}))
    if modes:
        return 'failed', detail, modes
    return ('harmless' if silent else 'reported'), detail, modes


def print_table(title, table, keys):
    width = max([len(title)] + [len(k) for k in keys])
    print('\n%-*s %6s %9s %9s %7s' % (width, title, 'flips', 'reported', 'harmless', 'failed'))
    for k in keys:
        s = table.get(k)
        if s:
            print('%-*s %6d %9d %9d %7d' % (width, k, s['flips'], s['reported'], s['harmless'],
                                           s['failed']))


if __name__ == '__main__':
    sys.exit(main())
