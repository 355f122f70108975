// Unit tests of the JavaScript SDK (sdk/js/weir.js) on Node, outside a
// component: weir.js is evaluated as build.mjs bundles it, with the host's
// WIT imports replaced by fakes that record what the SDK asks of them. The
// encoding vectors are postcard's, pinned on the Rust side too
// (sdk/src/codec.rs): a state written in one language is read in the others.
//
// weir.quickjs.test.mjs runs them again as the SDK runs on QuickJS (the
// default engine): no TextEncoder or TextDecoder (weir.js's own UTF-8), and
// the shapes QuickJS's bindings use, a WIT `none` as null and 64-bit
// integers as numbers; SpiderMonkey's are undefined and BigInts.
//
// Run: node --test sdk/tests/js/ (scripts/test does).
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { loadWeir } from './load.mjs';

const QUICKJS = globalThis.WEIR_TEST_ENGINE === 'quickjs';
// A WIT `none`, and a WIT s64 or u64, as the engine's bindings have them.
const none = QUICKJS ? null : undefined;
const i64 = QUICKJS ? (n) => Number(BigInt.asIntN(64, BigInt(n))) : (n) => BigInt.asIntN(64, BigInt(n));
// SpiderMonkey's bindings hand some s64 values over as if unsigned.
const s64 = QUICKJS ? i64 : (n) => BigInt.asUintN(64, BigInt(n));

// What the fake host holds and saw.
const host = { registered: [], emitted: [], emits: [], current: [], timers: [], calls: [], handles: {}, slots: [] };
const register = (kind) => (descriptor, mode) => {
  host.registered.push([kind, descriptor, mode]);
  const h = host.handles[descriptor.name];
  if (h instanceof Error) throw h;
  return h;
};
const fakes = {
  registerValue: register('value'),
  registerList: register('list'),
  registerMap: register('map'),
  registerReducing: register('reducing'),
  registerAggregating: register('aggregating'),
  registerOperatorList: register('operator-list'),
  registerBroadcastMap: register('broadcast-map'),
  emitBatch: (b) => {
    host.emits.push('emit-batch');
    host.emitted.push(...decodeOutput(b));
  },
  // Its text is the bytes' UTF-8.
  emitTextBatch: (text, index) => {
    assert.equal(typeof text, 'string', 'emit-text-batch takes text');
    host.emits.push('emit-text-batch');
    host.emitted.push(...decodeOutput({ data: new TextEncoder().encode(text), index }));
  },
  registerEventTimeTimer: (t) => {
    if (host.timerError) throw host.timerError;
    host.timers.push(['register', t]);
  },
  registerProcessingTimeTimer: (t) => host.timers.push(['register-processing', t]),
  deleteEventTimeTimer: (t) => host.timers.push(['delete', t]),
  deleteProcessingTimeTimer: () => {},
  setCurrentElement: (i) => {
    if (host.syncError) throw host.syncError;
    host.current.push(i);
  },
  batchSlots: () => {
    host.calls.push('batch-slots');
    return Uint32Array.from(host.slots);
  },
  currentKey: () => new TextEncoder().encode('k'),
  currentWatermark: () => s64(-(2n ** 63n)),
  currentProcessingTime: () => i64(1700000000000),
};

const weir = loadWeir(fakes, QUICKJS ? { globalThis: { WEIR_ENGINE: 'quickjs' }, TextEncoder: undefined, TextDecoder: undefined } : {});

const text = new TextDecoder();

// An emit-batch (`{ data, index }`, 32-byte little-endian entries, read
// here with a DataView, independently of the SDK's Int32Array) as
// [payload, key, timestamp] with text payloads and keys. Checks what the
// host checks: whole entries, no undefined flag bits, a zero word 5, zero
// timestamp words without flag bit 1, and fields inside `data`.
function decodeOutput({ data, index }) {
  assert.ok(data instanceof Uint8Array && index instanceof Uint8Array, 'emit-batch takes byte lists');
  return parseIndex(index).map((e) => {
    assert.ok(e.payloadStart + e.payloadLen <= data.length && e.keyStart + e.keyLen <= data.length, 'fields inside data');
    return [
      text.decode(data.subarray(e.payloadStart, e.payloadStart + e.payloadLen)),
      e.hasKey ? text.decode(data.subarray(e.keyStart, e.keyStart + e.keyLen)) : undefined,
      e.timestamp,
    ];
  });
}

function parseIndex(index) {
  assert.equal(index.length % 32, 0, 'whole 32-byte entries');
  const v = new DataView(index.buffer, index.byteOffset, index.byteLength);
  return Array.from({ length: index.length / 32 }, (_, i) => {
    const at = i * 32;
    const flags = v.getUint32(at + 16, true);
    assert.equal(flags & ~3, 0, 'no undefined flag bits');
    assert.equal(v.getUint32(at + 20, true), 0, 'word 5 is zero');
    const timestamp = v.getBigInt64(at + 24, true);
    if (!(flags & 2)) assert.equal(timestamp, 0n, 'no time, zero timestamp');
    if (!(flags & 1)) assert.deepEqual([v.getUint32(at + 8, true), v.getUint32(at + 12, true)], [0, 0], 'no key, zero key words');
    return {
      payloadStart: v.getUint32(at, true),
      payloadLen: v.getUint32(at + 4, true),
      keyStart: v.getUint32(at + 8, true),
      keyLen: v.getUint32(at + 12, true),
      hasKey: (flags & 1) !== 0,
      timestamp: flags & 2 ? timestamp : undefined,
    };
  });
}

