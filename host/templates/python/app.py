"""{{name}}: a Weir operator. Counts the events of each key (job.toml keys
the input by its `user` field) in value state, and emits `<key> <count>` on
every event, keyed by the key."""

from __future__ import annotations

import weir


class Counter:
    @staticmethod
    def open(ctx: weir.OpenContext) -> Counter:
        # weir.U64: the count is stored as a Rust u64, as the Rust template's.
        return Counter(ctx.value_state("count", weir.U64))

    def __init__(self, count: weir.ValueState[int]) -> None:
        self.count = count

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        if element.key is None:
            raise ValueError('needs a keyed input (partition = "key")')
        n = (self.count.get() or 0) + 1
        self.count.set(n)
        ctx.emit(f"{element.key_str} {n}", key=element.key)


Handler = weir.export(Counter)
