// Unit tests of the JavaScript SDK (sdk/js/weir.js) on Node, outside a
// component: weir.js is evaluated as build.mjs bundles it, with the host's
// WIT imports replaced by fakes that record what the SDK asks of them. The
// encoding vectors are the Rust SDK's (sdk/src/codec.rs): a state written in
// one language is read in the others.
//
// Run: node --test sdk/tests/js/weir.test.mjs (scripts/test does).
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const source = readFileSync(new URL('../../js/weir.js', import.meta.url), 'utf8');

const host = { registered: [], emitted: [], current: [], timers: [], handles: {} };
const register = (kind) => (descriptor) => {
  host.registered.push([kind, descriptor]);
  return host.handles[descriptor.name];
};
const fakes = {
  registerValue: register('value'),
  registerList: register('list'),
  registerMap: register('map'),
  hostEmit: (e) => host.emitted.push(e),
  registerEventTimeTimer: (t) => host.timers.push(['register', t]),
  registerProcessingTimeTimer: () => {},
  deleteEventTimeTimer: (t) => host.timers.push(['delete', t]),
  deleteProcessingTimeTimer: () => {},
  setCurrentElement: (i) => host.current.push(i),
  // componentize-js hands i64::MIN over as 2^63.
  currentWatermark: () => 2n ** 63n,
  currentProcessingTime: () => 1700000000000n,
};

// Every `import { a, b as c } from '...';` of weir.js, replaced by the fake
// of the local name; the module's `weir` is returned.
const locals = [];
const body = source.replace(/import\s*\{([^}]*)\}\s*from\s*'[^']+';/g, (_, names) => {
  for (const n of names.split(',').map((s) => s.trim()).filter(Boolean)) locals.push(n.split(/\s+as\s+/).pop());
  return '';
});
for (const n of locals) assert.ok(n in fakes, `no fake for the import ${n}`);
const weir = new Function(...locals, `${body}\nreturn weir;`)(...locals.map((n) => fakes[n]));

beforeEach(() => {
  host.registered.length = 0;
  host.emitted.length = 0;
  host.current.length = 0;
  host.timers.length = 0;
  host.handles = {};
});

const bytes = (...b) => new Uint8Array(b.flat());

// The Rust SDK's vectors (sdk/src/codec.rs, the_shared_types_encode_as_the_other_sdks_expect).
const vectors = [
  [0, Number, bytes(0x00)],
  [127, Number, bytes(0x7f)],
  [300, Number, bytes(0xac, 0x02)],
  [2 ** 53, Number, bytes(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10)],
  ['hé', String, bytes(3, 0x68, 0xc3, 0xa9)],
  [new Uint8Array(200).fill(9), Uint8Array, bytes(0xc8, 0x01, new Array(200).fill(9))],
  [[true, false], [Boolean, Boolean], bytes(1, 0)],
  [[1, 'a', 300], [Number, String, Number], bytes(1, 1, 0x61, 0xac, 0x02)],
];

test('the shared types encode as the Rust SDK does and decode back', () => {
  for (const [value, kind, encoded] of vectors) {
    assert.deepEqual(weir.encode(value), encoded, `encode ${value}`);
    assert.deepEqual(weir.decode(kind, encoded), value, `decode ${value}`);
  }
});

test('values without a shared encoding are refused', () => {
  assert.throws(() => weir.encode(-1), /non-negative/);
  assert.throws(() => weir.encode(1.5), /non-negative/);
  assert.throws(() => weir.encode({}), /cannot encode object/);
  assert.throws(() => weir.decode(Object, bytes(0)), /decode: use Number/);
});

test('state handles register postcard descriptors and page through long states', () => {
  const items = Array.from({ length: 2500 }, (_, i) => weir.encode(i));
  const entries = Array.from({ length: 2100 }, (_, i) => [weir.encode(`k${String(i).padStart(4, '0')}`), weir.encode(i)]);
  const reads = [];
  const afters = [];
  let value;
  host.handles = {
    count: { get: () => value, set: (v) => { value = v; } },
    seen: { read: (start, n) => { reads.push([start, n]); return items.slice(start, start + n); } },
    'by-page': {
      entries: (after, n) => {
        afters.push(after);
        const from = after === undefined ? 0 : entries.findIndex(([k]) => k === after) + 1;
        return entries.slice(from, from + n);
      },
    },
  };
  let ctx;
  weir.export({ open: (c) => { ctx = c; return {}; } }).open({ params: [['n', '3']] });
  assert.equal(ctx.param('n'), '3');
  assert.equal(ctx.param('missing', 7), 7);
  const count = ctx.valueState('count', Number, 2);
  const seen = ctx.listState('seen');
  const byPage = ctx.mapState('by-page');
  assert.deepEqual(
    host.registered.map(([k, d]) => [k, d.name, d.version, d.encoding, d.ttl]),
    [['value', 'count', 2, 'postcard', undefined], ['list', 'seen', 1, 'postcard', undefined], ['map', 'by-page', 1, 'postcard', undefined]],
  );
  assert.equal(count.get(), undefined);
  count.set(300);
  assert.deepEqual(value, bytes(0xac, 0x02));
  assert.equal(count.get(), 300);
  // 2500 items in pages of 1024: every item once, in order.
  assert.deepEqual(seen.get(), Array.from({ length: 2500 }, (_, i) => i));
  assert.deepEqual(reads, [[0, 1024], [1024, 1024], [2048, 1024]]);
  // Map pages continue after the last key of the previous page.
  assert.deepEqual([...byPage.entries()], Array.from({ length: 2100 }, (_, i) => [`k${String(i).padStart(4, '0')}`, i]));
  assert.deepEqual(afters, [undefined, entries[1023][0], entries[2047][0]]);
});

class Doubler {
  static open() { return new Doubler(); }
  process(ctx, element) {
    if (element.payloadStr === 'bad') throw new RangeError('bad record');
    ctx.emit(`${element.keyStr} ${element.payloadStr.repeat(2)}`, element.key, element.timestamp);
    ctx.registerEventTimeTimer(element.timestamp ?? ctx.watermark());
  }
}

test('a batch reaches the operator element by element, with signed times', () => {
  const handler = weir.export(Doubler);
  handler.open({ params: [] });
  const data = new TextEncoder().encode('abxyzq');
  handler.processBatch({
    data,
    elements: [
      { payloadStart: 2, payloadLen: 3, keyStart: 0, keyLen: 2, hasKey: true, timestamp: 5n },
      { payloadStart: 5, payloadLen: 1, keyStart: 0, keyLen: 0, hasKey: false, timestamp: undefined },
    ],
  });
  assert.deepEqual(host.current, [0, 1]);
  const dec = new TextDecoder();
  assert.deepEqual(
    host.emitted.map((e) => [dec.decode(e.payload), e.key && dec.decode(e.key), e.timestamp]),
    [['ab xyzxyz', 'ab', 5n], [' qq', undefined, undefined]],
  );
  // No watermark yet (i64::MIN, handed over as 2^63) reads as negative.
  assert.deepEqual(host.timers, [['register', 5n], ['register', -(2n ** 63n)]]);
});

test('an operator error fails the call with its name and message', () => {
  const handler = weir.export(Doubler);
  handler.open({ params: [] });
  assert.throws(() => handler.process({ payload: new TextEncoder().encode('bad') }), (e) => e === 'RangeError: bad record');
  assert.throws(() => handler.processBroadcast({ payload: bytes(1) }), (e) => e === 'this operator does not take a broadcast input');
  assert.throws(() => handler.migrateValue('count', 1, bytes(1)), (e) => e === "state 'count': no migration from version 1 (define migrateValue)");
});
