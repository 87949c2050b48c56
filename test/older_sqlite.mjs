// older_sqlite.mjs: the extension loaded into SQLite versions older than
// Debian's 3.40.1, the floor the other tests run on: 3.37.2, the last one
// without 3.38's planner interfaces (sqlite3_vtab_in, LIMIT and OFFSET in
// xBestIndex), whose calls the host's API table then lacks, and 3.31.1,
// the oldest that works: older ones have no SQLITE_DIRECTONLY (the
// companion tables would be open to views and triggers) and no
// pragma_function_list (a second load_extension fails).
//
// Each SQLite comes as the amalgamation inside an old better-sqlite3
// package from the npm registry (npm pack), built here with
// test/node/sqlite_driver.c into a small shell under RMQ_BUILD/oldsqlite,
// once. Run by test/run.sh with `node --test` (see node_api.mjs).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';

import { buildDir } from './node/better_sqlite3.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const ext = process.env.RMQ_EXT || path.join(buildDir, 'rocketmq');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rmq-oldsqlite-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// The better-sqlite3 releases whose amalgamation is each SQLite.
const versions = [
  { sqlite: '3.37.2', pkg: '7.5.0' },
  { sqlite: '3.31.1', pkg: '7.0.0' },
];

// The directory of sqlite3.c in an unpacked package (older ones keep it in a tarball).
function amalgamationDir(deps) {
  const dirs = [path.join(deps, 'sqlite3'), deps];
  const found = () => dirs.find((d) => fs.existsSync(path.join(d, 'sqlite3.c')));
  if (!found() && fs.existsSync(path.join(deps, 'sqlite3.tar.gz'))) {
    execFileSync('tar', ['xzf', 'sqlite3.tar.gz'], { cwd: deps });
  }
  if (!found()) throw new Error(`no sqlite3.c under ${deps}`);
  return found();
}

// The driver built with SQLite v.sqlite, made when missing.
function driver(v) {
  const dir = path.join(buildDir, 'oldsqlite', v.pkg);
  const exe = path.join(dir, `sqlite_driver-${v.sqlite}`);
  if (fs.existsSync(exe)) return exe;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  console.log(`fetching better-sqlite3@${v.pkg} (SQLite ${v.sqlite}) and building a shell with it`);
  execFileSync('npm', ['pack', `better-sqlite3@${v.pkg}`, '--pack-destination', dir],
               { stdio: ['ignore', 'ignore', 'pipe'] });
  execFileSync('tar', ['xzf', `better-sqlite3-${v.pkg}.tgz`], { cwd: dir });
  const src = amalgamationDir(path.join(dir, 'package', 'deps'));
  execFileSync(process.env.CC || 'cc',
               ['-O1', '-w', '-DSQLITE_THREADSAFE=1', `-I${src}`,
                path.join(root, 'test', 'node', 'sqlite_driver.c'), path.join(src, 'sqlite3.c'),
                '-o', `${exe}.tmp`, '-ldl', '-lpthread', '-lm'],
               { stdio: ['ignore', 'ignore', 'pipe'] });
  fs.renameSync(`${exe}.tmp`, exe);
  return exe;
}

// The output lines of sql run by the driver of v.
function run(v, sql) {
  return execFileSync(driver(v), [ext], { input: sql, encoding: 'utf8' }).trimEnd().split('\n');
}

// A store of 30 messages: topics A and B, queues 0..2, tags Aa, BB and c, keys k0..k4.
function setup(dir) {
  return `CREATE VIRTUAL TABLE mq USING rocketmq(dir='${dir}', commitlog_file_size=65536,
            consumequeue_entries=64, index_slots=64, index_entries=256);
          INSERT INTO mq(topic, queue_id, tags, keys, body)
          SELECT CASE WHEN i % 2 THEN 'A' ELSE 'B' END, i % 3,
                 CASE i % 3 WHEN 0 THEN 'Aa' WHEN 1 THEN 'BB' ELSE 'c' END, 'k' || (i % 5), 'm' || i
            FROM (WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 29)
                  SELECT i FROM n);\n`;
}

// A query's bodies in commit-log order.
const bodies = (where) =>
  `SELECT group_concat(body_text) FROM (SELECT body_text FROM mq WHERE ${where}
    ORDER BY commitlog_offset);\n`;

for (const v of versions) {
  test(`SQLite ${v.sqlite}: IN lists run once per value, LIMIT stays with SQLite`, () => {
    const dir = path.join(tmp, `plans-${v.sqlite}`);
    const where = `topic IN ('A', 'B') AND queue_id IN (0, 1) AND tags IN ('Aa', 'c')`;
    const out = run(v, `SELECT sqlite_version();\n${setup(dir)}
      EXPLAIN QUERY PLAN SELECT * FROM mq WHERE ${where};
      ${bodies(where)}
      ${bodies(where.replace(/(topic|queue_id|tags) IN/g, '+$1 IN'))}
      EXPLAIN QUERY PLAN SELECT * FROM mq WHERE topic = 'A' AND queue_id = 0 LIMIT 2 OFFSET 1;
      SELECT group_concat(body_text) FROM (SELECT body_text FROM mq
       WHERE topic = 'A' AND queue_id = 0 LIMIT 2 OFFSET 1);
      SELECT group_concat(body_text) FROM mq WHERE topic IN ('A', 'B') AND key IN ('k1', 'k2');`);
    assert.equal(out[0], v.sqlite);
    assert.match(out[1], /VIRTUAL TABLE INDEX 2084:cq topic=\? queue_id=\? tags=\?$/);
    assert.equal(out[2], 'm0,m3,m6,m9,m12,m15,m18,m21,m24,m27');
    assert.equal(out[3], out[2]);
    assert.match(out[4], /VIRTUAL TABLE INDEX 36:cq topic=\? queue_id=\?$/);
    assert.equal(out[5], 'm9,m15');
    assert.equal(out[6], 'm1,m11,m21,m7,m17,m27,m6,m16,m26,m2,m12,m22');
    assert.equal(out.length, 7, out.join('\n'));
  });

  test(`SQLite ${v.sqlite}: transactions, companion tables, functions, a second load`, () => {
    const dir = path.join(tmp, `rest-${v.sqlite}`);
    const out = run(v, `${setup(dir)}
      BEGIN; INSERT INTO mq(topic, body) VALUES ('T', 'x'); ROLLBACK;
      SELECT count(*) FROM rocketmq_commitlog('${dir}') WHERE kind = 'message';
      SELECT count(*), sum(message_count) FROM rocketmq_queues('${dir}');
      SELECT value FROM rocketmq_stats('${dir}') WHERE name = 'live';
      SELECT count(*) FROM rocketmq_verify('${dir}');
      SELECT rocketmq_flush('${dir}') > 0, rocketmq_commit_offset('${dir}', 'g', 'A', 0, 1);
      SELECT count(*) FROM mq WHERE topic = 'A' AND queue_id = 0 AND queue_offset >= 100 AND wait_ms = 100;
      SELECT load_extension('${ext}');
      SELECT rocketmq_version() IS NOT NULL;
      CREATE VIEW v AS SELECT * FROM rocketmq_stats('${dir}');
      SELECT count(*) FROM v;`);
    assert.deepEqual(out, ['30', '6|30', '1', '0', '1|1', '0', '', '1',
                           'error: unsafe use of virtual table "rocketmq_stats"']);
  });
}
