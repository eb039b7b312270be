"""The sorted events pass (:meth:`SqlEventStore.events_by_session`) run in a process of
its own, for an export of a large store.

Reading and decoding hundreds of thousands of events, and encoding each session's events
for the archive, is CPU work the export's own process would do under one interpreter
lock beside the listing, the blob reads and the writing. In a child interpreter the pass
runs on another core: the child rebuilds the store's databases from their settings (sent
on its stdin, never on a command line: a DSN may carry a password), reads the pass, hands
each session's events to ``encode`` (a module-level function, sent by reference: this
module imports no archive code) and writes ``(session id, count, encoded)`` back in
batches of pickled frames on its stdout, whose pipe buffer bounds what waits, so memory
stays flat. A failure in the child (a damaged event, a lost server) reaches the caller
as the same error. The child runs in a session of its own (a terminal's Ctrl-C reaches
the caller, which decides) and is stopped and reaped whenever the caller stops reading;
a caller killed outright leaves it to fail on its next write to the closed pipe.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, Callable, Iterator, NamedTuple, Sequence

from backends.contract import UNSCOPED, OwnerFilter

#: sessions per message from the child
BATCH = 256
#: seconds the child may take to stop once told to
_STOP_S = 5.0


class PassRecipe(NamedTuple):
    """How another process rebuilds a store's databases for reading its events: each
    one's settings once, which of them is the primary and which one each shard is (the
    events table is the engine's in every layout)."""

    configs: tuple[Any, ...]
    primary: int
    shards: tuple[int, ...]


def recipe_of(placement: Any) -> PassRecipe:
    """The recipe of ``placement`` (a shard that is the primary stays the same one)."""
    databases = placement.databases()
    index = {id(db): i for i, db in enumerate(databases)}
    return PassRecipe(tuple(db.config for db in databases), index[id(placement.primary)],
                      tuple(index[id(db)] for db in placement.shards))


def encoded_by_session(placement: Any, encode: Callable[[Sequence[Any]], bytes], *,
                       owner_subject: OwnerFilter = UNSCOPED,
                       page: int = 2000) -> Iterator[tuple[str, int, bytes]]:
    """``(session id, number of events, encode(events))`` of every session with events,
    in :meth:`~backends.postgres.events.SqlEventStore.events_by_session` order, from a
    child interpreter (``python -m backends.postgres.event_pass_worker``: it imports nothing of
    the caller's program, so a script without a main guard is safe, and it runs in a
    session of its own, so the terminal's Ctrl-C reaches the caller alone)."""
    import os
    import subprocess
    import sys
    import tempfile

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    with tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen([sys.executable, "-m", "backends.postgres.event_pass_worker"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                 env=env, start_new_session=True)
        try:
            assert child.stdin is not None and child.stdout is not None
            pickle.dump((recipe_of(placement), encode, owner_subject, page), child.stdin)
            child.stdin.close()
            while True:
                message = _read_frame(child.stdout)
                if message is _EOF:
                    raise _died(child, stderr)
                if message is None:
                    return
                kind, payload = message
                if kind == "error":
                    raise payload
                yield from payload
        finally:
            _stop(child)


_EOF = object()
_LENGTH = struct.Struct("<Q")


def _read_frame(stream: Any) -> Any:
    """One pickled message (length first), or _EOF when the child's output ended."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return _EOF
    (size,) = _LENGTH.unpack(head)
    body = stream.read(size)
    return pickle.loads(body) if len(body) == size else _EOF


def write_frame(stream: Any, message: Any) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(body)) + body)


def _died(child: Any, stderr: Any) -> Exception:
    """The error for a child that stopped without a word: its exit code, its last line."""
    from backends.errors import BackendError

    try:
        child.wait(_STOP_S)
    except Exception:  # noqa: BLE001 - stopped below
        pass
    stderr.seek(0)
    lines = [ln for ln in stderr.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    said = f": {lines[-1].strip()}" if lines else ""
    return BackendError(f"the process reading the events stopped before the end (exit code "
                        f"{child.returncode}){said}; nothing was exported")


def _stop(child: Any) -> None:
    """Stop and reap the child (nothing more to read: it is told by its closed pipe, then
    by SIGTERM, then SIGKILL)."""
    import subprocess

    for stream in (child.stdout, child.stdin):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    for stop in (None, child.terminate, child.kill):
        if stop is not None:
            stop()
        try:
            child.wait(_STOP_S if stop is not child.kill else None)
            return
        except subprocess.TimeoutExpired:
            continue
