"""Profile step 8: output's host call alone, on the raw bindings: one
`emit-batch` per batch of as many elements as it had records, their
references made before the batch. Output's boundary share is this minus
step 1."""

from typing import Any

import wit_world.exports
from wit_world.imports import collector, types

import weir._host
from weir._host import Ref

DATA = b"12345 1" * 65536
REFS = [weir._host.new_tuple(Ref, (i * 7, 7, 0, 0, False, None)) for i in range(65536)]


class Handler(wit_world.exports.Handler):
    def open(self, info: Any) -> None:
        pass

    def process(self, input: Any) -> None:
        pass

    def process_batch(self, inputs: Any) -> None:
        n = len(inputs.elements)
        collector.emit_batch(types.ElementBatch(DATA[: n * 7], REFS[:n]))  # type: ignore[arg-type]

    def process_broadcast(self, input: Any) -> None:
        pass

    def on_timer(self, fired: Any) -> None:
        pass

    def end_of_input(self) -> None:
        pass

    def migrate_value(self, state: str, from_version: int, value: bytes) -> bytes:
        return value
