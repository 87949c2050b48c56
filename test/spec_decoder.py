#!/usr/bin/python3
"""spec_decoder.py: an independent reader of RocketMQ store files.

Written from the description of RocketMQ 4.9's store format (CommitLog,
ConsumeQueue, IndexFile and StoreCheckpoint records),
not from the C engine, so that it can judge the stores the engine writes.
test/golden_commitlog.py proves it right against the files Apache RocketMQ
4.9.7 wrote.

CLI:
    spec_decoder.py commitlog <store-dir>
        prints one JSON object per line, the same lines as
        test/engine/golden_dump (see that file for the keys), so the two can
        be diffed.

Module:
    decode_record(buf, pos, end, check_crc=True) -> (status, fields or None)
    walk_commitlog(store_dir) -> list of dicts (the lines above)
    java_hash(utf8_bytes), tags_code(utf8_bytes), index_key_hash(topic, key)
    parse_properties(raw_bytes) -> list of (name, value) str pairs in stored order

Record validation (CommitLog.checkMessageAndReturnSize, spec 8.2), with every
length checked against the bytes of the record:
    magic BLANK                                 -> BLANK (size = TOTALSIZE)
    magic not v1 0xDAA320A7 / v2 0xDAA320AB     -> BAD_MAGIC
    fewer than 8 bytes, TOTALSIZE < 91 or past
      the end, a negative length, a field past
      TOTALSIZE                                 -> TRUNCATED
    non-empty body and masked CRC32 differs     -> BAD_CRC
    calMsgLength != TOTALSIZE                   -> BAD_LENGTH
"""
import json
import os
import socket
import struct
import sys
import zlib

MAGIC_V1 = -626843481       # 0xDAA320A7
MAGIC_V2 = -626843477       # 0xDAA320AB, 5.x: int16 topic length
MAGIC_BLANK = -875286124    # 0xCBD43194
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20
MIN_RECORD = 91             # calMsgLength with IPv4 hosts and empty fields


class Truncated(Exception):
    pass


class Reader:
    """Big-endian reads inside buf[pos:end]; running past end raises Truncated."""

    def __init__(self, buf, pos, end):
        self.buf, self.pos, self.end = buf, pos, end

    def take(self, n):
        if n < 0 or self.pos + n > self.end:
            raise Truncated()
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def i8(self):
        return struct.unpack('>b', self.take(1))[0]

    def i16(self):
        return struct.unpack('>h', self.take(2))[0]

    def i32(self):
        return struct.unpack('>i', self.take(4))[0]

    def i64(self):
        return struct.unpack('>q', self.take(8))[0]


def body_crc(data):
    return zlib.crc32(data) & 0x7FFFFFFF


def cal_msg_length(sys_flag, body_len, topic_len, props_len, v2=False):
    born = 20 if sys_flag & BORNHOST_V6 else 8
    store = 20 if sys_flag & STOREHOST_V6 else 8
    return (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8
            + 4 + max(body_len, 0) + (2 if v2 else 1) + topic_len
            + 2 + max(props_len, 0))


def read_host(r, v6):
    addr = r.take(16 if v6 else 4)
    port = r.i32()
    return addr, port


def format_host(addr, port):
    if len(addr) == 16:
        return '[%s]:%d' % (socket.inet_ntop(socket.AF_INET6, addr), port)
    return '%s:%d' % (socket.inet_ntop(socket.AF_INET, addr), port)


def msg_id(store_addr, store_port, offset):
    """Spec 4.1: store host bytes + int32 port + int64 offset, upper-case hex."""
    return (store_addr + struct.pack('>iq', store_port, offset)).hex().upper()


def decode_record(buf, pos, end, check_crc=True):
    """Decodes the record at buf[pos:end]. Returns (status, fields); fields
    is a dict for OK, {'size': n} for BLANK, None otherwise."""
    if end - pos < 8:
        return 'TRUNCATED', None
    total, magic = struct.unpack_from('>ii', buf, pos)
    if magic == MAGIC_BLANK:
        return 'BLANK', {'size': total}
    if magic not in (MAGIC_V1, MAGIC_V2):
        return 'BAD_MAGIC', None
    if total < MIN_RECORD or total > end - pos:
        return 'TRUNCATED', None
    r = Reader(buf, pos + 8, pos + total)
    f = {'size': total, 'magic': magic}
    try:
        f['bodyCRC'] = r.i32()
        f['queueId'] = r.i32()
        f['flag'] = r.i32()
        f['queueOffset'] = r.i64()
        f['physicalOffset'] = r.i64()
        f['sysFlag'] = r.i32()
        f['bornTimestamp'] = r.i64()
        f['bornHost'] = read_host(r, f['sysFlag'] & BORNHOST_V6)
        f['storeTimestamp'] = r.i64()
        f['storeHost'] = read_host(r, f['sysFlag'] & STOREHOST_V6)
        f['reconsumeTimes'] = r.i32()
        f['preparedTransactionOffset'] = r.i64()
        body_len = r.i32()
        f['body'] = r.take(body_len)
        # Java only checks the CRC of a non-empty body (CL 343-353).
        if check_crc and body_len > 0 and body_crc(f['body']) != f['bodyCRC']:
            return 'BAD_CRC', None
        v2 = magic == MAGIC_V2
        topic_len = r.i16() if v2 else r.i8()
        f['topic'] = r.take(topic_len)
        props_len = r.i16()
        f['properties'] = r.take(props_len)
    except Truncated:
        return 'TRUNCATED', None
    if cal_msg_length(f['sysFlag'], body_len, topic_len, props_len, v2) != total:
        return 'BAD_LENGTH', None
    return 'OK', f


