"""Adapters for tests/cli/app/test_interrupts.py (loaded by subprocesses through --adapter)."""

from __future__ import annotations

from backends.redis import RedisBackendAdapter


class _FailingDeleteStore:
    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def delete(self, *args, **kwargs):
        raise PermissionError("deletes are refused by this test double")


class FailingDeletes(RedisBackendAdapter):
    """Redis, except that cleanup cannot delete: the run must say what is left."""

    def state_store(self):
        return _FailingDeleteStore(super().state_store())


def failing_deletes(uri=None):
    return FailingDeletes(uri=uri)
