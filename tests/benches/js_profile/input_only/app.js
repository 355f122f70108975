// Profile step 1: a handler on the raw bindings that returns at once. What
// a batch costs before any JavaScript runs per record: the host, and
// componentize-js lifting the batch's buffer and index (two byte lists).
// (weir-build puts the SDK in front; nothing here uses it.)

export const handler = {
  open() {},
  process() {},
  processBatch() {},
  processBroadcast() {},
  onTimer() {},
  endOfInput() {},
  migrateValue(state, fromVersion, value) {
    return value;
  },
};
