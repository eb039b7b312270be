"""Map redis-py exceptions onto the backend layer's error categories.

The caller learns WHAT kind of failure happened without parsing driver messages, and
the driver exception stays attached as ``__cause__``:

- transient (retry the same call now): the server is loading its dataset (LOADING),
  a replica is read-only or its primary is down (READONLY, MASTERDOWN), a cluster is
  failing over (TRYAGAIN, CLUSTERDOWN);
- unreachable: connection refused or reset, DNS failure, timeout;
- auth: a refused password or missing privilege (NOAUTH, WRONGPASS, NOPERM);
- configuration: TLS that cannot be negotiated (certificates, protocol), a bad URI;
- corrupt: a key of ours holds another type (WRONGTYPE) or a script refused what it
  found (``ERR semvec ...``);
- a cluster that a standalone client or a multi-key script cannot use (MOVED, ASK,
  CROSSSLOT): unsupported, with advice.
"""

from __future__ import annotations

from typing import Literal

from backends.errors import (
    BackendAuthError,
    BackendConfigError,
    BackendError,
    BackendTransient,
    BackendUnreachable,
    CorruptState,
    IntegrityError,
    UnsupportedOperation,
)

#: Error-reply prefixes that mean "the server cannot serve this right now; retry".
_TRANSIENT_PREFIXES = ("LOADING", "BUSY ", "TRYAGAIN", "READONLY", "MASTERDOWN", "CLUSTERDOWN")
_AUTH_PREFIXES = ("NOAUTH", "WRONGPASS", "NOPERM")


def _is_tls_failure(exc: BaseException) -> bool:
    """True when the connection failed while negotiating TLS (a setup problem, not a
    host that is down): redis-py wraps ssl.SSLError in its ConnectionError."""
    import ssl

    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            break
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    return "SSL" in text and ("CERTIFICATE" in text.upper() or "WRONG_VERSION" in text.upper()
                              or "handshake" in text)


def translate_error(exc: BaseException, where: str, *, action: str = "a call",
                    events: bool = False) -> BaseException:
    """The categorised error for a redis-py exception (``where`` is a redacted URI), as
    :class:`backends.errors.ErrorTranslator` says; ``exc`` itself when not redis-py's."""
    from redis import exceptions as rx

    if isinstance(exc, (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError)):
        return BackendAuthError(f"Redis at {where} refused our credentials or privileges")
    if isinstance(exc, (rx.BusyLoadingError, rx.TryAgainError, rx.ReadOnlyError,
                        rx.ClusterDownError)):
        return BackendTransient(f"Redis at {where} cannot serve this now, retry "
                                f"({type(exc).__name__})")
    if isinstance(exc, rx.RedisClusterException):
        # raised while learning the slot map: no node answered, or the map is incomplete
        return BackendUnreachable(f"Redis Cluster at {where} is unreachable or not ready "
                                  f"({type(exc).__name__})")
    if isinstance(exc, rx.ResponseError):
        text = str(exc)
        if text.startswith(_AUTH_PREFIXES):
            return BackendAuthError(f"Redis at {where} refused our credentials or privileges")
        if text.startswith(_TRANSIENT_PREFIXES):
            return BackendTransient(f"Redis at {where} cannot serve this now, retry "
                                    f"({text.split(' ', 1)[0]})")
        # redis-py strips the MOVED/ASK code from the message: test the type too
        if isinstance(exc, rx.AskError) or text.startswith(("CROSSSLOT", "MOVED", "ASK ")):
            return UnsupportedOperation(
                f"Redis at {where} is a cluster: a turn's keys span hash slots, which one "
                "script cannot touch atomically; use a standalone or replicated Redis "
                "(or add ?cluster=true to the URI for state without events)"
            )
        if isinstance(exc, rx.ClusterError):
            return BackendUnreachable(f"Redis Cluster at {where} cannot serve the key's "
                                      f"slot ({type(exc).__name__})")
        if "DB index is out of range" in text:  # SELECT N on connect: N >= the server's databases
            return BackendConfigError(f"Redis at {where} has no such database ({text}): fix the "
                                      "/N of the URI (the server's 'databases' setting bounds it)")
        if text.startswith("WRONGTYPE") or "semvec" in text:
            return IntegrityError(f"unexpected data in Redis at {where}: {text}")
        return BackendError(f"Redis at {where} answered with an error: {text}")
    if isinstance(exc, (rx.ConnectionError, rx.TimeoutError, OSError)):
        if _is_tls_failure(exc):
            return BackendConfigError(f"TLS to Redis at {where} failed: check the "
                                      "certificates and the rediss:// options")
        return BackendUnreachable(f"Redis at {where} is unreachable ({type(exc).__name__})")
    if isinstance(exc, rx.RedisError):
        return BackendError(f"Redis at {where} failed ({type(exc).__name__})")
    return exc


def is_wrong_type(exc: BaseException) -> bool:
    """A WRONGTYPE reply, raised directly or kept as the cause of an IntegrityError."""
    seen = exc.__cause__ if isinstance(exc, IntegrityError) else exc
    return seen is not None and str(seen).startswith("WRONGTYPE")


def mapped_error(exc: BaseException, where: str,
                 session_id: str | None = None) -> BaseException | None:
    """The categorised error to raise (from ``exc``) for a failed Redis call, or None
    when ``exc`` is to propagate as it is (not the driver's, or nothing to map).

    With ``session_id``, a WRONGTYPE reply means the session's own key holds another
    type: that is :class:`CorruptState` naming the session. For hot paths that catch
    themselves (commit_turn); everything else uses :class:`redis_errors`."""
    from redis.exceptions import RedisClusterException, RedisError

    if not isinstance(exc, (RedisError, RedisClusterException, OSError)):
        return None
    if session_id is not None and is_wrong_type(exc):
        return CorruptState(session_id, "key", "holds another type than a hash")
    mapped = translate_error(exc, where)
    return None if mapped is exc else mapped


class redis_errors:  # noqa: N801 - used as ``with redis_errors(...)``, like a function
    """Re-raise driver errors as categorised backend errors (the original as cause), as
    :func:`mapped_error` says. A class, not a generator: it wraps every Redis call."""

    __slots__ = ("where", "session_id")

    def __init__(self, where: str, session_id: str | None = None) -> None:
        self.where = where
        self.session_id = session_id

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: object) -> Literal[False]:
        if exc is None:
            return False
        mapped = mapped_error(exc, self.where, self.session_id)
        if mapped is None:
            return False
        raise mapped from exc
