"""A fake host for the Python SDK's unit tests: the modules componentize-py
generates for the `operator` world (`wit_world`, `componentize_py_types`),
backed by dictionaries, recording every call the SDK makes.

It keeps state per key the way the host does (the key of the current
element, or of the timer), answers `batch-slots` and `get-batch` /
`set-batch` per key slot, and refuses what the host refuses (keyed calls
without a current key, broadcast writes outside `process-broadcast`), with
the host's error codes. The tests then check what the SDK asked for and
what a state holds afterwards.
"""

from __future__ import annotations

import dataclasses
import enum
import pathlib
import struct
import sys
import types as pytypes
from typing import Any

import pytest


class Err(Exception):
    """componentize-py's error result."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


def _record(name: str, *fields: str) -> type:
    return dataclasses.make_dataclass(name, fields)


types = pytypes.ModuleType("wit_world.imports.types")
for _name, _fields in {
    "Element": ("payload", "key", "timestamp"),
    "ElementBatch": ("data", "index"),
    "StateDescriptor": ("name", "version", "encoding", "ttl"),
    "TtlConfig": ("ttl_ms", "update", "visibility"),
    "ValueBatch": ("data", "index"),
    "OperatorInfo": ("uid", "subtask_index", "parallelism", "max_parallelism", "attempt_number", "params"),
    "ErrorCode_NotInOpen": ("value",),
    "ErrorCode_KindMismatch": ("value",),
    "ErrorCode_NoCurrentKey": (),
    "ErrorCode_ReadOnly": ("value",),
    "ErrorCode_OutOfRange": ("value",),
    "ErrorCode_Backend": ("value",),
}.items():
    setattr(types, _name, _record(_name, *_fields))
types.TtlUpdate = enum.Enum("TtlUpdate", ["ON_CREATE_AND_WRITE", "ON_READ_AND_WRITE"])
types.TtlVisibility = enum.Enum("TtlVisibility", ["NEVER_RETURN_EXPIRED", "RETURN_EXPIRED_IF_NOT_CLEANED_UP"])
types.TimeDomain = enum.Enum("TimeDomain", ["EVENT_TIME", "PROCESSING_TIME"])
types.Redistribution = enum.Enum("Redistribution", ["EVEN_SPLIT", "UNION"])

# The packed index entries of WIT 0.2.0 (types.wit), spelled out here
# independently of the SDK's own layouts: an element-batch entry (payload
# start, payload length, key start, key length, flags, zero, event time) and
# a value-batch entry (slot, start, length, flags).
ELEMENT_ENTRY = struct.Struct("<IIIIIIq")
VALUE_ENTRY = struct.Struct("<IIII")


class Trap(AssertionError):
    """What makes the host trap the guest: a malformed batch."""


class Host:
    """The host's side: stored state, the current element, and a log of
    every call, as ("name", args...) tuples."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.registered: list[tuple[str, Any, Any]] = []
        self.values: dict[tuple[str, bytes], bytes] = {}
        self.lists: dict[tuple[str, bytes | None], list[bytes]] = {}
        self.maps: dict[tuple[str, bytes | None], dict[bytes, bytes]] = {}
        self.emitted: list[tuple[bytes, bytes | None, int | None]] = []
        # Each emit-batch's buffer and index, as they crossed.
        self.emitted_raw: list[tuple[bytes, bytes]] = []
        self.timers: list[tuple[str, bytes, int]] = []
        self.batch_keys: list[bytes | None] = []
        self.current: int | None = None
        self.timer_key: bytes | None = None
        self.in_open = False
        self.broadcast_writable = False
        self.watermark = -(2**63)
        self.now = 1_700_000_000_000
        # A state name whose calls fail as the backend would.
        self.failing: str | None = None
        # When set, get-batch sends its entries in this order of slots.
        self.value_batch_order: list[int] | None = None
        # When set, get-batch sends an index one byte short.
        self.value_batch_truncated = False

    # The key the host would act on.
    def key(self) -> bytes:
        if self.timer_key is not None:
            return self.timer_key
        if self.current is None or self.batch_keys[self.current] is None:
            raise Err(types.ErrorCode_NoCurrentKey())
        key = self.batch_keys[self.current]
        assert key is not None
        return key

    def slots(self) -> tuple[list[int], list[bytes | None]]:
        order: dict[bytes | None, int] = {}
        slots = [order.setdefault(k, len(order)) for k in self.batch_keys]
        return slots, list(order)

    def check(self, name: str) -> None:
        if name == self.failing:
            raise Err(types.ErrorCode_Backend(f"disk full writing {name}"))


HOST = Host()


