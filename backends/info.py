"""Each backend's facts, said once: name, target, URI schemes, URI and secret variables,
extra, driver modules, its own audit.

The CLI derives everything from here (which backend a scheme implies, which variable
holds a backend's URI, which variables to scrub, what to install for a missing driver),
and so does each adapter's own environment lookup. A third-party adapter states the same
facts as class attributes (``uri_schemes``, ``uri_env``, ``secret_env``, ``extra``,
``required_modules``), in the manner of fsspec's ``protocol`` attribute; they are read
with :func:`info_from_class` once the plugin is selected or checked, never while
backends are merely listed.

Import cost matters: ``semvecctl backends list`` reads this module, so it imports nothing
and its record is a NamedTuple (a frozen dataclass of this many fields costs the cold
start a few milliseconds to build).
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple


class BackendInfo(NamedTuple):
    """What is known about a backend without importing it.

    ``uri_env`` lists the variables holding its location, first hit wins (the CLI reads
    the first; the adapter may honour the rest). ``secret_env`` are variables whose
    values must never be printed; the URI variables are always among them."""

    name: str
    target: str
    schemes: tuple[str, ...] = ()
    uri_env: tuple[str, ...] = ()
    secret_env: tuple[str, ...] = ()
    extra: str | None = None
    drivers: tuple[str, ...] = ()
    #: the distribution whose extra installs the drivers
    package: str = "semvecctl"
    #: ``module:function`` of the backend's own ``semvecctl doctor`` audit, or None (an
    #: adapter that lists its sessions then gets the generic audit)
    audit: str | None = None
    #: ``module:object`` telling apart the backends that share this one's scheme by what
    #: the store holds: ``object.choose(uri)`` and ``object.from_catalog(conn, schema)``
    #: return ``(backend, reason)`` and never raise (asked through backends.selection)
    detect: str | None = None
    #: schemes among ``schemes`` whose URI names a socket path instead of a host
    path_schemes: tuple[str, ...] = ()
    #: the query parameter that may name the host instead of the URI's authority (libpq)
    host_parameter: str | None = None
    #: an in-process store: its URI names no place at all
    embedded: bool = False
    #: a lone userinfo (``scheme://secret@host``) is a password, not a user name (redis-py's
    #: URL convention): redaction hides it (``backends.redaction`` is a leaf, so it keeps
    #: these schemes itself and a test holds its copy to this flag)
    bare_userinfo_is_password: bool = False
    #: schemes among ``schemes`` whose authority may list several ``host:port`` separated
    #: by commas (a MongoDB replica set's seed list, a Redis Sentinel's sentinels)
    host_list_schemes: tuple[str, ...] = ()
    #: schemes whose hosts find the server instead of being it (Redis Sentinel)
    locator_schemes: tuple[str, ...] = ()
    #: schemes among ``schemes`` that speak TLS to the server
    tls_schemes: tuple[str, ...] = ()
    #: the TCP port a URI without one means (the server's default)
    default_port: int | None = None
    #: the variable holding the idle TTL the engine applies to this store's sessions
    ttl_env: str | None = None
    #: SQLAlchemy-style driver suffixes a scheme may carry (``postgresql+psycopg://``):
    #: the same backend, the suffix names the engine's driver, not ours
    scheme_suffixes: tuple[str, ...] = ()
    #: the variable listing the DSNs a deployment spreads its sessions over (the engine's
    #: ``SEMVEC_STATE_DB_SHARDS``, ENGINE-WIRE section 10); its DSNs are secrets
    shards_env: str | None = None
    #: the variable naming the schema (the SQL backends': one for both, so a deployment
    #: switching between them keeps every session)
    schema_env: str | None = None
    #: ``module:object`` of the backend's settings table (``backends.settings.Setting``
    #: rows), loaded only when the settings are listed or rendered
    settings: str | None = None
    #: ``module:object`` of the SQL layout (``backends.postgres.schema.SqlLayout``) a backend
    #: built on the PostgreSQL base provisions: the backends sharing its scheme know its
    #: tables by name (loaded only when one of them needs them)
    sql_layout: str | None = None
    #: ``module:function`` promoting a replica of this backend to primary
    #: (``function(uri, timeout)``; the ``failover`` conformance group's default), or None
    promotion: str | None = None

    @property
    def driver(self) -> str | None:
        """The first driver module (the one a missing-driver message names)."""
        return self.drivers[0] if self.drivers else None

    @property
    def secret_variables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.uri_env + self.secret_env
                                   + ((self.shards_env,) if self.shards_env else ())))

    def missing_driver(self, module: str | None = None) -> Any:
        """The :class:`~backends.errors.MissingDriver` for this backend lacking ``module``
        (its first driver by default), naming the extra that installs it."""
        from backends.errors import MissingDriver

        return MissingDriver(self.name, self.extra or self.name, module or self.driver or "?")

    def names_no_place(self, scheme: str, *, hostname: str | None, path: str, query: str) -> str | None:
        """What a URI of ``scheme`` lacks to name a place ("host", "socket path"), or None."""
        if self.embedded:
            return None
        if scheme in self.path_schemes:
            return None if path else "socket path"
        if hostname or (self.host_parameter and f"{self.host_parameter}=" in query):
            return None
        return "host"

    @property
    def install_hint(self) -> str:
        if self.extra:
            return f"pip install '{self.package}[{self.extra}]'"
        if self.package == "semvecctl":
            return f"pip install 'semvecctl[{self.name}]'"
        return "pip install " + " ".join(self.drivers or (self.package,))


#: The shipped backends, consulted first; then our own entry points (``semvec.backends``
#: in pyproject.toml), whose facts are declared here too so that a scheme they claim
#: needs no import. Order matters where backends share a scheme: the first claims it.
SHIPPED_INFO: tuple[BackendInfo, ...] = (
    BackendInfo("memory", "backends.memory:MemoryBackendAdapter", schemes=("memory",),
                embedded=True),
    BackendInfo("redis", "backends.redis:RedisBackendAdapter",
                schemes=("redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel"),
                uri_env=("REDIS_URL",),
                extra="redis", drivers=("redis",), audit="backends.redis.audit:audit",
                settings="backends.redis.config:SETTINGS",
                host_list_schemes=("redis+sentinel", "rediss+sentinel"),
                locator_schemes=("redis+sentinel", "rediss+sentinel"),
                tls_schemes=("rediss", "rediss+sentinel"),
                path_schemes=("unix",), ttl_env="SEMVEC_REDIS_SESSION_TTL_S", default_port=6379,
                bare_userinfo_is_password=True, promotion="backends.redis.promotion:promote"),
    BackendInfo("mongo", "backends.mongo:MongoBackendAdapter",
                schemes=("mongodb", "mongodb+srv"), uri_env=("MONGODB_URI",),
                extra="mongo", drivers=("pymongo",), audit="backends.mongo.audit:audit",
                settings="backends.mongo.config:SETTINGS", host_list_schemes=("mongodb",),
                ttl_env="SEMVEC_MONGO_SESSION_TTL_S", default_port=27017),
)
#: the engine's SQL shard list (ENGINE-WIRE section 10): DSNs, so a secret
_SHARDS_ENV = "SEMVEC_STATE_DB_SHARDS"
#: the SQL backends' schema variable
_SQL_SCHEMA_ENV = "SEMVEC_PGVECTOR_SCHEMA"
#: the drivers the engine's SQLAlchemy URLs may name (``asyncpg`` is mapped to a sync one)
_SQL_DRIVERS = ("psycopg", "psycopg2", "asyncpg")
#: how a standby of the PostgreSQL base is promoted
_SQL_PROMOTION = "backends.postgres.promotion:promote"
ENTRY_POINT_INFO: tuple[BackendInfo, ...] = (
    BackendInfo("pgvector", "backends.pgvector:PgVectorAdapter",
                schemes=("postgresql", "postgres"),
                uri_env=("SEMVEC_PGVECTOR_URL", "DATABASE_URL"),
                extra="pgvector", drivers=("psycopg", "psycopg_pool", "pgvector"),
                audit="backends.pgvector.audit:audit",
                detect="backends.pgvector.detect:DETECTOR",
                sql_layout="backends.pgvector.schema:PGVECTOR_LAYOUT",
                settings="backends.pgvector.config:SETTINGS",
                host_parameter="host", ttl_env="SEMVEC_SQL_SESSION_TTL_S", default_port=5432,
                shards_env=_SHARDS_ENV, scheme_suffixes=_SQL_DRIVERS, schema_env=_SQL_SCHEMA_ENV,
                promotion=_SQL_PROMOTION),
    BackendInfo("postgres", "backends.postgres:PostgresAdapter",
                schemes=("postgresql", "postgres"), uri_env=("DATABASE_URL",),
                extra="pgvector", drivers=("psycopg", "psycopg_pool"),
                audit="backends.postgres.audit:audit", settings="backends.postgres.config:SETTINGS",
                host_parameter="host", ttl_env="SEMVEC_SQL_SESSION_TTL_S", default_port=5432,
                shards_env=_SHARDS_ENV, scheme_suffixes=_SQL_DRIVERS, schema_env=_SQL_SCHEMA_ENV,
                promotion=_SQL_PROMOTION),
)
KNOWN_INFO: tuple[BackendInfo, ...] = SHIPPED_INFO + ENTRY_POINT_INFO


def known(name: str) -> BackendInfo | None:
    """The declared facts of a shipped backend or one of our entry points."""
    for info in KNOWN_INFO:
        if info.name == name:
            return info
    return None


def declared(name: str) -> BackendInfo:
    """The declared facts of one of our own backends (a KeyError for any other name)."""
    info = known(name)
    if info is None:
        raise KeyError(name)
    return info


def declared_ttl_env(name: str) -> str:
    """The TTL variable of one of our own backends that declares one (KeyError otherwise)."""
    variable = declared(name).ttl_env
    if not variable:
        raise KeyError(f"{name} declares no TTL variable")
    return variable


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, (tuple, list, frozenset, set)):
        return tuple(v for v in value if isinstance(v, str) and v)
    return ()


def info_from_class(name: str, target: str, cls: Any, *,
                    package: str = "semvecctl") -> BackendInfo:
    """A plugin's facts from its adapter class attributes (absent ones stay empty);
    ``package`` is the distribution that advertises it."""
    extra = getattr(cls, "extra", None)
    return BackendInfo(
        name=name,
        target=target,
        schemes=tuple(s.lower() for s in _strings(getattr(cls, "uri_schemes", ()))),
        uri_env=_strings(getattr(cls, "uri_env", ())),
        secret_env=_strings(getattr(cls, "secret_env", ())),
        extra=extra if isinstance(extra, str) and extra else None,
        drivers=_strings(getattr(cls, "required_modules", ())),
        package=package,
    )


def scheme_claims(infos: Iterable[BackendInfo]) -> dict[str, tuple[str, ...]]:
    """scheme -> the backends claiming it, in declaration order."""
    claims: dict[str, list[str]] = {}
    for info in infos:
        for scheme in info.schemes:
            claims.setdefault(scheme, []).append(info.name)
    return {scheme: tuple(names) for scheme, names in claims.items()}


#: Secret variables of every declared backend (a plugin's join when it is loaded).
SECRET_ENV_VARS: tuple[str, ...] = tuple(
    dict.fromkeys(v for info in KNOWN_INFO for v in info.secret_variables))
