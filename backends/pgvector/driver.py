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
    except Exception:  # psycopg.ProgrammingError: vector type not found in the database
        return False
    return True


# SQLSTATE classes: 08 connection exception, 28 invalid authorization, 57P0x operator
# intervention (shutdown), 53 insufficient resources.
_AUTH_STATES = {"28000", "28P01", "42501"}


def map_error(exc: BaseException, display_uri: str, action: str) -> BaseException:
    """Translate a psycopg error into a category; unknown errors pass through unchanged."""
    if isinstance(exc, BackendError):
        return exc
    psycopg = load_psycopg()
    state = getattr(exc, "sqlstate", None) or ""
    text = _first_line(exc)
    if state in _AUTH_STATES or "password authentication failed" in text or "no pg_hba.conf" in text:
        return BackendAuthError(f"PostgreSQL at {display_uri} refused {action}: {text}")
    if isinstance(exc, psycopg.OperationalError) and (
        not state or state.startswith("08") or state.startswith("57P")
    ):
        return BackendUnreachable(f"cannot reach PostgreSQL at {display_uri} ({action}): {text}")
    if state == "57014":  # query_canceled: statement_timeout
        return BackendUnreachable(f"PostgreSQL at {display_uri} timed out ({action}): {text}")
    if state == "3D000":  # invalid_catalog_name: database does not exist
        return BackendConfigError(f"PostgreSQL at {display_uri}: {text}")
    return exc


def _first_line(exc: BaseException) -> str:
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    # libpq may echo connection parameters; never let a password through
    return redact_uri(line) if "://" in line else line