// A process-batch of (key, payload, timestamp) records as the host sends
// it: `{ data, index }`, 32-byte entries. `offset` puts the index at that
// byte offset of its buffer (the SDK copies an index that is not 4-byte
// aligned).
function batchOf(records, offset = 0) {
  const enc = new TextEncoder();
  const parts = [];
  const index = new Uint8Array(offset + records.length * 32).subarray(offset);
  const v = new DataView(index.buffer, index.byteOffset, index.byteLength);
  let at = 0;
  records.forEach(([key, payload, timestamp], i) => {
    const p = enc.encode(payload);
    v.setUint32(i * 32, at, true);
    v.setUint32(i * 32 + 4, p.length, true);
    at += p.length;
    parts.push(p);
    let flags = 0;
    if (key !== undefined) {
      const k = enc.encode(key);
      v.setUint32(i * 32 + 8, at, true);
      v.setUint32(i * 32 + 12, k.length, true);
      at += k.length;
      parts.push(k);
      flags |= 1;
    }
    if (timestamp !== undefined) {
      v.setBigInt64(i * 32 + 24, timestamp, true);
      flags |= 2;
    }
    v.setUint32(i * 32 + 16, flags, true);
  });
  const data = new Uint8Array(at);
  let o = 0;
  for (const p of parts) {
    data.set(p, o);
    o += p.length;
  }
  return { data, index };
}

// A value-batch (16-byte entries: slot, start, len, flags) as [slot,
// value bytes or null] pairs.
function parseValues({ data, index }) {
  assert.ok(data instanceof Uint8Array && index instanceof Uint8Array, 'set-batch takes byte lists');
  assert.equal(index.length % 16, 0, 'whole 16-byte entries');
  const v = new DataView(index.buffer, index.byteOffset, index.byteLength);
  return Array.from({ length: index.length / 16 }, (_, i) => {
    const [slot, start, len, flags] = [0, 4, 8, 12].map((o) => v.getUint32(i * 16 + o, true));
    assert.equal(flags & ~1, 0, 'no undefined flag bits');
    if (!(flags & 1)) assert.deepEqual([start, len], [0, 0], 'a cleared value has zero start and length');
    assert.ok(start + len <= data.length, 'value inside data');
    return [slot, flags & 1 ? [...data.subarray(start, start + len)] : null];
  });
}

// A host value state: each key slot's value at the start of a batch, the
// single-key value outside batches, and the calls made.
function valueHandle(slots = []) {
  const h = {
    slots: slots.map((v) => (v === undefined ? undefined : Uint8Array.from(v))),
    single: none,
    get: () => {
      host.calls.push('get');
      return h.single;
    },
    set: (v) => {
      host.calls.push(`set ${[...v]}`);
      h.single = v.slice();
    },
    clear: () => {
      host.calls.push('clear');
      h.single = none;
    },
    getBatch: () => {
      host.calls.push('get-batch');
      const index = new Uint8Array(h.slots.length * 16);
      const v = new DataView(index.buffer);
      const bytes = [];
      h.slots.forEach((value, i) => {
        v.setUint32(i * 16, i, true);
        if (value === undefined) return;
        v.setUint32(i * 16 + 4, bytes.length, true);
        v.setUint32(i * 16 + 8, value.length, true);
        v.setUint32(i * 16 + 12, 1, true);
        bytes.push(...value);
      });
      return { data: Uint8Array.from(bytes), index };
    },
    setBatch: (values) => {
      const entries = parseValues(values);
      host.calls.push(`set-batch ${JSON.stringify(entries.map(([s]) => s))} ${JSON.stringify(entries.map(([, b]) => b))}`);
      for (const [slot, b] of entries) h.slots[slot] = b === null ? undefined : Uint8Array.from(b);
    },
  };
  return h;
}

// The error componentize-js throws for an import's `err`.
const hostErr = (tag, val) => Object.assign(new Error('(see error.payload)'), { payload: { tag, val } });

beforeEach(() => {
  for (const k of ['registered', 'emitted', 'emits', 'current', 'timers', 'calls']) host[k].length = 0;
  host.handles = {};
  host.slots = [];
  host.syncError = undefined;
  host.timerError = undefined;
});

const bytes = (...b) => new Uint8Array(b.flat());
const info = (params = []) => ({ uid: 'op', subtaskIndex: 0, parallelism: 1, maxParallelism: 128, attemptNumber: 0, params });

