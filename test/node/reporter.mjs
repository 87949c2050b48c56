// reporter.mjs: a `node --test` reporter in the form of the other test
// programs: one line per test ("name... Ok" or "name... FAILED" with the
// error), what the test files print, and last the line run.sh reads:
//   tests: T passed, T failed; checks: 0 passed, 0 failed
// Each test() is a test. A test file that fails outside any test (it
// cannot load, say) counts as one failed test, named after the file.
//
//   node --test --test-reporter=./test/node/reporter.mjs test/node_api.mjs

function errorText(error) {
  const cause = error && error.cause ? error.cause : error;
  if (!cause) return 'failed';
  if (typeof cause === 'string') return cause;
  return cause.stack || cause.message || String(cause);
}

export default async function* reporter(source) {
  let passed = 0;
  let failed = 0;
  const failures = [];
  for await (const event of source) {
    const data = event.data;
    switch (event.type) {
      case 'test:pass':
        if (data.details && data.details.type === 'suite') break;
        passed++;
        yield `${data.name}... Ok\n`;
        break;
      case 'test:fail':
        if (data.details && data.details.type === 'suite') break;
        failed++;
        failures.push(data.name);
        yield `${data.name}... FAILED\n${errorText(data.details.error).replace(/^/gm, '  ')}\n`;
        break;
      case 'test:stdout':
      case 'test:stderr':
        yield data.message;
        break;
      default:
        break;
    }
  }
  if (failures.length) yield `failed: ${failures.join(', ')}\n`;
  yield `tests: ${passed} passed, ${failed} failed; checks: 0 passed, 0 failed\n`;
}
