"""The one place psycopg is imported, and the mapping of its errors to our categories.

Callers get :mod:`backends.errors` types with the driver exception as ``__cause__``; the
messages name the redacted URI, never a credential.
"""

from __future__ import annotations

from typing import Any

from backends.errors import (
    BackendAuthError,
    BackendConfigError,
    BackendError,
    BackendTransient,
    BackendUnreachable,
    MissingDriver,
)
from backends.uris import redact_uri


def load_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise MissingDriver("pgvector", "pgvector", "psycopg") from exc
    return psycopg


def register_vector_type(conn: Any) -> bool:
    """Teach this connection the ``vector`` type if the extension exists (else False)."""
    try:
        from pgvector.psycopg import register_vector
    except ImportError as exc:
        raise MissingDriver("pgvector", "pgvector", "pgvector") from exc
    try:
        register_vector(conn)
    except Exception:  # noqa: BLE001 - psycopg.ProgrammingError: no vector type in the database
        return False
    return True


# SQLSTATEs: 28xxx invalid authorization, 42501 insufficient privilege; serialization
# failure, deadlock, lock timeout, operator shutdown/crash/startup and statement timeout
# are expected to pass (retry now).
_AUTH_STATES = {"28000", "28P01", "42501"}
_TRANSIENT_STATES = {"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "57014"}


def translate_error(exc: BaseException, display_uri: str, *, action: str = "a query",
                    events: bool = False) -> BaseException:
    """Translate a psycopg error into a category, as :class:`backends.errors.ErrorTranslator`
    says (the driver error becomes the cause at the raise site); unknown errors pass
    through unchanged.

    Transient (retry now): serialization failures, deadlocks, lock timeouts, an operator
    shutting the backend down, statement timeouts. Unreachable: connection failures.
    Auth: bad password, missing privilege. Config: a malformed conninfo, an unknown
    database, a table without the engine's shape."""
    if isinstance(exc, BackendError):
        return exc
    psycopg = load_psycopg()
    state = getattr(exc, "sqlstate", None) or ""
    text = _first_line(exc)
    if state in _AUTH_STATES or "password authentication failed" in text or "no pg_hba.conf" in text:
        return BackendAuthError(f"PostgreSQL at {display_uri} refused {action}: {text}")
    if state in _TRANSIENT_STATES:
        return BackendTransient(f"PostgreSQL at {display_uri} failed {action}, retry: {text}")
    if isinstance(exc, psycopg.OperationalError) and (not state or state.startswith("08")):
        return BackendUnreachable(f"cannot reach PostgreSQL at {display_uri} ({action}): {text}")
    if state == "3D000":  # invalid_catalog_name: database does not exist
        return BackendConfigError(f"PostgreSQL at {display_uri}: {text}")
    if state == "42703":  # undefined_column: a table of our name with another shape
        return BackendConfigError(
            f"PostgreSQL at {display_uri}: {text} (a table there does not have the engine's "
            "SQL layout; see 'semvecctl indexes validate')")
    if isinstance(exc, psycopg.ProgrammingError) and not state:
        # libpq refused the conninfo itself (unknown option, malformed string)
        return BackendConfigError(f"PostgreSQL connection settings for {display_uri} are "
                                  f"invalid: {text}")
    return exc


def _first_line(exc: BaseException) -> str:
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    # libpq may echo connection parameters; never let a password through
    return redact_uri(line) if "://" in line else line
