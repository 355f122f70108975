"""State registration, the paged handles, timers, time and params, and the
host's refusals raised as Python exceptions with the host's message."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from conftest import Err, Host, batch, info, opened, types

import weir


class Registers:
    """Registers one state of every kind."""

    @staticmethod
    def open(ctx: weir.OpenContext) -> Registers:
        op = Registers()
        op.info = ctx.info
        op.n = ctx.param("n", 0, int)
        op.value = ctx.value_state("v", str, version=3, ttl=weir.Ttl(timedelta(seconds=2.5), renew_on_read=True))
        op.items = ctx.list_state("l", float, ttl=weir.Ttl(1000, return_expired=True))
        op.map = ctx.map_state("m", str, list[int])
        op.sum = ctx.reducing_state("r", int, lambda a, b: a + b)
        op.even = ctx.operator_list_state("even", int)
        op.union = ctx.operator_list_state("union", str, "union")
        op.rules = ctx.broadcast_map_state("rules", str, weir.U64)
        return op

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        pass


def test_registration_records_name_kind_version_encoding_ttl_and_mode(host: Host) -> None:
    opened(Registers, n="7")
    got = [(kind, d.name, d.version, d.encoding, d.ttl and (d.ttl.ttl_ms, d.ttl.update.name, d.ttl.visibility.name), mode and mode.name)
           for kind, d, mode in host.registered]
    assert got == [
        ("value", "v", 3, "postcard", (2500, "ON_READ_AND_WRITE", "NEVER_RETURN_EXPIRED"), None),
        ("list", "l", 1, "postcard", (1000, "ON_CREATE_AND_WRITE", "RETURN_EXPIRED_IF_NOT_CLEANED_UP"), None),
        ("map", "m", 1, "postcard", None, None),
        ("reducing", "r", 1, "postcard", None, None),
        ("operator-list", "even", 1, "postcard", None, "EVEN_SPLIT"),
        ("operator-list", "union", 1, "postcard", None, "UNION"),
        ("broadcast-map", "rules", 1, "postcard", None, None),
    ]


def test_params_and_operator_info_reach_open() -> None:
    handler_ops: list[Registers] = []

    class Keep(Registers):
        @staticmethod
        def open(ctx: weir.OpenContext) -> Registers:
            op = Registers.open(ctx)
            handler_ops.append(op)
            return op

    opened(Keep, n="42", other="x")
    op = handler_ops[0]
    assert op.n == 42
    assert (op.info.uid, op.info.subtask_index, op.info.parallelism, op.info.max_parallelism) == ("op", 0, 1, 128)
    assert op.info.params == {"n": "42", "other": "x"}


def test_a_param_that_does_not_parse_fails_open_naming_it() -> None:
    with pytest.raises(Err, match=r"param 'n': cannot parse 'seven'"):
        opened(Registers, n="seven")


def test_a_bad_kind_or_ttl_fails_open_with_the_reason() -> None:
    class BadKind:
        @staticmethod
        def open(ctx: weir.OpenContext) -> Any:
            return ctx.value_state("v", set[int])

    with pytest.raises(Err, match=r"^set\[int\] has no postcard layout: use int, .* \(at test_state.py:\d+, in open\)$"):
        opened(BadKind)
    with pytest.raises(ValueError, match="a TTL is a positive"):
        weir.Ttl(0)


def test_registering_outside_open_raises_the_hosts_refusal(host: Host) -> None:
    ctx = weir.OpenContext(info())
    with pytest.raises(weir.StateError) as e:
        ctx.value_state("late", int)
    assert e.value.kind == "not-in-open"
    assert str(e.value) == "state 'late': states are registered only in open: 'late' registered outside open"


class Pages:
    @staticmethod
    def open(ctx: weir.OpenContext) -> Pages:
        op = Pages()
        op.items = ctx.list_state("items", int)
        op.map = ctx.map_state("by-name", str, int)
        op.ops = ctx.operator_list_state("ops", str)
        return op

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        pass


def test_long_lists_and_maps_are_read_a_page_at_a_time_in_order(host: Host) -> None:
    op: Pages = Pages.open(_registering())
    host.batch_keys, host.current = [b"k"], 0
    op.items.add_all(range(2500))
    assert op.items.get() == list(range(2500))
    assert [c for c in host.calls if c[0] == "read"] == [("read", "items", s, 1024) for s in (0, 1024, 2048)]
    assert len(op.items) == 2500 and not op.items.is_empty()
    op.items.update([-1, -2])
    assert list(op.items) == [-1, -2]
    op.items.clear()
    assert op.items.is_empty()

    for i in range(2100):
        op.map.put(f"k{i:04}", i)
    # The next page starts after the last key of the previous one.
    assert list(op.map.items()) == [(f"k{i:04}", i) for i in range(2100)]
    cursors = [c[2] for c in host.calls if c[0] == "entries"]
    assert cursors == [None, weir.encode("k1023"), weir.encode("k2047")]
    assert op.map.get("k0005") == 5 and op.map.get("nope") is None
    assert "k0005" in op.map and not op.map.contains("nope")
    op.map.remove("k0005")
    assert op.map.get("k0005") is None
    assert list(op.map.keys())[:2] == ["k0000", "k0001"]
    assert sum(op.map.values()) == sum(range(2100)) - 5
    op.map.clear()
    assert op.map.is_empty()

    # Operator list state has no key: it works without one.
    host.current = None
    op.ops.add("x")
    op.ops.add_all(["y", "z"])
    assert op.ops.get() == ["x", "y", "z"]
    assert host.lists[("ops", None)] == [weir.encode(s) for s in "xyz"]


def _registering() -> weir.OpenContext:
    import conftest

    conftest.HOST.in_open = True
    return weir.OpenContext(info())


class Rules:
    @staticmethod
    def open(ctx: weir.OpenContext) -> Rules:
        op = Rules()
        op.rules = ctx.broadcast_map_state("rules", str, int)
        op.count = ctx.value_state("count", int)
        return op

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        if element.payload == b"write":
            self.rules.put("r", 1)
        elif element.payload == b"catch":
            try:
                self.rules.put("r", 1)
            except weir.StateError as e:
                ctx.emit(f"{e.kind}: {e}")
        ctx.emit(f"rules={dict(self.rules.items())}")

    def process_broadcast(self, ctx: weir.Context, element: weir.Element) -> None:
        self.rules.put(element.payload_str, len(element.payload))


def test_host_refusals_are_python_exceptions_with_the_hosts_message(host: Host) -> None:
    handler = opened(Rules)
    host.broadcast_writable = True
    handler.process_broadcast(types.Element(b"abc", None, None))
    host.broadcast_writable = False
    # Caught by the operator: the kind and the host's message.
    handler.process_batch(batch((b"catch", b"k", None)))
    assert host.emitted[0][0] == b"read-only: state 'rules': read-only here: broadcast state 'rules' outside process-broadcast"
    assert host.emitted[1][0] == b"rules={'abc': 3}"
    # Not caught: the call fails with the same message and the line.
    with pytest.raises(Err) as e:
        handler.process_batch(batch((b"write", b"k", None)))
    assert e.value.value.startswith(
        "state 'rules': read-only here: broadcast state 'rules' outside process-broadcast (at test_state.py:"
    )


def test_a_failing_backend_fails_the_batch_with_the_state_named(host: Host) -> None:
    class Touch:
        @staticmethod
        def open(ctx: weir.OpenContext) -> Any:
            touch = Touch()
            touch.count = ctx.value_state("count", int)  # type: ignore[attr-defined]
            return touch

        def process(self, ctx: weir.Context, element: weir.Element) -> None:
            self.count.set(1)  # type: ignore[attr-defined]

    handler = opened(Touch)
    host.failing = "count"
    with pytest.raises(Err, match=r"^state 'count': state backend failed: disk full writing count"):
        handler.process_batch(batch((b"x", b"k", None), (b"y", b"j", None)))


def test_keyed_state_without_a_key_raises_no_current_key(host: Host) -> None:
    op = Pages.open(_registering())
    host.current = None
    with pytest.raises(weir.StateError, match=r"state 'items': no current key") as e:
        op.items.add(1)
    assert e.value.kind == "no-current-key"


def test_a_stored_value_of_another_kind_fails_naming_the_state(host: Host) -> None:
    op = Rules.open(_registering())
    host.batch_keys, host.current = [b"k"], 0
    host.values[("count", b"k")] = weir.encode("not a number")
    with pytest.raises(weir.CodecError, match=r"state 'count': .*bytes left over after a int"):
        op.count.get()


class Timed:
    @staticmethod
    def open(ctx: weir.OpenContext) -> Timed:
        return Timed()

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        ctx.register_event_time_timer(ctx.watermark() + 10)
        ctx.register_processing_time_timer(ctx.processing_time() + 5)
        ctx.delete_event_time_timer(3)
        ctx.emit(f"key={ctx.current_key()!r}")

    def on_timer(self, ctx: weir.Context, timer: weir.Timer) -> None:
        ctx.emit(f"{timer.key_str} {timer.time} {timer.domain.name} key={ctx.current_key()!r}")

    def end_of_input(self, ctx: weir.Context) -> None:
        ctx.emit("end")


def test_timers_time_and_the_current_key(host: Host) -> None:
    handler = opened(Timed)
    host.watermark = 1000
    handler.process_batch(batch((b"", b"a", None), (b"", b"b", None)))
    assert host.timers == [
        ("register_event_time_timer", b"a", 1010),
        ("register_processing_time_timer", b"a", host.now + 5),
        ("delete_event_time_timer", b"a", 3),
        ("register_event_time_timer", b"b", 1010),
        ("register_processing_time_timer", b"b", host.now + 5),
        ("delete_event_time_timer", b"b", 3),
    ]
    host.current, host.timer_key = None, b"a"
    handler.on_timer(_fired(1010, b"a"))
    host.timer_key = None
    handler.end_of_input()
    assert [p for p, _, _ in host.emitted] == [b"key=b'a'", b"key=b'b'", b"a 1010 EVENT_TIME key=b'a'", b"end"]


def _fired(time: int, key: bytes) -> Any:
    class Fired:
        pass

    f = Fired()
    f.time, f.domain, f.key = time, types.TimeDomain.EVENT_TIME, key  # type: ignore[attr-defined]
    return f


class Migrates:
    @staticmethod
    def open(ctx: weir.OpenContext) -> Migrates:
        return Migrates()

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        pass

    @staticmethod
    def migrate_value(state: str, from_version: int, value: bytes) -> bytes:
        if (state, from_version) == ("count", 1):
            return weir.convert_value(value, weir.U64, tuple[weir.U64, bool], lambda n: (n, True))
        raise ValueError(f"state '{state}': no migration from version {from_version}")


def test_migrate_value_and_the_operator_missing_methods() -> None:
    handler = opened(Migrates)
    assert handler.migrate_value("count", 1, bytes([7])) == bytes([7, 1])
    with pytest.raises(Err, match=r"^ValueError: state 'other': no migration from version 2"):
        handler.migrate_value("other", 2, b"")
    with pytest.raises(Err, match="does not take a broadcast input"):
        handler.process_broadcast(types.Element(b"x", None, None))
    plain = opened(Pages)
    with pytest.raises(Err, match="state 'count': no migration from version 1 .define migrate_value."):
        plain.migrate_value("count", 1, b"\x01")


def test_calls_before_open_fail() -> None:
    handler = weir.export(Pages)()
    with pytest.raises(Err, match="operator called before open"):
        handler.process_batch(batch((b"x", b"k", None)))
