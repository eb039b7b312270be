"""Test-only adapters for ``sessions export/import/copy`` (loaded with ``--adapter``).

``--adapter`` builds a new adapter per invocation, so state that must outlive one
(a pre-filled memory store, a mongomock database) lives in this module; a test sets it
up and points the CLI here. MongoDB is ``mongomock`` (no real MongoDB on our machines).
"""

from __future__ import annotations

from typing import Any, Iterator

from backends.contract import UNSCOPED, SessionSummary
from backends.memory import MemoryBackendAdapter

#: the shared memory store behind ``memory_shared``
MEMORY: dict[str, MemoryBackendAdapter] = {"current": MemoryBackendAdapter()}
#: (mongomock client, database name) behind ``mongo_shared``
MONGO: dict[str, Any] = {}


class _Unclosing:
    """Delegates to an adapter but ignores close(), so the store outlives the command."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name = inner.name
        self.is_persistent = inner.is_persistent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def close(self) -> None:
        pass


def memory_shared() -> MemoryBackendAdapter:
    """The module's memory store (its close() is a no-op anyway)."""
    return MEMORY["current"]


def mongo_shared() -> Any:
    from backends.mongo import MongoBackendAdapter

    client, database = MONGO["client"], MONGO["database"]
    return MongoBackendAdapter(client=client, database=database, item_sync=True)


class NoRestoreAdapter:
    """A store that cannot restore versions (no restore_session): imports fall back to
    save(expected_version=None), i.e. version 1."""

    name = "norestore"
    is_persistent = False

    def __init__(self, inner: MemoryBackendAdapter) -> None:
        self._inner = inner

    def state_store(self):
        return self._inner.state_store()

    def event_store(self):
        return None

    def retrieval_backend(self):
        return None

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        return self._inner.commit_turn(session_id, blob, expected_version=expected_version,
                                       owner_subject=owner_subject, pending_message=pending_message,
                                       events=events)

    def check_health(self) -> bool:
        return True

    def iter_sessions(self, **kwargs) -> Iterator[SessionSummary]:
        return self._inner.iter_sessions(**kwargs)

    def describe_session(self, session_id, **kwargs):
        return self._inner.describe_session(session_id, **kwargs)

    def close(self) -> None:
        pass


def norestore_shared() -> NoRestoreAdapter:
    return NoRestoreAdapter(MEMORY["current"])


class Interrupting(MemoryBackendAdapter):
    """Enumerates ``after`` sessions, then raises ``exc`` (KeyboardInterrupt by default):
    an export interrupted half-way."""

    def __init__(self, source: MemoryBackendAdapter, after: int,
                 exc: BaseException | None = None) -> None:
        super().__init__()
        self._store = source.state_store()
        self._after = after
        self._exc = exc or KeyboardInterrupt()

    def iter_sessions(self, *, owner_subject=UNSCOPED, match=None, batch_size=500):
        for i, summary in enumerate(self._store.iter_sessions(owner_subject=owner_subject,
                                                              match=match)):
            if i == self._after:
                raise self._exc
            yield summary


INTERRUPT: dict[str, Any] = {}


def interrupting_shared() -> Interrupting:
    return Interrupting(MEMORY["current"], INTERRUPT.get("after", 2), INTERRUPT.get("exc"))


class Repeating(MemoryBackendAdapter):
    """Enumerates some sessions twice, like Redis SCAN during a rehash."""

    def __init__(self, source: MemoryBackendAdapter, repeat: set[str]) -> None:
        super().__init__()
        self._store = source.state_store()
        self._repeat = repeat

    def iter_sessions(self, *, owner_subject=UNSCOPED, match=None, batch_size=500):
        again = []
        for summary in self._store.iter_sessions(owner_subject=owner_subject, match=match):
            yield summary
            if summary.session_id in self._repeat:
                again.append(summary)
        yield from again
