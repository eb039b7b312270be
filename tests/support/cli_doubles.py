"""Adapters for the CLI tests, loaded through ``--adapter tests.support.cli_doubles:...``."""

from __future__ import annotations

from backends.errors import CorruptState
from backends.memory import MemoryBackendAdapter

#: one memory store shared by every invocation in a test process (CliRunner runs in-process)
SHARED = MemoryBackendAdapter()


def shared(uri=None):
    return SHARED


class _DamagedStore:
    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def load_full(self, session_id, **kwargs):
        if session_id.startswith("bad"):
            raise CorruptState(session_id, "version", "is 1.5, not a positive int")
        return self._inner.load_full(session_id, **kwargs)


class Damaged(MemoryBackendAdapter):
    """Rows whose id starts with ``bad`` fail strict reads (CorruptState)."""

    name = "damaged"

    def state_store(self):
        return _DamagedStore(super().state_store())


def damaged(uri=None):
    return Damaged()


class _UncheckedDeleteStore(_DamagedStore):
    """A store whose delete predates version checks (no expected_version keyword)."""

    def load_full(self, session_id, **kwargs):
        return self._inner.load_full(session_id, **kwargs)

    def delete(self, session_id, *, owner_subject=None):
        return self._inner.delete(session_id)


class Unchecked(MemoryBackendAdapter):
    name = "unchecked"

    def state_store(self):
        return _UncheckedDeleteStore(super().state_store())


UNCHECKED = Unchecked()


def unchecked(uri=None):
    return UNCHECKED
