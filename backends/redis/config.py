"""Redis connection settings: URI, environment and adapter options in one place, declared
in :data:`SETTINGS` (the table ``semvecctl config settings redis`` renders).

A Sentinel deployment is named by ``redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]``
(``rediss+sentinel`` for TLS to the primary): the hosts are the sentinels, SERVICE the
monitored primary's name; redis-py's Sentinel client asks them for the primary on
connecting, and an adapter's clients also follow every switch the sentinels announce
(:mod:`backends.redis.sentinel`: an old primary still up takes writes until demoted).
``?sentinel_password=`` authenticates to the sentinels when they need it.

``?wait_replicas=N&wait_timeout_ms=M`` (any Redis URI but a cluster's; the settings of the
same names beat them): every script that writes is followed by ``WAIT N M`` in the same
round trip, and fewer than N replicas is :class:`backends.errors.NotReplicated`.

Cluster mode is explicit, never guessed: ``?cluster=true`` on the URI (or the adapter
option ``cluster=True``) selects redis-py's RedisCluster client. Auto-detecting it would
cost a round trip in a constructor that promises none, and a standalone client pointed
at a cluster node fails loudly anyway (MOVED/CROSSSLOT become UnsupportedOperation with
this advice).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from backends.errors import BackendConfigError
from backends.info import declared, declared_ttl_env
from backends.redaction import redact_uri
from backends.selection import InvalidURI
from backends.settings import FALSE, TRUE, Setting, option_names

_INFO = declared("redis")
DEFAULT_URL = "redis://localhost:6379/0"
ENV_URL = _INFO.uri_env[0]
ENV_TTL = declared_ttl_env("redis")
SCHEMES = _INFO.schemes
CLUSTER_PARAM = "cluster"
SENTINEL_SCHEMES = _INFO.locator_schemes
SENTINEL_PASSWORD_PARAM = "sentinel_password"
WAIT_REPLICAS_PARAM = "wait_replicas"
WAIT_TIMEOUT_PARAM = "wait_timeout_ms"
#: our own URI parameters (redis-py does not know them: removed before it sees the URI)
OWN_PARAMS = (CLUSTER_PARAM, WAIT_REPLICAS_PARAM, WAIT_TIMEOUT_PARAM)
DEFAULT_WAIT_TIMEOUT_MS = 1000
_TRUE, _FALSE = TRUE, FALSE

DEFAULT_CONNECT_TIMEOUT_S = 3.0
DEFAULT_SOCKET_TIMEOUT_S = 5.0

#: every setting of the redis backend (the resolver below reads them)
SETTINGS: tuple[Setting, ...] = (
    Setting("uri", ENV_URL, "URI", DEFAULT_URL,
            "where Redis is: redis://, rediss:// (TLS) or unix://; ?cluster=true for a Redis "
            "Cluster; redis+sentinel://HOST:PORT[,HOST:PORT]/SERVICE[/DB] for a primary found "
            "through Sentinel", secret=True, option=False),
    Setting("connect_timeout", None, "seconds", DEFAULT_CONNECT_TIMEOUT_S,
            "time allowed to connect"),
    Setting("socket_timeout", None, "seconds", DEFAULT_SOCKET_TIMEOUT_S,
            "time allowed for a reply"),
    Setting("timeout", None, "seconds", None, "sets both timeouts at once (--timeout)"),
    Setting("ttl_seconds", ENV_TTL, "whole seconds", 0,
            "per-session TTL re-applied on each write (0: no expiry)"),
    Setting("retries", None, "int >= 0", 1, "retries of a failed connection or command"),
    Setting("max_connections", None, "int >= 1", None, "the connection pool's size"),
    Setting("cluster", None, "bool", False, "a Redis Cluster (beats ?cluster= on the URI)"),
    Setting(WAIT_REPLICAS_PARAM, None, "int >= 0", 0,
            "every state write and turn is followed by WAIT for this many replicas; fewer "
            "within wait_timeout_ms is an error (NotReplicated), never a success (beats "
            "?wait_replicas= on the URI; 0: no wait)"),
    Setting(WAIT_TIMEOUT_PARAM, None, "milliseconds >= 1", DEFAULT_WAIT_TIMEOUT_MS,
            "how long a write waits for wait_replicas replicas (beats ?wait_timeout_ms=; "
            "must stay below socket_timeout)"),
)


def _positive_float(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BackendConfigError(f"redis option {name} must be a number of seconds") from None
    if not number > 0:
        raise BackendConfigError(f"redis option {name} must be greater than 0")
    return number


def _whole(name: str, value: str, least: int) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) < least:
        raise BackendConfigError(f"redis URI parameter {name} must be a whole number >= "
                                 f"{least}, got {value!r}")
    return int(value)


def split_own_params(url: str) -> tuple[str, dict[str, Any]]:
    """Remove our own parameters (:data:`OWN_PARAMS`) from the query, which redis-py would
    refuse, and read them: ``cluster`` as a bool, the ``wait_*`` ones as whole numbers."""
    parts = urlsplit(url)
    if not parts.query:
        return url, {}
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    found: dict[str, Any] = {}
    for key, value in pairs:
        name, value = key.lower(), value.strip().lower()
        if name == CLUSTER_PARAM:
            if value not in _TRUE + _FALSE:
                raise BackendConfigError(f"redis URI parameter cluster must be true or false, "
                                         f"got {value!r}")
            found[name] = value in _TRUE
        elif name == WAIT_REPLICAS_PARAM:
            found[name] = _whole(name, value, 0)
        elif name == WAIT_TIMEOUT_PARAM:
            found[name] = _whole(name, value, 1)
    if not found:
        return url, {}
    rest = urlencode([(k, v) for k, v in pairs if k.lower() not in OWN_PARAMS])
    return urlunsplit(parts._replace(query=rest)), found


@dataclass(frozen=True)
class SentinelTarget:
    """Where a Sentinel-watched primary is found: the sentinels and the service name."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None
    sentinel_password: str | None
    tls: bool


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The sentinels, service and database of a ``redis+sentinel://`` URI (InvalidURI
    naming the part that is wrong; the password never appears in a message)."""
    from urllib.parse import unquote

    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    sentinels = []
    for host in hosts.split(","):
        one = urlsplit(f"//{host}")
        if not one.hostname:
            raise InvalidURI(f"Redis Sentinel URI {redact_uri(url)!r} names an empty sentinel "
                             "host; list them as HOST:PORT,HOST:PORT")
        sentinels.append((one.hostname, one.port or 26379))
    service, _, db = parts.path.strip("/").partition("/")
    if not service:
        raise InvalidURI(f"Redis Sentinel URI {redact_uri(url)!r} names no service: write "
                         "redis+sentinel://HOST:PORT/SERVICE[/DB] (SERVICE is the name the "
                         "sentinels monitor, e.g. mymaster)")
    if db and not (db.isascii() and db.isdigit()):
        raise InvalidURI(f"Redis Sentinel URI {redact_uri(url)!r}: {db!r} is not a database "
                         "number")
    user, colon, password = userinfo.partition(":") if at else ("", "", "")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(query) - {SENTINEL_PASSWORD_PARAM, *OWN_PARAMS})
    if unknown:
        raise InvalidURI(f"Redis Sentinel URI {redact_uri(url)!r}: parameter(s) "
                         f"{', '.join(unknown)} are not used through Sentinel; the ones used "
                         f"are {SENTINEL_PASSWORD_PARAM}=, {WAIT_REPLICAS_PARAM}= and "
                         f"{WAIT_TIMEOUT_PARAM}=")
    return SentinelTarget(tuple(sentinels), unquote(service), int(db or 0),
                          unquote(user) or None, unquote(password) if colon else None,
                          query.get(SENTINEL_PASSWORD_PARAM) or None,
                          parts.scheme.lower() in _INFO.tls_schemes)


def _require_db_number(url: str, scheme: str) -> None:
    """``redis://host:port/N``: the path is a database number or nothing. redis-py reads
    ``/abc`` as database 0 without a word, so a typo would silently address another
    database: a usage error naming the path instead (a unix socket's path is its file)."""
    if scheme in _INFO.path_schemes:
        return
    if scheme in SENTINEL_SCHEMES:
        parse_sentinel_url(url)  # SERVICE[/DB]: checked there
        return
    try:
        path = urlsplit(url).path
    except ValueError:
        return  # the driver reports a malformed URI itself
    if path in ("", "/"):
        return
    number = path[1:]
    if not (number.isascii() and number.isdigit()):
        raise InvalidURI(f"Redis URI {redact_uri(url)!r}: the path {path!r} is not a database "
                         "number; write redis://host:port/N with N a whole number (or no path "
                         "for database 0)")


#: rediss:// query parameters (redis-py's) that name a file or directory
_TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_ca_path")


def _require_tls_files(url: str) -> None:
    """A CA, certificate or key file the URI names must exist: a missing CA file is a
    permanent configuration error (exit 3), not an unreachable server (redis-py reports
    it as a connection failure)."""
    try:
        query = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    except ValueError:
        return
    for key, value in query:
        if key in _TLS_FILES and value and not os.path.exists(os.path.expanduser(value)):
            raise BackendConfigError(f"Redis URI {redact_uri(url)!r}: {key} names {value!r}, "
                                     "which does not exist; fix the path (or drop the parameter)")


def _ttl(value: Any, source: str) -> int:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise BackendConfigError(f"{source} must be a whole number of seconds (0 = no expiry)") from None
    if number < 0:
        raise BackendConfigError(f"{source} must not be negative")
    return number


@dataclass(frozen=True)
class RedisSettings:
    url: str
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT_S
    ttl_seconds: int = 0
    retries: int = 1
    max_connections: int | None = None
    #: talk to a Redis Cluster (RedisCluster client): state only, no events
    cluster: bool = False
    #: replicas every state write and turn waits for (WAIT), and for how long
    wait_replicas: int = 0
    wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS

    @property
    def sentinel(self) -> SentinelTarget | None:
        """The sentinels to ask for the primary (a ``redis+sentinel://`` URI), else None."""
        return sentinel_of(self.url)

    @property
    def redacted_url(self) -> str:
        return redact_uri(self.url)

    @classmethod
    def resolve(
        cls,
        uri: str | None,
        options: Mapping[str, Any],
        environ: Mapping[str, str] | None = None,
    ) -> "RedisSettings":
        """Explicit arguments beat environment variables, which beat defaults.

        ``timeout`` sets both timeouts at once (what a generic ``--timeout`` maps to).
        ``cluster`` (option) beats ``?cluster=`` (URI), which is stripped from the URL.
        """
        env = os.environ if environ is None else environ
        known = set(option_names(SETTINGS))
        unknown = sorted(set(options) - known)
        if unknown:
            raise BackendConfigError(
                f"unknown redis option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        url = (uri if uri else env.get(ENV_URL)) or DEFAULT_URL
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme not in SCHEMES:
            raise BackendConfigError(
                f"not a Redis URI: {redact_uri(url)!r} (expected redis://, rediss://, unix:// "
                "or redis+sentinel://)"
            )
        _require_db_number(url, scheme)
        _require_tls_files(url)
        try:
            url, from_uri = split_own_params(url)
        except ValueError as exc:
            if isinstance(exc, BackendConfigError):
                raise
            raise BackendConfigError(f"invalid Redis URI {redact_uri(url)!r}") from None
        cluster = options.get("cluster")
        if cluster is None:
            cluster = bool(from_uri.get(CLUSTER_PARAM))
        elif not isinstance(cluster, bool):
            raise BackendConfigError("redis option cluster must be true or false")
        if cluster and (scheme in _INFO.path_schemes or scheme in SENTINEL_SCHEMES):
            raise BackendConfigError("a Redis Cluster is reached over redis:// or rediss://, "
                                     "not a unix socket or through Sentinel")
        connect = socket = None
        if options.get("timeout") is not None:
            connect = socket = _positive_float("timeout", options["timeout"])
        if options.get("connect_timeout") is not None:
            connect = _positive_float("connect_timeout", options["connect_timeout"])
        if options.get("socket_timeout") is not None:
            socket = _positive_float("socket_timeout", options["socket_timeout"])
        if options.get("ttl_seconds") is not None:
            ttl = _ttl(options["ttl_seconds"], "redis option ttl_seconds")
        elif env.get(ENV_TTL, "").strip():
            ttl = _ttl(env[ENV_TTL], ENV_TTL)
        else:
            ttl = 0
        retries = options.get("retries", 1)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise BackendConfigError("redis option retries must be a non-negative int")
        max_conn = options.get("max_connections")
        if max_conn is not None and (not isinstance(max_conn, int) or max_conn < 1):
            raise BackendConfigError("redis option max_connections must be a positive int")
        socket = socket or DEFAULT_SOCKET_TIMEOUT_S
        replicas, wait_ms = _wait(options, from_uri, socket, cluster)
        return cls(
            url=url,
            connect_timeout=connect or DEFAULT_CONNECT_TIMEOUT_S,
            socket_timeout=socket,
            ttl_seconds=ttl,
            retries=retries,
            max_connections=max_conn,
            cluster=cluster,
            wait_replicas=replicas,
            wait_timeout_ms=wait_ms,
        )


def _wait(options: Mapping[str, Any], from_uri: Mapping[str, Any], socket_timeout: float,
          cluster: bool) -> tuple[int, int]:
    """``wait_replicas`` and ``wait_timeout_ms`` in force (an option beats the URI's): the
    wait must end before the reply's socket timeout, or a short count would read as an
    unreachable server instead of its own error."""
    found = {}
    for name, least in ((WAIT_REPLICAS_PARAM, 0), (WAIT_TIMEOUT_PARAM, 1)):
        value = options.get(name)
        if value is None:
            value = from_uri.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < least):
            raise BackendConfigError(f"redis option {name} must be an int >= {least}")
        found[name] = value
    replicas = found[WAIT_REPLICAS_PARAM] or 0
    wait_ms = found[WAIT_TIMEOUT_PARAM] or DEFAULT_WAIT_TIMEOUT_MS
    if replicas and wait_ms >= socket_timeout * 1000:
        raise BackendConfigError(f"redis option {WAIT_TIMEOUT_PARAM} ({wait_ms}) must be below "
                                 f"socket_timeout ({socket_timeout:g}s): raise the timeout or "
                                 "lower the wait")
    if replicas and cluster:
        raise BackendConfigError(f"redis option {WAIT_REPLICAS_PARAM} is not offered on a "
                                 "Redis Cluster (its scripts are routed node by node)")
    return replicas, wait_ms


def make_client(settings: RedisSettings, *, timeout: float | None = None,
                retries: int | None = None, follower: Any = None):
    """A lazily connecting redis-py client (no I/O here). Binary-safe: no decoding.
    ``follower`` (a :class:`backends.redis.sentinel.Follower`, Sentinel URIs only): the
    client's connections follow the primary it announces."""
    import redis
    from redis.backoff import ExponentialBackoff, NoBackoff
    from redis.retry import Retry

    attempts = settings.retries if retries is None else retries
    backoff = ExponentialBackoff(cap=0.5, base=0.05) if attempts else NoBackoff()
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": timeout or settings.connect_timeout,
        "socket_timeout": timeout or settings.socket_timeout,
        "retry": Retry(backoff, attempts),
        # named explicitly: redis-py 5.x retries a command only on the errors listed here
        # (none by default, so ``retries`` applied to connecting alone), 6.0+ on these two
        # by default; checked against redis-py 5.0.0 and 8.1.0
        "retry_on_error": [redis.exceptions.ConnectionError, redis.exceptions.TimeoutError],
        "decode_responses": False,
    }
    if settings.max_connections:
        kwargs["max_connections"] = settings.max_connections
    if settings.cluster:
        return LazyClusterClient(settings, kwargs)
    if settings.sentinel is not None:
        return sentinel_primary(settings.sentinel, kwargs, follower)
    try:
        return redis.Redis.from_url(settings.url, **kwargs)
    except ValueError:
        # redis-py's message may quote the URI, password included: do not chain it.
        raise BackendConfigError(f"invalid Redis URI {settings.redacted_url!r}") from None