// Postcard's bytes for the shared types (the same vectors as sdk/src/codec.rs).
const vectors = [
  [weir.u64, 0, bytes(0x00)],
  [Number, 300, bytes(0xac, 0x02)],
  [weir.u64, 2 ** 53 - 1, bytes(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f)],
  [weir.u64, 2n ** 64n - 1n, bytes(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)],
  [weir.i64, -1, bytes(0x01)],
  [weir.i64, 1, bytes(0x02)],
  [weir.i64, -300, bytes(0xd7, 0x04)],
  [weir.i64, -(2n ** 63n), bytes(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)],
  [weir.i32, -2147483648, bytes(0xff, 0xff, 0xff, 0xff, 0x0f)],
  [weir.u8, 200, bytes(200)],
  [weir.i8, -2, bytes(0xfe)],
  [weir.f64, 1.5, bytes(0, 0, 0, 0, 0, 0, 0xf8, 0x3f)],
  [weir.f32, -2, bytes(0, 0, 0, 0xc0)],
  [String, 'hé', bytes(3, 0x68, 0xc3, 0xa9)],
  [weir.string, 'x'.repeat(200), bytes(0xc8, 0x01, new Array(200).fill(0x78))],
  [Uint8Array, new Uint8Array(200).fill(9), bytes(0xc8, 0x01, new Array(200).fill(9))],
  [[Boolean, Boolean], [true, false], bytes(1, 0)],
  [[Number, String, Number], [1, 'a', 300], bytes(1, 1, 0x61, 0xac, 0x02)],
  [weir.option(weir.u64), null, bytes(0)],
  [weir.option(weir.u64), 5, bytes(1, 5)],
  [weir.list(weir.i64), [1, -1], bytes(2, 2, 1)],
  [weir.map(weir.string, weir.u64), new Map([['a', 1], ['b', 2]]), bytes(2, 1, 0x61, 1, 1, 0x62, 2)],
  [weir.dict(weir.u64), { a: 1 }, bytes(1, 1, 0x61, 1)],
  [weir.struct({ count: weir.u64, name: weir.string, ratio: weir.option(weir.f64) }), { count: 7, name: 'a', ratio: null }, bytes(7, 1, 0x61, 0)],
  [weir.json, { a: [1, null] }, bytes(14, ...new TextEncoder().encode('{"a":[1,null]}'))],
];

test('values encode as postcard, as the Rust SDK does, and decode back', () => {
  for (const [t, value, encoded] of vectors) {
    assert.deepEqual(weir.encode(t, value), encoded, `encode ${String(value)}`);
    assert.deepEqual(weir.decode(t, encoded), value, `decode ${String(value)}`);
  }
  // Integers past 2^53 decode as BigInt, those within as numbers; numbers
  // and BigInts encode alike.
  assert.equal(weir.decode(weir.u64, weir.encode(weir.u64, 2n ** 53n + 1n)), 2n ** 53n + 1n);
  assert.deepEqual(weir.encode(weir.i64, -5n), weir.encode(weir.i64, -5));
  assert.equal(weir.decode(weir.i64, weir.encode(weir.i64, -(2n ** 53n) + 1n)), -(2 ** 53) + 1);
  // A map also encodes from a plain object, and a dict from a Map.
  assert.deepEqual(weir.encode(weir.map(weir.u32, weir.bool), { 3: true }), bytes(1, 3, 1));
});

test('values without an encoding, and bad bytes, are refused with the reason', () => {
  assert.throws(() => weir.encode(weir.u64, -1), /expected an integer from 0 to 2\^64 - 1 \(u64\), got -1/);
  assert.throws(() => weir.encode(weir.u64, 1.5), /got 1.5/);
  assert.throws(() => weir.encode(weir.u8, 256), /\(u8\)/);
  assert.throws(() => weir.encode(weir.i64, 2n ** 63n), /\(i64\)/);
  assert.throws(() => weir.encode(String, 5), /expected a string/);
  assert.throws(() => weir.encode(weir.struct({ n: weir.u64 }), { n: 'x' }), /field 'n': expected an integer/);
  assert.throws(() => weir.encode({}, 1), /not a value type/);
  assert.throws(() => weir.decode(weir.u64, bytes(0x80)), /value ends early/);
  assert.throws(() => weir.decode(weir.u32, bytes(0xff, 0xff, 0xff, 0xff, 0x1f)), /u32 out of range/);
  assert.throws(() => weir.decode(String, bytes(1, 0xff)), /not UTF-8/);
  assert.throws(() => weir.decode(weir.bool, bytes(2)), /bool out of range/);
  assert.throws(() => weir.decode(weir.u64, bytes(1, 2)), /1 bytes left after the value/);
});

class Counter {
  static open(ctx) {
    return new Counter(ctx.valueState('count', weir.u64));
  }
  constructor(count) {
    this.count = count;
  }
  process(ctx, e) {
    if (e.payloadStr === 'clear') return this.count.clear();
    if (e.payloadStr === 'bad') throw new RangeError('bad record');
    const n = (this.count.get() ?? 0) + 1;
    this.count.set(n);
    ctx.emit(`${e.keyStr} ${n}`);
  }
}

