"""Weir's Python SDK: idiomatic state handles over the `weir:operator` WIT.

An operator is a class with `open(ctx)` and `process(ctx, element)` (and,
if it needs them, `on_timer`, `end_of_input`, `migrate_value`); the module
that componentize-py builds ends with `Handler = weir.export(MyOperator)`.

Values are encoded as postcard, the Rust SDK's encoding, for the types the
languages share: `int` (an unsigned LEB128 varint, Rust's `u64`), `str`
(varint length, then UTF-8: Rust's `String`), `bytes` (Rust's `Vec<u8>`),
`bool`, and tuples of them (Rust tuples). A state written by one language
is read by the others. Timers: `ctx.register_event_time_timer(t)` and the
like; `on_timer(ctx, timer)` gets `timer.time` and `timer.key` (bytes).
"""

import wit_world
import wit_world.exports
from componentize_py_types import Err
from wit_world.imports import collector, context, keyed_state, timers, types

__all__ = ["Element", "OpenContext", "Context", "ValueState", "ListState", "MapState", "export"]


def _varint(n):
    if n < 0:
        raise ValueError("only non-negative integers are encoded (Rust u64)")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(b, at):
    n, shift = 0, 0
    while True:
        byte = b[at]
        at += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return n, at


def encode(value):
    """A value as postcard bytes. A tuple is its items one after another,
    as postcard writes a Rust tuple."""
    if isinstance(value, tuple):
        return b"".join(encode(v) for v in value)
    if isinstance(value, bool):
        return b"\x01" if value else b"\x00"
    if isinstance(value, int):
        return _varint(value)
    if isinstance(value, str):
        data = value.encode("utf-8")
        return _varint(len(data)) + data
    if isinstance(value, (bytes, bytearray)):
        return _varint(len(value)) + bytes(value)
    raise TypeError(f"cannot encode {type(value).__name__}: use int, str, bytes or bool")


def _decode_at(kind, data, at):
    if isinstance(kind, tuple):
        items = []
        for k in kind:
            v, at = _decode_at(k, data, at)
            items.append(v)
        return tuple(items), at
    if kind is bool:
        return data[at] != 0, at + 1
    if kind is int:
        return _read_varint(data, at)
    n, at = _read_varint(data, at)
    raw = bytes(data[at:at + n])
    if kind is str:
        return raw.decode("utf-8"), at + n
    if kind is bytes:
        return raw, at + n
    raise TypeError(f"cannot decode {kind}: use int, str, bytes, bool or a tuple of them")


def decode(kind, data):
    """Postcard bytes as a value of type `kind`: int, str, bytes, bool, or a
    tuple of kinds such as `(int, int)`."""
    return _decode_at(kind, data, 0)[0]


def _descriptor(name, version):
    return types.StateDescriptor(name=name, version=version, encoding="postcard", ttl=None)


class ValueState:
    """One value per key (the current key of the call)."""

    def __init__(self, handle, kind):
        self._h, self._kind = handle, kind

    def get(self):
        raw = self._h.get()
        return None if raw is None else decode(self._kind, raw)

    def set(self, value):
        self._h.set(encode(value))

    def clear(self):
        self._h.clear()


class ListState:
    """A list per key."""

    def __init__(self, handle, kind):
        self._h, self._kind = handle, kind

    def add(self, value):
        self._h.add(encode(value))

    def get(self):
        out, start = [], 0
        while True:
            page = self._h.read(start, 1024)
            out.extend(decode(self._kind, v) for v in page)
            if len(page) < 1024:
                return out
            start += len(page)

    def clear(self):
        self._h.clear()


class MapState:
    """A map per key, ordered by the encoded bytes of its keys."""

    def __init__(self, handle, key_kind, value_kind):
        self._h, self._key, self._value = handle, key_kind, value_kind

    def get(self, key):
        raw = self._h.get(encode(key))
        return None if raw is None else decode(self._value, raw)

    def put(self, key, value):
        self._h.put(encode(key), encode(value))

    def remove(self, key):
        self._h.remove(encode(key))

    def items(self):
        after = None
        while True:
            page = self._h.entries(after, 1024)
            for k, v in page:
                yield decode(self._key, k), decode(self._value, v)
            if len(page) < 1024:
                return
            after = page[-1][0]

    def clear(self):
        self._h.clear()


