"""Profile step 2: the counter's logic with no host call. Each record's
key is sliced from the batch, its count kept in a dict, and its output line
formatted and kept, as the counter does; nothing reaches the host. The
interpreter's share is this minus step 1."""

from typing import Any

import wit_world.exports

from weir._host import ELEMENT

COUNTS: dict[bytes, int] = {}


class Handler(wit_world.exports.Handler):
    def open(self, info: Any) -> None:
        pass

    def process(self, input: Any) -> None:
        pass

    def process_batch(self, inputs: Any) -> None:
        data, counts, out = inputs.data, COUNTS, []
        for ps, pl, ks, kl, fl, ts in ELEMENT.iter_unpack(inputs.index):
            key = data[ks : ks + kl]
            n = counts.get(key, 0) + 1
            counts[key] = n
            out.append(key + b" " + str(n).encode())

    def process_broadcast(self, input: Any) -> None:
        pass

    def on_timer(self, fired: Any) -> None:
        pass

    def end_of_input(self) -> None:
        pass

    def migrate_value(self, state: str, from_version: int, value: bytes) -> bytes:
        return value
