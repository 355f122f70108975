"""Word-count counter in Python: keyed by word, keeps a count per word in
value state and emits `<word> <count>` on every update, like the Rust
`word-count/counter`, with the same state encoding (a postcard u64,
`weir.U64`), so either restores the other's savepoint."""

from __future__ import annotations

import weir


class Counter:
    @staticmethod
    def open(ctx: weir.OpenContext) -> Counter:
        return Counter(ctx.value_state("count", weir.U64))

    def __init__(self, count: weir.ValueState[int]) -> None:
        self.count = count

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        if element.key is None:
            raise ValueError('counter needs a keyed input (partition = "key")')
        n = (self.count.get() or 0) + 1
        self.count.set(n)
        ctx.emit(element.key + b" " + str(n).encode())


Handler = weir.export(Counter)
