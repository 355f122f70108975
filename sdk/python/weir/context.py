"""What operator code receives: :class:`OpenContext` to register state in
``open``; :class:`Context` to emit output, read time and set timers in every
other call; :class:`Element` and :class:`Timer`, the inputs.

Output is buffered during one call from the host and sent with one
``emit-batch`` when the call returns.
"""

from __future__ import annotations

import struct
from array import array
from itertools import accumulate
from typing import Any, Callable, Literal, NamedTuple, TypeVar, overload

from . import _host
from ._host import ELEMENT, ELEMENT_SIZE, HAS_KEY, HAS_TIMESTAMP
from .batch import sync_host
from .codec import codec
from .errors import WeirError, state_error
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

__all__ = ["Element", "Timer", "Context", "OpenContext", "flush_output"]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")
P = TypeVar("P")

Redistribution = Literal["even-split", "union"]
"""How operator list state is split on rescale."""


class Element(NamedTuple):
    """One input record."""

    payload: bytes
    """The record's bytes."""
    key: bytes | None
    """Its key, on a keyed input (``partition = "key"``); else None."""
    timestamp: int | None
    """Its event time in milliseconds since the epoch, if it has one."""

    @property
    def payload_str(self) -> str:
        """The payload as UTF-8 text (invalid bytes replaced)."""
        return self.payload.decode("utf-8", "replace")

    @property
    def key_str(self) -> str:
        """The key as UTF-8 text; empty without a key."""
        return "" if self.key is None else self.key.decode("utf-8", "replace")


class Timer(NamedTuple):
    """A timer that fired, passed to ``on_timer``; its key is the current key."""

    time: int
    """The time it was registered for (milliseconds since the epoch)."""
    domain: Any
    """``weir.TimeDomain.EVENT_TIME`` or ``weir.TimeDomain.PROCESSING_TIME``."""
    key: bytes
    """The key it was registered under."""

    @property
    def key_str(self) -> str:
        """The key as UTF-8 text."""
        return self.key.decode("utf-8", "replace")


# Output of the call in progress: every payload, in order; and, flat, the
# position, key and timestamp of each element that has a key or a timestamp.
# The common output, a bare payload, costs one append.
_PAYLOADS: list[Any] = []
_EXTRAS: list[Any] = []


def _as_bytes(value: Any, what: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"emit: {what} must be str or bytes, not {type(value).__name__}")


def flush_output() -> None:
    """Sends the output buffered during this call with one ``emit-batch``.
    Called by the export glue after every call into the operator."""
    payloads, extras = _PAYLOADS, _EXTRAS
    if not payloads:
        return
    try:
        if not extras:
            data, index = _pack_plain(payloads)
        else:
            n = len(payloads)
            keys: list[Any] = [None] * n
            stamps: list[int | None] = [None] * n
            for i, key, timestamp in zip(extras[0::3], extras[1::3], extras[2::3]):
                keys[i] = key
                stamps[i] = timestamp
            data, index = _pack(payloads, keys, stamps)
    finally:
        payloads.clear()
        extras.clear()
    _host.collector.emit_batch(_host.types.ElementBatch(data, index))


def _pack_plain(payloads: list[Any]) -> tuple[bytes, bytes]:
    """Output without keys or timestamps, the common case, packed by C
    loops alone: the payloads one after another, and an index whose entries
    are all zero but for each payload's start and length."""
    try:
        data = b"".join(payloads)
    except (TypeError, BufferError):
        # str payloads (or a mix, or a buffer join cannot read): bytes first.
        payloads = _payload_bytes(payloads)
        data = b"".join(payloads)
    lengths = array("I", map(len, payloads))
    starts = array("I", accumulate(lengths, initial=0))
    if starts.pop() != len(data):
        # A buffer whose len() is not its size in bytes (a memoryview of
        # wider items): copied as bytes, as emit does for memoryviews.
        return _pack_plain(_payload_bytes(payloads))
    # Every field after the length is 0 (no key, no flags, no event time).
    index = array("I", bytes(ELEMENT_SIZE * len(payloads)))
    index[0::8] = starts
    index[1::8] = lengths
    return data, index.tobytes()