def decode_utf8_like_java(data):
    """UTF-8 to str with U+FFFD per malformed sequence, as the JDK decodes:
    Python's 'replace' does the same except that Java turns an encoded
    surrogate (ED A0..BF 80..BF) into one U+FFFD, not three."""
    out, i = [], 0
    while True:
        try:
            out.append(data[i:].decode('utf-8'))
            return ''.join(out)
        except UnicodeDecodeError as e:
            out.append(data[i:i + e.start].decode('utf-8'))
            j = i + e.start
            if data[j] == 0xED and j + 1 < len(data) and 0xA0 <= data[j + 1] <= 0xBF:
                cont = j + 2 < len(data) and 0x80 <= data[j + 2] <= 0xBF
                step = 3 if cont else 2
            else:
                step = e.end - e.start
            out.append('\ufffd')
            i = j + step


def java_hash_str(s):
    """Java String.hashCode: h = 31*h + unit over UTF-16 units, as int32."""
    h = 0
    units = s.encode('utf-16-be', 'surrogatepass')
    for k in range(0, len(units), 2):
        h = (h * 31 + (units[k] << 8 | units[k + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_hash(data):
    return java_hash_str(decode_utf8_like_java(data))


def tags_code(tags):
    """Spec 3.5: Java hash of TAGS, sign-extended; 0 when absent or empty."""
    return java_hash(tags) if tags else 0


def index_key_hash(topic, key):
    """Spec 6.2: abs(javaHash(topic + '#' + key)), Integer.MIN_VALUE -> 0."""
    h = java_hash(topic + b'#' + key)
    return 0 if h == -(1 << 31) else abs(h)


def parse_properties(raw):
    """Spec 3.2 (4.9.7): split on 0x02; keep segments of at least 3 chars
    whose first 0x01 has a non-empty name before and value after it."""
    pairs = []
    for seg in decode_utf8_like_java(raw).split('\x02'):
        if len(seg) < 3:
            continue
        k = seg.find('\x01')
        if 0 < k < len(seg) - 1:
            pairs.append((seg[:k], seg[k + 1:]))
    return pairs


def property_value(raw, name):
    """The value of a property as UTF-8 bytes (the last duplicate wins), or None."""
    value = None
    for k, v in parse_properties(raw):
        if k == name:
            value = v
    return value.encode('utf-8', 'surrogatepass') if value is not None else None


def record_line(f):
    """The JSON object golden_dump prints for a decoded record."""
    born_addr, born_port = f['bornHost']
    store_addr, store_port = f['storeHost']
    return {
        'physicalOffset': f['physicalOffset'],
        'size': f['size'],
        'topic': f['topic'].decode('latin-1'),  # bytes as \u00XX, lossless
        'queueId': f['queueId'],
        'queueOffset': f['queueOffset'],
        'sysFlag': f['sysFlag'],
        'flag': f['flag'],
        'bodyCRC': f['bodyCRC'],
        'bornTimestamp': f['bornTimestamp'],
        'bornHost': format_host(born_addr, born_port),
        'storeTimestamp': f['storeTimestamp'],
        'storeHost': format_host(store_addr, store_port),
        'reconsumeTimes': f['reconsumeTimes'],
        'preparedTransactionOffset': f['preparedTransactionOffset'],
        'bodyLength': len(f['body']),
        'bodyHex': f['body'].hex(),
        'propertiesHex': f['properties'].hex(),
        'msgId': msg_id(store_addr, store_port, f['physicalOffset']),
        'tagsCode': tags_code(property_value(f['properties'], 'TAGS')),
        'blank': False,
    }


def segment_files(directory):
    """(start offset, path) of the 20-digit files of directory, in offset order."""
    names = [n for n in os.listdir(directory) if len(n) == 20 and n.isdigit() and n.isascii()]
    return [(int(n), os.path.join(directory, n)) for n in sorted(names)]


def walk_commitlog(store_dir):
    """Spec 2.5, 8.3: records in order; a BLANK moves to the next file; the
    first invalid record ends the log."""
    lines, next_start = [], 0
    for start, path in segment_files(os.path.join(store_dir, 'commitlog')):
        with open(path, 'rb') as fh:
            buf = fh.read()
        next_start = start + len(buf)
        pos = 0
        while True:
            status, f = decode_record(buf, pos, len(buf), check_crc=True)
            if status == 'OK':
                lines.append(record_line(f))
                pos += f['size']
            elif status == 'BLANK':
                lines.append({'physicalOffset': start + pos, 'size': f['size'], 'blank': True})
                break
            else:
                lines.append({'end': start + pos, 'status': status})
                return lines
    lines.append({'end': next_start, 'status': 'EOF'})
    return lines


def dumps(obj):
    """The exact line format golden_dump prints."""
    return json.dumps(obj, separators=(',', ':'), ensure_ascii=True)


def main(argv):
    if len(argv) != 3 or argv[1] != 'commitlog':
        sys.stderr.write('usage: spec_decoder.py commitlog <store-dir>\n')
        return 2
    for line in walk_commitlog(argv[2]):
        print(dumps(line))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
