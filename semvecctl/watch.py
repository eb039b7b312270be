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

import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, Optional, Sequence, TypeVar

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


@contextlib.contextmanager
def live(line: Callable[[T], str], render: Callable[[T], Any] | None = None, *,
         stream: Any = None) -> Iterator[Callable[[T], None]]:
    """``show(value)``: redraws ``render(value)`` in place on a terminal (rich ``Live``),
    else writes ``line(value)`` as one line (data on stdout; ``stream=sys.stderr`` for
    progress around a command's own output)."""
    from semvecctl.application import current

    out = current().output
    stream = sys.stdout if stream is None else stream
    if not _tty(stream):
        def plain(value: T) -> None:
            text = line(value)
            if stream is sys.stdout:
                out.write(text)
            else:
                out.info(text)
        yield plain
        return
    from rich.live import Live
    from rich.text import Text

    view = render if render is not None else (lambda v: Text(line(v)))
    with Live(Text("…"), console=out.console(stream), auto_refresh=False) as shown:
        yield lambda value: shown.update(view(value), refresh=True)


def watch(sample: Callable[[], T], line: Callable[[T], str], *, every: float,
          render: Callable[[T], Any] | None = None, done: Callable[[T], bool] | None = None,
          timeout: float | None = None, refreshes: int | None = None, stream: Any = None,
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> Outcome[T]:
    """Refresh every ``every`` seconds until ``done(sample)``, ``timeout`` seconds or
    ``refreshes`` refreshes (None: until interrupted). ``stream``: stdout (the view is
    the output) or stderr (progress before the command's own output)."""
    started = clock()
    count = 0
    with live(line, render, stream=stream) as show:
        while True:
            last = sample()
            count += 1
            show(last)
            if done is not None and done(last):
                return Outcome(last, True, False, count)
            if refreshes is not None and count >= refreshes:
                return Outcome(last, False, False, count)
            if timeout is not None and clock() - started >= timeout:
                return Outcome(last, False, True, count)
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
