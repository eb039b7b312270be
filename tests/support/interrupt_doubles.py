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


class SlowSource(RedisBackendAdapter):
    """Redis whose session listings yield a row every 0.1 ms: a bulk pass of some ten
    thousand sessions (several of the migration's steps) lasts long enough to be
    interrupted at chosen points."""

    @staticmethod
    def _slowly(rows):
        import time

        for row in rows:
            time.sleep(0.0001)
            yield row

    def iter_sessions(self, *args, **kwargs):
        return self._slowly(super().iter_sessions(*args, **kwargs))

    def iter_session_states(self, *args, **kwargs):
        return self._slowly(super().iter_session_states(*args, **kwargs))


def slow_source(uri=None):
    return SlowSource(uri=uri)
