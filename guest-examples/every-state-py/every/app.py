"""A test operator for every kind of state in Python: the twin of the Rust
`test-operators/every-state`, with the same output line for line and the
same state layout (the same names, kinds and postcard types), so that a
savepoint of either restores into the other (tests/all/every_state.rs).

Main input: jsonl keyed by `k`, with event time `t` and fields `seq`, `v`
and `f` (flags). Per record, for its key: reads `prev` (value) and `long`
(value, one-hour TTL) and writes `seq` to both; appends `v` to `vals`
(list); counts `v % 5` in `counts` (map); adds `v` to `sum` (reducing) and
`stats` (aggregating: count, min, max); registers an event-time timer at
`t + et_delay`, remembered in `et-pending`; flag `s` writes `short` (value,
TTL `short_ttl_ms`), read from `seq >= read_from` on; flag `p` registers a
processing-time timer `pt_delay_ms` ahead, remembered in `pt-pending`;
flag `m` appends `seq` to `even` and `union` (operator lists). Then emits
`rec KEY seq=.. prev=.. list=[..] counts=[..] sum=.. stats=.. long=.. short=..`.
Timers emit `et KEY t=T seq=S` and `pt KEY seq=S`. The broadcast input's
`cmd` (`set NAME VALUE`, `del NAME`) edits `rules` (broadcast map). In `open`
and at end of input each subtask emits `open|end I/P even=[..] union=[..]
rules=[..]`.
"""

from __future__ import annotations

import json
from datetime import timedelta

import weir
from weir import U64


class Stats:
    """Count, minimum and maximum of the values (an aggregate function)."""

    def create(self) -> tuple[int, int, int]:
        return (0, 2**64 - 1, 0)

    def add(self, value: int, acc: tuple[int, int, int]) -> tuple[int, int, int]:
        n, low, high = acc
        return (n + 1, min(low, value), max(high, value))

    def result(self, acc: tuple[int, int, int]) -> str:
        return f"{acc[0]}/{acc[1]}/{acc[2]}"


def show(value: int | None) -> str:
    return "none" if value is None else str(value)


def joined(items: list[int]) -> str:
    return ",".join(map(str, items))


class EveryState:
    def __init__(self, ctx: weir.OpenContext) -> None:
        short_ttl = ctx.param("short_ttl_ms", 1000, int)
        self.prev = ctx.value_state("prev", U64)
        self.long = ctx.value_state("long", U64, ttl=weir.Ttl(timedelta(hours=1)))
        self.short = ctx.value_state("short", U64, ttl=weir.Ttl(short_ttl))
        self.vals = ctx.list_state("vals", U64)
        self.counts = ctx.map_state("counts", U64, U64)
        self.sum = ctx.reducing_state("sum", U64, lambda a, b: a + b)
        self.stats = ctx.aggregating_state("stats", tuple[U64, U64, U64], Stats())
        self.et_pending = ctx.map_state("et-pending", int, U64)
        self.pt_pending = ctx.map_state("pt-pending", U64, int)
        self.even = ctx.operator_list_state("even", U64, "even-split")
        self.union = ctx.operator_list_state("union", U64, "union")
        self.rules = ctx.broadcast_map_state("rules", str, str)
        self.et_delay = ctx.param("et_delay", 200, int)
        self.pt_delay_ms = ctx.param("pt_delay_ms", 2000, int)
        self.read_from = ctx.param("read_from", 2**64 - 1, int)
        self.me = f"{ctx.info.subtask_index}/{ctx.info.parallelism}"

    @staticmethod
    def open(ctx: weir.OpenContext) -> EveryState:
        op = EveryState(ctx)
        # What this subtask was restored with.
        ctx.emit(op.lists("open"))
        return op

    def lists(self, when: str) -> str:
        """This subtask's operator lists and broadcast rules, as one line."""
        rules = ",".join(f"{k}={v}" for k, v in self.rules.items())
        return f"{when} {self.me} even=[{joined(self.even.get())}] union=[{joined(self.union.get())}] rules=[{rules}]"

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        record = json.loads(element.payload)
        seq, v, flags = record["seq"], record["v"], record["f"]
        if element.timestamp is None:
            raise ValueError(f"no event time on {element.payload_str}")

        prev = self.prev.get()
        self.prev.set(seq)
        long = self.long.get()
        self.long.set(seq)
        self.vals.add(v)
        bucket = v % 5
        self.counts.put(bucket, (self.counts.get(bucket) or 0) + 1)
        total = self.sum.add(v)
        self.stats.add(v)
        timer = element.timestamp + self.et_delay
        self.et_pending.put(timer, seq)
        ctx.register_event_time_timer(timer)
        if "s" in flags:
            self.short.set(seq)
        short = show(self.short.get()) if seq >= self.read_from else "-"
        if "p" in flags:
            at = ctx.processing_time() + self.pt_delay_ms
            self.pt_pending.put(seq, at)
            ctx.register_processing_time_timer(at)
        if "m" in flags:
            self.even.add(seq)
            self.union.add(seq)

        counts = ",".join(f"{b}:{n}" for b, n in self.counts.items())
        ctx.emit(
            f"rec {element.key_str} seq={seq} prev={show(prev)} list=[{joined(self.vals.get())}] "
            f"counts=[{counts}] sum={total} stats={self.stats.get() or ''} long={show(long)} short={short}"
        )

    def on_timer(self, ctx: weir.Context, timer: weir.Timer) -> None:
        key = timer.key_str
        if timer.domain == weir.TimeDomain.EVENT_TIME:
            seq = self.et_pending.get(timer.time)
            if seq is None:
                raise ValueError(f"event-time timer {timer.time} of {key} unknown")
            self.et_pending.remove(timer.time)
            ctx.emit(f"et {key} t={timer.time} seq={seq}")
            return
        # Records of one batch share a processing time, so one timer may
        # stand for several registrations.
        due = [s for s, at in self.pt_pending.items() if at == timer.time]
        if not due:
            raise ValueError(f"processing-time timer {timer.time} of {key} unknown")
        for seq in due:
            self.pt_pending.remove(seq)
            ctx.emit(f"pt {key} seq={seq}")

    def process_broadcast(self, ctx: weir.Context, element: weir.Element) -> None:
        words = json.loads(element.payload)["cmd"].split()
        if len(words) == 3 and words[0] == "set":
            self.rules.put(words[1], words[2])
        elif len(words) == 2 and words[0] == "del":
            self.rules.remove(words[1])
        else:
            raise ValueError(f"bad rule command {element.payload_str!r}")

    def end_of_input(self, ctx: weir.Context) -> None:
        ctx.emit(self.lists("end"))


Handler = weir.export(EveryState)
