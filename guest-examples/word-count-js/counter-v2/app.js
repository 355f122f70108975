// Word-count counter, version 2, in JavaScript: the twin of the Rust
// `word-count/counter-v2`. The same count per word as `counter`, kept in a
// richer value (a Tally struct, state version 2: the Rust twin's
// `struct Tally { count: u64, migrated: bool }`) and emitted as
// `word=count`. A savepoint of version 1, in any language, holds plain u64
// counts under the same state name; migrateValue turns each into a Tally
// before this module sees it.

const Tally = weir.struct({ count: weir.u64, migrated: weir.bool });

class Counter {
  static open(ctx) {
    return new Counter(ctx.valueState('count', Tally, { version: 2 }));
  }

  constructor(tally) {
    this.tally = tally;
  }

  process(ctx, element) {
    const t = this.tally.get() ?? { count: 0, migrated: false };
    t.count = Number(t.count) + 1;
    this.tally.set(t);
    ctx.emit(`${element.keyStr}=${t.count}`);
  }

  static migrateValue(state, fromVersion, value) {
    if (state === 'count' && fromVersion === 1) {
      return weir.convertValue(value, weir.u64, Tally, (count) => ({ count, migrated: true }));
    }
    throw new Error(`state '${state}': no migration from version ${fromVersion}`);
  }
}

export const handler = weir.export(Counter);
