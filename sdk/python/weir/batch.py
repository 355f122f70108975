"""The batch fast path, hidden behind per-record state handles.

Inside ``process-batch`` the SDK hands the operator one element at a time,
as a ``process`` call would. Value and accumulator state (value, reducing,
aggregating) are read for the whole batch with one ``get-batch`` call per
state, kept in guest memory while the batch runs, and written back with one
``set-batch`` call per state when it ends: no host call per element. Other
keyed calls (list and map state, timers, the current key) first tell the
host which element is current, and only when that changed.

Semantics are those of per-element calls: elements with equal keys share a
key slot, so a later element sees an earlier one's write. Values are kept
as their encoded bytes, as the host would hold them, so a value changed in
place after ``get`` is not written unless it is ``set``.
"""

from __future__ import annotations

from array import array
from typing import Any, Generic, Protocol, TypeVar

from . import _host
from ._host import PRESENT, VALUE, VALUE_SIZE
from .codec import Codec
from .errors import CodecError, WeirError, state_error

__all__ = ["Batch", "BATCH", "CachedValue", "sync_host"]

T = TypeVar("T")


class Batch:
    """The ``process-batch`` call in progress: which element user code is
    on, which one the host has current, and the states to write back."""

    __slots__ = ("active", "generation", "index", "host_index", "_slots", "_slots_generation", "touched")

    def __init__(self) -> None:
        self.active = False
        # Bumped per batch; a state's cache belongs to one generation.
        self.generation = 0
        self.index = 0
        self.host_index = 0
        self._slots: list[int] = []
        self._slots_generation = -1
        self.touched: list[CachedValue[Any]] = []

    def begin(self) -> None:
        """A batch starts; element 0 is current on the host."""
        self.active = True
        self.generation += 1
        self.index = 0
        self.host_index = 0

    def end(self, write_back: bool) -> None:
        """The batch ends: every state it changed is written back (or, after
        a failure, dropped: the task fails anyway)."""
        self.active = False
        touched, self.touched = self.touched, []
        if write_back:
            for state in touched:
                state.flush()

    def slots(self) -> list[int]:
        """The key slot of each element of this batch (one host call per
        batch, made when a state first needs it)."""
        if self._slots_generation != self.generation:
            try:
                self._slots = list(_host.context.batch_slots())
            except _host.Err as e:
                raise state_error("batch slots", e) from None
            self._slots_generation = self.generation
        return self._slots

    def report_position(self) -> None:
        """Tells the host which element user code is on, before a failure
        is reported, so the report names the record."""
        if self.active:
            try:
                _host.context.set_current_element(self.index)
                self.host_index = self.index
            except _host.Err:
                pass


BATCH = Batch()


def sync_host() -> None:
    """Makes the host's current element user code's, before a per-element
    keyed call (list or map state, a timer, the current key)."""
    b = BATCH
    if b.active and b.host_index != b.index:
        try:
            _host.context.set_current_element(b.index)
        except _host.Err as e:
            raise state_error("current element", e) from None
        b.host_index = b.index


class ValueHandle(Protocol):
    """The host calls of a value-shaped state (``value-state`` and
    ``accumulator-state`` in the WIT)."""

    def get(self) -> bytes | None: ...
    def set(self, value: bytes) -> None: ...
    def clear(self) -> None: ...
    def get_batch(self) -> Any: ...
    def set_batch(self, values: Any) -> None: ...


