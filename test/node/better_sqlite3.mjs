// better_sqlite3.mjs: the better-sqlite3 the Node tests load the extension
// into, with the SQLite it bundles. It is installed from the npm registry
// under $RMQ_BUILD/node (build/node by default; not committed) when it is
// not there yet. Its prebuilt binaries come from GitHub, which a machine
// that reaches only the npm registry cannot download, so it is built from
// source (node-gyp, a C++ compiler and make; a few minutes on 2 cores)
// against the headers of the Node that runs it (npm_config_nodedir, so
// that node-gyp downloads none). 12.x is the last line that supports Node
// 20; 13.x needs a newer Node.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

export const VERSION = '12.11.1';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
export const buildDir = path.resolve(process.env.RMQ_BUILD || path.join(root, 'build'));
const prefix = path.join(buildDir, 'node');
const moduleDir = path.join(prefix, 'node_modules', 'better-sqlite3');
const binary = path.join(moduleDir, 'build', 'Release', 'better_sqlite3.node');

// The directory of the running Node's headers (include/node/node.h), or undefined.
function nodeHeadersDir() {
  const candidates = [path.resolve(path.dirname(process.execPath), '..'), '/usr', '/usr/local'];
  return candidates.find((d) => existsSync(path.join(d, 'include', 'node', 'node.h')));
}

function install() {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 20) {
    throw new Error(`better-sqlite3 ${VERSION} needs Node 20 or later; this is Node ${process.versions.node}`);
  }
  const env = { ...process.env, npm_config_build_from_source: 'true' };
  const headers = nodeHeadersDir();
  if (headers) env.npm_config_nodedir = headers;
  rmSync(moduleDir, { recursive: true, force: true });
  mkdirSync(prefix, { recursive: true });
  const started = Date.now();
  console.log(`installing better-sqlite3@${VERSION} under ${prefix} (built from source)`);
  try {
    execFileSync('npm', ['install', '--prefix', prefix, '--no-audit', '--no-fund', '--no-save',
                         '--no-package-lock', `better-sqlite3@${VERSION}`],
                 { env, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  } catch (e) {
    const why = e.code === 'ENOENT' ? 'npm is not installed (test/deps.sh installs nodejs and npm)'
                                    : `${e.stdout || ''}${e.stderr || e.message}`;
    throw new Error(`npm install better-sqlite3@${VERSION} failed: ${why}`);
  }
  console.log(`installed in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

// The better-sqlite3 Database class, installed first when missing.
export function loadBetterSqlite3() {
  if (!existsSync(binary)) install();
  return createRequire(path.join(prefix, 'package.json'))('better-sqlite3');
}

export const modulePath = moduleDir;
