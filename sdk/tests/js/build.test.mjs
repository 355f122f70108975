// Unit tests of weir-build's command line (sdk/js/build.mjs): what it
// refuses before it starts an engine, with the usage and exit code 2, and
// how it reports an operator that does not build (this one needs
// componentize-qjs, which scripts/test installs). Building itself is tested
// end to end: scripts/test builds every JavaScript example with it, on
// QuickJS, and word count on SpiderMonkey too.
//
// Run: node --test sdk/tests/js/ (scripts/test does).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

test('--engine is quickjs or spidermonkey, and --aot is SpiderMonkey only', () => {
  const bad = run('app.js', 'out.wasm', '--engine', 'v8');
  assert.equal(bad.status, 2);
  assert.match(bad.err, /--engine is quickjs or spidermonkey, not 'v8'/);
  const aot = run('app.js', 'out.wasm', '--engine', 'quickjs', '--aot');
  assert.equal(aot.status, 2);
  assert.match(aot.err, /--aot compiles with SpiderMonkey/);
  assert.match(run('app.js', 'out.wasm', '--engine').err, /--engine needs a value/);
  assert.match(run('--help').out, /--engine quickjs\|spidermonkey/);
});

test('a build error names the operator file and its own line, not the bundle', () => {
  // The SDK's lines come first in the one source; the engine's error must
  // be mapped back to the operator's line.
  const dir = mkdtempSync(join(tmpdir(), 'weir-build-'));
  const app = join(dir, 'app.js');
  writeFileSync(app, 'class X {\n  static open() { return new X(); }\n  process(ctx, e) { ctx.emit(e.keyStr) \n}\nexport const handler = weir.export(X);\n');
  const r = run(app, join(dir, 'out.wasm'));
  rmSync(dir, { recursive: true });
  assert.doesNotMatch(r.err, /Cannot find package/, 'QuickJS is installed (scripts/test sets WEIR_COMPONENTIZE_QJS)');
  assert.equal(r.status, 1, r.err);
  assert.match(r.err, new RegExp(`weir-build: ${app.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .*`));
  assert.match(r.err, /app\.js:5:\d+/, r.err);
});
