/// <reference types="@weir/sdk" />
// {{name}}: a Weir operator. Counts the events of each key (job.toml keys
// the input by its `user` field) in value state, and emits `<key> <count>`
// on every event, keyed by the key.

class Counter {
  static open(ctx) {
    return new Counter(ctx.valueState('count', Number));
  }

  constructor(count) {
    this.count = count;
  }

  process(ctx, element) {
    if (element.key === undefined) throw new Error('needs a keyed input (partition = "key")');
    const n = (this.count.get() ?? 0) + 1;
    this.count.set(n);
    ctx.emit(`${element.keyStr} ${n}`, element.key);
  }
}

export const handler = weir.export(Counter);
