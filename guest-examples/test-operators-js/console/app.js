// Logs through `console` (tests/all/log_format.rs): on QuickJS the SDK's
// console writes to WASI stdout and stderr, which the host sends to its
// log tagged with the operator. In `open`, a line of several kinds of
// values, an error with its stack, and a line longer than one WASI write
// (4096 bytes); per record, a line on each stream naming its payload; each
// record passes through unchanged.

class Console {
  static open() {
    console.log('opened', 1, { a: [1, 2] }, 5n, null, undefined);
    console.error(new RangeError('a warning from open'));
    console.info(`${'long '.repeat(1000)}ü`);
    return new Console();
  }

  process(ctx, element) {
    console.log(`record ${element.payloadStr}`);
    console.warn(`warned ${element.payloadStr}`);
    ctx.emit(element.payload, element.key);
  }
}

export const handler = weir.export(Console);
