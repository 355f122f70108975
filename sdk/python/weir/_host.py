"""The host's imports, as componentize-py generates them for the `operator`
world, and the layouts of the batches that cross in bulk.

Only this module names the generated bindings (``wit_world``); the rest of
the SDK reaches the host through it.

Batches cross as two byte strings, a buffer and an index of fixed-size
little-endian entries (WIT 0.2.0, ``element-batch`` and ``value-batch``):
componentize-py lifts and lowers each with one copy, where a list of
records cost a Python object per record. The SDK reads and writes the
entries with the precompiled :class:`struct.Struct` layouts below, whose
loops run in C.
"""

from __future__ import annotations

import struct

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import (
    broadcast_state,
    collector,
    context,
    keyed_state,
    operator_state,
    timers,
    types,
)

__all__ = [
    "Err",
    "exports",
    "broadcast_state",
    "collector",
    "context",
    "keyed_state",
    "operator_state",
    "timers",
    "types",
    "ELEMENT",
    "ELEMENT_SIZE",
    "HAS_KEY",
    "HAS_TIMESTAMP",
    "VALUE",
    "VALUE_SIZE",
    "PRESENT",
    "new_tuple",
]

ELEMENT = struct.Struct("<IIIII4xq")
"""One ``element-batch`` index entry: payload start, payload length, key
start, key length, flags, (4 zero bytes), event time. 32 bytes."""
ELEMENT_SIZE = ELEMENT.size
HAS_KEY = 1
"""Element flag: the element has a key (an empty key is a key)."""
HAS_TIMESTAMP = 2
"""Element flag: the element has an event time."""

VALUE = struct.Struct("<IIII")
"""One ``value-batch`` index entry: key slot, value start, value length,
flags. 16 bytes."""
VALUE_SIZE = VALUE.size
PRESENT = 1
"""Value flag: the slot holds (or is to be set to) a value; clear, it holds
none (or is to be cleared)."""

# `new_tuple(Element, (a, b, c))` makes a NamedTuple without running its
# Python-level __new__.
new_tuple = tuple.__new__
