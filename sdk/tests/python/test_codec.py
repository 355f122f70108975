"""The value encoding (weir.codec) against the bytes postcard writes for the
Rust types the mapping names. The same vectors are pinned on the Rust side
(sdk/src/codec.rs, `the_shared_types_encode_as_the_other_sdks_expect` and
`python_kinds_have_the_rust_types_bytes`), so state written by either SDK
is read by the other."""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import pytest

import weir
from weir import CodecError


@dataclass
class Rule:
    small: weir.U64
    large: weir.U64
    window_ms: int


class Point(NamedTuple):
    x: int
    label: str | None


class Color(enum.Enum):
    RED = "r"
    GREEN = "g"
    BLUE = "b"


@dataclass
class Counted:
    """Rust: `struct Counted { count: u64, name: String, ratio: Option<f64> }`."""

    count: weir.U64
    name: str
    ratio: float | None


@dataclass(frozen=True)
class Nested:
    rules: list[Rule]
    by_name: dict[str, tuple[int, float]]
    note: Optional[bytes]


VECTORS: list[tuple[Any, Any, bytes]] = [
    # u64: unsigned LEB128, Rust's `u64`.
    (weir.U64, 0, bytes([0x00])),
    (weir.U64, 127, bytes([0x7F])),
    (weir.U64, 300, bytes([0xAC, 0x02])),
    (weir.U64, 2**64 - 1, bytes([0xFF] * 9 + [0x01])),
    # int: i64, zigzag then LEB128.
    (int, 0, bytes([0x00])),
    (int, -1, bytes([0x01])),
    (int, 1, bytes([0x02])),
    (int, 63, bytes([0x7E])),
    (int, -64, bytes([0x7F])),
    (int, 64, bytes([0x80, 0x01])),
    (int, 60000, bytes([0xC0, 0xA9, 0x07])),
    (int, -(2**63), bytes([0xFF] * 9 + [0x01])),
    (int, 2**63 - 1, bytes([0xFE] + [0xFF] * 8 + [0x01])),
    # Fixed widths: u8 and i8 are one byte, not varints.
    (weir.U8, 200, bytes([0xC8])),
    (weir.I8, -1, bytes([0xFF])),
    (weir.U16, 300, bytes([0xAC, 0x02])),
    (weir.I32, -3, bytes([0x05])),
    (weir.U128, 2**64, bytes([0x80] * 9 + [0x02])),
    # Floats: little-endian IEEE 754.
    (float, 1.5, bytes([0, 0, 0, 0, 0, 0, 0xF8, 0x3F])),
    (weir.F32, 1.5, bytes([0, 0, 0xC0, 0x3F])),
    (bool, True, bytes([1])),
    (str, "hé", bytes([3, ord("h"), 0xC3, 0xA9])),
    (bytes, bytes([9] * 200), bytes([0xC8, 0x01] + [9] * 200)),
    (None, None, b""),
    # Option<T>: 0, or 1 then T.
    (weir.U64 | None, None, bytes([0])),
    (Optional[weir.U64], 5, bytes([1, 5])),
    # Vec<i64>, a tuple, a map (BTreeMap<String, u64>: in key order).
    (list[int], [1, -2], bytes([2, 2, 3])),
    (tuple[bool, bool], (True, False), bytes([1, 0])),
    (tuple[weir.U64, str, weir.U64], (1, "a", 300), bytes([1, 1, ord("a"), 0xAC, 0x02])),
    (tuple[int, ...], (5, 6), bytes([2, 10, 12])),
    (dict[str, weir.U64], {"a": 1, "b": 300}, bytes([2, 1, ord("a"), 1, 1, ord("b"), 0xAC, 0x02])),
    # Structs: the fields in order.
    (Rule, Rule(10, 500, 60000), bytes([0x0A, 0xF4, 0x03, 0xC0, 0xA9, 0x07])),
    (Point, Point(-2, None), bytes([3, 0])),
    # A fieldless enum: the variant's index.
    (Color, Color.BLUE, bytes([2])),
    # The fraud-detection rules' versions: Vec<(i64, Option<Rule>)>.
    (
        list[tuple[int, Rule | None]],
        [(0, Rule(10, 500, 60000)), (200000, None)],
        bytes([2, 0, 1, 0x0A, 0xF4, 0x03, 0xC0, 0xA9, 0x07, 0x80, 0xB5, 0x18, 0]),
    ),
    # The JavaScript SDK's vectors (sdk/src/codec.rs pins both sets): the
    # same Rust types give the same bytes in either language.
    (int, -300, bytes([0xD7, 0x04])),
    (weir.I32, -(2**31), bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])),
    (weir.I8, -2, bytes([0xFE])),
    (weir.F32, -2.0, bytes([0, 0, 0, 0xC0])),
    (list[int], [1, -1], bytes([2, 2, 1])),
    (Counted, Counted(7, "a", None), bytes([7, 1, ord("a"), 0])),
    # Json: a String of compact JSON text, as JSON.stringify writes it.
    (weir.Json, {"a": [1, None, "é"]}, bytes([19]) + '{"a":[1,null,"é"]}'.encode()),
]


