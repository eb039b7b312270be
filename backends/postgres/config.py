"""Where a SQL backend built on this base connects and how: URI, schema, dimensions,
timeouts.

Each backend passes its own :class:`SqlVariables` (its name, the variables naming its
location, schema and embedding width); :data:`POSTGRES_VARIABLES` are the ``postgres``
backend's, and :meth:`SqlVariables.settings` the settings table every backend built on
this base has (``semvecctl config settings`` renders it). Kept free of driver imports so the registry can read adapter attributes
without psycopg.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from backends.errors import BackendConfigError
from backends.info import declared
from backends.redaction import redact_uri
from backends.settings import Setting, option_names



@dataclass(frozen=True)
class SqlVariables:
    """What one backend built on this base reads from the environment: its name (in
    messages), the variables naming its location (first hit wins), its schema variable
    and its embedding-width variable (None: the option alone)."""

    backend: str
    url_env: tuple[str, ...]
    schema_env: str | None = None
    dimensions_env: str | None = None

    def settings(self) -> tuple[Setting, ...]:
        """The settings of a backend built on this base, in the order its unknown-option
        message lists them (a flavour appends its own)."""
        url = self.url_env[0] if self.url_env else None
        return (
            Setting("uri", url, "URI", None,
                    "where PostgreSQL is: postgresql:// (the engine's postgresql+psycopg:// "
                    "too; ?schema=NAME selects a schema; pool_* parameters tune the pool)",
                    secret=True, fallback_env=self.url_env[1:], option=False),
            Setting("schema", self.schema_env, "identifier", "public",
                    "the schema holding the tables (also ?schema= in the URI)"),
            Setting("dimensions", self.dimensions_env, f"int 1..{MAX_DIMENSIONS}", None,
                    f"embedding width (default: the deployed column's, else "
                    f"{DEFAULT_DIMENSIONS})"),
            Setting("connect_timeout", None, "seconds", 5.0, "time allowed to connect"),
            Setting("statement_timeout_ms", None, "milliseconds", 30_000,
                    "each statement's time limit"),
            Setting("pool_size", None, "int 1..64", 4, "connections the pool opens at most"),
            Setting("create_tables", None, "bool", True,
                    "writes create missing tables (off: run semvecctl indexes ensure)"),
            Setting("shards", SHARDS_ENV, "DSN list", None,
                    "the engine's shard list of the DATABASE_URL deployment", secret=True),
        )


#: the ``postgres`` backend's: the engine's DATABASE_URL, honoured as the engine does
#: (declared in backends.info)
POSTGRES_VARIABLES = SqlVariables("postgres", declared("postgres").uri_env,
                                  schema_env=declared("postgres").schema_env)
#: the engine's deployment variable (its shard list applies to that database)
ENV_DATABASE_URL = POSTGRES_VARIABLES.url_env[0]
#: SQLAlchemy driver suffixes the engine accepts in its URLs (``postgresql+psycopg://``;
#: declared in backends.info); we connect with psycopg 3 whichever is named
DRIVER_SUFFIXES = declared("postgres").scheme_suffixes
#: the engine's shard-list variable (comma-separated DSNs; declared in backends.info)
SHARDS_ENV = declared("postgres").shards_env or ""


def parse_shard_list(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """The engine's reading of a shard list: comma-separated, white space stripped, empty
    entries dropped (a list or tuple is taken entry by entry, the same way)."""
    if text is None:
        return ()
    entries = text.split(",") if isinstance(text, str) else list(text)
    return tuple(e.strip() for e in entries if isinstance(e, str) and e.strip())


DEFAULT_DIMENSIONS = 384
MAX_DIMENSIONS = 16000  # the widest embedding column the vector extension takes

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_SCHEMES = declared("postgres").schemes


def _positive_int(name: str, value, *, upper: int | None = None, backend: str = "postgres") -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BackendConfigError(f"{backend} option {name} must be an integer, got {value!r}") from None
    if isinstance(value, bool) or number < 1 or (upper is not None and number > upper):
        limit = f" and at most {upper}" if upper else ""
        raise BackendConfigError(f"{backend} option {name} must be at least 1{limit}, got {value!r}")
    return number


def _positive_float(name: str, value, *, backend: str = "postgres") -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BackendConfigError(f"{backend} option {name} must be a number, got {value!r}") from None
    if not number > 0:
        raise BackendConfigError(f"{backend} option {name} must be positive, got {value!r}")
    return number


@dataclass(frozen=True)
class SqlConfig:
    """Resolved options. ``conninfo`` is what psycopg receives (our own ``schema`` query
    parameter removed); ``display_uri`` is the redacted form used in every message."""

    conninfo: str
    display_uri: str
    schema: str = "public"
    dimensions: int = DEFAULT_DIMENSIONS
    connect_timeout: float = 5.0
    statement_timeout_ms: int = 30_000
    pool_size: int = 4
    create_tables: bool = True
    #: False when neither dimensions= nor the environment set it: an existing items
    #: table's embedding column then decides (see Database.dimensions)
    dimensions_explicit: bool = True
    #: the SQL backend this config is for: named in messages
    backend: str = "postgres"
    #: the shard DSNs, in the engine's order (empty: the primary is the only shard); see
    #: :mod:`backends.postgres.placement`
    shards: tuple[str, ...] = ()
    #: the backend's variables this config was resolved with (its shards' too)
    variables: SqlVariables = POSTGRES_VARIABLES

    def shard_configs(self) -> list["SqlConfig"]:
        """One config per shard DSN: this one's schema, timeouts and pool settings, the
        shard's own location (each resolved as a URI is, so a bad one is named)."""
        options = {"schema": self.schema, "connect_timeout": self.connect_timeout,
                   "statement_timeout_ms": self.statement_timeout_ms,
                   "pool_size": self.pool_size, "create_tables": self.create_tables,
                   "shards": ()}
        if self.dimensions_explicit:
            options["dimensions"] = self.dimensions
        return [SqlConfig.resolve(dsn, dict(options), variables=self.variables,
                                  role=f"shard {i} of {SHARDS_ENV}")
                for i, dsn in enumerate(self.shards)]

    @classmethod
    def resolve(cls, uri: str | None, options: dict, *,
                variables: SqlVariables = POSTGRES_VARIABLES, role: str = "") -> "SqlConfig":
        """Options and environment to a config. ``variables`` are the calling backend's:
        its name in messages, where it looks for its location, schema and embedding
        width (:class:`SqlVariables`). The engine's SQLAlchemy
        spellings (``postgresql+psycopg://``, ``+psycopg2``, ``+asyncpg``) are accepted.

        The ``shards`` option (a comma-separated string or a list of DSNs; empty: no
        shards) is the deployment's shard list. Without it the engine's
        ``SEMVEC_STATE_DB_SHARDS`` applies to the engine's deployment: when the location
        came from the environment, or is the database ``DATABASE_URL`` names (or that
        variable is unset). ``role`` names a shard in messages."""
        options = dict(options)
        backend = variables.backend
        from_env = uri is None
        if uri is None:
            uri = next((os.environ[v] for v in variables.url_env if os.environ.get(v)), None)
        if not uri:
            raise BackendConfigError(
                f"the {backend} backend needs a location: pass uri='postgresql://...' or set "
                + " or ".join(variables.url_env)
            )
        try:
            parts = urlsplit(uri)
        except ValueError as exc:
            raise BackendConfigError(f"malformed {backend} URI {redact_uri(uri)!r}: {exc}") from None
        scheme, _, dialect = parts.scheme.lower().partition("+")
        where = f" ({role})" if role else ""
        if scheme not in _SCHEMES or (dialect and dialect not in DRIVER_SUFFIXES):
            raise BackendConfigError(
                f"{backend} URI{where} must start with postgresql:// (or the engine's "
                f"postgresql+psycopg://, +psycopg2, +asyncpg; got {redact_uri(uri)!r})"
            )
        parts = parts._replace(scheme=scheme)
        query = parse_qsl(parts.query, keep_blank_values=True)
        uri_schema = [value for key, value in query if key == "schema"]
        kept = [(key, value) for key, value in query if key != "schema"]
        conninfo = urlunsplit(
            (parts.scheme, parts.netloc, parts.path, urlencode(kept, safe="/:,"), parts.fragment)
        )
        _require_tls_files(kept, backend, redact_uri(uri))
        schema = options.pop("schema", None) or (uri_schema[-1] if uri_schema else None)
        schema = schema or _env(variables.schema_env) or "public"
        if not _IDENT.match(schema):
            raise BackendConfigError(
                f"{backend} schema must be a plain identifier (letters, digits, _), got {schema!r}"
            )
        dims = options.pop("dimensions", None)
        if dims is None:
            dims = _env(variables.dimensions_env) or None
        explicit = dims is not None
        if dims is None:
            dims = DEFAULT_DIMENSIONS
        config = cls(
            conninfo=conninfo,
            display_uri=redact_uri(uri),
            schema=schema,
            dimensions=_positive_int("dimensions", dims, upper=MAX_DIMENSIONS, backend=backend),
            connect_timeout=_positive_float("connect_timeout", options.pop("connect_timeout", 5.0),
                                            backend=backend),
            statement_timeout_ms=_positive_int(
                "statement_timeout_ms", options.pop("statement_timeout_ms", 30_000),
                backend=backend,
            ),
            pool_size=_positive_int("pool_size", options.pop("pool_size", 4), upper=64,
                                    backend=backend),
            create_tables=bool(options.pop("create_tables", True)),
            dimensions_explicit=explicit,
            backend=backend,
            shards=_shards(options.pop("shards", None), uri, from_env),
            variables=variables,
        )
        if options:
            raise BackendConfigError(
                f"unknown {backend} option(s): " + ", ".join(sorted(options))
                + f" (known: {', '.join(option_names(variables.settings()))})"
            )
        return config


