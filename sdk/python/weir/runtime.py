"""The export glue: the ``Handler`` componentize-py exports, driving an
operator class. Operator code does not use this module beyond
:func:`export`.

Every call from the host runs the operator's method, sends the output it
buffered, and turns an exception into the call's error: the host fails the
task with that message, the operator's uid and the record's position.
"""

from __future__ import annotations

import os
import traceback
from typing import Any, Callable, NoReturn, Protocol

from . import _host
from ._host import ELEMENT, ELEMENT_SIZE
from .batch import BATCH
from .context import Context, Element, OpenContext, Timer, flush_output
from .errors import WeirError, state_error

__all__ = ["Operator", "export"]

# Frames in files under here are the SDK's (inside a component, paths are
# whatever componentize-py recorded, so no normalisation).
_SDK_DIR = os.path.dirname(__file__)

class Operator(Protocol):
    """What an operator class provides: a static ``open(ctx)`` that
    registers the operator's state and returns the instance (once per
    subtask, before any other call), and ``process``. The SDK calls these
    too if the class defines them:

    - ``process_broadcast(self, ctx, element)``: one element of the broadcast
      input (the only place broadcast state can be written);
    - ``on_timer(self, ctx, timer)``: a timer fired, its key current;
    - ``end_of_input(self, ctx)``: every input ended; emit final results;
    - ``migrate_value(state, from_version, value) -> bytes`` (static):
      converts a stored value of an older version.
    """

    def process(self, ctx: Context, element: Element) -> None:
        """Processes one element of the main input; its key is current."""
        ...


def _where(e: BaseException) -> str:
    """Where operator code raised `e`: its innermost frame outside the SDK."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(_SDK_DIR)]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {os.path.basename(f.filename)}:{f.lineno}, in {f.name})"


def _message(e: BaseException) -> str:
    """The error the host reports for an exception from operator code."""
    if isinstance(e, _host.Err):
        # A host refusal from a binding called directly, or the glue's own.
        value = e.value
        return value if isinstance(value, str) else state_error("host call", e).message
    if isinstance(e, WeirError):
        return f"{e}{_where(e)}"
    return f"{type(e).__name__}: {e}{_where(e)}"


def _fail(error: BaseException) -> NoReturn:
    """Fails the call with `error`, after sending the output the call made
    before it (the task fails anyway; what fails to send is dropped)."""
    try:
        flush_output()
    except Exception:
        pass
    raise _host.Err(_message(error)) from None


def _finish() -> None:
    """Ends a call that succeeded: sends its output."""
    try:
        flush_output()
    except Exception as e:
        raise _host.Err(_message(e)) from None


def export(operator_class: type) -> type:
    """The ``Handler`` class componentize-py exports, driving
    `operator_class`. The operator's module ends with
    ``Handler = weir.export(MyOperator)``."""
    cls: Any = operator_class
    ctx = Context()
    # componentize-py makes a Handler per exported function, so the operator
    # lives here, not on the Handler.
    slot: list[Any] = []

    def operator() -> Any:
        if not slot:
            raise _host.Err("operator called before open")
        return slot[0]

    def run(call: Callable[[], Any]) -> Any:
        """Runs one call into operator code and sends its output."""
        try:
            result = call()
        except Exception as e:
            _fail(e)
        _finish()
        return result

    def optional(name: str) -> Callable[..., Any] | None:
        method = getattr(operator(), name, None)
        return method if callable(method) else None

    class Handler(_host.exports.Handler):
        def open(self, info: Any) -> None:
            run(lambda: slot.append(cls.open(OpenContext(info))))

        def process(self, input: Any) -> None:
            process = operator().process
            run(lambda: process(ctx, Element(input.payload, input.key, input.timestamp)))

        def process_batch(self, inputs: Any) -> None:
            process = operator().process
            data, index = inputs.data, inputs.index
            if len(index) % ELEMENT_SIZE:
                raise _host.Err(f"element batch: an index of {len(index)} bytes is not whole {ELEMENT_SIZE}-byte entries")
            b = BATCH
            b.begin()
            try:
                # One iteration per record, kept to the bare minimum: the
                # index entries are unpacked in C, the rest is plain bytecode
                # (which beats chains of C iterators here). Flag bit 0 is
                # HAS_KEY, bit 1 HAS_TIMESTAMP (weir._host).
                make, element = _host.new_tuple, Element
                for i, (ps, pl, ks, kl, fl, ts) in enumerate(ELEMENT.iter_unpack(index)):
                    b.index = i
                    process(
                        ctx,
                        make(
                            element,
                            (data[ps : ps + pl], data[ks : ks + kl] if fl & 1 else None, ts if fl & 2 else None),
                        ),
                    )
            except Exception as e:
                b.report_position()
                b.end(False)
                _fail(e)
            run(lambda: b.end(True))

        def process_broadcast(self, input: Any) -> None:
            method = optional("process_broadcast")
            if method is None:
                raise _host.Err("this operator does not take a broadcast input (define process_broadcast)")
            run(lambda: method(ctx, Element(input.payload, input.key, input.timestamp)))

        def on_timer(self, fired: Any) -> None:
            method = optional("on_timer")
            if method is not None:
                run(lambda: method(ctx, Timer(fired.time, fired.domain, bytes(fired.key))))

        def end_of_input(self) -> None:
            method = optional("end_of_input")
            if method is not None:
                run(lambda: method(ctx))

        def migrate_value(self, state: str, from_version: int, value: bytes) -> bytes:
            migrate = getattr(cls, "migrate_value", None)
            if migrate is None:
                raise _host.Err(f"state '{state}': no migration from version {from_version} (define migrate_value)")
            out = run(lambda: migrate(state, from_version, bytes(value)))
            if not isinstance(out, (bytes, bytearray)):
                raise _host.Err(f"state '{state}': migrate_value returned {type(out).__name__}, not bytes")
            return bytes(out)

    return Handler
