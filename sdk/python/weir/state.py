"""Typed state handles: keyed value, list, map, reducing and aggregating
state, operator list state and broadcast map state.

Keyed handles act on the current key (the key of the element being
processed, or of the timer that fired). Lists and maps are read a page at a
time, so a large one never crosses into the guest in one call. Host
refusals are raised as :class:`~weir.errors.StateError` naming the state;
values that do not fit the state's kind as :class:`~weir.errors.CodecError`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable, Generic, Iterable, Iterator, Protocol, TypeVar

from . import _host
from .batch import CachedValue, sync_host
from .codec import Codec
from .errors import CodecError, WeirError, state_error

__all__ = [
    "Ttl",
    "ValueState",
    "ListState",
    "MapState",
    "ReducingState",
    "AggregateFunction",
    "AggregatingState",
    "OperatorListState",
    "BroadcastMapState",
]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")
IN_contra = TypeVar("IN_contra", contravariant=True)
OUT_co = TypeVar("OUT_co", covariant=True)

# How many items one paged read asks for.
PAGE = 1024


class Ttl:
    """Time-to-live of keyed state entries, in processing time: an entry
    lives `duration` (a ``timedelta`` or milliseconds) after it was last
    written, or also read with ``renew_on_read``. Expired entries are never
    returned, unless ``return_expired`` allows it until clean-up."""

    __slots__ = ("ms", "renew_on_read", "return_expired")

    def __init__(self, duration: timedelta | int, *, renew_on_read: bool = False, return_expired: bool = False):
        ms = duration // timedelta(milliseconds=1) if isinstance(duration, timedelta) else duration
        if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
            raise ValueError(f"a TTL is a positive timedelta or number of milliseconds, not {duration!r}")
        self.ms = min(ms, (1 << 64) - 1)
        self.renew_on_read = renew_on_read
        self.return_expired = return_expired

    def to_wit(self) -> Any:
        """The ``ttl-config`` record."""
        t = _host.types
        return t.TtlConfig(
            ttl_ms=self.ms,
            update=t.TtlUpdate.ON_READ_AND_WRITE if self.renew_on_read else t.TtlUpdate.ON_CREATE_AND_WRITE,
            visibility=(
                t.TtlVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP
                if self.return_expired
                else t.TtlVisibility.NEVER_RETURN_EXPIRED
            ),
        )


class _Handle:
    """What every handle shares: its state's name and error wrapping."""

    __slots__ = ("name", "_handle")

    def __init__(self, name: str, handle: Any) -> None:
        self.name = name
        self._handle = handle

    def _failed(self, e: BaseException) -> WeirError:
        if isinstance(e, CodecError):
            return CodecError(f"state '{self.name}': {e}")
        return state_error(f"state '{self.name}'", e)

    def _call(self, method: Callable[..., T], *args: Any) -> T:
        try:
            return method(*args)
        except _host.Err as e:
            raise self._failed(e) from None

    def _encode(self, codec: Codec[Any], value: Any) -> bytes:
        try:
            return codec.encode(value)
        except CodecError as e:
            raise self._failed(e) from None

    def _decode(self, codec: Codec[T], raw: bytes) -> T:
        try:
            return codec.decode(raw)
        except CodecError as e:
            raise self._failed(e) from None


class ValueState(CachedValue[T]):
    """One value of kind ``T`` per key: ``get()`` (None when unset),
    ``set(value)``, ``clear()``. Inside a batch these go through the batch
    fast path (:mod:`weir.batch`): one host call per batch, not per record."""

    __slots__ = ()


class _Pages(_Handle):
    """A list read a page at a time (keyed or operator list state)."""

    __slots__ = ("_codec", "_keyed")

    def __init__(self, name: str, handle: Any, codec: Codec[Any], keyed: bool) -> None:
        super().__init__(name, handle)
        self._codec = codec
        self._keyed = keyed

    def _sync(self) -> None:
        if self._keyed:
            sync_host()


