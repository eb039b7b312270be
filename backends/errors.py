"""Error types of the backend layer.

One conflict type (the contract's), plus a few categories that let a caller (the CLI,
a health endpoint) react to *what kind* of failure happened without parsing driver
messages. Driver exceptions are kept as ``__cause__``; messages never carry credentials.
"""

from __future__ import annotations

from typing import Protocol


class StateVersionConflict(RuntimeError):
    """A compare-and-set lost: the row exists (insert), or its version moved (update),
    or it belongs to another owner. The caller reloads and retries."""


class ErrorTranslator(Protocol):
    """The one signature of every driver-error translator (``translate_error`` in
    backends.redis.failures, backends.mongo.errors and backends.sql.driver): the
    categorised error for a driver exception, or ``exc`` itself when it is not the
    driver's. ``where`` is a redacted location (a store that must not name hosts may
    ignore it), ``action`` what was being done, ``events`` whether the payload was events
    (a rejected document is then InvalidEvent)."""

    def __call__(self, exc: BaseException, where: str, *, action: str = "a call",
                 events: bool = False) -> BaseException: ...


def session_exists(session_id: str) -> StateVersionConflict:
    """An insert (``expected_version=None``) or a restore found the session there."""
    return StateVersionConflict(f"session {session_id!r} already exists")


def cas_refusal(session_id: str, stored_version: object | None, expected_version: int | None,
                *, expired: bool = False) -> StateVersionConflict:
    """Why a compare-and-set update matched nothing, worded once for every store: the
    row is gone (or expired), its version moved, or it belongs to another owner."""
    if stored_version is None:
        return StateVersionConflict(f"session {session_id!r} does not exist")
    if expired:
        return StateVersionConflict(f"session {session_id!r} has expired (idle TTL)")
    if stored_version != expected_version:
        return StateVersionConflict(
            f"session {session_id!r} is at version {stored_version}, not {expected_version}")
    return StateVersionConflict(f"session {session_id!r} belongs to another owner")


def is_state_version_conflict(exc: BaseException) -> bool:
    """True for our conflict type and for any exception class *named*
    ``StateVersionConflict`` (adapters written against the engine's own types)."""
    return any(cls.__name__ == "StateVersionConflict" for cls in type(exc).__mro__)


class BackendError(Exception):
    """Base of the categorised backend failures."""


class InvalidEvent(BackendError, ValueError):
    """An event failed validation; nothing of its turn was written."""


class BackendUnreachable(BackendError, ConnectionError):
    """The store could not be reached (refused, timed out, DNS, TLS)."""


class BackendAuthError(BackendError, PermissionError):
    """The store answered but refused our credentials or privileges."""


class BackendConfigError(BackendError, ValueError):
    """The backend is misconfigured (missing or malformed URI, bad option)."""


class UnsupportedOperation(BackendError, NotImplementedError):
    """The deployment cannot do this safely (e.g. multi-document transactions on a
    standalone MongoDB, events on a Redis Cluster); refused instead of half-done."""


class BackendTransient(BackendError):
    """A failure that is expected to pass: retry the same call now (a primary stepping
    down, a failover, a lock timeout). Distinct from :class:`BackendUnreachable`, where
    the host itself cannot be reached."""


class IntegrityError(BackendError):
    """Stored data failed verification (e.g. a blob whose sha256 does not match)."""


class CorruptState(IntegrityError):
    """A stored session row cannot be read strictly: a field is missing, has the wrong
    type, holds an impossible value, or the blob fails its digest. Never answered with a
    best-effort value, because a caller would then save over the real state."""

    def __init__(self, session_id: str, field: str, problem: str) -> None:
        self.session_id = session_id
        self.field = field
        self.problem = problem
        super().__init__(f"session {session_id!r} is damaged: field {field!r} {problem}")


class CorruptEvent(IntegrityError):
    """A stored event cannot be read strictly: a field is missing, is not the JSON it
    must be (``meta`` an object, ``embedding`` an array of finite numbers), or holds an
    impossible value. Names the event (and its user when known) and the field, so the
    operator can find the row; a command that meets it fails with exit 1, never with a
    best-effort event."""

    def __init__(self, event_id: str, field: str, problem: str, *,
                 user_id: str | None = None) -> None:
        self.event_id = event_id
        self.field = field
        self.problem = problem
        self.user_id = user_id
        of = f" of user {user_id!r}" if user_id else ""
        super().__init__(f"event {event_id!r}{of} is damaged: field {field!r} {problem} "
                         "(semvecctl doctor lists every damaged row)")


class InjectedFault(BackendError):
    """Raised by an adapter's fault seam (conformance only): a failure planted on purpose
    at a named point of a write, to check that the write leaves all or nothing."""


class MissingDriver(BackendError, ImportError):
    """A shipped backend was selected but its driver is not installed."""

    def __init__(self, backend: str, extra: str, module: str) -> None:
        self.backend = backend
        self.extra = extra
        self.module = module
        super().__init__(
            f"backend {backend!r} needs the {module!r} driver, which is not installed: "
            f"pip install 'semvecctl[{extra}]'"
        )


class ContestedBackend(RuntimeError):
    """A name advertised by two or more installed distributions."""

    def __init__(self, name: str, distributions: list[str]) -> None:
        self.name = name
        self.distributions = list(distributions)
        joined = ", ".join(self.distributions)
        super().__init__(
            f"backend name {name!r} is advertised by several installed distributions "
            f"({joined}); uninstall all but one of them (pip uninstall ...) to use it"
        )


class ContractError(TypeError):
    """An adapter that does not satisfy the BackendAdapter contract."""

    def __init__(self, target: str, problems: list[str]) -> None:
        self.target = target
        self.problems = list(problems)
        super().__init__(
            f"{target} does not satisfy the BackendAdapter contract: " + "; ".join(problems)
        )
