"""The word-count counter's logic with no host calls, for the languages
benchmark (tests/benches/languages.rs): the interpreter's own bound on a
Python counter. Per record, as the SDK counter does: the key sliced from the
batch, its count read, incremented and stored (in a dict, not in host
state), and the output line formatted and kept; nothing reaches the host
but the call's result. Also step 2 of scripts/profile-python: the
interpreter's share is this minus step 1 (the input alone)."""

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