class ListState(_Pages, Generic[T]):
    """An ordered list of ``T`` per key (keyed) or per subtask (operator
    list state)."""

    __slots__ = ()

    def __init__(self, name: str, handle: Any, codec: Codec[T], keyed: bool = True) -> None:
        super().__init__(name, handle, codec, keyed)

    def add(self, value: T) -> None:
        """Appends `value`."""
        raw = self._encode(self._codec, value)
        self._sync()
        self._call(self._handle.add, raw)

    def add_all(self, values: Iterable[T]) -> None:
        """Appends every value of `values`, in order."""
        raw = [self._encode(self._codec, v) for v in values]
        self._sync()
        self._call(self._handle.add_all, raw)

    def update(self, values: Iterable[T]) -> None:
        """Replaces the list with `values` (empty: clears it)."""
        raw = [self._encode(self._codec, v) for v in values]
        self._sync()
        self._call(self._handle.update, raw)

    def __iter__(self) -> Iterator[T]:
        """The values in order, fetched from the host a page at a time."""
        start = 0
        while True:
            self._sync()
            page = self._call(self._handle.read, start, PAGE)
            for raw in page:
                yield self._decode(self._codec, raw)
            if len(page) < PAGE:
                return
            start += len(page)

    def get(self) -> list[T]:
        """The whole list."""
        return list(self)

    def __len__(self) -> int:
        """The number of values."""
        self._sync()
        return int(self._call(self._handle.len))

    def is_empty(self) -> bool:
        """Whether the list has no values."""
        return len(self) == 0

    def clear(self) -> None:
        """Removes every value."""
        self._sync()
        self._call(self._handle.clear)


class OperatorListState(ListState[T]):
    """A list of ``T`` owned by this subtask, not by a key; redistributed on
    rescale as registered (even-split: dealt out; union: everyone gets
    all). Operator list state has no TTL."""

    __slots__ = ()

    def __init__(self, name: str, handle: Any, codec: Codec[T]) -> None:
        super().__init__(name, handle, codec, keyed=False)


class _Map(_Handle, Generic[K, V]):
    """A map read a page at a time (keyed or broadcast map state). Entries
    iterate in the order of their encoded keys' bytes."""

    __slots__ = ("_key", "_value", "_keyed")

    def __init__(self, name: str, handle: Any, key: Codec[K], value: Codec[V], keyed: bool) -> None:
        super().__init__(name, handle)
        self._key, self._value, self._keyed = key, value, keyed

    def _sync(self) -> None:
        if self._keyed:
            sync_host()

    def get(self, key: K) -> V | None:
        """The value under `key`, or None."""
        k = self._encode(self._key, key)
        self._sync()
        raw = self._call(self._handle.get, k)
        return None if raw is None else self._decode(self._value, raw)

    def put(self, key: K, value: V) -> None:
        """Sets the value under `key`."""
        k = self._encode(self._key, key)
        v = self._encode(self._value, value)
        self._sync()
        self._call(self._handle.put, k, v)

    def remove(self, key: K) -> None:
        """Removes `key` (nothing happens if it is absent)."""
        k = self._encode(self._key, key)
        self._sync()
        self._call(self._handle.remove, k)

    def contains(self, key: K) -> bool:
        """Whether the map holds `key`."""
        k = self._encode(self._key, key)
        self._sync()
        return bool(self._call(self._handle.contains, k))

    def __contains__(self, key: object) -> bool:
        return self.contains(key)  # type: ignore[arg-type]

    def is_empty(self) -> bool:
        """Whether the map has no entries."""
        self._sync()
        return bool(self._call(self._handle.is_empty))

    def items(self) -> Iterator[tuple[K, V]]:
        """The entries, in the order of their encoded keys' bytes, fetched a
        page at a time; the map may change between pages."""
        after: bytes | None = None
        while True:
            self._sync()
            page = self._call(self._handle.entries, after, PAGE)
            for k, v in page:
                yield self._decode(self._key, k), self._decode(self._value, v)
            if len(page) < PAGE:
                return
            after = page[-1][0]

    def keys(self) -> Iterator[K]:
        """The keys, in the order of their encoded bytes."""
        after: bytes | None = None
        while True:
            self._sync()
            page = self._call(self._handle.keys, after, PAGE)
            for k in page:
                yield self._decode(self._key, k)
            if len(page) < PAGE:
                return
            after = page[-1]

    def values(self) -> Iterator[V]:
        """The values, in the order of their keys."""
        return (v for _, v in self.items())

    def clear(self) -> None:
        """Removes every entry."""
        self._sync()
        self._call(self._handle.clear)


