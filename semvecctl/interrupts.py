"""SIGINT and SIGTERM as an exception, so every ``finally`` and cleanup block runs.

Python's default SIGTERM kills the process on the spot: no ``finally``, so a half-written
export's ``.partial`` file and a load run's ``semvec-load-*`` rows stayed behind. While a
command runs, both signals raise :class:`Interrupted` in the main thread instead; the
error boundary turns it into exit 130 (SIGINT) or 143 (SIGTERM). A second signal during
cleanup raises again, so an operator can still force the way out; commands that leave
data behind then say what is left and how to remove it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")

HANDLED = (signal.SIGINT, signal.SIGTERM)

#: signals that arrived inside :func:`deferred` blocks, oldest first (main thread only)
_pending: list[int] = []
#: how deep the main thread is in :func:`deferred` blocks
_depth = 0


class Interrupted(BaseException):
    """The command was interrupted by a signal (a BaseException: ``except Exception``
    blocks must not swallow it)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.signal_name}")

    @property
    def exit_code(self) -> int:
        from semvecctl.exit_codes import ExitCode

        return {signal.SIGINT: ExitCode.INTERRUPTED,
                signal.SIGTERM: ExitCode.TERMINATED}.get(self.signum, 128 + self.signum)


def _raise(signum: int, _frame: object) -> None:
    if _depth and not _pending:
        _pending.append(signum)  # taken when the unit of work in flight has finished
        return
    _pending.clear()
    raise Interrupted(signum)  # outside a deferred block, or a second signal: at once


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until the block ends, then raise :class:`Interrupted`.

    For one unit of work and its bookkeeping (a delete and the count that says it
    happened): a signal raised in the middle, while the driver waits for the server's
    reply, would leave the write done on the server and missing from the count, so
    "stopped after N" said one less than was done. A second signal inside the block
    raises at once (an operator can always force the way out; the count may then be
    short by the unit in flight). Outside :func:`signals_raise` it changes nothing."""
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are only ever handled in the main thread
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
    if not _depth and _pending:
        raise Interrupted(_pending.pop(0))


def steps(items: Iterable[T]) -> Iterator[T]:
    """``items`` with signals held (as in :func:`deferred`) while each one is produced and
    while the consumer handles it: for a generator that does one unit of work per item and
    counts it before yielding (``backends.ops.prune.delete_idle``) and a consumer that prints
    its row, a signal is taken between units, so the count kept and the rows shown both
    include the unit that was in flight. A second signal stops at once, as in
    :func:`deferred`."""
    global _depth
    iterator = iter(items)
    if threading.current_thread() is not threading.main_thread():
        yield from iterator
        return
    _depth += 1
    try:
        for item in iterator:
            yield item
            if _depth == 1 and _pending:  # between two units: take the held signal now
                raise Interrupted(_pending.pop(0))
    finally:
        _depth -= 1
    if not _depth and _pending:
        raise Interrupted(_pending.pop(0))


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` (main thread only;
    elsewhere Python cannot install handlers and the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in HANDLED:
        try:
            previous[signum] = signal.signal(signum, _raise)
        except (ValueError, OSError):  # pragma: no cover - embedded interpreters
            pass
    try:
        yield
    finally:
        _pending.clear()
        for signum, handler in previous.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signum, handler)


def interruption_of(exc: BaseException | None) -> Interrupted | None:
    """The :class:`Interrupted` behind ``exc`` (itself, or what click wrapped in Abort)."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, Interrupted):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None
