// Profile step 7: output's host call alone, on the raw bindings: one
// `emit-batch` per batch of as many elements as it had records, their
// buffer and index made before the batch. Output's boundary share is this
// minus step 1.

// The raw bindings are those the SDK imports (weir-build puts it in front
// of this file, in one module).
const MAX = 65536;
const DATA = new TextEncoder().encode('12345 1'.repeat(MAX));
// The element index: payload start and len, key start and len, flags, 0,
// the timestamp's two halves (wit/types.wit).
const INDEX = new Int32Array(MAX * 8);
for (let i = 0; i < MAX; i++) {
  INDEX[i * 8] = i * 7;
  INDEX[i * 8 + 1] = 7;
}

export const handler = {
  open() {},
  process() {},
  processBatch(batch) {
    const n = batch.index.byteLength >> 5;
    emitBatch({ data: DATA.subarray(0, n * 7), index: new Uint8Array(INDEX.buffer, 0, n * 32) });
  },
  processBroadcast() {},
  onTimer() {},
  endOfInput() {},
  migrateValue(state, fromVersion, value) {
    return value;
  },
};
