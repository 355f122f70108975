"""Weir's Python SDK: stream operators in Python, built into WebAssembly
components with componentize-py.

An operator is a class with a static ``open(ctx)`` that registers state and
returns the instance, and ``process(ctx, element)``; the operator's module
ends with ``Handler = weir.export(MyOperator)``::

    import weir

    class Counter:
        @staticmethod
        def open(ctx: weir.OpenContext) -> "Counter":
            return Counter(ctx.value_state("count", weir.U64))

        def __init__(self, count: weir.ValueState[int]) -> None:
            self.count = count

        def process(self, ctx: weir.Context, element: weir.Element) -> None:
            n = (self.count.get() or 0) + 1
            self.count.set(n)
            ctx.emit(element.key_str + " " + str(n))

    Handler = weir.export(Counter)

The host owns all state; handles read and write it for the current key.
Values are encoded as postcard, the Rust SDK's encoding, by the mapping in
:mod:`weir.codec`, so state written in one language is read in another.
Records arrive in batches; the SDK hands them to ``process`` one at a time
and batches the host calls of value state and output (:mod:`weir.batch`).
"""

from ._host import types as _types
from .codec import (
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    I128,
    U8,
    Json,
    U16,
    U32,
    U64,
    U128,
    Codec,
    codec,
    convert_value,
    decode,
    encode,
)
from .context import Context, Element, OpenContext, OperatorInfo, Timer
from .errors import CodecError, StateError, WeirError
from .runtime import Operator, export
from .state import (
    AggregateFunction,
    AggregatingState,
    BroadcastMapState,
    ListState,
    MapState,
    OperatorListState,
    ReducingState,
    Ttl,
    ValueState,
)

__version__ = "0.2.0"

TimeDomain = _types.TimeDomain
"""Which clock a timer fires on: ``TimeDomain.EVENT_TIME`` or
``TimeDomain.PROCESSING_TIME`` (``Timer.domain``)."""

__all__ = [
    "AggregateFunction",
    "AggregatingState",
    "BroadcastMapState",
    "Codec",
    "CodecError",
    "Context",
    "Element",
    "F32",
    "F64",
    "I8",
    "I16",
    "I32",
    "I64",
    "I128",
    "Json",
    "ListState",
    "MapState",
    "OpenContext",
    "Operator",
    "OperatorInfo",
    "OperatorListState",
    "ReducingState",
    "StateError",
    "TimeDomain",
    "Timer",
    "Ttl",
    "U8",
    "U16",
    "U32",
    "U64",
    "U128",
    "ValueState",
    "WeirError",
    "codec",
    "convert_value",
    "decode",
    "encode",
    "export",
]