test('a batch reads value state once and writes it back once, with per-record semantics', () => {
  host.handles.count = valueHandle([[5], undefined, [9]]);
  const handler = weir.export(Counter);
  handler.open(info());
  // Records on keys b, a, b, b (slots 1, 0, 1, 1): later ones see the
  // earlier writes.
  host.slots = [1, 0, 1, 1];
  handler.processBatch(batchOf([['b', 'x'], ['a', 'x'], ['b', 'x'], ['b', 'x']]));
  assert.deepEqual(host.emitted.map(([p]) => p), ['b 1', 'a 6', 'b 2', 'b 3']);
  // Slots in slot order, each once with its last value; slot 2 untouched;
  // no per-record call.
  assert.deepEqual(host.calls, ['batch-slots', 'get-batch', 'set-batch [0,1] [[6],[3]]']);
  assert.deepEqual(host.current, []);
  // The next batch reads what this one wrote.
  host.calls.length = 0;
  host.slots = [0, 2];
  handler.processBatch(batchOf([['a', 'x'], ['c', 'x']]));
  assert.deepEqual(host.emitted.slice(4).map(([p]) => p), ['a 7', 'c 10']);
  assert.deepEqual(host.handles.count.slots, [bytes(7), bytes(3), bytes(10)]);
});

test('outside a batch each value state call goes to the host', () => {
  host.handles.count = valueHandle();
  const handler = weir.export(Counter);
  handler.open(info());
  handler.process({ payload: bytes(0x78), key: bytes(0x6b), timestamp: none });
  handler.process({ payload: bytes(0x78), key: bytes(0x6b), timestamp: none });
  assert.deepEqual(host.calls, ['get', 'set 1', 'get', 'set 2']);
  assert.deepEqual(host.emitted, [['k 1', undefined, undefined], ['k 2', undefined, undefined]]);
});

test('a clear in a batch is written back as absent and read as absent', () => {
  host.handles.count = valueHandle([[4]]);
  const handler = weir.export(Counter);
  handler.open(info());
  host.slots = [0, 0, 0];
  handler.processBatch(batchOf([['a', 'x'], ['a', 'clear'], ['a', 'x']]));
  assert.deepEqual(host.emitted.map(([p]) => p), ['a 5', 'a 1']);
  assert.equal(host.calls.at(-1), 'set-batch [0] [[1]]');
  host.slots = [0, 0];
  handler.processBatch(batchOf([['a', 'x'], ['a', 'clear']]));
  assert.equal(host.calls.at(-1), 'set-batch [0] [null]');
});

test('a failing record fails the batch naming the error, reports its index and writes nothing', () => {
  host.handles.count = valueHandle([[1]]);
  const handler = weir.export(Counter);
  handler.open(info());
  host.slots = [0, 0, 0];
  assert.throws(
    () => handler.processBatch(batchOf([['a', 'x'], ['a', 'x'], ['a', 'bad']])),
    (e) => e === 'RangeError: bad record',
  );
  assert.deepEqual(host.current, [2], 'the host is told which record failed');
  assert.ok(!host.calls.some((c) => c.startsWith('set-batch')), host.calls.join());
  // Output before the failure is still sent; the next batch reads the host's
  // value, not the dropped writes.
  assert.deepEqual(host.emitted.map(([p]) => p), ['a 2', 'a 3']);
  host.slots = [0];
  handler.processBatch(batchOf([['a', 'x']]));
  assert.deepEqual(host.emitted.at(-1), ['a 2', undefined, undefined]);
});

test('ASCII text output goes as text, anything else as bytes, to the same records', () => {
  class Lines {
    static open() {
      return new Lines();
    }
    process(ctx, e) {
      if (e.payloadStr === 'bytes') ctx.emit(e.payload, 'k');
      else ctx.emit(`${e.payloadStr}!`, e.keyStr, e.timestamp);
    }
  }
  const handler = weir.export(Lines);
  handler.open(info());
  // Each batch is one call: all ASCII text, then text that is not, then text
  // with a byte payload.
  const batches = [
    [['k1', 'one', 3n], ['k22', 'two']],
    [['k', 'ça'], ['k', 'plain']],
    [['k', 'text'], ['k', 'bytes']],
  ];
  for (const b of batches) handler.processBatch(batchOf(b));
  assert.deepEqual(host.emits, ['emit-text-batch', 'emit-batch', 'emit-batch']);
  assert.deepEqual(host.emitted, [
    ['one!', 'k1', 3n],
    ['two!', 'k22', undefined],
    ['ça!', 'k', undefined],
    ['plain!', 'k', undefined],
    ['text!', 'k', undefined],
    ['bytes', 'k', undefined],
  ]);
  // Each string is encoded on its own: halves of a pair split between a
  // payload and its key are two lone surrogates, as TextEncoder has them.
  host.emitted.length = 0;
  const split = weir.export({ open: () => ({ process: (ctx) => ctx.emit('a\ud83d', '\ude00b') }) });
  split.open(info());
  split.processBatch(batchOf([['k', 'x']]));
  assert.deepEqual(host.emitted, [['a\ufffd', '\ufffdb', undefined]]);
});

