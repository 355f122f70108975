"""The SDK's exceptions, and the sentences for the host's error codes.

Any exception an operator raises fails the call; the host reports its
message with the operator's uid and the record being processed. These are
the ones the SDK itself raises, so that operator code can tell them apart.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WeirError", "StateError", "CodecError", "describe"]


class WeirError(Exception):
    """Base of the SDK's exceptions. Its message is what the host reports."""

    @property
    def message(self) -> str:
        """The message, as the host reports it."""
        return str(self)


class StateError(WeirError):
    """The host refused a state or timer call.

    ``kind`` names the host's error code (``"not-in-open"``,
    ``"kind-mismatch"``, ``"invalid-name"``, ``"no-current-key"``,
    ``"read-only"``, ``"out-of-range"`` or ``"backend"``), so a caller can
    handle one; the message is the host's, prefixed with the state's name.
    """

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class CodecError(WeirError):
    """A value does not fit its state's kind, or stored bytes are not a
    value of that kind."""


# The host's error codes: variant case -> (kind, sentence before the payload).
_CODES = {
    "NotInOpen": ("not-in-open", "states are registered only in open"),
    "KindMismatch": ("kind-mismatch", "kind mismatch"),
    "InvalidName": ("invalid-name", "invalid state name"),
    "NoCurrentKey": ("no-current-key", "no current key (keyed state and timers need a keyed input)"),
    "ReadOnly": ("read-only", "read-only here"),
    "OutOfRange": ("out-of-range", "element index past the batch"),
    "Backend": ("backend", "state backend failed"),
}


def describe(code: Any) -> tuple[str, str]:
    """(kind, sentence) for an ``error-code`` value from the host, with the
    host's own message when the code carries one."""
    case = type(code).__name__.rpartition("_")[2]
    kind, sentence = _CODES.get(case, ("unknown", f"host error {code!r}"))
    payload = getattr(code, "value", None)
    return kind, sentence if payload is None else f"{sentence}: {payload}"


def state_error(what: str, err: BaseException) -> WeirError:
    """A host refusal (componentize-py's ``Err`` carrying an ``error-code``)
    as a :class:`StateError` naming `what` (``state 'count'``, ``timer``)."""
    kind, sentence = describe(getattr(err, "value", err))
    return StateError(f"{what}: {sentence}", kind)