def _env(variable: str | None) -> str | None:
    return os.environ.get(variable) if variable else None


def _shards(given: Any, uri: str, from_env: bool) -> tuple[str, ...]:
    """The shard list in force (see :meth:`SqlConfig.resolve`)."""
    if given is not None:
        if not isinstance(given, (str, list, tuple)):
            raise BackendConfigError(f"option shards must be a comma-separated string or a "
                                     f"list of DSNs, got {type(given).__name__}")
        return parse_shard_list(given)
    listed = parse_shard_list(os.environ.get(SHARDS_ENV, ""))
    if not listed:
        return ()
    primary = os.environ.get(ENV_DATABASE_URL, "")
    if from_env or not primary or _key(primary) == _key(uri):
        return listed
    return ()


def _key(uri: str) -> tuple:
    return database_key(uri)


#: libpq parameters that name a file (and the variable libpq reads when the URI does not)
_TLS_FILES = (("sslrootcert", "PGSSLROOTCERT"), ("sslcert", "PGSSLCERT"), ("sslkey", "PGSSLKEY"),
              ("sslcrl", "PGSSLCRL"))


def _require_tls_files(query: list[tuple[str, str]], backend: str, display_uri: str) -> None:
    """A certificate, key or CRL file the connection names must exist: a missing CA file
    is a permanent configuration error (exit 3), not a server that might come back (libpq
    only says so after the TLS handshake, and not at all against a server without TLS)."""
    given = dict(query)
    for key, variable in _TLS_FILES:
        value = given.get(key) or os.environ.get(variable) or ""
        if not value or (key == "sslrootcert" and value == "system"):
            continue
        if not os.path.isfile(os.path.expanduser(value)):
            source = key if given.get(key) else f"${variable}"
            raise BackendConfigError(
                f"{backend} connection {display_uri}: {source} names {value!r}, which is not "
                "a file; fix the path (or drop the parameter)")


def database_key(conninfo: str) -> tuple:
    """What makes two DSNs one database (host, port, database, user; the scheme's
    driver suffix and query options play no part), so a primary listed among the shards
    is read once."""
    try:
        parts = urlsplit(conninfo)
        port = parts.port
    except ValueError:
        return (conninfo,)
    return ((parts.hostname or "").lower(), port or 5432, parts.path.strip("/"),
            parts.username or "", parts.query if not parts.hostname else "")


#: every setting of the postgres backend
SETTINGS: tuple[Setting, ...] = POSTGRES_VARIABLES.settings()
