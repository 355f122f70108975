"""Profile step 8: output's host call alone, on the raw bindings: one
`emit-batch` per batch of as many elements as it had records, their
buffer and index made before the batch. Output's boundary share is this minus
step 1."""

from typing import Any

import wit_world.exports
from wit_world.imports import collector, types

from weir._host import ELEMENT, ELEMENT_SIZE

DATA = b"12345 1" * 65536
INDEX = b"".join(ELEMENT.pack(i * 7, 7, 0, 0, 0, 0) for i in range(65536))


class Handler(wit_world.exports.Handler):
    def open(self, info: Any) -> None:
        pass

    def process(self, input: Any) -> None:
        pass

    def process_batch(self, inputs: Any) -> None:
        n = len(inputs.index) // ELEMENT_SIZE
        collector.emit_batch(types.ElementBatch(DATA[: n * 7], INDEX[: n * ELEMENT_SIZE]))

    def process_broadcast(self, input: Any) -> None:
        pass

    def on_timer(self, fired: Any) -> None:
        pass

    def end_of_input(self) -> None:
        pass

    def migrate_value(self, state: str, from_version: int, value: bytes) -> bytes:
        return value