@pytest.mark.parametrize("kind,value,encoded", VECTORS)
def test_each_kind_encodes_as_its_rust_type(kind: Any, value: Any, encoded: bytes) -> None:
    assert weir.encode(value, kind) == encoded
    assert weir.decode(encoded, kind) == value


def test_nested_kinds_round_trip() -> None:
    value = Nested([Rule(1, 2, -3), Rule(2**64 - 1, 0, 0)], {"x": (-5, math.pi), "": (0, -0.0)}, None)
    assert weir.decode(weir.encode(value, Nested), Nested) == value
    # A frozen dataclass comes back frozen, as the class it is.
    assert type(weir.decode(weir.encode(value, Nested), Nested)) is Nested


def test_a_kind_defaults_to_the_values_own_type() -> None:
    assert weir.encode(-1) == bytes([1])
    assert weir.encode("a") == bytes([1, ord("a")])
    assert weir.encode(Rule(1, 2, 3)) == bytes([1, 2, 6])


@pytest.mark.parametrize(
    "kind,value,message",
    [
        (weir.U64, -1, "-1 is out of range for u64"),
        (int, 2**63, "out of range for i64"),
        (weir.U8, 256, "256 is out of range for u8"),
        (int, 1.5, "expected an int (i64), got float"),
        (int, True, "expected an int (i64), got bool"),
        (str, b"x", "expected a str, got bytes"),
        (float, "1", "expected a float, got str"),
        (weir.F32, 1e300, "does not fit an f32"),
        (list[int], "abc", "expected a list, got str"),
        (dict[str, int], [("a", 1)], "expected a dict, got list"),
        (tuple[int, int], (1,), "expected a tuple of 2"),
        (Rule, Point(1, None), "expected a Rule, got Point without field 'small'"),
        (Color, "r", "expected a Color"),
        (None, 0, "expected None, got int"),
    ],
)
def test_a_value_that_does_not_fit_its_kind_is_refused(kind: Any, value: Any, message: str) -> None:
    with pytest.raises(CodecError, match=re.escape(message)):
        weir.encode(value, kind)


@pytest.mark.parametrize(
    "kind,data,message",
    [
        (weir.U64, bytes([0x80]), "end before a whole"),
        (weir.U64, bytes([0xFF] * 10 + [0x01]), "overflows 64 bits"),
        (weir.U64, bytes([0x80] * 11 + [0x01]), "longer than 64 bits"),
        (weir.U8 | None, bytes([2]), "an Option's tag is 0 or 1, not 2"),
        (bool, bytes([7]), "a bool is 0 or 1, not 7"),
        (str, bytes([2, 0xFF, 0xFE]), "not UTF-8"),
        (str, bytes([5, ord("a")]), "runs past the end"),
        (list[int], bytes([0xFF, 0xFF, 0xFF, 0x0F]), "a list of .* items runs past the end"),
        (Color, bytes([3]), "Color has no variant 3"),
        (weir.U64, bytes([1, 2]), "1 bytes left over after"),
        (float, bytes([0, 0, 0]), "end before a whole"),
    ],
)
def test_bytes_that_are_not_a_value_of_the_kind_are_refused(kind: Any, data: bytes, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        weir.decode(data, kind)


@pytest.mark.parametrize(
    "kind,message",
    [
        (object, "object has no postcard layout"),
        (int | str, "only `T | None` unions"),
        (list, "list needs an item kind"),
        (set[int], "has no postcard layout"),
    ],
)
def test_kinds_without_a_postcard_layout_are_refused_when_registered(kind: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        weir.codec(kind)


@dataclass
class Tree:
    children: list[Tree]


def test_a_recursive_kind_is_refused() -> None:
    with pytest.raises(CodecError, match="refers to itself"):
        weir.codec(Tree)


def test_convert_value_migrates_one_stored_value() -> None:
    @dataclass
    class Tally:
        count: weir.U64
        migrated: bool

    old = weir.encode(41, weir.U64)
    new = weir.convert_value(old, weir.U64, Tally, lambda n: Tally(n + 1, True))
    assert new == bytes([42, 1])
    assert weir.decode(new, Tally) == Tally(42, True)
