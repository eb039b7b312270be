"""Writing one batch on a thread while the caller announces the next.

A batch's target write (a binary COPY on PostgreSQL) mostly waits on the server; the
caller's own work for the next batch (reading the state file, announcing the intents,
deciding each session) mostly runs Python. Running the write on a thread overlaps the
two. The order the crash-safety argument of :mod:`.state` needs is kept: a batch is
written only after its intents were committed (the caller announces before it
:meth:`WriteBehind.push`-es), and it is recorded as copied (``done``, on the caller's
thread: the state file is bound to it) only after its write returned, before the next
write starts. At most one write runs at a time, so two batches never race for a row;
a caller about to read what a running write touches calls :meth:`WriteBehind.settle`
first.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Collection, Generic, TypeVar

T = TypeVar("T")


class WriteBehind(Generic[T]):
    """At most one write running; its ``done`` runs on the caller's thread."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._running: tuple[Future[T], frozenset[str], Callable[[T], None]] | None = None

    def __enter__(self) -> "WriteBehind[T]":
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        try:
            if kind is None:
                self.settle()  # the last batch's write and record; its error is raised
            elif self._running is not None:  # failing already: let the write end, unrecorded
                future = self._running[0]    # (its intents stay: a rerun settles them)
                self._running = None
                future.exception()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def touches(self, ids: Collection[str]) -> bool:
        """Whether the running write (if any) writes one of ``ids``."""
        return self._running is not None and not self._running[1].isdisjoint(ids)

    def push(self, ids: Collection[str], write: Callable[[], T], done: Callable[[T], None]) -> None:
        """Settle the running write, then start ``write`` (the sessions ``ids``); its
        result goes to ``done`` at the next :meth:`push` or :meth:`settle`."""
        self.settle()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="migrate-write")
        self._running = (self._pool.submit(write), frozenset(ids), done)

    def settle(self) -> None:
        """Wait for the running write and record it (``done``); its error is raised here."""
        if self._running is None:
            return
        future, _, done = self._running
        self._running = None
        done(future.result())
