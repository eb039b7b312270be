"""``--watch [SECONDS]``: refresh a view until it is done, it times out, or Ctrl-C.

On a terminal the view is redrawn in place (rich ``Live`` on stdout); on a pipe each
refresh is one line on stdout, so a log or a CI job keeps a plain record. Ctrl-C is the
usual way out: the interrupt handling (:mod:`semvecctl.interrupts`) raises in the sleep
or the read in flight, ``Live`` restores the terminal as its block ends, and the error
boundary exits 130. Commands give a ``sample`` function (one cheap read), a ``line`` and
optionally a ``render`` (a rich renderable) of a sample, and ``done`` for views that end
(an index becoming queryable).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Optional, Sequence, TypeVar

T = TypeVar("T")

#: ``--watch`` without a value refreshes this often (seconds)
DEFAULT_INTERVAL = 2.0
#: options whose value may be left out: the value used then
OPTIONAL_VALUES = {"--watch": repr(DEFAULT_INTERVAL)}


def optional_values(args: Sequence[str]) -> list[str]:
    """``--watch`` given without a number gets the default, so ``--watch`` and
    ``--watch 5`` both parse (the vendored click parser has no optional values)."""
    out: list[str] = []
    items = list(args)
    for i, arg in enumerate(items):
        if arg == "--":
            out.extend(items[i:])
            break
        out.append(arg)
        if arg in OPTIONAL_VALUES:
            following = items[i + 1] if i + 1 < len(items) else None
            if following is None or not _number(following):
                out.append(OPTIONAL_VALUES[arg])
    return out


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass
class Outcome(Generic[T]):
    """How a watch ended: the last sample, whether ``done`` said so, and refreshes made."""

    last: Optional[T]
    done: bool
    timed_out: bool
    refreshes: int


def watch(sample: Callable[[], T], line: Callable[[T], str], *, every: float,
          render: Callable[[T], Any] | None = None, done: Callable[[T], bool] | None = None,
          timeout: float | None = None, refreshes: int | None = None,
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> Outcome[T]:
    """Refresh every ``every`` seconds until ``done(sample)``, ``timeout`` seconds or
    ``refreshes`` refreshes (None: until interrupted)."""
    from semvecctl.application import current

    out = current().output
    started = clock()
    tty = _tty(sys.stdout)
    count = 0
    last: Optional[T] = None

    def finished(value: T) -> bool:
        return bool(done and done(value))

    def over() -> bool:
        if refreshes is not None and count >= refreshes:
            return True
        return timeout is not None and clock() - started >= timeout

    if tty:
        from rich.live import Live
        from rich.text import Text

        console = out.console(sys.stdout)
        view = (lambda v: render(v)) if render is not None else (lambda v: Text(line(v)))
        with Live(Text("…"), console=console, auto_refresh=False, transient=False) as live:
            while True:
                last = sample()
                count += 1
                live.update(view(last), refresh=True)
                if finished(last):
                    return Outcome(last, True, False, count)
                if over():
                    return Outcome(last, False, timeout is not None, count)
                sleep(_pause(every, timeout, started, clock))
    while True:
        last = sample()
        count += 1
        out.write(line(last))
        if finished(last):
            return Outcome(last, True, False, count)
        if over():
            return Outcome(last, False, timeout is not None, count)
        sleep(_pause(every, timeout, started, clock))


def _tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _pause(every: float, timeout: float | None, started: float, clock: Callable[[], float]) -> float:
    if timeout is None:
        return every
    return max(min(every, timeout - (clock() - started)), 0.0)


def stamp() -> str:
    """The time of a refresh, as a line starts with it (UTC, seconds)."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
