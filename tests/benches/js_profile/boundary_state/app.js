// Profile step 6: value state's host calls alone, on the raw bindings: per
// batch `batch-slots`, `get-batch` and a `set-batch` of one value per key
// slot, made ready before the batch. What crossing costs for value state
// (not what the SDK does with it) is this minus step 1.

// The raw bindings are those the SDK imports (weir-build puts it in front
// of this file, in one module).
const MAX = 65536;
const ONE = new Uint8Array(MAX).fill(1);
// The value-batch index: slot, start, len, flags (bit 0: present).
const INDEX = new Int32Array(MAX * 4);
for (let i = 0; i < MAX; i++) INDEX.set([i, i, 1, 1], i * 4);
let count;

export const handler = {
  open() {
    count = registerValue({ name: 'count', version: 1, encoding: 'postcard', ttl: undefined });
  },
  process() {},
  processBatch() {
    batchSlots();
    const n = count.getBatch().index.byteLength >> 4;
    count.setBatch({
      data: ONE.subarray(0, n),
      index: new Uint8Array(INDEX.buffer, 0, n * 16),
    });
  },
  processBroadcast() {},
  onTimer() {},
  endOfInput() {},
  migrateValue(state, fromVersion, value) {
    return value;
  },
};
