// Session windows in JavaScript, like the Rust `session-windows/sessionizer`:
// clicks keyed by user, grouped into sessions separated by at least `gap_ms`
// of event time. Open sessions are a map state (start -> [end, clicks]); an
// event-time timer at `end + gap` closes a session and emits
// `user start end clicks`. A click that falls between sessions merges them;
// a click later than the watermark allows is dropped.

class Sessions {
  static open(ctx) {
    return new Sessions(ctx.mapState('sessions', weir.i64, [weir.i64, Number]), Number(ctx.param('gap_ms', '30000')));
  }

  constructor(sessions, gap) {
    this.sessions = sessions;
    this.gap = gap;
  }

  process(ctx, element) {
    const t = element.timestamp;
    if (t === undefined) throw new Error('clicks need an event time (timestamp_field)');
    if (t + this.gap <= ctx.watermark()) return; // late: its session has closed
    let [start, end, clicks] = [t, t, 1];
    const touching = [...this.sessions.entries()].filter(([s, [e]]) => s - this.gap <= t && t <= e + this.gap);
    for (const [s, [e, n]] of touching) {
      start = Math.min(start, s);
      end = Math.max(end, e);
      clicks += n;
      this.sessions.remove(s);
      ctx.deleteEventTimeTimer(e + this.gap);
    }
    this.sessions.put(start, [end, clicks]);
    ctx.registerEventTimeTimer(end + this.gap);
  }

  onTimer(ctx, timer) {
    const user = timer.keyStr;
    const closing = [...this.sessions.entries()].filter(([, [e]]) => e + this.gap === timer.time);
    for (const [s, [e, n]] of closing) {
      this.sessions.remove(s);
      ctx.emit(`${user} ${s} ${e} ${n}`);
    }
  }
}

export const handler = weir.export(Sessions);
