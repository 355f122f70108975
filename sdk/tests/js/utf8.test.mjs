// Unit tests of the SDK's own UTF-8 (sdk/js/weir.js), which it uses, and
// gives operators as TextEncoder and TextDecoder, where the engine has none
// (QuickJS): on random text and bytes, valid or not, it must do what
// Node's TextEncoder and TextDecoder do.
//
// Run: node --test sdk/tests/js/ (scripts/test does).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadWeir } from './load.mjs';

const engine = { WEIR_ENGINE: 'quickjs' };
const noImports = new Proxy({}, { has: () => true, get: () => () => assert.fail('no host call here') });
const weir = loadWeir(noImports, { globalThis: engine, TextEncoder: undefined, TextDecoder: undefined });
const { TextEncoder: Encoder, TextDecoder: Decoder } = engine;

// A seeded generator (mulberry32): failures repeat.
function random(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Strings of UTF-16 units from every class UTF-8 treats apart: ASCII, two
// and three bytes, astral pairs, lone surrogates of both halves, the BOM.
const PIECES = ['a', 'Z', ' ', '\0', '\x7f', '\x80', 'é', '\u07ff', '\u0800', '€', '中', '\uffff', '\ufeff', '😀', '\u{10ffff}', '\ud800', '\udfff', '\udbff', 'x\ud83d'];
function text(next) {
  const n = Math.floor(next() * 24);
  let s = '';
  for (let i = 0; i < n; i++) s += PIECES[Math.floor(next() * PIECES.length)];
  return s;
}

// Bytes: valid UTF-8 of such text, then bent: bytes changed, cut short, or
// high bytes added.
function bytes(next) {
  const b = [...new TextEncoder().encode(text(next))];
  const edits = Math.floor(next() * 4);
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(next() * (b.length + 1));
    const kind = next();
    if (kind < 0.4) b.splice(at, 0, 0x80 + Math.floor(next() * 0x80));
    else if (kind < 0.7 && at < b.length) b[at] = Math.floor(next() * 256);
    else b.length = at;
  }
  return Uint8Array.from(b);
}

test('the encoder gives the bytes TextEncoder gives, lone surrogates as U+FFFD', () => {
  const next = random(1);
  const native = new TextEncoder();
  const mine = new Encoder();
  for (let i = 0; i < 3000; i++) {
    const s = text(next);
    assert.deepEqual(mine.encode(s), native.encode(s), JSON.stringify(s));
    // encodeInto writes whole characters while they fit.
    const room = Math.floor(next() * (s.length * 3 + 2));
    const [a, b] = [new Uint8Array(room), new Uint8Array(room)];
    assert.deepEqual(mine.encodeInto(s, a), native.encodeInto(s, b), `${JSON.stringify(s)} into ${room}`);
    assert.deepEqual(a, b);
  }
  assert.deepEqual(mine.encode(), new Uint8Array(0));
  assert.equal(mine.encoding, 'utf-8');
});

test('the decoder gives the text TextDecoder gives, and fails where its fatal mode fails', () => {
  const next = random(2);
  const [lossy, fatal, keepBom] = [new TextDecoder(), new TextDecoder('utf-8', { fatal: true }), new TextDecoder('utf-8', { ignoreBOM: true })];
  const [mLossy, mFatal, mKeepBom] = [new Decoder(), new Decoder('UTF-8', { fatal: true }), new Decoder('utf8', { ignoreBOM: true })];
  let invalid = 0;
  for (let i = 0; i < 5000; i++) {
    const b = bytes(next);
    const what = `[${[...b].map((x) => x.toString(16))}]`;
    assert.equal(mLossy.decode(b), lossy.decode(b), what);
    assert.equal(mKeepBom.decode(b), keepBom.decode(b), what);
    let expected;
    try {
      expected = fatal.decode(b);
    } catch {
      invalid++;
      assert.throws(() => mFatal.decode(b), TypeError, what);
      continue;
    }
    assert.equal(mFatal.decode(b), expected, what);
  }
  assert.ok(invalid > 1000 && invalid < 4000, `both valid and invalid bytes were tried (${invalid} invalid)`);
  // Other views and buffers are read as their bytes.
  const buf = new TextEncoder().encode('hé').buffer;
  assert.equal(mLossy.decode(buf), 'hé');
  assert.equal(mLossy.decode(new DataView(buf, 1)), 'é');
  assert.equal(mLossy.decode(), '');
  // Long text crosses the decoder's chunks.
  const long = 'é😀a'.repeat(9000);
  assert.equal(mFatal.decode(new TextEncoder().encode(long)), long);
  assert.throws(() => new Decoder('latin1'), RangeError);
  assert.throws(() => mLossy.decode(buf, { stream: true }), /stream/);
});

test('string values use it: postcard UTF-8 with a length, invalid bytes refused', () => {
  const next = random(3);
  for (let i = 0; i < 500; i++) {
    const s = text(next);
    const utf8 = new TextEncoder().encode(s);
    const encoded = weir.encode(weir.string, s);
    // A length below 128 is one varint byte; longer ones are not made here.
    assert.deepEqual(encoded, Uint8Array.from([utf8.length, ...utf8]), JSON.stringify(s));
    assert.equal(weir.decode(weir.string, encoded), new TextDecoder().decode(utf8));
  }
  assert.throws(() => weir.decode(weir.string, Uint8Array.from([2, 0xc3, 0x28])), /string is not UTF-8/);
});
