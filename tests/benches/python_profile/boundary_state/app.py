"""Profile step 7: value state's host calls alone, on the raw bindings: per
batch `batch-slots`, `get-batch` and a `set-batch` of one value per key
slot, all made ready before the batch. The batch path's boundary share
(what crossing costs, not what the SDK does) is this minus step 1."""

from typing import Any

import wit_world.exports
from wit_world.imports import context, keyed_state, types

from weir._host import PRESENT, VALUE, VALUE_SIZE

STATE: list[Any] = []
ONE = bytes([1])
INDEX = b"".join(VALUE.pack(i, i, 1, PRESENT) for i in range(65536))


class Handler(wit_world.exports.Handler):
    def open(self, info: Any) -> None:
        STATE.append(keyed_state.register_value(types.StateDescriptor("count", 1, "postcard", None)))

    def process(self, input: Any) -> None:
        pass

    def process_batch(self, inputs: Any) -> None:
        slots = context.batch_slots()
        n = len(STATE[0].get_batch().index) // VALUE_SIZE
        STATE[0].set_batch(types.ValueBatch(ONE * n, INDEX[: n * VALUE_SIZE]))

    def process_broadcast(self, input: Any) -> None:
        pass

    def on_timer(self, fired: Any) -> None:
        pass

    def end_of_input(self) -> None:
        pass

    def migrate_value(self, state: str, from_version: int, value: bytes) -> bytes:
        return value
