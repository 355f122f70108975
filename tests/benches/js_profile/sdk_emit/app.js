// Profile step 5: step 3 plus the counter's output, a line `<key> 1` per
// record through `ctx.emit` (one `emit-batch` per batch); no state.
// Output's share is this minus step 3.

class Emit {
  static open() {
    return new Emit();
  }

  process(ctx, element) {
    if (!element.hasKey) throw new Error('needs a keyed input');
    ctx.emit(`${element.keyStr} 1`);
  }
}

export const handler = weir.export(Emit);
