// The word-count counter's logic with no host calls, for the languages
// benchmark (tests/benches/languages.rs): the interpreter's own bound on a
// JavaScript counter. Per record, as the SDK counter does: the key as text,
// its count read, incremented and stored (in a JavaScript Map, not in host
// state), and the output line formatted (then dropped, not emitted). The
// records come in through the same batch call (bytes and a 32-byte entry
// per element, read as an Int32Array as the SDK does); nothing goes back
// to the host but the call's result.

const counts = new Map();
const lines = [];
const text = new TextDecoder();

export const handler = {
  open() {},
  // A batch of one element comes as a single call.
  process(input) {
    const key = text.decode(input.key);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  },
  processBatch(batch) {
    const data = text.decode(batch.data);
    const refs = new Int32Array(batch.index.buffer, batch.index.byteOffset, batch.index.byteLength >> 2);
    for (let at = 0; at < refs.length; at += 8) {
      const start = refs[at + 2];
      const key = data.substring(start, start + refs[at + 3]);
      const n = (counts.get(key) ?? 0) + 1;
      counts.set(key, n);
      lines.push(`${key} ${n}`);
    }
    lines.length = 0;
  },
  processBroadcast() {
    throw 'no broadcast input';
  },
  onTimer() {},
  endOfInput() {},
  migrateValue() {
    throw 'no state';
  },
};
