// better_sqlite3.mjs: the better-sqlite3 the Node tests load the extension
// into, with the SQLite it bundles. It is installed from the npm registry
// under $RMQ_BUILD/node (build/node by default; not committed) when it is
// not there yet. Its prebuilt binaries come from GitHub, which a machine
// that reaches only the npm registry cannot download, so it is built from
// source (node-gyp, a C++ compiler and make; a few minutes on 2 cores)
// against the headers of the Node that runs it (npm_config_nodedir, so
// that node-gyp downloads none; Debian's are in libnode-dev, which its npm
// brings). 12.x is the line for Node 20 and later (13.x needs a newer
// Node); on Debian 12's Node 18 it is 11.10.0, the last release that
// builds there.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const nodeMajor = Number(process.versions.node.split('.')[0]);
export const VERSION = nodeMajor >= 20 ? '12.11.1' : '11.10.0';

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