class Element:
    """One record: `payload` and `key` (bytes), `timestamp` (ms or None)."""

    __slots__ = ("payload", "key", "timestamp")

    def __init__(self, payload, key, timestamp):
        self.payload, self.key, self.timestamp = payload, key, timestamp

    @property
    def key_str(self):
        return "" if self.key is None else self.key.decode("utf-8", "replace")

    @property
    def payload_str(self):
        return self.payload.decode("utf-8", "replace")


class OpenContext:
    """What `open` gets: who this subtask is, its params, and registration."""

    def __init__(self, info):
        self.info = info
        self._params = dict(info.params)

    def param(self, name, default=None):
        return self._params.get(name, default)

    def value_state(self, name, kind=int, version=1):
        return ValueState(keyed_state.register_value(_descriptor(name, version)), kind)

    def list_state(self, name, kind=int, version=1):
        return ListState(keyed_state.register_list(_descriptor(name, version)), kind)

    def map_state(self, name, key_kind=str, value_kind=int, version=1):
        return MapState(keyed_state.register_map(_descriptor(name, version)), key_kind, value_kind)


class Context:
    """What `process` gets: output and time."""

    def emit(self, payload, key=None, timestamp=None):
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        if isinstance(key, str):
            key = key.encode("utf-8")
        collector.emit(types.Element(payload=payload, key=key, timestamp=timestamp))

    def watermark(self):
        return context.current_watermark()

    def register_event_time_timer(self, time):
        """A timer for the current key, firing when the watermark reaches `time`."""
        timers.register_event_time_timer(time)

    def register_processing_time_timer(self, time):
        timers.register_processing_time_timer(time)

    def delete_event_time_timer(self, time):
        timers.delete_event_time_timer(time)

    def delete_processing_time_timer(self, time):
        timers.delete_processing_time_timer(time)

    def processing_time(self):
        return context.current_processing_time()


def export(operator_class):
    """The `Handler` componentize-py exports, driving `operator_class`."""
    ctx = Context()
    state = {}

    def guard(call):
        try:
            return call()
        except Err:
            raise
        except Exception as e:  # a Python error becomes the call's error
            raise Err(f"{type(e).__name__}: {e}")

    class Handler(wit_world.exports.Handler):
        def open(self, info):
            state["op"] = guard(lambda: operator_class.open(OpenContext(info)))

        def process(self, input):
            guard(lambda: state["op"].process(ctx, Element(input.payload, input.key, input.timestamp)))

        def process_batch(self, inputs):
            data, op = inputs.data, state["op"]
            for i, e in enumerate(inputs.elements):
                context.set_current_element(i)
                key = data[e.key_start:e.key_start + e.key_len] if e.has_key else None
                payload = data[e.payload_start:e.payload_start + e.payload_len]
                element = Element(payload, key, e.timestamp)
                guard(lambda: op.process(ctx, element))

        def process_broadcast(self, input):
            op = state["op"]
            if not hasattr(op, "process_broadcast"):
                raise Err("this operator does not take a broadcast input")
            guard(lambda: op.process_broadcast(ctx, Element(input.payload, input.key, input.timestamp)))

        def on_timer(self, fired):
            op = state["op"]
            if hasattr(op, "on_timer"):
                guard(lambda: op.on_timer(ctx, fired))

        def end_of_input(self):
            op = state["op"]
            if hasattr(op, "end_of_input"):
                guard(lambda: op.end_of_input(ctx))

        def migrate_value(self, state_name, from_version, value):
            if not hasattr(operator_class, "migrate_value"):
                raise Err(f"state '{state_name}': no migration from version {from_version} (define migrate_value)")
            return guard(lambda: operator_class.migrate_value(state_name, from_version, value))

    return Handler
