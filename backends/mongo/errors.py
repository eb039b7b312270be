"""Driver errors → the backend layer's categories, and identifier-free operation logs.

A caller (the CLI, a health endpoint) must be able to tell "wrong password" from "host
down" from "lost a race" without parsing driver text, and nothing we log or raise may
carry ids, hosts, filters or driver messages, which can include any of those.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from backends.errors import (
    BackendAuthError,
    BackendConfigError,
    BackendError,
    BackendTransient,
    BackendUnreachable,
    IntegrityError,
    InvalidEvent,
    StateVersionConflict,
)

log = logging.getLogger("backends.mongo")

#: Server codes meaning "who you are / what you may do" was refused.
AUTH_CODES = frozenset({11, 13, 18, 8000, 31, 33})
#: Server codes meaning the request itself was malformed.
INVALID_CODES = frozenset({2, 9, 14, 17, 52, 121, 10334})
#: Server codes meaning "not now, retry": a primary stepping down, a failover, a write
#: conflict between transactions (112), an interrupted operation.
TRANSIENT_CODES = frozenset({6, 7, 89, 91, 112, 189, 262, 9001, 10107, 11600, 11602, 13435,
                             13436})
#: Error labels with which the server or driver says "the same call may succeed now".
TRANSIENT_LABELS = ("RetryableWriteError", "TransientTransactionError",
                    "UnknownTransactionCommitResult")

_OURS = (
    StateVersionConflict,
    BackendError,
)


def translate_error(exc: BaseException, where: str = "", *, action: str = "a call",
                    events: bool = False) -> BaseException:
    """The categorised error for a pymongo error, as :class:`backends.errors.ErrorTranslator`
    says (``exc`` itself when it is not the driver's). ``where`` is not used: nothing we
    raise may carry hosts or ids.

    Transient (retry the same call now) is told apart from unreachable (the host cannot
    be reached at all): ``ServerSelectionTimeoutError`` is unreachable although pymongo
    derives it from ``AutoReconnect``, which is otherwise transient."""
    try:
        from pymongo import errors as pe
    except ImportError:  # pragma: no cover - the adapter cannot exist without pymongo
        return exc
    try:
        from bson.errors import BSONError
    except ImportError:  # pragma: no cover
        BSONError = ()  # type: ignore[assignment,misc]  # noqa: N806
    code = getattr(exc, "code", None)
    name = getattr(exc, "details", None) or {}
    code_name = name.get("codeName") if isinstance(name, dict) else None
    label = f" ({code_name})" if isinstance(code_name, str) and code_name.isidentifier() else ""
    if isinstance(exc, pe.ServerSelectionTimeoutError):
        return BackendUnreachable(
            f"MongoDB is unreachable{label}: no server answered within the selection timeout"
        )
    if isinstance(exc, pe.AutoReconnect):  # NotPrimaryError, NetworkTimeout, a dropped socket
        return BackendTransient(f"MongoDB connection or primary changed{label}; retry now")
    if isinstance(exc, pe.ConnectionFailure):
        return BackendUnreachable(f"MongoDB is unreachable{label}")
    if isinstance(exc, (pe.ConfigurationError, pe.InvalidURI, pe.InvalidName)):
        if "auth" in type(exc).__name__.lower():
            return BackendAuthError("MongoDB refused the credentials")
        return BackendConfigError(f"MongoDB client configuration is invalid{label}")
    if isinstance(exc, pe.OperationFailure) and code in AUTH_CODES:
        return BackendAuthError(
            f"MongoDB refused the credentials or privileges{label}; check the user's roles"
        )
    has_label = getattr(exc, "has_error_label", None)
    if (isinstance(exc, pe.OperationFailure) and code in TRANSIENT_CODES) or (
        callable(has_label) and any(has_label(lbl) for lbl in TRANSIENT_LABELS)
    ):
        return BackendTransient(f"MongoDB could not serve the request right now{label}; retry")
    if isinstance(exc, (pe.InvalidDocument, pe.DocumentTooLarge)) or (
        isinstance(exc, pe.OperationFailure) and code in INVALID_CODES
    ):
        if events:
            return InvalidEvent(f"MongoDB rejected an event document{label}")
        return BackendConfigError(f"MongoDB rejected the request as invalid{label}")
    if isinstance(exc, BSONError):
        return IntegrityError("a stored MongoDB document cannot be decoded (damaged BSON)")
    if isinstance(exc, pe.ExecutionTimeout):
        return BackendUnreachable(f"MongoDB did not finish in time{label}")
    if isinstance(exc, pe.PyMongoError):
        return BackendError(f"MongoDB operation failed{label}")
    return exc


@contextmanager
def driver_errors(operation: str, *, events: bool = False,
                  on_duplicate: Callable[[], BaseException] | None = None,
                  inside_transaction: bool = True) -> Iterator[None]:
    """Translate driver errors raised inside the block, keeping the original as cause,
    and log one identifier-free line per failed operation. ``on_duplicate`` builds the
    exception a duplicate key means here (a lost insert race is an outcome, not an
    error, so it is logged at debug level). Errors labelled for a transaction retry pass
    through untouched (``with_transaction`` needs them) unless ``inside_transaction`` is
    False: the block that wraps the whole transaction maps what its retries gave up on."""
    started = time.monotonic()
    try:
        yield
    except _OURS:
        raise
    except Exception as exc:  # noqa: BLE001 - we re-raise everything we do not map
        if inside_transaction and in_transaction_retry(exc):
            raise  # the driver's with_transaction retries these; it needs them untouched
        if on_duplicate is not None and is_duplicate_key(exc):
            log.debug("mongo op=%s outcome=duplicate_key duration_ms=%d", operation,
                      int((time.monotonic() - started) * 1000))
            raise on_duplicate() from exc
        mapped = translate_error(exc, "", action=operation, events=events)
        log.warning(
            "mongo op=%s outcome=error category=%s duration_ms=%d",
            operation,
            type(mapped).__name__,
            int((time.monotonic() - started) * 1000),
        )
        if mapped is exc:
            raise
        raise mapped from exc


#: Codes a server gives for Atlas-only stages or search-index commands it cannot run.
NO_SEARCH_CODES = frozenset({59, 115, 31082, 40324, 6047401})
_NO_SEARCH_WORDS = ("only supported with atlas", "only allowed on mongodb atlas",
                    "requires additional configuration", "unrecognized pipeline stage",
                    "search index commands")


def is_no_atlas_search(exc: BaseException) -> bool:
    """True when the server (or an in-process fake) says it has no Atlas Search."""
    if isinstance(exc, NotImplementedError):
        return True
    code = getattr(exc, "code", None)
    if code in NO_SEARCH_CODES:
        return True
    text = str(getattr(exc, "details", None) or exc).lower()
    return code is not None and any(w in text for w in _NO_SEARCH_WORDS)


def in_transaction_retry(exc: BaseException) -> bool:
    has_label = getattr(exc, "has_error_label", None)
    return callable(has_label) and (
        has_label("TransientTransactionError") or has_label("UnknownTransactionCommitResult")
    )


def is_duplicate_key(exc: BaseException) -> bool:
    from pymongo import errors as pe

    if isinstance(exc, pe.DuplicateKeyError):
        return True
    if isinstance(exc, pe.BulkWriteError):
        return any(err.get("code") == 11000 for err in exc.details.get("writeErrors", []))
    return getattr(exc, "code", None) == 11000


__all__ = [
    "translate_error",
    "driver_errors",
    "in_transaction_retry",
    "is_duplicate_key",
    "is_no_atlas_search",
]
