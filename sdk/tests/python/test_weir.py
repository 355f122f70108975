"""Unit tests of the Python SDK (sdk/python/weir.py) on CPython, outside a
component: the host's WIT imports are replaced by fakes that record what the
SDK asks of them. The encoding vectors are the Rust SDK's (sdk/src/codec.rs):
a state written in one language is read in the others.

Run: pytest sdk/tests/python (scripts/test does).
"""

import pathlib
import sys
import types as pytypes

import pytest


class Record:
    """A WIT record: its fields as attributes."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


class Err(Exception):
    """componentize-py's error result."""

    def __init__(self, value):
        super().__init__(value)
        self.value = value


class Host:
    """What the SDK called on the host's imports."""

    def __init__(self):
        self.registered = []
        self.emitted = []
        self.current = []
        self.handles = {}

    def register(self, kind):
        def register(descriptor):
            self.registered.append((kind, descriptor))
            return self.handles[descriptor.name]

        return register


HOST = Host()


def _install_fake_bindings():
    """The modules componentize-py generates for the `operator` world."""
    world = pytypes.ModuleType("wit_world")
    exports = pytypes.ModuleType("wit_world.exports")
    imports = pytypes.ModuleType("wit_world.imports")
    exports.Handler = type("Handler", (), {})
    names = {}
    for name in ["collector", "context", "keyed_state", "timers", "types"]:
        names[name] = pytypes.ModuleType(f"wit_world.imports.{name}")
        setattr(imports, name, names[name])
    names["types"].StateDescriptor = Record
    names["types"].Element = Record
    names["collector"].emit = HOST.emitted.append
    names["context"].set_current_element = HOST.current.append
    names["context"].current_watermark = lambda: 1234
    names["keyed_state"].register_value = HOST.register("value")
    names["keyed_state"].register_list = HOST.register("list")
    names["keyed_state"].register_map = HOST.register("map")
    world.exports, world.imports = exports, imports
    cpt = pytypes.ModuleType("componentize_py_types")
    cpt.Err = Err
    sys.modules.update(
        {
            "wit_world": world,
            "wit_world.exports": exports,
            "wit_world.imports": imports,
            "componentize_py_types": cpt,
            **{f"wit_world.imports.{n}": m for n, m in names.items()},
        }
    )


_install_fake_bindings()
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import weir  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_host():
    # Cleared in place: the fake modules hold these lists' methods.
    for calls in (HOST.registered, HOST.emitted, HOST.current):
        calls.clear()
    HOST.handles = {}
    yield HOST


# The Rust SDK's vectors (sdk/src/codec.rs, the_shared_types_encode_as_the_other_sdks_expect).
VECTORS = [
    (0, bytes([0x00])),
    (127, bytes([0x7F])),
    (300, bytes([0xAC, 0x02])),
    (2**64 - 1, bytes([0xFF] * 9 + [0x01])),
    ("hé", bytes([3, ord("h"), 0xC3, 0xA9])),
    (bytes([9] * 200), bytes([0xC8, 0x01] + [9] * 200)),
    ((True, False), bytes([1, 0])),
    ((1, "a", 300), bytes([1, 1, ord("a"), 0xAC, 0x02])),
]


@pytest.mark.parametrize("value,encoded", VECTORS)
def test_the_shared_types_encode_as_the_rust_sdk_does(value, encoded):
    assert weir.encode(value) == encoded
    kind = tuple(type(v) for v in value) if isinstance(value, tuple) else type(value)
    assert weir.decode(kind, encoded) == value


def test_values_that_have_no_shared_encoding_are_refused():
    with pytest.raises(ValueError, match="non-negative"):
        weir.encode(-1)
    with pytest.raises(TypeError, match="cannot encode float"):
        weir.encode(1.5)
    with pytest.raises(TypeError, match="cannot decode"):
        weir.decode(float, b"\x00")


class FakeList:
    def __init__(self, items):
        self.items, self.reads = items, []

    def read(self, start, count):
        self.reads.append((start, count))
        return self.items[start:start + count]


class FakeMap:
    def __init__(self, entries):
        self.entries_, self.pages = sorted(entries), []

    def entries(self, after, count):
        self.pages.append(after)
        rest = [e for e in self.entries_ if after is None or e[0] > after]
        return rest[:count]


class FakeValue:
    def __init__(self):
        self.value = None

    def get(self):
        return self.value

    def set(self, v):
        self.value = v


def test_state_handles_register_postcard_descriptors_and_page_through_long_states(fresh_host):
    items = [weir.encode(i) for i in range(2500)]
    entries = [(weir.encode(f"k{i:04}"), weir.encode(i)) for i in range(2100)]
    fresh_host.handles = {"count": FakeValue(), "seen": FakeList(items), "by-page": FakeMap(entries)}
    ctx = weir.OpenContext(Record(params=[("n", "3")]))
    assert ctx.param("n") == "3" and ctx.param("missing", 7) == 7
    count = ctx.value_state("count", version=2)
    seen = ctx.list_state("seen")
    by_page = ctx.map_state("by-page")
    assert [(k, d.name, d.version, d.encoding, d.ttl) for k, d in fresh_host.registered] == [
        ("value", "count", 2, "postcard", None),
        ("list", "seen", 1, "postcard", None),
        ("map", "by-page", 1, "postcard", None),
    ]
    assert count.get() is None
    count.set(300)
    assert fresh_host.handles["count"].value == bytes([0xAC, 0x02]) and count.get() == 300
    # 2500 items in pages of 1024: every item once, in order.
    assert seen.get() == list(range(2500))
    assert fresh_host.handles["seen"].reads == [(0, 1024), (1024, 1024), (2048, 1024)]
    # Map pages continue after the last key of the previous page.
    assert list(by_page.items()) == [(f"k{i:04}", i) for i in range(2100)]
    pages = fresh_host.handles["by-page"].pages
    assert pages == [None, entries[1023][0], entries[2047][0]]


class Doubler:
    """Emits `key payload*2`; fails on payload `bad`."""

    @staticmethod
    def open(ctx):
        return Doubler()

    def process(self, ctx, element):
        if element.payload == b"bad":
            raise ValueError("bad record")
        ctx.emit(f"{element.key_str} {element.payload_str * 2}", key=element.key_str, timestamp=element.timestamp)


def test_a_batch_reaches_the_operator_element_by_element(fresh_host):
    handler = weir.export(Doubler)()
    handler.open(Record(params=[]))
    data = b"ab" + b"xyz" + b"q"
    refs = [
        Record(payload_start=2, payload_len=3, key_start=0, key_len=2, has_key=True, timestamp=5),
        Record(payload_start=5, payload_len=1, key_start=0, key_len=0, has_key=False, timestamp=None),
    ]
    handler.process_batch(Record(data=data, elements=refs))
    assert fresh_host.current == [0, 1]
    assert [(e.payload, e.key, e.timestamp) for e in fresh_host.emitted] == [
        (b"ab xyzxyz", b"ab", 5),
        (b" qq", b"", None),
    ]


def test_an_operator_error_fails_the_call_with_its_type_and_message():
    handler = weir.export(Doubler)()
    handler.open(Record(params=[]))
    with pytest.raises(Err) as e:
        handler.process(Record(payload=b"bad", key=None, timestamp=None))
    assert e.value.value == "ValueError: bad record"
    with pytest.raises(Err, match="does not take a broadcast input"):
        handler.process_broadcast(Record(payload=b"x", key=None, timestamp=None))
    with pytest.raises(Err, match="state 'count': no migration from version 1"):
        handler.migrate_value("count", 1, b"\x01")