test('output keeps text, bytes, keys and signed timestamps, ASCII or not', () => {
  class Echo {
    static open() {
      return new Echo();
    }
    process(ctx, e) {
      ctx.emit(`${e.payloadStr}·`, e.keyStr, e.timestamp);
      ctx.emit(e.payload, e.key);
      ctx.emit(new Uint8Array([0x68, 0x69]), 'ключ', -5);
    }
  }
  const handler = weir.export(Echo);
  handler.open(info());
  handler.processBatch(batchOf([['ü', 'été', -1700000000123n], [undefined, 'plain', 4n]]));
  assert.deepEqual(host.emitted, [
    ['été·', 'ü', -1700000000123n],
    ['été', 'ü', undefined],
    ['hi', 'ключ', -5n],
    ['plain·', '', 4n],
    ['plain', undefined, undefined],
    ['hi', 'ключ', -5n],
  ]);
});

test('plain text outputs keep their place among keyed, timed and byte outputs, and calls start anew', () => {
  // Plain strings (no key, no timestamp) are only collected until another
  // kind comes or the call ends: each case below switches at another point.
  class Mixed {
    static open() {
      return new Mixed();
    }
    process(ctx, e) {
      const p = e.payloadStr;
      if (p === 'plain') {
        ctx.emit('p1');
        ctx.emit('p2', null);
      } else if (p === 'keyed') ctx.emit('k1', 'key');
      else if (p === 'timed') ctx.emit('t1', undefined, 9);
      else if (p === 'bytes') ctx.emit(new Uint8Array([0x62]));
      else if (p === 'wide') ctx.emit('ü');
    }
  }
  const handler = weir.export(Mixed);
  handler.open(info());
  const calls = [
    [['k', 'plain'], ['k', 'keyed'], ['k', 'plain']],
    [['k', 'plain'], ['k', 'timed']],
    [['k', 'plain'], ['k', 'bytes'], ['k', 'plain']],
    [['k', 'plain'], ['k', 'wide']],
    [['k', 'nothing']],
    [['k', 'plain']],
  ];
  const expected = [
    ['p1', undefined, undefined], ['p2', undefined, undefined], ['k1', 'key', undefined], ['p1', undefined, undefined], ['p2', undefined, undefined],
    ['p1', undefined, undefined], ['p2', undefined, undefined], ['t1', undefined, 9n],
    ['p1', undefined, undefined], ['p2', undefined, undefined], ['b', undefined, undefined], ['p1', undefined, undefined], ['p2', undefined, undefined],
    ['p1', undefined, undefined], ['p2', undefined, undefined], ['ü', undefined, undefined],
    ['p1', undefined, undefined], ['p2', undefined, undefined],
  ];
  for (const c of calls) handler.processBatch(batchOf(c));
  assert.deepEqual(host.emits, ['emit-text-batch', 'emit-text-batch', 'emit-batch', 'emit-batch', 'emit-text-batch']);
  assert.deepEqual(host.emitted, expected);
});

test('open may emit, before any input; its output goes out when open returns', () => {
  weir.export({
    open: (ctx) => {
      ctx.emit('restored with nothing');
      ctx.emit('keyed', 'k', 7);
      assert.deepEqual(host.emitted, [], 'nothing is sent before open returns');
      return {};
    },
  }).open(info());
  assert.deepEqual(host.emitted, [
    ['restored with nothing', undefined, undefined],
    ['keyed', 'k', 7n],
  ]);
});

test('elements read their fields from the batch, unkeyed and keyed', () => {
  const seen = [];
  const handler = weir.export({
    open: () => ({ process: (ctx, e) => seen.push([e.keyStr, e.key && [...e.key], e.payloadStr, [...e.payload], e.timestamp]) }),
  });
  handler.open(info());
  handler.processBatch(batchOf([['ab', 'xyz', 5n], [undefined, 'q', undefined]]));
  assert.deepEqual(seen, [
    ['ab', [0x61, 0x62], 'xyz', [0x78, 0x79, 0x7a], 5],
    ['', undefined, 'q', [0x71], undefined],
  ]);
  // Bytes that are not UTF-8 read as U+FFFD, as a TextDecoder reads them,
  // also when each lone byte makes one character.
  seen.length = 0;
  const b = batchOf([['k', 'x']]);
  b.data[0] = 0xff;
  b.data[1] = 0x80;
  handler.processBatch(b);
  assert.deepEqual(seen, [['\uFFFD', [0x80], '\uFFFD', [0xff], undefined]]);
});