def _payload_bytes(payloads: list[Any]) -> list[bytes]:
    """Payloads as bytes: str encoded as UTF-8 (a list of str by one C
    loop), other bytes-likes copied."""
    try:
        return list(map(str.encode, payloads))
    except TypeError:
        return [p if type(p) is bytes else _as_bytes(p, "a payload") for p in payloads]


def _pack(payloads: list[Any], keys: list[Any], stamps: list[int | None]) -> tuple[bytes, bytes]:
    """Output with keys or timestamps: each payload followed by its key in
    the buffer, one index entry per element. A plain loop: it runs once per
    output record, and beats chains of C iterators here."""
    parts: list[bytes] = []
    entries: list[bytes] = []
    at = 0
    pack = ELEMENT.pack
    for payload, key, timestamp in zip(payloads, keys, stamps):
        if type(payload) is not bytes:
            payload = _as_bytes(payload, "a payload")
        n = len(payload)
        parts.append(payload)
        flags = 0 if timestamp is None else HAS_TIMESTAMP
        if key is not None:
            if type(key) is not bytes:
                key = _as_bytes(key, "a key")
            parts.append(key)
            flags |= HAS_KEY
        try:
            if key is None:
                entries.append(pack(at, n, 0, 0, flags, timestamp or 0))
                at += n
            else:
                entries.append(pack(at, n, at + n, len(key), flags, timestamp or 0))
                at += n + len(key)
        except struct.error:
            raise TypeError(f"emit: a timestamp must be a 64-bit int, not {timestamp!r}") from None
    return b"".join(parts), b"".join(entries)


def _emit(payload: bytes | str, key: bytes | str | None = None, timestamp: int | None = None) -> None:
    if key is None and timestamp is None:
        _PAYLOADS.append(payload)
    else:
        _EXTRAS.extend((len(_PAYLOADS), key, timestamp))
        _PAYLOADS.append(payload)


def _timer_call(call: Callable[[int], None], time: int) -> None:
    sync_host()
    try:
        call(time)
    except _host.Err as e:
        raise state_error("timer", e) from None


class Context:
    """Passed to ``process``, ``process_broadcast``, ``on_timer`` and
    ``end_of_input``: output, the current key, time and timers."""

    __slots__ = ()

    @staticmethod
    def emit(payload: bytes | str, key: bytes | str | None = None, timestamp: int | None = None) -> None:
        """Sends `payload` downstream (``str`` is sent as UTF-8). With `key`,
        a keyed downstream operator sees it under that key; with
        `timestamp`, it carries that event time."""
        # _emit's body, inline: this runs once per output record.
        if key is None and timestamp is None:
            _PAYLOADS.append(payload)
        else:
            _EXTRAS.extend((len(_PAYLOADS), key, timestamp))
            _PAYLOADS.append(payload)

    @staticmethod
    def current_key() -> bytes | None:
        """The current key, if any."""
        sync_host()
        key = _host.context.current_key()
        return None if key is None else bytes(key)

    @staticmethod
    def watermark() -> int:
        """The operator's event-time watermark (the smallest 64-bit integer
        before the first)."""
        return int(_host.context.current_watermark())

    @staticmethod
    def processing_time() -> int:
        """The host's wall clock, in milliseconds since the epoch."""
        return int(_host.context.current_processing_time())

    @staticmethod
    def register_event_time_timer(time: int) -> None:
        """A timer for the current key, firing when the watermark reaches `time`."""
        _timer_call(_host.timers.register_event_time_timer, time)

    @staticmethod
    def register_processing_time_timer(time: int) -> None:
        """A timer for the current key, firing when the wall clock reaches `time`."""
        _timer_call(_host.timers.register_processing_time_timer, time)

    @staticmethod
    def delete_event_time_timer(time: int) -> None:
        """Deletes the current key's event-time timer at `time`, if any."""
        _timer_call(_host.timers.delete_event_time_timer, time)

    @staticmethod
    def delete_processing_time_timer(time: int) -> None:
        """Deletes the current key's processing-time timer at `time`, if any."""
        _timer_call(_host.timers.delete_processing_time_timer, time)


class OperatorInfo(NamedTuple):
    """Who this subtask is."""

    uid: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt_number: int
    params: dict[str, str]


