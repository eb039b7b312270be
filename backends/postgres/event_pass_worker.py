"""The child's side of :mod:`backends.postgres.event_pass`: ``python -m
backends.postgres.event_pass_worker`` reads its recipe on stdin, runs the store's events
pass and writes each batch of encoded sessions as a frame on stdout, then None (the end)
or the error."""

from __future__ import annotations

import os
import pickle
import signal
import sys
from typing import Any

from backends.postgres.event_pass import BATCH, write_frame


def run() -> None:
    """The pass, encoded, in batches of frames on stdout; then None, or the error."""
    # the frames go out on a copy of stdout, and stdout itself becomes stderr: a stray
    # print (of a module the recipe imports, of ``encode``) lands there, never in a frame
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    recipe, encode, owner_subject, page = pickle.load(sys.stdin.buffer)
    from backends.postgres.database import Database
    from backends.postgres.events import SqlEventStore
    from backends.postgres.placement import Placement

    databases = [Database(config) for config in recipe.configs]
    try:
        store = SqlEventStore(Placement(databases[recipe.primary],
                                        [databases[i] for i in recipe.shards]))
        batch: list[tuple[str, int, bytes]] = []
        for session_id, events in store.events_by_session(owner_subject=owner_subject,
                                                          page=page):
            batch.append((session_id, len(events), encode(events)))
            if len(batch) == BATCH:
                write_frame(out, ("sessions", batch))
                batch = []
        if batch:
            write_frame(out, ("sessions", batch))
        write_frame(out, None)
        out.flush()
    except BrokenPipeError:
        pass  # the caller stopped reading: nothing to tell
    except BaseException as exc:  # noqa: BLE001 - handed to the caller, which raises it
        _send_error(out, exc)
    finally:
        for db in databases:
            db.close()


def _send_error(out: Any, exc: BaseException) -> None:
    """The error itself where it pickles (our errors do), else one with its words."""
    from backends.errors import BackendError

    try:
        try:
            pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - an error that does not pickle: its words then
            exc = BackendError(f"{type(exc).__name__}: {exc}")
        write_frame(out, ("error", exc))
        out.flush()
    except OSError:
        pass  # the caller is gone


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides when to stop
    run()
