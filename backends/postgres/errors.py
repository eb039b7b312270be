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
from backends.redaction import redact_uri


def missing_driver(backend: str, module: str) -> MissingDriver:
    """The MissingDriver for ``backend`` (the backend built on this base) lacking ``module``,
    naming the extra its declaration in :mod:`backends.info` installs."""
    from backends.info import declared

    return declared(backend).missing_driver(module)


def load_psycopg(backend: str = "postgres") -> Any:
    """psycopg, or MissingDriver naming ``backend`` (the backend the user selected)."""
    try:
        import psycopg
    except ImportError as exc:
        raise missing_driver(backend, "psycopg") from exc
    return psycopg


# SQLSTATEs: 28xxx invalid authorization, 42501 insufficient privilege; serialization
# failure, deadlock, lock timeout, operator shutdown/crash/startup and statement timeout
# are expected to pass (retry now).
_AUTH_STATES = {"28000", "28P01", "42501"}
#: 25006 (read_only_sql_transaction): a write reached a server that no longer takes any
#: (a failover in progress; a multi-host URI finds the new primary on the next connection)
_TRANSIENT_STATES = {"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "57014", "25006"}


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
    if isinstance(exc, psycopg.OperationalError) and not state:
        permanent = _permanent_connect_failure(str(exc))
        if permanent == "auth":
            return BackendAuthError(f"PostgreSQL at {display_uri} refused {action}: {text}")
        if permanent:
            return BackendConfigError(f"PostgreSQL at {display_uri} ({action}): {text}"
                                      f" ({permanent}: retrying will not help)")
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


#: What libpq says (no SQLSTATE: the connection never got that far) when a retry cannot
#: help: the server answered and refused the settings. Anything else at connect time is
#: treated as unreachable (exit 4).
_PERMANENT_CONNECT = (
    ("does not exist", "database", 'database "'),
    ("does not exist", "auth", 'role "'),
    ("server does not support ssl", "the server has no TLS: drop sslmode=require or enable "
                                    "TLS on the server", ""),
    ("root certificate file", "a CA file is missing or unreadable", ""),
    ("certificate verify failed", "the server's certificate does not verify", ""),
    ("could not open certificate file", "a certificate file is missing or unreadable", ""),
    ("could not load private key file", "a key file is missing or unreadable", ""),
    ("private key file", "a key file is unusable", ""),
    ("server certificate for", "the server's certificate does not match the host", ""),
    ("invalid sslmode value", "bad sslmode", ""),
)


def _permanent_connect_failure(text: str) -> str:
    """Why a connection failure is permanent ("auth" for a role that does not exist), or
    "" when it may pass (refused, timed out, DNS)."""
    lowered = text.lower()
    for needle, why, also in _PERMANENT_CONNECT:
        if needle in lowered and (not also or also in text):
            return "the database does not exist" if why == "database" else why
    return ""


def _first_line(exc: BaseException) -> str:
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    # libpq may echo connection parameters; never let a password through
    return redact_uri(line) if "://" in line else line
