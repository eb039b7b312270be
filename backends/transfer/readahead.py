"""Reading the source one step ahead while the previous step is written.

A full pass alternates between waiting on the source (a batch of rows) and waiting on
the target and the state file (intents, the batch restore, the commit). Reading the
next step on a thread while the current one is written overlaps the two waits. At most
``depth`` steps wait in the queue, so memory stays flat whatever the number of
sessions. Only the source is read on the thread; the state file (SQLite, bound to its
thread) and every target write stay on the caller's thread, in the same order as
without read-ahead, so the crash-safety argument of
:mod:`backends.migrate.state` is unchanged. An export with events reads the next
chunk's events the same way while the current chunk is encoded and written.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator
from typing import Iterable, TypeVar

T = TypeVar("T")

_END = object()


def read_ahead(steps: Iterable[T], depth: int = 1) -> Generator[T, None, None]:
    """``steps``, each produced on a thread while the caller works on the one before.

    An exception raised while reading reaches the caller at the step where it happened;
    a caller that stops early (an exception, or closing this generator) stops the
    reader, which closes ``steps``."""
    ready: queue.Queue[tuple[object, object]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(item: tuple[object, object]) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        source = iter(steps)
        try:
            for step in source:
                if not offer((step, None)):
                    return
            offer((_END, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            offer((_END, exc))
        finally:
            if isinstance(source, Generator):
                source.close()

    reader = threading.Thread(target=produce, name="migrate-read-ahead", daemon=True)
    reader.start()
    try:
        while True:
            step, error = ready.get()
            if step is _END:
                if error is not None:
                    raise error  # type: ignore[misc]
                return
            yield step  # type: ignore[misc]
    finally:
        stop.set()
        reader.join()
