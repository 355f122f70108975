"""Profile step 1: a handler on the raw bindings that returns at once. What
a batch costs before any Python code runs per record: the host, and
componentize-py lifting the batch's buffer and index (two byte strings)."""

from typing import Any

import wit_world.exports


class Handler(wit_world.exports.Handler):
    def open(self, info: Any) -> None:
        pass

    def process(self, input: Any) -> None:
        pass

    def process_batch(self, inputs: Any) -> None:
        pass

    def process_broadcast(self, input: Any) -> None:
        pass

    def on_timer(self, fired: Any) -> None:
        pass

    def end_of_input(self) -> None:
        pass

    def migrate_value(self, state: str, from_version: int, value: bytes) -> bytes:
        return value
