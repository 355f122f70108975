// The JavaScript twin of the Rust test operator `test-operators/every-state`
// (tests/all/every_state.rs): every kind of state, with output that shows
// their exact contents, so a restored run is compared with an
// uninterrupted one element by element, and a savepoint of either twin
// restores into the other. Its states are encoded as the Rust twin's:
// u64 values, lists and maps of them (`Number`), an i64 -> u64 and a
// u64 -> i64 map, a (u64, u64, u64) accumulator, String -> String rules.
//
// Main input: jsonl keyed by `k`, with event time `t` and fields `seq`, `v`
// and `f` (flags). Per record, for its key: `prev` and `long` (one-hour TTL)
// hold the previous `seq`; `v` is appended to `vals` (list), `v % 5` counted
// in `counts` (map), added to `sum` (reducing) and `stats` (aggregating:
// count, min, max); an event-time timer at `t + et_delay` is remembered in
// `et-pending` (time -> seq). Flag `s` writes `seq` to `short` (TTL
// `short_ttl_ms`), read and shown from `seq >= read_from` on; flag `p`
// registers a processing-time timer `pt_delay_ms` ahead, remembered in
// `pt-pending` (seq -> time); flag `m` appends `seq` to the operator lists
// `even` (even-split) and `union`. Broadcast input: `cmd` is `set NAME VALUE`
// or `del NAME`, applied to `rules`. In `open` and at end of input each
// subtask emits its operator lists and rules. The lines are the Rust twin's.

/** Count, minimum and maximum; u64::MAX does not fit a number: a BigInt. */
const stats = {
  create: () => [0, 2n ** 64n - 1n, 0],
  add: (v, [n, min, max]) => [n + 1, v < min ? v : min, v > max ? v : max],
  result: ([n, min, max]) => `${n}/${min}/${max}`,
};

const show = (v) => (v === undefined ? 'none' : `${v}`);

class EveryState {
  static open(ctx) {
    const op = new EveryState(ctx);
    // Emitted in `open`: the state this subtask was restored with.
    ctx.emit(op.lists('open'));
    return op;
  }

  constructor(ctx) {
    this.prev = ctx.valueState('prev', Number);
    this.long = ctx.valueState('long', Number, { ttl: 3600 * 1000 });
    this.short = ctx.valueState('short', Number, { ttl: ctx.paramNumber('short_ttl_ms', 1000) });
    this.vals = ctx.listState('vals', Number);
    this.counts = ctx.mapState('counts', Number, Number);
    this.sum = ctx.reducingState('sum', Number, (a, b) => a + b);
    this.stats = ctx.aggregatingState('stats', [Number, Number, Number], stats);
    this.etPending = ctx.mapState('et-pending', weir.i64, Number);
    this.ptPending = ctx.mapState('pt-pending', Number, weir.i64);
    this.even = ctx.operatorListState('even', Number, { redistribution: 'even-split' });
    this.union = ctx.operatorListState('union', Number, { redistribution: 'union' });
    this.rules = ctx.broadcastMapState('rules', String, String);
    this.etDelay = ctx.paramNumber('et_delay', 200);
    this.ptDelayMs = ctx.paramNumber('pt_delay_ms', 2000);
    this.readFrom = ctx.paramNumber('read_from', Infinity);
    this.me = `${ctx.info.subtaskIndex}/${ctx.info.parallelism}`;
  }

  /** This subtask's operator lists and broadcast rules, as one line. */
  lists(when) {
    const rules = [...this.rules].map(([k, v]) => `${k}=${v}`);
    return `${when} ${this.me} even=[${this.even.get()}] union=[${this.union.get()}] rules=[${rules}]`;
  }

  process(ctx, element) {
    const line = element.payloadStr;
    const key = element.keyStr;
    const { seq, v, f: flags } = JSON.parse(line);
    const t = element.timestamp;
    if (t === undefined) throw new Error(`no event time on ${line}`);

    const prev = this.prev.get();
    this.prev.set(seq);
    const long = this.long.get();
    this.long.set(seq);
    this.vals.add(v);
    const bucket = v % 5;
    this.counts.put(bucket, (this.counts.get(bucket) ?? 0) + 1);
    const sum = this.sum.add(v);
    this.stats.add(v);
    const timer = t + this.etDelay;
    this.etPending.put(timer, seq);
    ctx.registerEventTimeTimer(timer);
    if (flags.includes('s')) this.short.set(seq);
    const short = seq >= this.readFrom ? show(this.short.get()) : '-';
    if (flags.includes('p')) {
      const at = ctx.processingTime() + this.ptDelayMs;
      this.ptPending.put(seq, at);
      ctx.registerProcessingTimeTimer(at);
    }
    if (flags.includes('m')) {
      this.even.add(seq);
      this.union.add(seq);
    }

    const counts = [...this.counts].map(([b, n]) => `${b}:${n}`);
    ctx.emit(
      `rec ${key} seq=${seq} prev=${show(prev)} list=[${this.vals.get()}] counts=[${counts}] ` +
        `sum=${sum} stats=${this.stats.get() ?? ''} long=${show(long)} short=${short}`,
    );
  }

  onTimer(ctx, timer) {
    const key = timer.keyStr;
    if (timer.domain === 'event-time') {
      const seq = this.etPending.get(timer.time);
      if (seq === undefined) throw new Error(`event-time timer ${timer.time} of ${key} unknown`);
      this.etPending.remove(timer.time);
      ctx.emit(`et ${key} t=${timer.time} seq=${seq}`);
    } else {
      // Records of one batch share a processing time, so one timer may
      // stand for several registrations.
      const due = [...this.ptPending].filter(([, at]) => at === timer.time).map(([s]) => s);
      if (due.length === 0) throw new Error(`processing-time timer ${timer.time} of ${key} unknown`);
      for (const seq of due) {
        this.ptPending.remove(seq);
        ctx.emit(`pt ${key} seq=${seq}`);
      }
    }
  }

  processBroadcast(ctx, element) {
    const line = element.payloadStr;
    const words = JSON.parse(line).cmd.split(/\s+/).filter(Boolean);
    if (words[0] === 'set' && words.length === 3) this.rules.put(words[1], words[2]);
    else if (words[0] === 'del' && words.length === 2) this.rules.remove(words[1]);
    else throw new Error(`bad rule command ${JSON.stringify(line)}`);
  }

  endOfInput(ctx) {
    ctx.emit(this.lists('end'));
  }
}

export const handler = weir.export(EveryState);
