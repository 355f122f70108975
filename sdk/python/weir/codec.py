"""Postcard, the value encoding the Rust SDK uses, driven by Python types.

A state's *kind* is a Python type (or type expression) that says how its
values are encoded, so that state written by an operator in one language is
read by an operator in another. The mapping to Rust types:

=====================================  ===============================
kind                                   Rust type (postcard bytes)
=====================================  ===============================
``int``                                ``i64`` (zigzag varint)
``U8``/``U16``/``U32``/``U64``/``U128``    ``u8`` (one byte), ``u16``..``u128`` (varint)
``I8``/``I16``/``I32``/``I64``/``I128``    ``i8`` (one byte), ``i16``..``i128`` (zigzag varint)
``float`` (or ``F64``), ``F32``        ``f64``, ``f32`` (little-endian)
``bool``                               ``bool`` (one byte)
``str``                                ``String`` (varint length, UTF-8)
``bytes``                              ``Vec<u8>`` (varint length, bytes)
``None``                               ``()`` (nothing)
``T | None``, ``Optional[T]``          ``Option<T>`` (0, or 1 then T)
``list[T]``                            ``Vec<T>`` (varint length, items)
``tuple[A, B]``                        ``(A, B)`` (the items in order)
``tuple[T, ...]``                      ``Vec<T>``
``dict[K, V]``                         ``BTreeMap<K, V>`` / ``HashMap`` (varint length, pairs)
a ``@dataclass`` or ``NamedTuple``     a struct (the fields in order)
an ``enum.Enum``                       a fieldless enum (varint variant index,
                                       members in definition order)
``Json``                               ``String`` holding compact JSON text
                                       (the JavaScript SDK's ``json`` type)
=====================================  ===============================

``U64`` and the other markers are ``typing.Annotated`` aliases of ``int`` or
``float``: type checkers see ``int``, the codec sees the width. A value that
does not fit its kind is refused with :class:`~weir.errors.CodecError`.

This module does not import the host bindings: it runs anywhere.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import struct
import sys
import types
import typing
from typing import Annotated, Any, Callable, Generic, TypeVar, cast

from .errors import CodecError

__all__ = [
    "Codec",
    "codec",
    "encode",
    "decode",
    "convert_value",
    "U8",
    "U16",
    "U32",
    "U64",
    "U128",
    "I8",
    "I16",
    "I32",
    "I64",
    "I128",
    "F32",
    "F64",
    "Json",
]

T = TypeVar("T")
U = TypeVar("U")


class _Width:
    """The marker inside ``Annotated[int, ...]`` naming a fixed Rust integer
    or float type."""

    __slots__ = ("name", "signed", "bits")

    def __init__(self, name: str, signed: bool, bits: int) -> None:
        self.name, self.signed, self.bits = name, signed, bits

    def __repr__(self) -> str:
        return self.name


U8 = Annotated[int, _Width("u8", False, 8)]
U16 = Annotated[int, _Width("u16", False, 16)]
U32 = Annotated[int, _Width("u32", False, 32)]
U64 = Annotated[int, _Width("u64", False, 64)]
U128 = Annotated[int, _Width("u128", False, 128)]
I8 = Annotated[int, _Width("i8", True, 8)]
I16 = Annotated[int, _Width("i16", True, 16)]
I32 = Annotated[int, _Width("i32", True, 32)]
I64 = Annotated[int, _Width("i64", True, 64)]
I128 = Annotated[int, _Width("i128", True, 128)]
F32 = Annotated[float, _Width("f32", True, 32)]
F64 = Annotated[float, _Width("f64", True, 64)]


class _JsonText:
    """The marker inside ``Annotated[Any, ...]`` for a value stored as JSON text."""

    def __repr__(self) -> str:
        return "json"


Json = Annotated[Any, _JsonText()]
"""Any JSON-like value (None, bool, int, float, str, lists, dicts with str
keys) stored as a ``String`` of compact JSON text: the JavaScript SDK's
``weir.types.json``, for values whose shape is not fixed. Typed kinds
(``dict[str, int]``, a dataclass) are smaller and checked; prefer them."""

# One part of a codec: writes a value at the end of a buffer, or reads one
# at an offset and returns it with the offset after it.
_Put = Callable[[bytearray, Any], None]
_Get = Callable[[bytes, int], "tuple[Any, int]"]

_SMALL = [bytes([i]) for i in range(128)]


def _put_uvarint(buf: bytearray, n: int) -> None:
    while n >= 0x80:
        buf.append((n & 0x7F) | 0x80)
        n >>= 7
    buf.append(n)


def _get_uvarint(data: bytes, at: int, limit: int = 64) -> tuple[int, int]:
    b = data[at]
    if b < 0x80:
        return b, at + 1
    n, shift = b & 0x7F, 7
    while True:
        at += 1
        b = data[at]
        n |= (b & 0x7F) << shift
        if b < 0x80:
            if n >> limit:
                raise CodecError(f"varint overflows {limit} bits")
            return n, at + 1
        shift += 7
        if shift >= limit + 7:
            raise CodecError(f"varint longer than {limit} bits")


def _int_parts(width: _Width | None) -> tuple[_Put, _Get]:
    """An integer of `width` (none: ``i64``)."""
    signed, bits, name = (True, 64, "i64") if width is None else (width.signed, width.bits, width.name)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)

    def check(v: Any) -> int:
        if type(v) is not int and (not isinstance(v, int) or isinstance(v, bool)):
            raise CodecError(f"expected an int ({name}), got {type(v).__name__}")
        if not lo <= v <= hi:
            raise CodecError(f"{v} is out of range for {name}")
        return int(v)

    if bits == 8:
        fmt = struct.Struct("<b" if signed else "<B")

        def put8(buf: bytearray, v: Any) -> None:
            buf += fmt.pack(check(v))

        def get8(data: bytes, at: int) -> tuple[int, int]:
            return fmt.unpack_from(data, at)[0], at + 1

        return put8, get8
    if not signed:

        def put_u(buf: bytearray, v: Any) -> None:
            _put_uvarint(buf, check(v))

        def get_u(data: bytes, at: int) -> tuple[int, int]:
            return _get_uvarint(data, at, bits)

        return put_u, get_u

    def put_zigzag(buf: bytearray, v: Any) -> None:
        n = check(v)
        _put_uvarint(buf, n << 1 if n >= 0 else ((-n) << 1) - 1)

    def get_zigzag(data: bytes, at: int) -> tuple[int, int]:
        z, at = _get_uvarint(data, at, bits)
        return (z >> 1) ^ -(z & 1), at

    return put_zigzag, get_zigzag


def _float_parts(bits: int) -> tuple[_Put, _Get]:
    fmt = struct.Struct("<d" if bits == 64 else "<f")
    size = fmt.size

    def put(buf: bytearray, v: Any) -> None:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise CodecError(f"expected a float, got {type(v).__name__}")
        try:
            buf += fmt.pack(v)
        except (OverflowError, struct.error) as e:
            raise CodecError(f"{v} does not fit an f{bits}: {e}") from None

    def get(data: bytes, at: int) -> tuple[float, int]:
        return fmt.unpack_from(data, at)[0], at + size

    return put, get


def _put_bool(buf: bytearray, v: Any) -> None:
    if type(v) is not bool:
        raise CodecError(f"expected a bool, got {type(v).__name__}")
    buf.append(1 if v else 0)


def _get_bool(data: bytes, at: int) -> tuple[bool, int]:
    b = data[at]
    if b > 1:
        raise CodecError(f"a bool is 0 or 1, not {b}")
    return b == 1, at + 1


def _put_str(buf: bytearray, v: Any) -> None:
    if type(v) is not str:
        raise CodecError(f"expected a str, got {type(v).__name__}")
    raw = v.encode("utf-8")
    _put_uvarint(buf, len(raw))
    buf += raw


def _get_str(data: bytes, at: int) -> tuple[str, int]:
    n, at = _get_uvarint(data, at)
    end = at + n
    if end > len(data):
        raise CodecError("a string runs past the end of the value")
    try:
        return bytes(data[at:end]).decode("utf-8"), end
    except UnicodeDecodeError as e:
        raise CodecError(f"a string is not UTF-8: {e}") from None


def _put_bytes(buf: bytearray, v: Any) -> None:
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise CodecError(f"expected bytes, got {type(v).__name__}")
    _put_uvarint(buf, len(v))
    buf += v


def _get_bytes(data: bytes, at: int) -> tuple[bytes, int]:
    n, at = _get_uvarint(data, at)
    end = at + n
    if end > len(data):
        raise CodecError("bytes run past the end of the value")
    return bytes(data[at:end]), end


def _put_unit(buf: bytearray, v: Any) -> None:
    if v is not None:
        raise CodecError(f"expected None, got {type(v).__name__}")


def _get_unit(data: bytes, at: int) -> tuple[None, int]:
    return None, at


def _put_json(buf: bytearray, v: Any) -> None:
    try:
        text = json.dumps(v, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise CodecError(f"not a JSON value: {e}") from None
    _put_str(buf, text)


def _get_json(data: bytes, at: int) -> tuple[Any, int]:
    text, at = _get_str(data, at)
    try:
        return json.loads(text), at
    except ValueError as e:
        raise CodecError(f"stored text is not JSON: {e}") from None


def _option_parts(inner: tuple[_Put, _Get]) -> tuple[_Put, _Get]:
    put_inner, get_inner = inner

    def put(buf: bytearray, v: Any) -> None:
        if v is None:
            buf.append(0)
        else:
            buf.append(1)
            put_inner(buf, v)

    def get(data: bytes, at: int) -> tuple[Any, int]:
        tag = data[at]
        if tag == 0:
            return None, at + 1
        if tag != 1:
            raise CodecError(f"an Option's tag is 0 or 1, not {tag}")
        return get_inner(data, at + 1)

    return put, get


def _seq_parts(inner: tuple[_Put, _Get], make: Callable[[list[Any]], Any]) -> tuple[_Put, _Get]:
    put_item, get_item = inner
    # Items take a byte at least, so a length past the bytes left is a bad
    # value, not a reason to loop; unless items take no bytes (`()`).
    try:
        get_item(b"", 0)
        zero_sized = True
    except Exception:
        zero_sized = False

    def put(buf: bytearray, v: Any) -> None:
        if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__"):
            raise CodecError(f"expected a list, got {type(v).__name__}")
        _put_uvarint(buf, len(v))
        for item in v:
            put_item(buf, item)

    def get(data: bytes, at: int) -> tuple[Any, int]:
        n, at = _get_uvarint(data, at)
        if n > len(data) - at and not zero_sized:
            raise CodecError(f"a list of {n} items runs past the end of the value")
        items = []
        for _ in range(n):
            item, at = get_item(data, at)
            items.append(item)
        return make(items), at

    return put, get


def _map_parts(key: tuple[_Put, _Get], value: tuple[_Put, _Get]) -> tuple[_Put, _Get]:
    put_k, get_k = key
    put_v, get_v = value

    def put(buf: bytearray, v: Any) -> None:
        if not isinstance(v, dict):
            raise CodecError(f"expected a dict, got {type(v).__name__}")
        _put_uvarint(buf, len(v))
        for k, item in v.items():
            put_k(buf, k)
            put_v(buf, item)

    def get(data: bytes, at: int) -> tuple[dict[Any, Any], int]:
        n, at = _get_uvarint(data, at)
        out: dict[Any, Any] = {}
        for _ in range(n):
            k, at = get_k(data, at)
            out[k], at = get_v(data, at)
        return out, at

    return put, get


def _record_parts(
    fields: list[tuple[str, tuple[_Put, _Get]]], make: Callable[..., Any], what: str, positional: bool
) -> tuple[_Put, _Get]:
    names = [n for n, _ in fields]
    puts = [p for _, (p, _g) in fields]
    gets = [g for _, (_p, g) in fields]

    def put(buf: bytearray, v: Any) -> None:
        if positional:
            if not isinstance(v, tuple) or len(v) != len(puts):
                raise CodecError(f"expected {what}, got {type(v).__name__} {v!r}")
            for p, item in zip(puts, v):
                p(buf, item)
            return
        for name, p in zip(names, puts):
            try:
                item = getattr(v, name)
            except AttributeError:
                raise CodecError(f"expected {what}, got {type(v).__name__} without field '{name}'") from None
            p(buf, item)

    def get(data: bytes, at: int) -> tuple[Any, int]:
        items = []
        for g in gets:
            item, at = g(data, at)
            items.append(item)
        return make(*items), at

    return put, get


def _enum_parts(cls: type[enum.Enum]) -> tuple[_Put, _Get]:
    members = list(cls)
    index = {m: i for i, m in enumerate(members)}

    def put(buf: bytearray, v: Any) -> None:
        try:
            _put_uvarint(buf, index[v])
        except (KeyError, TypeError):
            raise CodecError(f"expected a {cls.__name__}, got {v!r}") from None

    def get(data: bytes, at: int) -> tuple[enum.Enum, int]:
        i, at = _get_uvarint(data, at, 32)
        if i >= len(members):
            raise CodecError(f"{cls.__name__} has no variant {i}")
        return members[i], at

    return put, get


def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules.get(cls.__module__)
    return typing.get_type_hints(cls, globalns=vars(module) if module else None, include_extras=True)


def _parts(kind: Any, seen: tuple[Any, ...] = ()) -> tuple[_Put, _Get]:
    """The put and get functions of `kind`."""
    if kind in seen:
        raise CodecError(f"{_name(kind)} refers to itself: recursive kinds have no postcard layout here")
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin is Annotated:
        if any(isinstance(a, _JsonText) for a in args[1:]):
            return _put_json, _get_json
        width = next((a for a in args[1:] if isinstance(a, _Width)), None)
        if width is None:
            return _parts(args[0], seen)
        if args[0] is float:
            return _float_parts(width.bits)
        return _int_parts(width)
    if kind is int:
        return _int_parts(None)
    if kind is float:
        return _float_parts(64)
    if kind is bool:
        return _put_bool, _get_bool
    if kind is str:
        return _put_str, _get_str
    if kind is bytes:
        return _put_bytes, _get_bytes
    if kind is None or kind is type(None):
        return _put_unit, _get_unit
    if origin is typing.Union or origin is types.UnionType:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            return _option_parts(_parts(rest[0], seen))
        raise CodecError(f"{_name(kind)}: only `T | None` unions have a postcard layout")
    if origin is list or kind is list:
        if not args:
            raise CodecError("list needs an item kind: list[int], list[str], ...")
        return _seq_parts(_parts(args[0], seen), list)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _seq_parts(_parts(args[0], seen), tuple)
        if args == ((),):
            args = ()
        fields = [(str(i), _parts(a, seen)) for i, a in enumerate(args)]
        return _record_parts(fields, lambda *items: tuple(items), f"a tuple of {len(args)}", True)
    if origin is dict or kind is dict:
        if len(args) != 2:
            raise CodecError("dict needs key and value kinds: dict[str, int], ...")
        return _map_parts(_parts(args[0], seen), _parts(args[1], seen))
    if isinstance(kind, type):
        inner = (*seen, kind)
        if dataclasses.is_dataclass(kind):
            hints = _hints(kind)
            fields = [(f.name, _parts(hints[f.name], inner)) for f in dataclasses.fields(kind)]
            return _record_parts(fields, kind, f"a {kind.__name__}", False)
        if issubclass(kind, tuple) and hasattr(kind, "_fields"):
            hints = _hints(kind)
            fields = [(n, _parts(hints[n], inner)) for n in kind._fields]
            return _record_parts(fields, kind, f"a {kind.__name__}", False)
        if issubclass(kind, enum.Enum):
            return _enum_parts(kind)
    raise CodecError(
        f"{_name(kind)} has no postcard layout: use int, float, bool, str, bytes, None, "
        "T | None, list, tuple, dict, a dataclass, a NamedTuple, an Enum, or a width such as weir.U64"
    )


def _name(kind: Any) -> str:
    return kind.__name__ if isinstance(kind, type) else repr(kind)


class Codec(Generic[T]):
    """Encodes and decodes values of one kind. Made once per kind by
    :func:`codec`; every state handle holds one."""

    __slots__ = ("kind", "_put", "_get", "encode", "decode")

    encode: Callable[[T], bytes]
    """The postcard bytes of a value."""
    decode: Callable[[bytes], T]
    """The value of postcard bytes; all of them must be used."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind
        self._put, self._get = _parts(kind)
        self.encode, self.decode = self._whole_value_functions()

    def _whole_value_functions(self) -> tuple[Callable[[T], bytes], Callable[[bytes], T]]:
        put, get = self._put, self._get

        def encode(value: T) -> bytes:
            buf = bytearray()
            put(buf, value)
            return bytes(buf)

        def decode(data: bytes) -> T:
            try:
                value, end = get(data, 0)
            except (IndexError, struct.error):
                raise CodecError(f"{len(data)} bytes end before a whole {_name(self.kind)}") from None
            if end != len(data):
                raise CodecError(f"{len(data) - end} bytes left over after a {_name(self.kind)}")
            return cast(T, value)

        # The common kinds get shortcuts: a counter's value is one byte
        # most of the time, and these run once per record.
        if self.kind is int:

            def encode_i64(value: Any) -> bytes:
                if type(value) is int and 0 <= value < 64:
                    return _SMALL[value << 1]
                return encode(value)

            def decode_i64(data: bytes) -> Any:
                if len(data) == 1 and data[0] < 0x80:
                    z = data[0]
                    return (z >> 1) ^ -(z & 1)
                return decode(data)

            return encode_i64, decode_i64
        if self.kind is U64 or self.kind is U32:

            def encode_u(value: Any) -> bytes:
                if type(value) is int and 0 <= value < 128:
                    return _SMALL[value]
                return encode(value)

            def decode_u(data: bytes) -> Any:
                if len(data) == 1 and data[0] < 0x80:
                    return data[0]
                return decode(data)

            return encode_u, decode_u
        return encode, decode

    def encode_into(self, buf: bytearray, value: T) -> None:
        """Appends the postcard bytes of `value` to `buf`."""
        self._put(buf, value)

    def __repr__(self) -> str:
        return f"Codec({_name(self.kind)})"


