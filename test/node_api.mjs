// node_api.mjs: the extension in Node.js, loaded into better-sqlite3 and
// the SQLite it bundles (newer than Debian's), as docs/clients.md shows it:
// produce (lastInsertRowid is the commit-log offset), consume by queue,
// look up by key, transactions, an outbox joined with an ordinary table, a
// long poll that another thread's INSERT ends, the companion tables and
// the functions; the IN lists and LIMIT/OFFSET this SQLite's planner hands
// the store table; and every example of sql/ (make demo) run statement by
// statement.
//
// Run by test/run.sh as
//   node --test --test-reporter=./test/node/reporter.mjs test/node_api.mjs
// with RMQ_EXT and RMQ_BUILD set (their defaults suit a checkout built
// with make). better-sqlite3 is installed under RMQ_BUILD/node when
// missing (test/node/better_sqlite3.mjs).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { Worker } from 'node:worker_threads';

import { buildDir, loadBetterSqlite3, modulePath } from './node/better_sqlite3.mjs';

const Database = loadBetterSqlite3();
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const ext = process.env.RMQ_EXT || path.join(buildDir, 'rocketmq');
const golden = process.env.RMQ_GOLDEN || path.join(root, 'test', 'golden');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rmq-node-'));

const open = [];
function connect() {
  const db = new Database(':memory:');
  db.loadExtension(ext);
  open.push(db);
  return db;
}
after(() => {
  for (const db of open) if (db.open) db.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// The arguments of a store in dir with small files.
function smallStore(dir) {
  return `dir='${dir}', commitlog_file_size=65536, consumequeue_entries=64, ` +
         'index_slots=64, index_entries=256';
}

// EXPLAIN QUERY PLAN's detail lines.
function plan(db, sql) {
  return db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all().map((r) => r.detail).join('\n');
}

const db = connect();
const store = path.join(tmp, 'store');
db.exec(`CREATE VIRTUAL TABLE mq USING rocketmq(${smallStore(store)})`);
const stat = (name) =>
  db.prepare('SELECT value FROM rocketmq_stats(?) WHERE name = ?').pluck().get(store, name);

test('loads into better-sqlite3', () => {
  const version = db.prepare('SELECT sqlite_version()').pluck().get();
  console.log(`better-sqlite3 with SQLite ${version}`);
  assert.match(db.prepare('SELECT rocketmq_version()').pluck().get(), /^\d+\.\d+\.\d+$/);
  // Loading it again on the same connection is a no-op.
  db.loadExtension(ext);
});

test('produce: lastInsertRowid is the commit-log offset', () => {
  // better-sqlite3 binds a number as a double: queue_id 0 arrives as 0.0.
  const insert = db.prepare(
      'INSERT INTO mq(topic, queue_id, tags, keys, body) VALUES (?, ?, ?, ?, ?)');
  const offsets = [];
  for (let i = 0; i < 5; i++) {
    const info = insert.run('Orders', 0, i % 2 ? 'created' : 'paid', `order-${i}`, `{"id":${i}}`);
    assert.equal(info.changes, 1);
    offsets.push(info.lastInsertRowid);
  }
  assert.equal(offsets[0], 0);
  const found = db.prepare(`SELECT commitlog_offset FROM mq
                             WHERE topic = 'Orders' AND queue_id = 0 AND queue_offset >= 0`)
                    .pluck().all();
  assert.deepEqual(found, offsets);
  // A BLOB body comes back as a Buffer.
  const off = insert.run('Orders', 0, 'bin', 'bin-1', Buffer.from([0, 1, 255])).lastInsertRowid;
  assert.deepEqual(db.prepare('SELECT body FROM mq WHERE commitlog_offset = ?').pluck().get(off),
                   Buffer.from([0, 1, 255]));
});

test('consume by queue uses the consume-queue plan', () => {
  const sql = `SELECT queue_offset, tags, body_text FROM mq
                WHERE topic = 'Orders' AND queue_id = 0 AND queue_offset >= 2`;
  assert.equal(plan(db, sql), 'SCAN mq VIRTUAL TABLE INDEX 164:cq topic=? queue_id=? queue_offset>=?');
  assert.deepEqual(db.prepare(sql).all().map((r) => r.queue_offset), [2, 3, 4, 5]);
  // Bound values, as a consumer pulls a batch.
  const batch = db.prepare(`SELECT queue_offset FROM mq WHERE topic = ? AND queue_id = ?
                              AND queue_offset >= ? AND queue_offset < ?`).pluck();
  assert.deepEqual(batch.all('Orders', 0, 1, 3), [1, 2]);
});

test('key look-up uses the index', () => {
  const sql = `SELECT body_text FROM mq WHERE topic = 'Orders' AND key = 'order-3'`;
  assert.equal(plan(db, sql), 'SCAN mq VIRTUAL TABLE INDEX 12:index key');
  assert.deepEqual(db.prepare(sql).pluck().all(), ['{"id":3}']);
  assert.deepEqual(db.prepare(`SELECT key, body_text FROM mq WHERE topic = 'Orders'
                                  AND key IN ('order-4', 'order-1', 'nope')`).raw().all(),
                   [['order-1', '{"id":1}'], ['order-4', '{"id":4}']]);
});

test('a transaction: ROLLBACK appends nothing, COMMIT appends every row', () => {
  const before = stat('commitlog_max_offset');
  const insert = db.prepare(`INSERT INTO mq(topic, queue_id, body) VALUES ('Tx', 0, ?)`);
  const produce = db.transaction((bodies) => {
    for (const b of bodies) {
      // Offsets are assigned at COMMIT.
      assert.equal(insert.run(b).lastInsertRowid, -1);
    }
    if (bodies.includes('fail')) throw new Error('rolled back');
  });
  assert.throws(() => produce(['a', 'fail']), /rolled back/);
  assert.equal(stat('commitlog_max_offset'), before);
  produce(['a', 'b', 'c']);
  assert.deepEqual(db.prepare(`SELECT body_text FROM mq WHERE topic = 'Tx' AND queue_id = 0`)
                       .pluck().all(), ['a', 'b', 'c']);
  assert.ok(stat('commitlog_max_offset') > before);
});

test('an outbox: an ordinary table and the store in one transaction, then joined', () => {
  db.exec('CREATE TABLE orders(id INTEGER PRIMARY KEY, customer TEXT, total REAL)');
  const order = db.prepare('INSERT INTO orders VALUES (?, ?, ?)');
  // A number bound here would read 'order-2001.0': the id comes from the row.
  const event = db.prepare(`INSERT INTO mq(topic, tags, keys, body)
                            SELECT 'OrderEvents', 'created', 'order-' || id, json_object('id', id)
                              FROM orders WHERE id = ?`);
  const place = db.transaction((id, customer, total, fail) => {
    order.run(id, customer, total);
    event.run(id);
    if (fail) throw new Error('no');
  });
  place(2001, 'ada', 42.0, false);
  assert.throws(() => place(2002, 'bob', 7.0, true), /no/);
  place(2003, 'cy', 1.5, false);
  const rows = db.prepare(`SELECT o.id, o.customer, m.body_text
                             FROM orders o JOIN mq m
                               ON m.topic = 'OrderEvents' AND m.key = 'order-' || o.id
                            ORDER BY o.id`).raw().all();
  assert.deepEqual(rows, [[2001, 'ada', '{"id":2001}'], [2003, 'cy', '{"id":2003}']]);
  // Read through the consume queues the ordinary table names.
  db.exec(`CREATE TABLE positions(topic TEXT, queue_id INTEGER, next_offset INTEGER);
           INSERT INTO positions SELECT DISTINCT topic, queue_id, 0 FROM mq WHERE topic = 'OrderEvents'`);
  const pulled = db.prepare(`SELECT m.keys FROM positions p JOIN mq m
                               ON m.topic = p.topic AND m.queue_id = p.queue_id
                              AND m.queue_offset >= p.next_offset ORDER BY m.keys`).pluck().all();
  assert.deepEqual(pulled, ['order-2001', 'order-2003']);
});

test('wait_ms returns when another thread produces', async () => {
  const worker = new Worker(`
    const { workerData } = require('node:worker_threads');
    const Database = require(workerData.module);
    const db = new Database(':memory:');
    db.loadExtension(workerData.ext);
    db.exec("CREATE VIRTUAL TABLE mq USING rocketmq(" + workerData.args + ")");
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
    db.prepare("INSERT INTO mq(topic, queue_id, body) VALUES ('Poll', 0, 'arrived')").run();
    db.close();
  `, { eval: true, workerData: { module: modulePath, ext, args: smallStore(store) } });
  const done = new Promise((resolve, reject) => {
    worker.on('error', reject);
    worker.on('exit', resolve);
  });
  const started = Date.now();
  const rows = db.prepare(`SELECT body_text FROM mq WHERE topic = 'Poll' AND queue_id = 0
                              AND queue_offset >= 0 AND wait_ms = 20000`).pluck().all();
  const ms = Date.now() - started;
  await done;
  assert.deepEqual(rows, ['arrived']);
  assert.ok(ms < 10000, `the poll took ${ms} ms`);
});

test('wait_ms returns empty after its time when nothing arrives', () => {
  const started = Date.now();
  const rows = db.prepare(`SELECT body_text FROM mq WHERE topic = 'Poll' AND queue_id = 0
                              AND queue_offset >= 1 AND wait_ms = 300`).all();
  const ms = Date.now() - started;
  assert.deepEqual(rows, []);
  assert.ok(ms >= 290 && ms < 5000, `the poll took ${ms} ms`);
});

test('the companion tables', () => {
  db.prepare(`INSERT INTO mq(topic, queue_id, keys, body, delay_level)
              VALUES ('Later', 0, 'later-1', 'x', 18)`).run();
  const count = (sql, ...args) => db.prepare(sql).pluck().get(...args);
  const messages = count('SELECT count(*) FROM mq');
  assert.ok(messages > 10);
  assert.equal(count(`SELECT count(*) FROM rocketmq_commitlog(?) WHERE kind = 'message'`, store),
               messages);
  assert.equal(count('SELECT count(*) FROM rocketmq_consumequeue(?, ?, 0)', store, 'Orders'), 6);
  assert.ok(count('SELECT count(*) FROM rocketmq_index(?) WHERE key = ?', store, 'Orders#order-1') >= 1);
  assert.deepEqual(db.prepare(`SELECT min_offset, max_offset, message_count FROM rocketmq_queues(?)
                                WHERE topic = 'Orders'`).raw().all(store), [[0, 6, 6]]);
  assert.equal(stat('live'), 1);
  assert.equal(count('SELECT count(*) FROM rocketmq_verify(?)', store), 0);
  assert.ok(count(`SELECT count(*) FROM rocketmq_files(?) WHERE kind = 'commitlog'`, store) >= 1);
  assert.deepEqual(db.prepare('SELECT level, real_topic, keys FROM rocketmq_scheduled(?)')
                       .raw().all(store), [[18, 'Later', 'later-1']]);
  assert.equal(db.prepare('SELECT rocketmq_commit_offset(?, ?, ?, ?, ?)').pluck()
                   .get(store, 'billing', 'Orders', 0, 4), 4);
  assert.deepEqual(db.prepare(`SELECT "group", topic, queue_id, offset, max_offset, lag
                                 FROM rocketmq_consumer_offsets(?)`).raw().all(store),
                   [['billing', 'Orders', 0, 4, 6, 2]]);
});

test('the functions', () => {
  const flushed = db.prepare('SELECT rocketmq_flush(?)').pluck().get(store);
  assert.equal(flushed, stat('commitlog_max_offset'));
  assert.equal(db.prepare(`SELECT rocketmq_java_hash('Aa') = rocketmq_java_hash('BB')`).pluck().get(), 1);
  assert.throws(() => db.prepare('SELECT rocketmq_commit_offset(?, ?, ?, 0, 99)')
                          .get(store, 'billing', 'Orders'), /99/);
});

test('IN lists and LIMIT/OFFSET go to the store table', () => {
  const where = `topic IN ('Orders', 'Tx') AND queue_id IN (0, 1) AND tags IN ('paid', 'created')`;
  assert.equal(plan(db, `SELECT * FROM mq WHERE ${where}`),
               'SCAN mq VIRTUAL TABLE INDEX 14682148:cq topic IN (...) queue_id IN (...) tags IN (...)');
  const rows = db.prepare(`SELECT commitlog_offset FROM mq WHERE ${where}`).pluck().all();
  const scanned = db.prepare(`SELECT commitlog_offset FROM mq
                               WHERE +topic IN ('Orders', 'Tx') AND +queue_id IN (0, 1)
                                 AND +tags IN ('paid', 'created') ORDER BY topic, queue_id, queue_offset`)
                      .pluck().all();
  assert.deepEqual(rows, scanned);
  assert.equal(rows.length, 5);
  const limited = `SELECT queue_offset FROM mq WHERE topic = 'Orders' AND queue_id = 0
                   LIMIT 2 OFFSET 3`;
  assert.equal(plan(db, limited),
               'SCAN mq VIRTUAL TABLE INDEX 100663332:cq topic=? queue_id=? LIMIT ? OFFSET ?');
  assert.deepEqual(db.prepare(limited).pluck().all(), [3, 4]);
});

// The statements of an SQL script: split at each `;` outside quotes and
// comments, but a CREATE TRIGGER ends at its END;.
function statements(script) {
  const out = [];
  let start = 0;
  for (let i = 0; i < script.length; i++) {
    const ch = script[i];
    if (ch === "'" || ch === '"') {
      i = script.indexOf(ch, i + 1);
      if (i < 0) break;
    } else if (ch === '-' && script[i + 1] === '-') {
      i = script.indexOf('\n', i);
      if (i < 0) break;
    } else if (ch === ';') {
      const sql = script.slice(start, i + 1).replace(/^(\s*--[^\n]*\n)*\s*/, '');
      if (/^CREATE\s+(TEMP\s+|TEMPORARY\s+)?TRIGGER/i.test(sql) && !/END\s*;$/i.test(sql)) continue;
      out.push(sql);
      start = i + 1;
    }
  }
  return out;
}

// make demo's examples, in its order, on stores under tmp.
const demo = ['quickstart', 'consume', 'consumer_group', 'outbox', 'joins', 'admin',
              'broker_store', 'delayed', 'retention'];
for (const name of demo) {
  test(`sql/${name}.sql`, () => {
    const text = fs.readFileSync(path.join(root, 'sql', `${name}.sql`), 'utf8')
                     .replace(/^\.load .*$/gm, '')
                     .replace(/^\.mode .*$/gm, '')
                     .replaceAll("'build/", `'${tmp}/`)
                     .replaceAll("'test/golden/", `'${golden}/`);
    const conn = new Database(':memory:');
    conn.loadExtension(ext);
    try {
      let rows = 0;
      for (const sql of statements(text)) {
        try {
          const stmt = conn.prepare(sql);
          rows += stmt.reader ? stmt.all().length : (stmt.run(), 0);
        } catch (e) {
          throw new Error(`${e.message}\n  in: ${sql}`);
        }
      }
      assert.ok(rows > 0);
    } finally {
      conn.close();
    }
  });
}