def _sentinel_kwargs(target: SentinelTarget, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    timeouts = {k: kwargs[k] for k in ("socket_connect_timeout", "socket_timeout")}
    return {**timeouts, "password": target.sentinel_password}


def new_follower(settings: RedisSettings, *, listen: bool = True) -> Any:
    """The :class:`backends.redis.sentinel.Follower` of a Sentinel URI's service (None for
    a URI naming one server): an adapter's clients share one; a probe's does not listen."""
    target = settings.sentinel
    if target is None:
        return None
    from backends.redis.sentinel import Follower

    timeouts = {"socket_connect_timeout": settings.connect_timeout,
                "socket_timeout": settings.socket_timeout}
    return Follower(list(target.sentinels), target.service, _sentinel_kwargs(target, timeouts),
                    listen=listen)


def sentinel_primary(target: SentinelTarget, kwargs: dict[str, Any], follower: Any = None) -> Any:
    """A client of the primary the sentinels name (redis-py's ``Sentinel.master_for``: no
    I/O here; it asks them on connecting and after a failed connection); with a
    ``follower``, its connections also follow every switch the sentinels announce."""
    from redis.sentinel import Sentinel

    watcher = Sentinel(list(target.sentinels), sentinel_kwargs=_sentinel_kwargs(target, kwargs))
    if follower is not None:
        from backends.redis.sentinel import following_pool_class

        kwargs = {**kwargs, "connection_pool_class": following_pool_class(follower)}
    return watcher.master_for(target.service, db=target.db, username=target.username,
                              password=target.password, ssl=target.tls, **kwargs)


def sentinel_of(url: str) -> SentinelTarget | None:
    """The Sentinel target a URI names, or None for a URI naming one server."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    return parse_sentinel_url(url) if scheme in SENTINEL_SCHEMES else None


class LazyClusterClient:
    """A RedisCluster built on first use.

    RedisCluster asks a startup node for the slot map inside its constructor; the adapter
    promises no I/O before first use, so the real client is made by the first call (under
    a lock, once) and every attribute is delegated to it.
    """

    is_cluster = True

    def __init__(self, settings: RedisSettings, kwargs: dict[str, Any]) -> None:
        import threading

        self._settings = settings
        self._kwargs = kwargs
        self._client: Any = None
        self._lock = threading.Lock()

    def cluster(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    from redis.cluster import RedisCluster

                    try:
                        self._client = RedisCluster.from_url(self._settings.url, **self._kwargs)
                    except ValueError:
                        raise BackendConfigError(
                            f"invalid Redis URI {self._settings.redacted_url!r}") from None
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster(), name)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def is_cluster_client(client: Any) -> bool:
    return bool(getattr(client, "is_cluster", False))
