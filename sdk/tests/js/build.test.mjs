// Unit tests of weir-build's command line (sdk/js/build.mjs): what it
// refuses before it starts componentize-js, with the usage and exit code 2.
// Building itself is tested end to end: scripts/test builds every
// JavaScript example with it (WEIR_JS_AOT=1 ahead of time).
//
// Run: node --test sdk/tests/js/ (scripts/test does).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const build = fileURLToPath(new URL('../../js/build.mjs', import.meta.url));
const run = (...args) => {
  // No componentize-js is needed for what is refused before it loads.
  const r = spawnSync(process.execPath, [build, ...args], { encoding: 'utf8', env: { ...process.env, WEIR_WEVAL: '' } });
  return { status: r.status, out: r.stdout, err: r.stderr };
};

test('--help prints the usage, with --aot, and succeeds', () => {
  const r = run('--help');
  assert.equal(r.status, 0);
  assert.match(r.out, /usage: weir-build <app\.js> <out\.wasm> .*--aot/);
});

test('a wrong number of files, an unknown option or an option without its value is refused', () => {
  for (const args of [['app.js'], ['app.js', 'out.wasm', 'more.js'], ['app.js', 'out.wasm', '--fast'], ['app.js', 'out.wasm', '--wit']]) {
    const r = run(...args);
    assert.equal(r.status, 2, `${args}: ${r.err}`);
    assert.match(r.err, /usage: weir-build/, `${args}`);
  }
  assert.match(run('app.js', 'out.wasm', '--weval').err, /--weval needs a value/);
});

test('--aot with a weval that is not there says so rather than downloading one', () => {
  const r = run('app.js', 'out.wasm', '--aot', '--weval', '/nonexistent/weval');
  assert.equal(r.status, 2);
  assert.match(r.err, /no weval at \/nonexistent\/weval/);
});