test('the batch index packs an empty key apart from no key (hasKey tells them apart), and signed or absent timestamps', () => {
  const seen = [];
  const handler = weir.export({
    open: () => ({
      process: (ctx, e) => {
        seen.push([e.hasKey, e.key && [...e.key], e.keyStr, e.payloadStr, e.timestamp]);
        // Each record back out as it came, then with the key as bytes.
        ctx.emit(e.payload, e.key, e.timestamp);
        ctx.emit(e.payloadStr, e.key === undefined ? undefined : e.keyStr, e.timestamp === undefined ? undefined : BigInt(e.timestamp));
      },
    }),
  });
  handler.open(info());
  const records = [
    ['', 'empty key', -1n],
    [undefined, 'no key', undefined],
    ['k', 'zero time', 0n],
    ['', '', -(2n ** 53n) + 1n],
    ['k', 'late', 2n ** 53n - 1n],
  ];
  // An index at an odd byte offset of its buffer is read from a copy.
  for (const offset of [0, 1]) {
    seen.length = 0;
    host.emitted.length = 0;
    handler.processBatch(batchOf(records, offset));
    assert.deepEqual(seen, [
      [true, [], '', 'empty key', -1],
      [false, undefined, '', 'no key', undefined],
      [true, [0x6b], 'k', 'zero time', 0],
      [true, [], '', '', -(2 ** 53) + 1],
      [true, [0x6b], 'k', 'late', 2 ** 53 - 1],
    ]);
    assert.deepEqual(host.emitted, records.flatMap(([k, p, t]) => [[p, k, t], [p, k, t]]));
  }
  // A single element (`process`) packs the same way.
  seen.length = 0;
  handler.process({ payload: bytes(0x70), key: bytes(), timestamp: s64(-2) });
  handler.process({ payload: bytes(), key: none, timestamp: none });
  assert.deepEqual(seen, [
    [true, [], '', 'p', -2],
    [false, undefined, '', '', undefined],
  ]);
  // A timestamp that is not an integer number of ms is refused.
  const bad = weir.export({ open: () => ({ process: (ctx) => ctx.emit('x', undefined, 1.5) }) });
  bad.open(info());
  assert.throws(() => bad.processBatch(batchOf([['k', 'x']])), (e) => e === 'emit: timestamp 1.5 is not an integer number of ms');
});

test('a cleared value is written back apart from an empty one, and read back apart', () => {
  // An empty tuple encodes as zero bytes: a present, empty value.
  host.handles.unit = valueHandle([[], undefined, []]);
  const got = [];
  const handler = weir.export({
    open: (ctx) => {
      const unit = ctx.valueState('unit', []);
      return {
        process: (c, e) => {
          got.push(unit.get());
          if (e.payloadStr === 'set') unit.set([]);
          if (e.payloadStr === 'clear') unit.clear();
        },
      };
    },
  });
  handler.open(info());
  host.slots = [0, 1, 2, 0, 1];
  handler.processBatch(batchOf([['a', 'clear'], ['b', 'set'], ['c', 'read'], ['a', 'read'], ['b', 'read']]));
  assert.deepEqual(got, [[], undefined, [], undefined, []]);
  assert.equal(host.calls.at(-1), 'set-batch [0,1] [null,[]]');
  assert.deepEqual(host.handles.unit.slots, [undefined, bytes(), bytes()]);
});

test('small integers, read and written in place by the batch cache, encode as the codec does', () => {
  // Around the one-byte bounds of each kind: u8 (one byte for 0-255, in
  // place for 0-127), the unsigned varints (0-127) and zigzag (-64 to 63).
  const cases = [
    [weir.u8, [0, 127, 128, 255]],
    [weir.u16, [0, 1, 127, 128, 65535]],
    [weir.u64, [0, 127, 128, 2 ** 53 - 1, 2n ** 64n - 1n]],
    [weir.i64, [0, 63, 64, -1, -64, -65, -(2 ** 40)]],
    [weir.i32, [-64, 63, -2147483648]],
  ];
  for (const [t, values] of cases) {
    const stored = values.map((v) => weir.encode(t, v));
    host.handles.v = valueHandle(stored.map((b) => [...b]));
    const seen = [];
    const handler = weir.export({
      open: (ctx) => {
        const v = ctx.valueState('v', t);
        return {
          process: (c, e) => {
            const i = Number(e.payloadStr);
            // What the host held, then what this batch wrote over it.
            seen.push(v.get());
            v.set(values[values.length - 1 - i]);
            seen.push(v.get());
          },
        };
      },
    });
    handler.open(info());
    host.slots = values.map((_, i) => i);
    host.calls.length = 0;
    handler.processBatch(batchOf(values.map((_, i) => ['k', String(i)])));
    const reversed = values.slice().reverse();
    assert.deepEqual(seen, values.flatMap((v, i) => [v, reversed[i]]), t.name);
    assert.deepEqual(host.handles.v.slots, reversed.map((v) => weir.encode(t, v)), t.name);
  }
  // A value out of the type's range is refused on the in-place path too.
  host.handles.v = valueHandle([[1]]);
  const failing = weir.export({
    open: (ctx) => {
      const v = ctx.valueState('v', weir.u64);
      return { process: () => v.set(-1) };
    },
  });
  failing.open(info());
  host.slots = [0];
  assert.throws(() => failing.processBatch(batchOf([['k', 'x']])), (e) => e === "state 'v': cannot encode value: expected an integer from 0 to 2^64 - 1 (u64), got -1");
});