class CachedValue(Generic[T]):
    """A value-shaped state: per-record ``get``/``set``/``clear`` that go to
    the host directly outside a batch, and through the batch cache inside."""

    __slots__ = ("name", "_handle", "_encode", "_decode", "_generation", "_slots", "_values", "_dirty")

    def __init__(self, name: str, handle: ValueHandle, codec: Codec[T]) -> None:
        self.name = name
        self._handle = handle
        self._encode = codec.encode
        self._decode = codec.decode
        self._generation = -1
        # Per key slot of the batch: the value's bytes, or None when absent.
        self._slots: list[int] = []
        self._values: list[bytes | None] = []
        # Slots written in this batch, in first-write order (dict keys).
        self._dirty: dict[int, None] = {}

    def _failed(self, e: BaseException) -> WeirError:
        if isinstance(e, CodecError):
            return CodecError(f"state '{self.name}': {e}")
        return state_error(f"state '{self.name}'", e)

    def _load(self, b: Batch) -> None:
        """The batch's values, once per batch, on first use."""
        try:
            got = self._handle.get_batch()
        except _host.Err as e:
            raise self._failed(e) from None
        self._values = _values_by_slot(self.name, got.data, got.index)
        self._slots = b.slots()
        self._dirty = {}
        self._generation = b.generation
        b.touched.append(self)

    def _no_slot(self, b: Batch) -> WeirError:
        if b.index >= len(self._slots):
            return WeirError(f"state '{self.name}': no key slot for element {b.index}")
        return WeirError(f"state '{self.name}': key slot {self._slots[b.index]} is past the batch's values")

    def get(self) -> T | None:
        """The current key's value, or None."""
        b = BATCH
        if b.active:
            if self._generation != b.generation:
                self._load(b)
            try:
                raw = self._values[self._slots[b.index]]
            except IndexError:
                raise self._no_slot(b) from None
        else:
            try:
                raw = self._handle.get()
            except _host.Err as e:
                raise self._failed(e) from None
        if raw is None:
            return None
        try:
            return self._decode(raw)
        except CodecError as e:
            raise self._failed(e) from None

    def set(self, value: T) -> None:
        """Sets the current key's value."""
        try:
            raw = self._encode(value)
        except CodecError as e:
            raise self._failed(e) from None
        b = BATCH
        if b.active:
            if self._generation != b.generation:
                self._load(b)
            try:
                slot = self._slots[b.index]
                self._values[slot] = raw
            except IndexError:
                raise self._no_slot(b) from None
            self._dirty[slot] = None
            return
        try:
            self._handle.set(raw)
        except _host.Err as e:
            raise self._failed(e) from None

    def clear(self) -> None:
        """Removes the current key's value."""
        b = BATCH
        if b.active:
            if self._generation != b.generation:
                self._load(b)
            try:
                slot = self._slots[b.index]
                self._values[slot] = None
            except IndexError:
                raise self._no_slot(b) from None
            self._dirty[slot] = None
            return
        try:
            self._handle.clear()
        except _host.Err as e:
            raise self._failed(e) from None

    def flush(self) -> None:
        """Writes the slots this batch changed back in one ``set-batch``:
        slots in first-write order, each once with its last value."""
        dirty = self._dirty
        if not dirty:
            return
        self._dirty = {}
        values = self._values
        parts: list[bytes] = []
        entries: list[bytes] = []
        at = 0
        pack = VALUE.pack
        for slot in dirty:
            raw = values[slot]
            if raw is None:
                entries.append(pack(slot, 0, 0, 0))
            else:
                n = len(raw)
                entries.append(pack(slot, at, n, PRESENT))
                parts.append(raw)
                at += n
        try:
            self._handle.set_batch(_host.types.ValueBatch(b"".join(parts), b"".join(entries)))
        except _host.Err as e:
            raise self._failed(e) from None


def _values_by_slot(name: str, data: bytes, index: bytes) -> list[bytes | None]:
    """The values of a ``get-batch``, by key slot: a value's bytes, or None
    where the key holds none (present-and-empty is ``b""``)."""
    if len(index) % VALUE_SIZE:
        raise WeirError(f"state '{name}': a value batch index of {len(index)} bytes is not whole {VALUE_SIZE}-byte entries")
    values: list[bytes | None] = [
        data[start : start + n] if flags & PRESENT else None for _, start, n, flags in VALUE.iter_unpack(index)
    ]
    # The host sends one entry per slot, in slot order (checked in C: the
    # index's slot column against 0, 1, 2, ...; both are little-endian u32s
    # on wasm32). Should it not, the entries still land on the slots they name.
    if memoryview(index).cast("I")[0::4] != array("I", range(len(values))):
        placed: list[bytes | None] = [None] * (1 + max((e[0] for e in VALUE.iter_unpack(index)), default=-1))
        for (slot, _, _, _), value in zip(VALUE.iter_unpack(index), values):
            placed[slot] = value
        return placed
    return values
