// Profile step 3: the SDK's dispatch. The SDK calls `process(ctx,
// element)` per record, and the operator reads the key as the counter
// does (the check that there is one, then its text); no state, no output.
// The SDK's dispatch share is this minus step 1.

class Dispatch {
  static open() {
    return new Dispatch();
  }

  process(ctx, element) {
    if (!element.hasKey) throw new Error('needs a keyed input');
    this.last = element.keyStr;
  }
}

export const handler = weir.export(Dispatch);