test('list and map state page through long states and sync the current record first', () => {
  const items = Array.from({ length: 600 }, (_, i) => weir.encode(weir.u64, i));
  const entries = Array.from({ length: 300 }, (_, i) => [weir.encode(String, `k${String(i).padStart(3, '0')}`), weir.encode(weir.i64, 0 - i)]);
  const reads = [];
  const afters = [];
  host.handles.seen = {
    read: (start, n) => {
      reads.push([start, n]);
      return items.slice(start, start + n);
    },
    add: (b) => host.calls.push(`add ${[...b]}`),
  };
  host.handles.byPage = {
    entries: (after, n) => {
      afters.push(after);
      const from = after == null ? 0 : entries.findIndex(([k]) => k === after) + 1;
      return entries.slice(from, from + n);
    },
  };
  let lists;
  const handler = weir.export({
    open: (ctx) => {
      lists = [ctx.listState('seen'), ctx.mapState('byPage', String, weir.i64)];
      return { process: (c, e) => e.payloadStr === 'add' && lists[0].add(7) };
    },
  });
  handler.open(info());
  host.slots = [0, 1];
  handler.processBatch(batchOf([['a', 'skip'], ['b', 'add']]));
  assert.deepEqual(host.current, [1], 'list state acts on the record that uses it');
  assert.deepEqual(host.calls.filter((c) => c.startsWith('add')), ['add 7']);
  assert.deepEqual(lists[0].get(), Array.from({ length: 600 }, (_, i) => i));
  assert.deepEqual(reads, [[0, 256], [256, 256], [512, 256]]);
  assert.deepEqual([...lists[1].entries()], Array.from({ length: 300 }, (_, i) => [`k${String(i).padStart(3, "0")}`, 0 - i]));
  assert.deepEqual(afters, [undefined, entries[255][0]]);
});

test('every state kind registers its descriptor, TTL and redistribution', () => {
  let ctx;
  weir.export({ open: (c) => ((ctx = c), {}) }).open(info([['n', '3'], ['bad', 'x']]));
  ctx.valueState('v', weir.i64, 2);
  ctx.listState('l', String, { ttl: 2000 });
  ctx.mapState('m', String, weir.u64, { version: 3, ttl: { ms: 10, renewOnRead: true, returnExpired: true } });
  ctx.reducingState('r', weir.i64, (a, b) => a + b);
  ctx.aggregatingState('a', [Number, Number], { create: () => [0, 0], add: (x, [s, n]) => [s + x, n + 1], result: ([s, n]) => s / n });
  ctx.operatorListState('o', weir.u64, { redistribution: 'union' });
  ctx.operatorListState('e');
  ctx.broadcastMapState('b', String, weir.json);
  assert.deepEqual(
    host.registered.map(([k, d, mode]) => [k, d.name, d.version, d.encoding, d.ttl, mode]),
    [
      ['value', 'v', 2, 'postcard', undefined, undefined],
      ['list', 'l', 1, 'postcard', { ttlMs: i64(2000), update: 'on-create-and-write', visibility: 'never-return-expired' }, undefined],
      ['map', 'm', 3, 'postcard', { ttlMs: i64(10), update: 'on-read-and-write', visibility: 'return-expired-if-not-cleaned-up' }, undefined],
      ['reducing', 'r', 1, 'postcard', undefined, undefined],
      ['aggregating', 'a', 1, 'postcard', undefined, undefined],
      ['operator-list', 'o', 1, 'postcard', undefined, 'union'],
      ['operator-list', 'e', 1, 'postcard', undefined, 'even-split'],
      ['broadcast-map', 'b', 1, 'postcard', undefined, undefined],
    ],
  );
  assert.equal(ctx.param('n'), '3');
  assert.equal(ctx.paramNumber('n', 1), 3);
  assert.equal(ctx.paramNumber('missing', 7), 7);
  assert.throws(() => ctx.paramNumber('bad', 1), /param 'bad': cannot parse 'x' as a number/);
  assert.throws(() => ctx.operatorListState('x', Number, { redistribution: 'round-robin' }), /'even-split' or 'union'/);
  assert.throws(() => ctx.listState('t', Number, { ttl: 0 }), /ttl must be a positive number of ms/);
});

test('reducing and aggregating state fold through the batch cache', () => {
  host.handles.sum = valueHandle([weir.encode(weir.i64, -10)]);
  host.handles.avg = valueHandle([]);
  const handler = weir.export({
    open: (ctx) => {
      const sum = ctx.reducingState('sum', weir.i64, (a, b) => a + b);
      const avg = ctx.aggregatingState('avg', [weir.f64, weir.u64], {
        create: () => [0, 0],
        add: (x, [s, n]) => [s + x, n + 1],
        result: ([s, n]) => s / n,
      });
      return {
        process: (ctx2, e) => {
          const x = Number(e.payloadStr);
          sum.add(x);
          avg.add(x);
          ctx2.emit(`${sum.get()} ${avg.get()}`);
        },
      };
    },
  });
  handler.open(info());
  host.handles.avg.slots = [undefined];
  host.slots = [0, 0, 0];
  handler.processBatch(batchOf([['k', '1'], ['k', '2'], ['k', '6']]));
  assert.deepEqual(host.emitted.map(([p]) => p), ['-9 1', '-7 1.5', '-1 3']);
  assert.deepEqual(weir.decode(weir.i64, host.handles.sum.slots[0]), -1);
  assert.deepEqual(weir.decode([weir.f64, weir.u64], host.handles.avg.slots[0]), [9, 3]);
});

