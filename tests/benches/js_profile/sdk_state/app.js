// Profile step 4: step 3 plus the counter's value state (a count per key,
// read, incremented and written through the SDK's batch cache, one
// `get-batch` and one `set-batch` per batch); no output. Value state's
// share is this minus step 3.

class State {
  static open(ctx) {
    return new State(ctx.valueState('count', Number));
  }

  constructor(count) {
    this.count = count;
  }

  process(ctx, element) {
    if (!element.hasKey) throw new Error('needs a keyed input');
    this.last = element.keyStr;
    this.count.set((this.count.get() ?? 0) + 1);
  }
}

export const handler = weir.export(State);