class OpenContext:
    """Passed to ``open``: who this subtask is, the operator's params, and
    the functions that register state (only possible here).

    A state's *kind* says how its values are encoded (see :mod:`weir.codec`):
    ``int``, ``float``, ``str``, ``bytes``, ``bool``, ``T | None``,
    ``list[T]``, ``tuple[...]``, ``dict[K, V]``, dataclasses, NamedTuples,
    enums, and widths such as ``weir.U64``.
    """

    __slots__ = ("info",)

    def __init__(self, info: Any) -> None:
        self.info = OperatorInfo(
            info.uid,
            info.subtask_index,
            info.parallelism,
            info.max_parallelism,
            info.attempt_number,
            dict(info.params),
        )

    @overload
    def param(self, name: str) -> str | None: ...
    @overload
    def param(self, name: str, default: T) -> str | T: ...
    @overload
    def param(self, name: str, default: T, parse: Callable[[str], P]) -> P | T: ...
    def param(self, name: str, default: Any = None, parse: Callable[[str], Any] | None = None) -> Any:
        """Param `name` from the operator's ``params`` in ``job.toml`` (a
        string), or `default` when absent; with `parse` (``int``, ``float``,
        ...) the string parsed, an error naming the param if it does not."""
        value = self.info.params.get(name)
        if value is None:
            return default
        if parse is None:
            return value
        try:
            return parse(value)
        except ValueError as e:
            raise WeirError(f"param '{name}': cannot parse {value!r}: {e}") from None

    @staticmethod
    def emit(payload: bytes | str, key: bytes | str | None = None, timestamp: int | None = None) -> None:
        """Output from ``open`` (sent before any record is processed), as
        :meth:`Context.emit`."""
        _emit(payload, key, timestamp)

    @staticmethod
    def _register(register: Callable[..., Any], name: str, version: int, ttl: Ttl | None, *extra: Any) -> Any:
        t = _host.types
        descriptor = t.StateDescriptor(
            name=name, version=version, encoding="postcard", ttl=None if ttl is None else ttl.to_wit()
        )
        try:
            return register(descriptor, *extra)
        except _host.Err as e:
            raise state_error(f"state '{name}'", e) from None

    # Each registration has a typed overload, for kinds that are types
    # (`int`, `weir.U64`, `list[str]`, a dataclass), and one returning
    # `Any` handles for kinds type checkers do not see as types (`int |
    # None`); annotate the attribute for those.

    @overload
    def value_state(self, name: str, kind: type[T], *, version: int = 1, ttl: Ttl | None = None) -> ValueState[T]: ...
    @overload
    def value_state(self, name: str, kind: Any, *, version: int = 1, ttl: Ttl | None = None) -> ValueState[Any]: ...
    def value_state(self, name: str, kind: Any, *, version: int = 1, ttl: Ttl | None = None) -> ValueState[Any]:
        """Registers value state: one value of `kind` per key."""
        handle = self._register(_host.keyed_state.register_value, name, version, ttl)
        return ValueState(name, handle, codec(kind))

    @overload
    def list_state(self, name: str, kind: type[T], *, version: int = 1, ttl: Ttl | None = None) -> ListState[T]: ...
    @overload
    def list_state(self, name: str, kind: Any, *, version: int = 1, ttl: Ttl | None = None) -> ListState[Any]: ...
    def list_state(self, name: str, kind: Any, *, version: int = 1, ttl: Ttl | None = None) -> ListState[Any]:
        """Registers list state: a list of `kind` per key."""
        handle = self._register(_host.keyed_state.register_list, name, version, ttl)
        return ListState(name, handle, codec(kind))

    @overload
    def map_state(
        self, name: str, key_kind: type[K], value_kind: type[V], *, version: int = 1, ttl: Ttl | None = None
    ) -> MapState[K, V]: ...
    @overload
    def map_state(
        self, name: str, key_kind: Any, value_kind: Any, *, version: int = 1, ttl: Ttl | None = None
    ) -> MapState[Any, Any]: ...
    def map_state(
        self, name: str, key_kind: Any, value_kind: Any, *, version: int = 1, ttl: Ttl | None = None
    ) -> MapState[Any, Any]:
        """Registers map state: a map from `key_kind` to `value_kind` per key."""
        handle = self._register(_host.keyed_state.register_map, name, version, ttl)
        return MapState(name, handle, codec(key_kind), codec(value_kind))

    @overload
    def reducing_state(
        self, name: str, kind: type[T], reduce: Callable[[T, T], T], *, version: int = 1, ttl: Ttl | None = None
    ) -> ReducingState[T]: ...
    @overload
    def reducing_state(
        self, name: str, kind: Any, reduce: Callable[[Any, Any], Any], *, version: int = 1, ttl: Ttl | None = None
    ) -> ReducingState[Any]: ...
    def reducing_state(
        self, name: str, kind: Any, reduce: Callable[[Any, Any], Any], *, version: int = 1, ttl: Ttl | None = None
    ) -> ReducingState[Any]:
        """Registers reducing state: an accumulator of `kind` per key,
        folded with `reduce(accumulator, value)`."""
        handle = self._register(_host.keyed_state.register_reducing, name, version, ttl)
        return ReducingState(ValueState(name, handle, codec(kind)), reduce)

    @overload
    def aggregating_state(
        self,
        name: str,
        accumulator: type[ACC],
        function: AggregateFunction[IN, ACC, OUT],
        *,
        version: int = 1,
        ttl: Ttl | None = None,
    ) -> AggregatingState[IN, ACC, OUT]: ...
    @overload
    def aggregating_state(
        self,
        name: str,
        accumulator: Any,
        function: AggregateFunction[IN, Any, OUT],
        *,
        version: int = 1,
        ttl: Ttl | None = None,
    ) -> AggregatingState[IN, Any, OUT]: ...
    def aggregating_state(
        self,
        name: str,
        accumulator: Any,
        function: AggregateFunction[Any, Any, Any],
        *,
        version: int = 1,
        ttl: Ttl | None = None,
    ) -> AggregatingState[Any, Any, Any]:
        """Registers aggregating state: an accumulator of kind `accumulator`
        per key, folded with `function`."""
        handle = self._register(_host.keyed_state.register_aggregating, name, version, ttl)
        return AggregatingState(ValueState(name, handle, codec(accumulator)), function)

    @overload
    def operator_list_state(
        self, name: str, kind: type[T], mode: Redistribution = "even-split", *, version: int = 1
    ) -> OperatorListState[T]: ...
    @overload
    def operator_list_state(
        self, name: str, kind: Any, mode: Redistribution = "even-split", *, version: int = 1
    ) -> OperatorListState[Any]: ...
    def operator_list_state(
        self, name: str, kind: Any, mode: Redistribution = "even-split", *, version: int = 1
    ) -> OperatorListState[Any]:
        """Registers operator list state: a list of `kind` per subtask,
        redistributed on rescale by `mode`: ``"even-split"`` (dealt out)
        or ``"union"`` (every subtask gets every item)."""
        modes = {"even-split": _host.types.Redistribution.EVEN_SPLIT, "union": _host.types.Redistribution.UNION}
        if mode not in modes:
            raise WeirError(f"state '{name}': redistribution is 'even-split' or 'union', not {mode!r}")
        handle = self._register(_host.operator_state.register_list, name, version, None, modes[mode])
        return OperatorListState(name, handle, codec(kind))

    @overload
    def broadcast_map_state(
        self, name: str, key_kind: type[K], value_kind: type[V], *, version: int = 1
    ) -> BroadcastMapState[K, V]: ...
    @overload
    def broadcast_map_state(
        self, name: str, key_kind: Any, value_kind: Any, *, version: int = 1
    ) -> BroadcastMapState[Any, Any]: ...
    def broadcast_map_state(
        self, name: str, key_kind: Any, value_kind: Any, *, version: int = 1
    ) -> BroadcastMapState[Any, Any]:
        """Registers broadcast map state: a map from `key_kind` to
        `value_kind` replicated on every subtask, written only in
        ``process_broadcast``."""
        handle = self._register(_host.broadcast_state.register_map, name, version, None)
        return BroadcastMapState(name, handle, codec(key_kind), codec(value_kind))