test('host errors are WeirErrors with the host message, and fail the call with it', () => {
  host.handles.count = hostErr('kind-mismatch', "state 'count' is map state, not value state");
  assert.throws(
    () => weir.export(Counter).open(info()),
    (e) => e === "state 'count': kind mismatch: state 'count' is map state, not value state",
  );
  let caught;
  host.handles.l = { add: () => { throw hostErr('no-current-key'); } };
  const handler = weir.export({
    open: (ctx) => {
      const l = ctx.listState('l');
      return {
        process: () => {
          try {
            l.add(1);
          } catch (e) {
            caught = e;
            throw e;
          }
        },
      };
    },
  });
  handler.open(info());
  assert.throws(() => handler.process({ payload: bytes(1) }), (e) => e === "state 'l': no current key (keyed state and timers need a keyed input)");
  assert.ok(caught instanceof weir.WeirError && caught instanceof Error);
  assert.equal(caught.code, 'no-current-key');
  // Map calls catch host errors the same way, and a failed sync of the
  // current element names the batch.
  host.handles.b = { put: () => { throw hostErr('read-only', "broadcast state 'b'"); }, get: () => { throw hostErr('backend', 'disk full'); } };
  host.handles.m = { contains: () => true };
  let b;
  let m;
  weir.export({ open: (ctx) => ((b = ctx.broadcastMapState('b')), (m = ctx.mapState('m')), {}) }).open(info());
  assert.throws(() => b.put('k', 1), (e) => e instanceof weir.WeirError && e.code === 'read-only' && e.message === "state 'b': read-only here: broadcast state 'b'");
  assert.throws(() => b.get('k'), (e) => e instanceof weir.WeirError && e.code === 'backend' && e.message === "state 'b': state backend failed: disk full");
  host.syncError = hostErr('out-of-range', 5);
  const h = weir.export({ open: () => ({ process: (ctx, e) => e.payloadStr === 'use' && m.contains('x') }) });
  h.open(info());
  host.slots = [0, 0];
  assert.throws(() => h.processBatch(batchOf([['k', 'skip'], ['k', 'use']])), (e) => e === 'batch: element index 5 is past the batch');
});

test('operator errors fail the call with their name and message', () => {
  host.handles.count = valueHandle();
  const handler = weir.export(Counter);
  handler.open(info());
  assert.throws(() => handler.process({ payload: new TextEncoder().encode('bad') }), (e) => e === 'RangeError: bad record');
  assert.throws(() => handler.processBroadcast({ payload: bytes(1) }), (e) => e === 'this operator does not take a broadcast input');
  assert.throws(() => handler.migrateValue('count', 1, bytes(1)), (e) => e === "state 'count': no migration from version 1 (define static migrateValue)");
  assert.throws(() => weir.export(Counter).process({ payload: bytes(1) }), (e) => e === 'operator called before open');
});

test('timers and time are signed milliseconds; migrations convert values', () => {
  class Timed {
    static open() {
      return new Timed();
    }
    static migrateValue(state, from, value) {
      return weir.convertValue(value, weir.u64, weir.struct({ n: weir.u64, migrated: weir.bool }), (n) => ({ n, migrated: true }));
    }
    process(ctx, e) {
      ctx.registerEventTimeTimer(e.timestamp ?? ctx.watermark());
      ctx.deleteEventTimeTimer(-3);
    }
    onTimer(ctx, t) {
      ctx.emit(`${t.keyStr} ${t.time} ${t.domain}`);
    }
  }
  const handler = weir.export(Timed);
  handler.open(info());
  host.slots = [0, 1];
  handler.processBatch(batchOf([['a', 'x', 5n], ['b', 'y']]));
  assert.deepEqual(host.timers, [['register', i64(5)], ['delete', i64(-3)], ['register', i64(-(2n ** 63n))], ['delete', i64(-3)]]);
  assert.deepEqual(host.current, [1], 'the second record is made current before its timer');
  handler.onTimer({ time: s64(-7), domain: 'event-time', key: bytes(0x6b) });
  assert.deepEqual(host.emitted, [['k -7 event-time', undefined, undefined]]);
  assert.deepEqual(handler.migrateValue('count', 1, bytes(0xac, 0x02)), bytes(0xac, 0x02, 1));
  // A refused timer call fails the record with the host's reason.
  host.timerError = hostErr('no-current-key');
  assert.throws(() => handler.processBatch(batchOf([['a', 'x', 1n]])), (e) => e === 'timer: no current key (keyed state and timers need a keyed input)');
});
