"""Session windows in Python, like the Rust `session-windows/sessionizer`:
clicks keyed by user, grouped into sessions separated by at least `gap_ms`
of event time. Open sessions are a map state (start -> (end, clicks)); an
event-time timer at `end + gap` closes a session and emits
`user start end clicks`. A click that falls between sessions merges them;
a click later than the watermark allows is dropped."""

from __future__ import annotations

import weir


class Sessions:
    @staticmethod
    def open(ctx: weir.OpenContext) -> Sessions:
        return Sessions(ctx.map_state("sessions", int, tuple[int, weir.U64]), ctx.param("gap_ms", 30000, int))

    def __init__(self, sessions: weir.MapState[int, tuple[int, int]], gap: int) -> None:
        self.sessions, self.gap = sessions, gap

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        t = element.timestamp
        if t is None:
            raise ValueError("clicks need an event time (timestamp_field)")
        if t + self.gap <= ctx.watermark():
            return  # late: its session has closed
        start, end, clicks = t, t, 1
        touching = [(s, e, n) for s, (e, n) in self.sessions.items() if s - self.gap <= t <= e + self.gap]
        for s, e, n in touching:
            start, end, clicks = min(start, s), max(end, e), clicks + n
            self.sessions.remove(s)
            ctx.delete_event_time_timer(e + self.gap)
        self.sessions.put(start, (end, clicks))
        ctx.register_event_time_timer(end + self.gap)

    def on_timer(self, ctx: weir.Context, timer: weir.Timer) -> None:
        closing = [(s, e, n) for s, (e, n) in self.sessions.items() if e + self.gap == timer.time]
        for s, e, n in closing:
            self.sessions.remove(s)
            ctx.emit(f"{timer.key_str} {s} {e} {n}")


Handler = weir.export(Sessions)