class MapState(_Map[K, V]):
    """A map from ``K`` to ``V`` per key."""

    __slots__ = ()

    def __init__(self, name: str, handle: Any, key: Codec[K], value: Codec[V]) -> None:
        super().__init__(name, handle, key, value, keyed=True)


class BroadcastMapState(_Map[K, V]):
    """A map from ``K`` to ``V`` replicated on every subtask. Readable
    everywhere; writable only in ``process_broadcast`` (elsewhere a write
    raises :class:`~weir.errors.StateError` of kind ``"read-only"``)."""

    __slots__ = ()

    def __init__(self, name: str, handle: Any, key: Codec[K], value: Codec[V]) -> None:
        super().__init__(name, handle, key, value, keyed=False)


class ReducingState(Generic[T]):
    """One accumulator of kind ``T`` per key, folded with a reduce function:
    ``add(value)`` stores ``reduce(accumulator, value)`` (or `value` for
    the first) and returns it. Batched like value state."""

    __slots__ = ("_acc", "_reduce")

    def __init__(self, acc: CachedValue[T], reduce: Callable[[T, T], T]) -> None:
        self._acc, self._reduce = acc, reduce

    @property
    def name(self) -> str:
        """The state's name."""
        return self._acc.name

    def add(self, value: T) -> T:
        """Folds `value` into the current key's accumulator; returns the result."""
        acc = self._acc.get()
        value = value if acc is None else self._reduce(acc, value)
        self._acc.set(value)
        return value

    def get(self) -> T | None:
        """The current key's accumulator, or None before the first ``add``."""
        return self._acc.get()

    def clear(self) -> None:
        """Removes the current key's accumulator."""
        self._acc.clear()


class AggregateFunction(Protocol[IN_contra, ACC, OUT_co]):
    """How aggregating state folds inputs (Flink's ``AggregateFunction``):
    inputs fold into an accumulator, which the host stores, and which
    yields a result."""

    def create(self) -> ACC:
        """A fresh accumulator."""
        ...

    def add(self, value: IN_contra, accumulator: ACC) -> ACC:
        """`accumulator` with `value` folded in."""
        ...

    def result(self, accumulator: ACC) -> OUT_co:
        """The result for an accumulator."""
        ...


class AggregatingState(Generic[IN, ACC, OUT]):
    """One accumulator per key, folded with an :class:`AggregateFunction`.
    Batched like value state."""

    __slots__ = ("_acc", "_function")

    def __init__(self, acc: CachedValue[ACC], function: AggregateFunction[IN, ACC, OUT]) -> None:
        self._acc, self._function = acc, function

    @property
    def name(self) -> str:
        """The state's name."""
        return self._acc.name

    def add(self, value: IN) -> None:
        """Folds `value` into the current key's accumulator."""
        acc = self._acc.get()
        self._acc.set(self._function.add(value, self._function.create() if acc is None else acc))

    def get(self) -> OUT | None:
        """The current key's result, or None before the first ``add``."""
        acc = self._acc.get()
        return None if acc is None else self._function.result(acc)

    def clear(self) -> None:
        """Removes the current key's accumulator."""
        self._acc.clear()