class ValueHandle:
    """value-state and accumulator-state."""

    def __init__(self, name: str) -> None:
        self.name = name

    def get(self) -> bytes | None:
        HOST.calls.append(("get", self.name))
        HOST.check(self.name)
        return HOST.values.get((self.name, HOST.key()))

    def set(self, value: bytes) -> None:
        HOST.calls.append(("set", self.name, value))
        HOST.check(self.name)
        HOST.values[(self.name, HOST.key())] = value

    def clear(self) -> None:
        HOST.calls.append(("clear", self.name))
        HOST.values.pop((self.name, HOST.key()), None)

    def get_batch(self) -> Any:
        HOST.calls.append(("get-batch", self.name))
        HOST.check(self.name)
        data, index = bytearray(), bytearray()
        for slot, key in enumerate(HOST.slots()[1]):
            value = HOST.values.get((self.name, key)) if key is not None else None
            if value is None:
                index += VALUE_ENTRY.pack(slot, 0, 0, 0)
            else:
                index += VALUE_ENTRY.pack(slot, len(data), len(value), 1)
                data += value
        if HOST.value_batch_truncated:
            index = index[:-1]
        if HOST.value_batch_order is not None:
            # Entries in another order than the slots' (the host promises
            # slot order; the SDK places them by the slot they name anyway).
            entries = [index[i * 16 : i * 16 + 16] for i in range(len(index) // 16)]
            index = bytearray(b"".join(entries[i] for i in HOST.value_batch_order))
        return types.ValueBatch(bytes(data), bytes(index))

    def set_batch(self, values: Any) -> None:
        # The host's checks: whole entries, defined flags, a slot of the
        # batch, a value inside `data`; any failure writes nothing.
        data, index = values.data, values.index
        assert type(data) is bytes and type(index) is bytes, "list<u8> crosses as bytes"
        if len(index) % 16:
            raise Err(types.ErrorCode_OutOfRange(len(index)))
        keys = HOST.slots()[1]
        slots, written = [], []
        for slot, start, n, flags in VALUE_ENTRY.iter_unpack(index):
            if slot >= len(keys) or start + n > len(data) or flags > 1:
                raise Err(types.ErrorCode_OutOfRange(slot))
            if not flags:
                assert (start, n) == (0, 0), "an absent value has start and length 0"
            slots.append(slot)
            written.append(data[start : start + n] if flags else None)
        HOST.calls.append(("set-batch", self.name, slots, written))
        HOST.check(self.name)
        for slot, value in zip(slots, written):
            key = keys[slot]
            assert key is not None
            if value is None:
                HOST.values.pop((self.name, key), None)
            else:
                HOST.values[(self.name, key)] = value


class ListHandle:
    """list-state (keyed) and operator-list-state (per subtask)."""

    def __init__(self, name: str, keyed: bool) -> None:
        self.name, self.keyed = name, keyed

    def items(self) -> list[bytes]:
        HOST.check(self.name)
        return HOST.lists.setdefault((self.name, HOST.key() if self.keyed else None), [])

    def add(self, value: bytes) -> None:
        HOST.calls.append(("add", self.name, value))
        self.items().append(value)

    def add_all(self, values: list[bytes]) -> None:
        HOST.calls.append(("add-all", self.name, list(values)))
        self.items().extend(values)

    def update(self, values: list[bytes]) -> None:
        HOST.calls.append(("update", self.name, list(values)))
        self.items()[:] = values

    def read(self, start: int, count: int) -> list[bytes]:
        HOST.calls.append(("read", self.name, start, count))
        return self.items()[start : start + count]

    def len(self) -> int:
        return len(self.items())

    def clear(self) -> None:
        self.items().clear()


class MapHandle:
    """map-state (keyed) and broadcast-map-state."""

    def __init__(self, name: str, keyed: bool) -> None:
        self.name, self.keyed = name, keyed

    def entries_of(self, write: bool = False) -> dict[bytes, bytes]:
        HOST.check(self.name)
        if write and not self.keyed and not HOST.broadcast_writable:
            raise Err(types.ErrorCode_ReadOnly(f"broadcast state '{self.name}' outside process-broadcast"))
        return HOST.maps.setdefault((self.name, HOST.key() if self.keyed else None), {})

    def get(self, k: bytes) -> bytes | None:
        HOST.calls.append(("map-get", self.name, k))
        return self.entries_of().get(k)

    def put(self, k: bytes, v: bytes) -> None:
        HOST.calls.append(("put", self.name, k, v))
        self.entries_of(write=True)[k] = v

    def remove(self, k: bytes) -> None:
        self.entries_of(write=True).pop(k, None)

    def contains(self, k: bytes) -> bool:
        return k in self.entries_of()

    def is_empty(self) -> bool:
        return not self.entries_of()

    def entries(self, after: bytes | None, count: int) -> list[tuple[bytes, bytes]]:
        HOST.calls.append(("entries", self.name, after))
        rest = sorted(e for e in self.entries_of().items() if after is None or e[0] > after)
        return rest[:count]

    def keys(self, after: bytes | None, count: int) -> list[bytes]:
        return [k for k, _ in self.entries(after, count)]

    def clear(self) -> None:
        self.entries_of(write=True).clear()


def _register(kind: str, make: Any) -> Any:
    def register(descriptor: Any, *mode: Any) -> Any:
        HOST.registered.append((kind, descriptor, mode[0] if mode else None))
        if not HOST.in_open:
            raise Err(types.ErrorCode_NotInOpen(f"'{descriptor.name}' registered outside open"))
        return make(descriptor.name)

    return register


def _set_current_element(i: int) -> None:
    HOST.calls.append(("set-current-element", i))
    if i >= len(HOST.batch_keys):
        raise Err(types.ErrorCode_OutOfRange(i))
    HOST.current = i


def _emit_batch(batch: Any) -> None:
    # The host's checks (types.wit): whole 32-byte entries, defined flags
    # only, zero padding, payloads and keys inside `data`; a failure traps.
    # Fields the flags leave unused must be 0 too: the SDK writes them so.
    data, index = batch.data, batch.index
    if type(data) is not bytes or type(index) is not bytes:
        raise Trap("list<u8> crosses as bytes")
    if len(index) % 32:
        raise Trap(f"an index of {len(index)} bytes")
    HOST.calls.append(("emit-batch", len(index) // 32))
    HOST.emitted_raw.append((data, index))
    for ps, pl, ks, kl, flags, zero, ts in ELEMENT_ENTRY.iter_unpack(index):
        if flags & ~3 or zero or ps + pl > len(data) or ks + kl > len(data):
            raise Trap(f"a malformed entry {(ps, pl, ks, kl, flags, zero, ts)}")
        if not flags & 1 and (ks, kl) != (0, 0) or not flags & 2 and ts:
            raise Trap(f"an unused field is not 0 in {(ps, pl, ks, kl, flags, zero, ts)}")
        key = data[ks : ks + kl] if flags & 1 else None
        HOST.emitted.append((data[ps : ps + pl], key, ts if flags & 2 else None))


def _timer(name: str) -> Any:
    def call(time: int) -> None:
        HOST.calls.append((name, time))
        HOST.timers.append((name, HOST.key(), time))

    return call


def _install() -> None:
    world = pytypes.ModuleType("wit_world")
    exports = pytypes.ModuleType("wit_world.exports")
    imports = pytypes.ModuleType("wit_world.imports")
    exports.Handler = type("Handler", (), {})
    mods = {n: pytypes.ModuleType(f"wit_world.imports.{n}") for n in
            ["broadcast_state", "collector", "context", "keyed_state", "operator_state", "timers"]}
    mods["types"] = types
    for name, module in mods.items():
        setattr(imports, name, module)
    mods["collector"].emit_batch = _emit_batch
    ctx = mods["context"]
    ctx.set_current_element = _set_current_element
    ctx.batch_slots = lambda: (HOST.calls.append(("batch-slots",)), HOST.slots()[0])[1]
    ctx.current_key = lambda: HOST.key() if HOST.current is not None or HOST.timer_key is not None else None
    ctx.current_watermark = lambda: HOST.watermark
    ctx.current_processing_time = lambda: HOST.now
    ks = mods["keyed_state"]
    ks.register_value = _register("value", ValueHandle)
    ks.register_reducing = _register("reducing", ValueHandle)
    ks.register_aggregating = _register("aggregating", ValueHandle)
    ks.register_list = _register("list", lambda n: ListHandle(n, True))
    ks.register_map = _register("map", lambda n: MapHandle(n, True))
    mods["operator_state"].register_list = _register("operator-list", lambda n: ListHandle(n, False))
    mods["broadcast_state"].register_map = _register("broadcast-map", lambda n: MapHandle(n, False))
    for name in ["register_event_time_timer", "register_processing_time_timer",
                 "delete_event_time_timer", "delete_processing_time_timer"]:
        setattr(mods["timers"], name, _timer(name))
    world.exports, world.imports = exports, imports
    cpt = pytypes.ModuleType("componentize_py_types")
    cpt.Err = Err
    sys.modules.update({"wit_world": world, "wit_world.exports": exports, "wit_world.imports": imports,
                        "componentize_py_types": cpt, **{f"wit_world.imports.{n}": m for n, m in mods.items()}})


_install()
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))


@pytest.fixture(autouse=True)
def host() -> Host:
    """A fresh host for every test (the SDK's bindings keep pointing at it)."""
    HOST.__init__()  # type: ignore[misc]
    return HOST


def batch(*elements: tuple[bytes, bytes | None, int | None]) -> Any:
    """An element-batch of (payload, key, timestamp) as the host sends it:
    one buffer, and one 32-byte index entry per element (fields the flags
    leave unused are 0); the host's current keys are set to match."""
    data, index = bytearray(), bytearray()
    for payload, key, ts in elements:
        start = len(data)
        data += payload
        key_start = len(data) if key is not None else 0
        data += key or b""
        flags = (key is not None) | (ts is not None) << 1
        index += ELEMENT_ENTRY.pack(start, len(payload), key_start, len(key or b""), flags, 0, ts or 0)
    HOST.batch_keys = [key for _, key, _ in elements]
    HOST.current = 0
    return types.ElementBatch(bytes(data), bytes(index))


def info(**params: str) -> Any:
    return types.OperatorInfo("op", 0, 1, 128, 0, sorted(params.items()))


def opened(operator_class: type, **params: str) -> Any:
    """The Handler of `operator_class`, opened with `params` as the host
    would (registration is allowed only during `open`)."""
    import weir

    handler = weir.export(operator_class)()
    HOST.in_open = True
    try:
        handler.open(info(**params))
    finally:
        HOST.in_open = False
    return handler
