"""Fraud detection with live rules, in event time: the Python twin of
guest-examples/fraud-detection (the same alerts, and the same state names
and postcard types, so a savepoint of either restores into the other).

Main input: transactions keyed by account, `{"ts", "account", "id",
"amount"}`. Broadcast input: rules, `{"ts", "rule", "small", "large",
"window_ms"}` (or `{"ts", "rule", "delete": true}`). A rule flags a
transaction larger than `large` that comes at most `window_ms` after a
transaction smaller than `small` on the same account, and emits
`ALERT rule=<rule> account=<account> tx=<id> amount=<amount> small_at=<ts>`.

Rules change while transactions flow. To give the same alerts whatever
order the two streams interleave in, every rule version is kept with the
event time it takes effect, and transactions wait in keyed state until the
watermark passes them (an event-time timer at their time); then each is
judged by the rule versions in effect at its time, in event-time order.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Any

import weir
from weir import U64


@dataclass(frozen=True)
class Rule:
    """One version of a rule (Rust: `struct Rule { small: u64, large: u64,
    window_ms: i64 }`)."""

    small: U64
    large: U64
    window_ms: int


# A rule's versions: (effective event time, rule or None for a deletion),
# by time (Rust: `Vec<(i64, Option<Rule>)>`).
Versions = list[tuple[int, Rule | None]]


def event_time(element: weir.Element) -> int:
    if element.timestamp is None:
        raise ValueError("records need an event time (timestamp_field)")
    return element.timestamp


def parse(element: weir.Element) -> dict[str, Any]:
    try:
        record = json.loads(element.payload)
    except ValueError as e:
        raise ValueError(f"bad record {element.payload_str!r}: {e}") from None
    if not isinstance(record, dict):
        raise ValueError(f"bad record {element.payload_str!r}: not an object")
    return record


class Detector:
    def __init__(self, ctx: weir.OpenContext) -> None:
        # Rule id -> its versions.
        self.rules = ctx.broadcast_map_state("rules", str, Versions)
        # Event time -> (id, amount) of the current account's transactions
        # waiting for it (Rust: `MapState<i64, Vec<(String, u64)>>`).
        self.pending = ctx.map_state("pending", int, list[tuple[str, U64]])
        # Rule id -> event time of the current account's last small transaction.
        self.last_small = ctx.map_state("last-small", str, int)

    @staticmethod
    def open(ctx: weir.OpenContext) -> Detector:
        return Detector(ctx)

    def process_broadcast(self, ctx: weir.Context, element: weir.Element) -> None:
        at = event_time(element)
        update = parse(element)
        name = str(update["rule"])
        versions = self.rules.get(name) or []
        rule = None if update.get("delete") else Rule(update.get("small", 0), update.get("large", 0), update.get("window_ms", 0))
        # Stable: of two versions at the same time, the later-arriving wins.
        versions.insert(bisect.bisect_right([t for t, _ in versions], at), (at, rule))
        self.rules.put(name, versions)

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        at = event_time(element)
        tx = parse(element)
        waiting = self.pending.get(at) or []
        waiting.append((tx["id"], tx["amount"]))
        self.pending.put(at, waiting)
        ctx.register_event_time_timer(at)

    def on_timer(self, ctx: weir.Context, timer: weir.Timer) -> None:
        at = timer.time
        waiting = self.pending.get(at)
        if waiting is None:
            return
        self.pending.remove(at)
        account = timer.key_str
        rules = list(self.rules.items())
        for tx_id, amount in waiting:
            for rule_id, versions in rules:
                in_effect = next((r for t, r in reversed(versions) if t <= at), None)
                if in_effect is None:
                    continue
                if amount > in_effect.large:
                    small_at = self.last_small.get(rule_id)
                    if small_at is not None and at - small_at <= in_effect.window_ms:
                        ctx.emit(
                            f"ALERT rule={rule_id} account={account} tx={tx_id} amount={amount} small_at={small_at}"
                        )
                if amount < in_effect.small:
                    self.last_small.put(rule_id, at)


Handler = weir.export(Detector)
