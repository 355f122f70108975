// Type-checks sdk/js/weir.d.ts against the way operators use the SDK:
// `tsc -p sdk/tests/js/types` (scripts/test) fails when the declarations
// and this use disagree. The @ts-expect-error lines must stay errors.
/// <reference path="../../../js/weir.d.ts" />

const Tally = weir.struct({ count: weir.u64, last: weir.option(weir.string), ratio: weir.f64 });

class Everything implements Weir.Operator {
  static open(ctx: Weir.OpenContext): Everything {
    const window: number = ctx.paramNumber('window_ms', 1000);
    const uid: string = ctx.info.uid;
    ctx.emit(`open ${ctx.info.subtaskIndex}`);
    return new Everything(
      ctx.valueState('count', Number),
      ctx.valueState('tally', Tally, { version: 2, ttl: { ms: window, renewOnRead: true } }),
      ctx.listState('recent', weir.string, { ttl: window }),
      ctx.mapState('all-time', String, weir.u64),
      ctx.reducingState('sum', weir.i64, (a, b) => BigInt(a) + BigInt(b)),
      ctx.aggregatingState('avg', [weir.f64, weir.u32], {
        create: (): [number, number] => [0, 0],
        add: (x: number, [s, n]) => [s + x, n + 1],
        result: ([s, n]) => s / n,
      }),
      ctx.operatorListState('offsets', weir.u64, { redistribution: 'union' }),
      ctx.broadcastMapState('rules', weir.string, weir.json),
      uid,
    );
  }

  constructor(
    readonly count: Weir.ValueState<Weir.Integer>,
    readonly tally: Weir.ValueState<{ count: Weir.Integer; last: string | null; ratio: number }>,
    readonly recent: Weir.ListState<string>,
    readonly allTime: Weir.MapState<string, Weir.Integer>,
    readonly sum: Weir.ReducingState<Weir.Integer>,
    readonly avg: Weir.AggregatingState<number, number>,
    readonly offsets: Weir.ListState<Weir.Integer>,
    readonly rules: Weir.MapState<string, unknown>,
    readonly uid: string,
  ) {}

  process(ctx: Weir.Context, element: Weir.Element): void {
    const n = Number(this.count.get() ?? 0) + 1;
    this.count.set(n);
    this.tally.set({ count: n, last: element.payloadStr, ratio: 0.5 });
    this.recent.add(element.keyStr);
    for (const page of this.recent) ctx.emit(page);
    for (const [page, c] of this.allTime.entries()) ctx.emit(`${page}:${c}`, element.key, element.timestamp);
    this.sum.add(-1);
    this.avg.add(1.5);
    const mean: number | undefined = this.avg.get();
    ctx.emit(`${mean}`);
    ctx.registerEventTimeTimer(ctx.watermark() + 1000);
    // @ts-expect-error: a list of strings takes strings
    this.recent.add(5);
    // @ts-expect-error: a struct needs its fields
    this.tally.set({ count: 1 });
  }

  onTimer(ctx: Weir.Context, timer: Weir.Timer): void {
    ctx.emit(`${timer.keyStr} ${timer.time} ${timer.domain}`);
  }

  static migrateValue(state: string, fromVersion: number, value: Uint8Array): Uint8Array {
    if (fromVersion !== 1) throw new Error(`state '${state}': unknown version ${fromVersion}`);
    return weir.convertValue(value, weir.u64, Tally, (count) => ({ count, last: null, ratio: 0 }));
  }
}

const bytes: Uint8Array = weir.encode(weir.map(weir.string, weir.list(weir.i64)), new Map([['a', [1, -1]]]));
const back: Map<string, Weir.Integer[]> = weir.decode(weir.map(weir.string, weir.list(weir.i64)), bytes);
const pair: [number, string] = weir.decode([weir.u8, String], bytes) as [number, string];
void back;
void pair;

export const handler = weir.export(Everything);
