"""A test operator for list state in Python: keyed by the record's key, it
appends each payload (as `str`) to the key's list state and emits
`<key> <every payload so far, comma-separated>`. The JavaScript twin is
`list-state-js/lister`; both encode elements as postcard strings, so either
restores the other's savepoint. scripts/test builds it into
target/wasm/list_state_py_lister.wasm (tests/all/list_state.rs)."""

from __future__ import annotations

import weir


class Lister:
    @staticmethod
    def open(ctx: weir.OpenContext) -> Lister:
        return Lister(ctx.list_state("seen", str))

    def __init__(self, seen: weir.ListState[str]) -> None:
        self.seen = seen

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        if element.key is None:
            raise ValueError('lister needs a keyed input (partition = "key")')
        self.seen.add(element.payload_str)
        ctx.emit(element.key_str + " " + ",".join(self.seen.get()))


Handler = weir.export(Lister)
