// Word-count counter in JavaScript: keyed by word, keeps a number per word
// in value state and emits `<word> <count>` on every update, like the Rust
// `word-count/counter`, with the same state encoding (a postcard u64).

class Counter {
  static open(ctx) {
    return new Counter(ctx.valueState('count', Number));
  }

  constructor(count) {
    this.count = count;
  }

  process(ctx, element) {
    if (!element.hasKey) throw new Error('counter needs a keyed input (partition = "key")');
    const n = (this.count.get() ?? 0) + 1;
    this.count.set(n);
    ctx.emit(`${element.keyStr} ${n}`);
  }
}

export const handler = weir.export(Counter);
