"""Profile step 3: step 2 (the counter's logic with no host calls,
guest-examples/bench-py/counter-bound) with each count kept as postcard
bytes, as the host holds it, so decoded and encoded once per record by the
SDK's codec. The postcard share is this minus step 2."""

from typing import Any

import wit_world.exports

import weir
from weir._host import ELEMENT

COUNTS: dict[bytes, bytes] = {}
COUNT: weir.Codec[int] = weir.codec(weir.U64)


class Handler(wit_world.exports.Handler):
    def open(self, info: Any) -> None:
        pass

    def process(self, input: Any) -> None:
        pass

    def process_batch(self, inputs: Any) -> None:
        data, counts, out = inputs.data, COUNTS, []
        for ps, pl, ks, kl, fl, ts in ELEMENT.iter_unpack(inputs.index):
            key = data[ks : ks + kl]
            raw = counts.get(key)
            n = (0 if raw is None else COUNT.decode(raw)) + 1
            counts[key] = COUNT.encode(n)
            out.append(key + b" " + str(n).encode())

    def process_broadcast(self, input: Any) -> None:
        pass

    def on_timer(self, fired: Any) -> None:
        pass

    def end_of_input(self) -> None:
        pass

    def migrate_value(self, state: str, from_version: int, value: bytes) -> bytes:
        return value
