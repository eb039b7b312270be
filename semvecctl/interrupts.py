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
from typing import Iterator

HANDLED = (signal.SIGINT, signal.SIGTERM)


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
    raise Interrupted(signum)


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
