"""The host's imports, as componentize-py generates them for the `operator`
world, and the shapes of the records that cross in bulk.

Only this module names the generated bindings (``wit_world``); the rest of
the SDK reaches the host through it.

componentize-py turns every record the host sends into a Python object by
calling the class the bindings name, one call per record: for the element
references of a ``process-batch`` and the value spans of a ``get-batch``
that is one object per record processed. It looks those classes up once,
after importing the operator's module, so replacing them here (the operator
imports ``weir`` first) makes each record a plain tuple instead of a
dataclass, which costs a fraction (a value span becomes a ``slice``, whose
constructor is not Python code at all). Records going the other way are read by
attribute, so the SDK sends tuples with named fields (:class:`Ref`,
:class:`Span`) built without running Python code per record.
"""

from __future__ import annotations

from typing import NamedTuple

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
    "Ref",
    "Span",
    "new_tuple",
]


class Ref(NamedTuple):
    """An ``element-ref``: where one output element lies in the batch's buffer."""

    payload_start: int
    payload_len: int
    key_start: int
    key_len: int
    has_key: bool
    timestamp: int | None


class Span(NamedTuple):
    """A ``value-span``: where one value lies in a ``set-batch`` buffer."""

    start: int
    len: int
    present: bool


# `new_tuple(Ref, (a, b, ...))` makes a Ref without a Python-level __new__.
new_tuple = tuple.__new__


def _element_ref(
    payload_start: int, payload_len: int, key_start: int, key_len: int, has_key: bool, timestamp: int | None
) -> tuple[int, int, int, int, bool, int | None]:
    return (payload_start, payload_len, key_start, key_len, has_key, timestamp)


# Records the host sends, made as tuples (see the module's docstring). The
# SDK also accepts the generated dataclasses, should a componentize-py look
# the classes up before the operator's module is imported.
types.ElementRef = _element_ref  # type: ignore[misc,assignment]
# A value span becomes a slice(start, len, present): made without running
# Python code at all.
types.ValueSpan = slice  # type: ignore[misc,assignment]
