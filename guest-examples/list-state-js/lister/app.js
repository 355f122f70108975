// A test operator for list state in JavaScript: keyed by the record's key,
// it appends each payload (a String) to the key's list state and emits
// `<key> <every payload so far, comma-separated>`, as the Python twin
// `list-state-py/lister` does, with the same encoding (postcard strings).
// scripts/test builds it into target/wasm/list_state_js_lister.wasm
// (tests/all/list_state.rs).

class Lister {
  static open(ctx) {
    return new Lister(ctx.listState('seen', String));
  }

  constructor(seen) {
    this.seen = seen;
  }

  process(ctx, element) {
    if (!element.hasKey) throw new Error('lister needs a keyed input (partition = "key")');
    this.seen.add(element.payloadStr);
    ctx.emit(`${element.keyStr} ${this.seen.get().join(',')}`);
  }
}

export const handler = weir.export(Lister);
