// The SDK's console on QuickJS, which has none: weir-build's QuickJS builds
// hand weir.js WASI's stdout and stderr (`globalThis.WEIR_STDIO`) and the
// layout of the one source they make (`WEIR_SOURCE`); here both are fakes,
// and the streams record what they are given. tests/all/log_format.rs
// checks the same in a component, through the host's log.
//
// Run: node --test sdk/tests/js/ (scripts/test does).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadWeir } from './load.mjs';

// Every host import is a no-op: the console uses none of them.
const noImports = new Proxy({}, { has: () => true, get: () => () => {} });

// A console as weir-build's prelude sets it up, over recording streams.
function quickjsConsole({ stdio = true, failing = false } = {}) {
  const writes = { stdout: [], stderr: [] };
  const asked = { stdout: 0, stderr: 0 };
  const stream = (name) => () => {
    asked[name]++;
    return {
      blockingWriteAndFlush(bytes) {
        if (failing) throw new Error('closed');
        assert.ok(bytes.length <= 4096, `a WASI write of ${bytes.length} bytes`);
        writes[name].push(Uint8Array.from(bytes));
      },
    };
  };
  const global = {
    WEIR_ENGINE: 'quickjs',
    WEIR_STDIO: stdio ? { stdout: stream('stdout'), stderr: stream('stderr') } : undefined,
    WEIR_SOURCE: { file: 'app.js', app: 'ops/app.js', before: 100, prelude: 5 },
  };
  loadWeir(noImports, { globalThis: global, console: undefined, TextEncoder: undefined, TextDecoder: undefined });
  const text = (name) => new TextDecoder().decode(Buffer.concat(writes[name]));
  return { console: global.console, writes, asked, text };
}

test('log, info, debug and dir write lines to stdout; warn, error, trace and failed asserts to stderr', () => {
  const c = quickjsConsole();
  c.console.log('a', 1, { x: [1, 'y'] }, 5n, null, undefined, true);
  c.console.info('info');
  c.console.debug('debug');
  c.console.warn('warn', 2);
  c.console.error('error');
  c.console.trace('trace');
  c.console.dir({ d: 1 });
  c.console.assert(true, 'not shown');
  c.console.assert(1 > 2, 'one is', 1);
  assert.equal(c.text('stdout'), 'a 1 {"x":[1,"y"]} 5n null undefined true\ninfo\ndebug\n{"d":1}\n');
  assert.equal(c.text('stderr'), 'warn 2\nerror\ntrace\nAssertion failed: one is 1\n');
  // Each stream is asked for once (each `get-stdout` makes a new handle).
  assert.deepEqual(c.asked, { stdout: 1, stderr: 1 });
});

test('a long line goes in writes of at most 4096 bytes, as UTF-8', () => {
  const c = quickjsConsole();
  const line = `${'€'.repeat(3000)}🙂${'x'.repeat(5000)}`;
  c.console.log(line);
  assert.ok(c.writes.stdout.length >= 4, `${c.writes.stdout.length} writes`);
  assert.equal(c.text('stdout'), `${line}\n`);
});

test("an error shows its name, message and stack, with lines of the operator's file and weir.js", () => {
  const c = quickjsConsole();
  const e = new RangeError('out of range');
  e.stack = '    at process (/app.js:107:9)\n    at call (/app.js:40:7)\n    at other (/lib.js:3:1)\n';
  c.console.error(e);
  assert.equal(
    c.text('stderr'),
    'RangeError: out of range\n    at process (ops/app.js:7:9)\n    at call (weir.js:35:7)\n    at other (/lib.js:3:1)\n',
  );
  const bare = new TypeError('no stack');
  bare.stack = undefined;
  c.console.warn(bare);
  assert.match(c.text('stderr'), /TypeError: no stack\n$/);
});

test('values JSON cannot show are shown as String() does; a failing stream drops the line', () => {
  const c = quickjsConsole();
  const cycle = {};
  cycle.self = cycle;
  c.console.log(cycle, [1n, 2], new Uint8Array([1, 2]), Symbol('s'));
  assert.equal(c.text('stdout'), '[object Object] ["1n",2] 1,2 Symbol(s)\n');
  const failing = quickjsConsole({ failing: true });
  assert.doesNotThrow(() => failing.console.log('lost'));
  const none = quickjsConsole({ stdio: false });
  assert.doesNotThrow(() => none.console.error('dropped'));
});