_CODECS: dict[Any, Codec[Any]] = {}


def codec(kind: type[T] | Any) -> Codec[T]:
    """The codec of `kind` (made once, then shared)."""
    try:
        return _CODECS[kind]
    except KeyError:
        pass
    except TypeError:  # an unhashable type expression
        return Codec(kind)
    made: Codec[T] = Codec(kind)
    _CODECS[kind] = made
    return made


_OWN_TYPE: Any = object()


def encode(value: T, kind: type[T] | Any = _OWN_TYPE) -> bytes:
    """The postcard bytes of `value` as `kind` (by default the kind of the
    value's own type: ``int`` is ``i64``, a ``str`` a ``String``)."""
    return codec(type(value) if kind is _OWN_TYPE else kind).encode(value)


def decode(data: bytes, kind: type[T] | Any) -> T:
    """The value of kind `kind` that postcard bytes `data` hold."""
    made: Codec[T] = codec(kind)
    return made.decode(data)


def convert_value(value: bytes, old: type[T] | Any, new: type[U] | Any, convert: Callable[[T], U]) -> bytes:
    """One stored value converted from kind `old` to kind `new`: the body of
    an operator's ``migrate_value``::

        @staticmethod
        def migrate_value(state, from_version, value):
            if (state, from_version) == ("count", 1):
                return weir.convert_value(value, weir.U64, Tally, lambda n: Tally(n, True))
            raise ValueError(f"state '{state}': no migration from version {from_version}")
    """
    return codec(new).encode(convert(codec(old).decode(value)))
