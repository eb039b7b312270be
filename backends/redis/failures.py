"""Map redis-py exceptions onto the backend layer's error categories.

The caller learns WHAT kind of failure happened (unreachable, credentials, wrong data)
without parsing driver messages; the driver exception stays attached as ``__cause__``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from backends.errors import (
    BackendAuthError,
    BackendConfigError,
    BackendError,
    BackendUnreachable,
    IntegrityError,
    UnsupportedOperation,
)


def translate(exc: BaseException, where: str) -> BaseException:
    """The categorised error for a redis-py exception (``where`` is a redacted URI)."""
    from redis import exceptions as rx

    if isinstance(exc, rx.RedisClusterException):
        # raised while learning the slot map: no node answered, or the map is incomplete
        return BackendUnreachable(f"Redis Cluster at {where} is unreachable or not ready "
                                  f"({type(exc).__name__})")
    if isinstance(exc, (rx.ClusterDownError, rx.ClusterError)):
        return BackendUnreachable(f"Redis Cluster at {where} is down or cannot serve the "
                                  f"key's slot ({type(exc).__name__})")
    if isinstance(exc, (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError)):
        return BackendAuthError(f"Redis at {where} refused our credentials or privileges")
    if isinstance(exc, rx.ResponseError):
        text = str(exc)
        if text.startswith(("NOAUTH", "WRONGPASS", "NOPERM")):
            return BackendAuthError(f"Redis at {where} refused our credentials or privileges")
        # redis-py strips the MOVED/ASK code from the message: test the type too
        if isinstance(exc, (rx.AskError, rx.TryAgainError)) or text.startswith(
                ("CROSSSLOT", "MOVED", "ASK ", "CLUSTERDOWN")):
            return UnsupportedOperation(
                f"Redis at {where} is a cluster: a turn's keys span hash slots, which one "
                "script cannot touch atomically; use a standalone or replicated Redis "
                "(or add ?cluster=true to the URI for state without events)"
            )
        if text.startswith("WRONGTYPE") or "semvec" in text:
            return IntegrityError(f"unexpected data in Redis at {where}: {text}")
        if isinstance(exc, rx.ReadOnlyError):
            return BackendConfigError(f"Redis at {where} is a read-only replica")
        return BackendError(f"Redis at {where} answered with an error: {text}")
    if isinstance(exc, (rx.ConnectionError, rx.TimeoutError, OSError)):
        return BackendUnreachable(f"Redis at {where} is unreachable ({type(exc).__name__})")
    if isinstance(exc, rx.RedisError):
        return BackendError(f"Redis at {where} failed ({type(exc).__name__})")
    return exc


@contextmanager
def redis_errors(where: str) -> Iterator[None]:
    """Re-raise driver errors as categorised backend errors (the original as cause)."""
    from redis.exceptions import RedisClusterException, RedisError

    try:
        yield
    except (RedisError, RedisClusterException, OSError) as exc:
        mapped = translate(exc, where)
        if mapped is exc:
            raise
        raise mapped from exc
