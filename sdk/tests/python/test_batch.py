"""The batch path behind the per-record API: a `process-batch` reaches
`process` element by element; value, reducing and aggregating state take
one `get-batch` and one `set-batch` per state and batch, with the semantics
of per-element calls; output leaves in one `emit-batch`."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Err, Host, batch, opened, types

import weir


class Counter:
    """The word-count counter: `<key> <count>` per record; fails on `bad`,
    clears its key on `reset`."""

    @staticmethod
    def open(ctx: weir.OpenContext) -> Counter:
        return Counter(ctx.value_state("count", weir.U64))

    def __init__(self, count: weir.ValueState[int]) -> None:
        self.count = count

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        if element.payload == b"bad":
            raise ValueError("bad record")
        if element.payload == b"reset":
            self.count.clear()
            ctx.emit(element.key_str + " cleared")
            return
        n = (self.count.get() or 0) + 1
        self.count.set(n)
        ctx.emit(element.key_str + " " + str(n))


def words(*keys: str) -> Any:
    return batch(*[(k.encode(), k.encode(), None) for k in keys])


def test_a_batch_reads_once_writes_back_once_and_equal_keys_share_a_value(host: Host) -> None:
    handler = opened(Counter)
    host.values[("count", b"b")] = weir.encode(5, weir.U64)
    handler.process_batch(words("a", "b", "a", "a"))
    # Later elements of a key see the earlier ones' writes.
    assert [p for p, _, _ in host.emitted] == [b"a 1", b"b 6", b"a 2", b"a 3"]
    # One read, one write (slots in first-write order, each once with its
    # last value), one emit; no call per element.
    assert host.calls == [
        ("get-batch", "count"),
        ("batch-slots",),
        ("set-batch", "count", [0, 1], [bytes([3]), bytes([6])]),
        ("emit-batch", 4),
    ]
    host.calls.clear()
    host.emitted.clear()
    # The next batch reads what this one wrote.
    handler.process_batch(words("b", "c", "a"))
    assert [p for p, _, _ in host.emitted] == [b"b 7", b"c 1", b"a 4"]
    assert host.calls.count(("get-batch", "count")) == 1


def test_a_clear_in_a_batch_is_read_as_absent_and_written_back_as_absent(host: Host) -> None:
    handler = opened(Counter)
    host.values[("count", b"a")] = weir.encode(4, weir.U64)
    handler.process_batch(batch((b"a", b"a", None), (b"reset", b"a", None), (b"a", b"a", None), (b"reset", b"b", None)))
    assert [p for p, _, _ in host.emitted] == [b"a 5", b"a cleared", b"a 1", b"b cleared"]
    assert ("set-batch", "count", [0, 1], [bytes([1]), None]) in host.calls
    assert host.values == {("count", b"a"): bytes([1])}


def test_a_failing_record_drops_the_batchs_writes_and_names_its_position(host: Host) -> None:
    handler = opened(Counter)
    with pytest.raises(Err) as failed:
        handler.process_batch(batch((b"a", b"a", None), (b"b", b"b", None), (b"bad", b"c", None)))
    # The message names the exception and the operator's line.
    assert failed.value.value.startswith("ValueError: bad record (at test_batch.py:")
    assert failed.value.value.endswith(", in process)")
    # The host was told which element failed; nothing was written back;
    # what the records before it emitted is sent.
    assert host.calls[-2:] == [("set-current-element", 2), ("emit-batch", 2)]
    assert not any(c[0] == "set-batch" for c in host.calls)
    assert host.values == {}
    # The next batch reads the host's values again.
    handler.process_batch(words("a"))
    assert host.emitted[-1] == (b"a 1", None, None)


def test_outside_a_batch_each_call_goes_to_the_host(host: Host) -> None:
    handler = opened(Counter)
    host.batch_keys, host.current = [b"k"], 0
    handler.process(types.Element(b"k", b"k", None))
    handler.process(types.Element(b"k", b"k", None))
    assert host.calls == [
        ("get", "count"),
        ("set", "count", bytes([1])),
        ("emit-batch", 1),
        ("get", "count"),
        ("set", "count", bytes([2])),
        ("emit-batch", 1),
    ]


class EveryCall:
    """Per record: a list add, a map put, a timer, a reducing sum and an
    aggregating (count, max); emits the sum."""

    class Max:
        def create(self) -> tuple[int, int]:
            return (0, -(2**63))

        def add(self, value: int, acc: tuple[int, int]) -> tuple[int, int]:
            return (acc[0] + 1, max(acc[1], value))

        def result(self, acc: tuple[int, int]) -> str:
            return f"{acc[0]}/{acc[1]}"

    @staticmethod
    def open(ctx: weir.OpenContext) -> EveryCall:
        op = EveryCall()
        op.seen = ctx.list_state("seen", str)
        op.by_len = ctx.map_state("by-len", int, int)
        op.sum = ctx.reducing_state("sum", int, lambda a, b: a + b)
        op.max = ctx.aggregating_state("max", tuple[int, int], EveryCall.Max())
        return op

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        v = int(element.payload)
        self.seen.add(element.payload_str)
        self.by_len.put(len(element.payload), v)
        ctx.register_event_time_timer(v)
        total = self.sum.add(v)
        self.max.add(v)
        ctx.emit(f"{element.key_str} sum={total} max={self.max.get()}", key=element.key, timestamp=v)


def test_per_key_calls_in_a_batch_move_the_hosts_current_element_only_when_needed(host: Host) -> None:
    handler = opened(EveryCall)
    handler.process_batch(batch((b"5", b"a", 1), (b"-7", b"a", 2), (b"12", b"b", 3)))
    moves = [c for c in host.calls if c[0] == "set-current-element"]
    assert moves == [("set-current-element", 1), ("set-current-element", 2)]
    assert host.lists[("seen", b"a")] == [weir.encode("5"), weir.encode("-7")]
    assert host.maps[("by-len", b"a")] == {weir.encode(1): weir.encode(5), weir.encode(2): weir.encode(-7)}
    assert [(k, t) for _, k, t in host.timers] == [(b"a", 5), (b"a", -7), (b"b", 12)]
    # Reducing and aggregating state: one read and one write each.
    assert [c[0] for c in host.calls if c[1:2] in (("sum",), ("max",))] == ["get-batch", "get-batch", "set-batch", "set-batch"]
    assert host.values[("sum", b"a")] == weir.encode(-2)
    assert host.values[("max", b"a")] == weir.encode((2, 5), tuple[int, int])
    assert host.emitted == [
        (b"a sum=5 max=1/5", b"a", 5),
        (b"a sum=-2 max=2/5", b"a", -7),
        (b"b sum=12 max=1/12", b"b", 12),
    ]


class Emitter:
    """Emits whatever each record's payload says: `s` a str, `b` bytes with
    a key, `t` with a timestamp."""

    @staticmethod
    def open(ctx: weir.OpenContext) -> Emitter:
        return Emitter()

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        for c in element.payload_str:
            if c == "s":
                ctx.emit("text é")
            elif c == "b":
                ctx.emit(bytearray(b"\x00\xff"), key="k")
            elif c == "t":
                ctx.emit(b"", key=b"", timestamp=-5)
            elif c == "x":
                ctx.emit(3)  # type: ignore[arg-type]


def test_output_of_every_shape_leaves_in_one_emit_batch_in_order(host: Host) -> None:
    handler = opened(Emitter)
    handler.process_batch(batch((b"sb", None, None), (b"ts", None, None)))
    assert host.emitted == [("text é".encode(), None, None), (b"\x00\xff", b"k", None), (b"", b"", -5), ("text é".encode(), None, None)]
    assert [c for c in host.calls if c[0] == "emit-batch"] == [("emit-batch", 4)]


def test_output_that_is_not_text_or_bytes_fails_the_call(host: Host) -> None:
    handler = opened(Emitter)
    with pytest.raises(Err, match="emit: a payload must be str or bytes, not int"):
        handler.process_batch(batch((b"x", None, None), (b"s", None, None)))


class Seen:
    """Keeps every element as `process` receives it."""

    elements: list[weir.Element] = []

    @staticmethod
    def open(ctx: weir.OpenContext) -> Seen:
        Seen.elements = []
        return Seen()

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        Seen.elements.append(element)


def test_the_packed_index_tells_an_empty_key_from_none_and_a_zero_or_negative_time_from_none(host: Host) -> None:
    handler = opened(Seen)
    handler.process_batch(
        batch(
            (b"p", b"", -5),
            (b"", None, None),
            (b"q", b"key", 0),
            (b"", b"", None),
            (b"r", None, -(2**63)),
            (b"s", b"k2", 2**63 - 1),
        )
    )
    assert Seen.elements == [
        (b"p", b"", -5),
        (b"", None, None),
        (b"q", b"key", 0),
        (b"", b"", None),
        (b"r", None, -(2**63)),
        (b"s", b"k2", 2**63 - 1),
    ]
    assert all(type(e) is weir.Element and type(e.payload) is bytes for e in Seen.elements)
    assert Seen.elements[0].key_str == "" and Seen.elements[1].key is None


def test_an_index_that_is_not_whole_entries_fails_the_call(host: Host) -> None:
    handler = opened(Seen)
    with pytest.raises(Err, match=r"^element batch: an index of 31 bytes is not whole 32-byte entries$"):
        handler.process_batch(types.ElementBatch(b"", bytes(31)))
    assert Seen.elements == []


class Shapes:
    """Emits one element per line of its payload, `<payload>|<key>|<time>`,
    where a missing part is absent and `-` is the empty key."""

    @staticmethod
    def open(ctx: weir.OpenContext) -> Shapes:
        return Shapes()

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        for line in element.payload_str.split("\n"):
            payload, key, ts = (line.split("|") + ["", ""])[:3]
            ctx.emit(payload, key=None if key == "" else "" if key == "-" else key, timestamp=int(ts) if ts else None)


def test_output_packs_an_empty_key_apart_from_none_and_a_negative_time_apart_from_none(host: Host) -> None:
    handler = opened(Shapes)
    handler.process_batch(batch((b"ab|-|-1\nc\nd|k\ne||0\nf|kk|-9223372036854775808\ng||9223372036854775807", None, None)))
    assert host.emitted == [
        (b"ab", b"", -1),
        (b"c", None, None),
        (b"d", b"k", None),
        (b"e", None, 0),
        (b"f", b"kk", -(2**63)),
        (b"g", None, 2**63 - 1),
    ]
    # The first two entries byte for byte: payload and key in one buffer,
    # flags 3 (key and time) and the time's two's complement; then flags 0
    # and every field but the payload's 0.
    data, index = host.emitted_raw[0]
    assert data.startswith(b"abc")
    assert index[:64] == (
        bytes([0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]) + b"\xff" * 8
        + bytes([2, 0, 0, 0, 1, 0, 0, 0]) + bytes(24)
    )


def test_plain_output_of_mixed_bytes_likes_is_packed_as_their_bytes(host: Host) -> None:
    class Mixed:
        @staticmethod
        def open(ctx: weir.OpenContext) -> Any:
            return Mixed()

        def process(self, ctx: weir.Context, element: weir.Element) -> None:
            if element.payload == b"y":
                # No str, so the buffers are joined as they are.
                ctx.emit(b"b")
                ctx.emit(memoryview(bytes([5, 6, 7, 8])).cast("I"))
                ctx.emit(b"c")
                return
            ctx.emit("é")
            ctx.emit(b"b")
            ctx.emit(bytearray(b"ba"))
            ctx.emit(memoryview(b"mv"))
            # A memoryview of 4-byte items: len() 1, 4 bytes.
            ctx.emit(memoryview(bytes([1, 2, 3, 4])).cast("I"))
            ctx.emit("")

    handler = opened(Mixed)
    handler.process_batch(batch((b"x", None, None)))
    assert host.emitted == [
        ("é".encode(), None, None),
        (b"b", None, None),
        (b"ba", None, None),
        (b"mv", None, None),
        (bytes([1, 2, 3, 4]), None, None),
        (b"", None, None),
    ]
    assert host.emitted_raw[0][0] == "é".encode() + b"bbamv\x01\x02\x03\x04"
    host.emitted.clear()
    handler.process_batch(batch((b"y", None, None)))
    assert host.emitted == [(b"b", None, None), (bytes([5, 6, 7, 8]), None, None), (b"c", None, None)]


def test_a_timestamp_that_is_not_a_64_bit_int_fails_the_call(host: Host) -> None:
    class BadTime:
        @staticmethod
        def open(ctx: weir.OpenContext) -> Any:
            return BadTime()

        def process(self, ctx: weir.Context, element: weir.Element) -> None:
            ctx.emit(b"x", timestamp=eval(element.payload_str))

    handler = opened(BadTime)
    with pytest.raises(Err, match=r"^TypeError: emit: a timestamp must be a 64-bit int, not 1.5$"):
        handler.process_batch(batch((b"1.5", None, None)))
    with pytest.raises(Err, match=r"^TypeError: emit: a timestamp must be a 64-bit int, not 9223372036854775808$"):
        handler.process_batch(batch((b"2**63", None, None)))


class Unit:
    """Value state whose value encodes to no bytes at all: `set` stores it,
    `clear` clears it, and every record emits what `get` read first."""

    @staticmethod
    def open(ctx: weir.OpenContext) -> Unit:
        return Unit(ctx.value_state("unit", tuple[()]))

    def __init__(self, unit: weir.ValueState[tuple[()]]) -> None:
        self.unit = unit

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        ctx.emit(f"{element.key_str}={self.unit.get()!r}")
        if element.payload == b"set":
            self.unit.set(())
        elif element.payload == b"clear":
            self.unit.clear()


def test_a_present_empty_value_is_not_a_cleared_one_both_ways(host: Host) -> None:
    handler = opened(Unit)
    host.values[("unit", b"b")] = b""
    handler.process_batch(batch((b"set", b"a", None), (b"clear", b"b", None), (b"get", b"c", None)))
    assert [p for p, _, _ in host.emitted] == [b"a=None", b"b=()", b"c=None"]
    # Written back: a present with no bytes, b cleared (the fake host checks
    # a cleared entry's start and length are 0).
    assert ("set-batch", "unit", [0, 1], [b"", None]) in host.calls
    assert host.values == {("unit", b"a"): b""}
    host.emitted.clear()
    # Read back: a present and empty, b absent.
    handler.process_batch(batch((b"get", b"a", None), (b"get", b"b", None)))
    assert [p for p, _, _ in host.emitted] == [b"a=()", b"b=None"]


def test_value_batch_entries_land_on_the_slots_they_name_in_any_order(host: Host) -> None:
    handler = opened(Counter)
    host.values[("count", b"a")] = weir.encode(10, weir.U64)
    host.values[("count", b"c")] = weir.encode(30, weir.U64)
    host.value_batch_order = [2, 0, 1]
    handler.process_batch(words("a", "b", "c", "a"))
    assert [p for p, _, _ in host.emitted] == [b"a 11", b"b 1", b"c 31", b"a 12"]


def test_a_value_batch_index_that_is_not_whole_entries_fails_the_call_naming_the_state(host: Host) -> None:
    handler = opened(Counter)
    host.value_batch_truncated = True
    with pytest.raises(Err, match=r"^state 'count': a value batch index of 31 bytes is not whole 16-byte entries"):
        handler.process_batch(words("a", "b"))
    assert host.calls[-1] == ("set-current-element", 0)
