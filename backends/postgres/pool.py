"""The SQL backends' connection pool: psycopg_pool's, configured from the URI.

Connections run in autocommit mode with the statement timeout and UTC set once per
connection. A backend built on this base may hand the pool its own connection hook
(``prepare_connection``, e.g. teaching a connection an extension's types): the pool runs
it on a borrowed connection when the borrower asks (``typed=True``), once per connection
once it succeeds. Callers open explicit transactions, and a connection handed back inside
one is rolled back by the pool (a broken one is discarded). What psycopg_pool adds over
a hand-rolled pool: each connection is checked when it is handed out (a connection the
server dropped, after a restart, a failover or ``pg_terminate_backend``, is replaced
before the caller sees it), and connections are retired after a maximum lifetime and idle
time. The check is cheap by default: a server that ends a connection says so on its
socket (a termination notice, then end of file), so an idle connection with nothing to
read is handed out as it is, and one with something to read gets psycopg_pool's own check
(an empty query) first; ``pool_check=always`` runs that query on every checkout (one
round trip more per operation, which a load test notices).

Pool settings are query parameters of the URI (removed before libpq sees it):

- ``pool_max_lifetime`` seconds a connection is kept at most (default 3600)
- ``pool_max_idle`` seconds an unused connection is kept (default 600)
- ``pool_timeout`` seconds to wait for a free connection (default 30)
- ``pool_check`` ``on`` (default: the socket check above), ``always`` (the query on
  every checkout) or ``off``

A multi-host URI with ``target_session_attrs=read-write`` (or ``primary``) follows a
promotion: libpq connects to whichever listed server takes writes, and the pool hands out
no connection to a server that became read-only (its ``in_hot_standby`` or
``default_transaction_read_only``, which PostgreSQL 14+ reports on the connection, checked
at each checkout at no cost) or vanished; a write refused as read-only (SQLSTATE 25006)
discards its connection and checks the rest.

The size is the ``pool_size`` option (``max_size``; connections open on demand, none is
kept open before first use). The pool is opened on first use, not by the constructor,
and that first use makes one direct connection first, so a server that refuses (a bad
password, an unknown database, nothing listening) fails at once with its own reason
instead of after the pool's wait. Checked against psycopg_pool 3.2.0 and 3.3.
"""

from __future__ import annotations

import logging
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from backends.errors import BackendConfigError, BackendUnreachable
from backends.postgres.config import SqlConfig
from backends.postgres.errors import load_psycopg, translate_error

#: the URI query parameters read here, with their defaults
POOL_PARAMETERS: dict[str, Any] = {"pool_max_lifetime": 3600.0, "pool_max_idle": 600.0,
                                   "pool_timeout": 30.0, "pool_check": "on"}
_CHECK_MODES = {"on": "on", "true": "on", "1": "on", "yes": "on", "always": "always",
                "off": "off", "false": "off", "0": "off", "no": "off"}


def split_pool_parameters(conninfo: str, display_uri: str) -> tuple[str, dict[str, Any]]:
    """``conninfo`` without the ``pool_*`` query parameters, and their values (checked:
    a bad one is a BackendConfigError naming it)."""
    settings = dict(POOL_PARAMETERS)
    if "pool_" not in conninfo:
        return conninfo, settings
    parts = urlsplit(conninfo)
    kept = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in POOL_PARAMETERS:
            kept.append((key, value))
            continue
        if key == "pool_check":
            mode = _CHECK_MODES.get(value.strip().lower())
            if mode is None:
                raise BackendConfigError(f"URI parameter pool_check must be on, always or "
                                         f"off, got {value!r} (in {display_uri})")
            settings[key] = mode
            continue
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not number > 0 or number != number or number == float("inf"):
            raise BackendConfigError(f"URI parameter {key} must be a positive number of "
                                     f"seconds, got {value!r} (in {display_uri})")
        settings[key] = number
    query = urlencode(kept, safe="/:,")
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment)), settings


#: what ``target_session_attrs`` must say for the pool to keep to a writable server
_WRITABLE_ATTRS = {"read-write", "primary"}


def wants_writable(conninfo: str) -> bool:
    """Whether the URI asks libpq for a server that takes writes."""
    query = dict(parse_qsl(urlsplit(conninfo).query, keep_blank_values=True))
    return query.get("target_session_attrs", "").strip().lower() in _WRITABLE_ATTRS


def reports_read_only(conn: Any) -> bool:
    """Whether the server said on this connection that it takes no writes (a standby, or
    ``default_transaction_read_only``): no round trip, PostgreSQL 14+ reports both."""
    try:
        status = conn.info.parameter_status
        return "on" in (status("in_hot_standby"), status("default_transaction_read_only"))
    except Exception:  # noqa: BLE001 - a closed connection: the liveness check decides
        return False


def _has_pending_input(conn: Any) -> bool:
    """Whether an idle connection's socket has something to read: what a server that ended
    the connection leaves there (its termination notice, then end of file). One poll."""
    import select

    try:
        return bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError):  # a closed connection has no descriptor
        return True


def _load_pool_class(backend: str = "postgres") -> Any:
    try:
        from psycopg_pool import ConnectionPool as DriverPool
    except ImportError as exc:
        from backends.postgres.errors import missing_driver

        raise missing_driver(backend, "psycopg_pool") from exc
    # the pool logs each failed reconnection attempt; the caller gets the error itself,
    # so nothing is printed through logging's last-resort handler
    logger = logging.getLogger("psycopg.pool")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return DriverPool


#: a backend's connection hook: prepares one connection, True when done (False: the
#: database cannot yet, e.g. its extension is not created; asked again on the next use)
ConnectionHook = Callable[[Any], bool]


#: read_only_sql_transaction: a write on a server that takes none (demoted, or read-only)
_READ_ONLY_STATE = "25006"


def _states(exc: BaseException) -> set[str]:
    """The SQLSTATEs of ``exc`` and its causes (a mapped error keeps the driver's)."""
    found: set[str] = set()
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            break
        state = getattr(seen, "sqlstate", None)
        if state:
            found.add(state)
        seen = seen.__cause__
    return found


class ConnectionPool:
    def __init__(self, config: SqlConfig, *,
                 prepare_connection: ConnectionHook | None = None) -> None:
        self._config = config
        self._prepare = prepare_connection
        self._conninfo, self._settings = split_pool_parameters(config.conninfo,
                                                               config.display_uri)
        self._pool: Any = None
        #: hand out connections to a server that takes writes only
        self._writable = wants_writable(self._conninfo)
        self._full_check: Any = None
        self._closed = False
        self._lock = threading.Lock()
        #: connections the hook has prepared
        self._prepared: "weakref.WeakSet[Any]" = weakref.WeakSet()

    @property
    def settings(self) -> dict[str, Any]:
        """The pool settings in force (the URI's ``pool_*`` parameters or their defaults)."""
        return dict(self._settings, pool_size=self._config.pool_size)

    # -- connections ----------------------------------------------------------------

    def connect(self, *, connect_timeout: float | None = None,
                statement_timeout_ms: int | None = None) -> Any:
        """A fresh, unpooled connection (UTC, statement timeout set). Caller closes it."""
        psycopg = load_psycopg(self._config.backend)
        timeout = connect_timeout if connect_timeout is not None else self._config.connect_timeout
        try:
            conn = psycopg.connect(
                self._conninfo,
                autocommit=True,
                # libpq takes whole seconds and treats anything below 2 as 2
                connect_timeout=max(1, int(round(timeout))),
            )
        except Exception as exc:
            raise translate_error(exc, self._config.display_uri, action="connection") from exc
        try:
            self._configure(conn, statement_timeout_ms)
        except Exception as exc:
            conn.close()
            raise translate_error(exc, self._config.display_uri, action="connection setup") from exc
        return conn

    def _configure(self, conn: Any, statement_timeout_ms: int | None = None) -> None:
        ms = statement_timeout_ms or self._config.statement_timeout_ms
        conn.execute(f"SET statement_timeout = {int(ms)}")
        conn.execute("SET TIME ZONE 'UTC'")

    def _driver_pool(self) -> Any:
        """The psycopg_pool pool, opened on first use after one direct connection."""
        pool = self._pool
        if pool is not None:
            return pool
        with self._lock:
            if self._closed:
                raise BackendUnreachable(f"{self._config.backend} adapter for {self._config.display_uri} is closed")
            if self._pool is None:
                driver_pool = _load_pool_class(self._config.backend)
                self.connect().close()  # a refusal surfaces now, with the server's reason
                self._full_check = driver_pool.check_connection
                pool = driver_pool(
                    self._conninfo,
                    kwargs={"autocommit": True,
                            "connect_timeout": max(1, int(round(self._config.connect_timeout)))},
                    min_size=0,
                    max_size=self._config.pool_size,
                    open=False,
                    configure=self._configure,
                    name=f"semvec {self._config.display_uri}",
                    timeout=self._settings["pool_timeout"],
                    max_lifetime=self._settings["pool_max_lifetime"],
                    max_idle=self._settings["pool_max_idle"],
                )
                pool.open(wait=False)
                self._pool = pool
            return self._pool

    def _getconn(self) -> Any:
        """A connection from the pool, checked (``pool_check``): one found dead is given
        back (the pool discards it), the pool's other idle connections are checked at
        once (after a restart they are all dead), and the next one is taken. Done here
        rather than by psycopg_pool's ``check`` callback, which sleeps a backoff (1 s,
        doubling) after each dead connection it meets."""
        pool = self._driver_pool()
        mode = self._settings["pool_check"]
        for _ in range(self._config.pool_size + 1):
            conn = self._getconn_unchecked(pool)
            if mode == "off" or (mode == "on" and not _has_pending_input(conn)):
                if self._writable and reports_read_only(conn):
                    self._discard(conn)
                    continue
                return conn
            try:
                self._full_check(conn)
            except Exception:  # noqa: BLE001 - a dead connection: discard, check the rest
                self._putconn(conn)
                pool.check()
                continue
            if self._writable and reports_read_only(conn):
                self._discard(conn)
                continue
            return conn
        return self._getconn_unchecked(pool)

    def _discard(self, conn: Any) -> None:
        """Close ``conn`` (the pool drops a closed connection it gets back) and check the
        others: after a failover every idle one may point at the old server."""
        try:
            conn.close()
        finally:
            self._putconn(conn)
        pool = self._pool
        if pool is not None:
            pool.check()

    def _getconn_unchecked(self, pool: Any) -> Any:
        try:
            return pool.getconn()
        except Exception as exc:
            from psycopg_pool import PoolClosed, PoolTimeout

            if isinstance(exc, PoolClosed):
                raise BackendUnreachable(
                    f"{self._config.backend} adapter for {self._config.display_uri} is closed") from None
            if not isinstance(exc, PoolTimeout):
                raise
            # the pool could not hand out a connection in time: busy, or the server is
            # gone; a direct attempt tells which (and raises the server's own reason)
            self.connect().close()
            raise BackendUnreachable(
                f"no free connection to {self._config.display_uri} within "
                f"{self._settings['pool_timeout']:.0f}s (pool_size={self._config.pool_size})"
            ) from exc

    @contextmanager
    def connection(self, *, typed: bool = False) -> Iterator[Any]:
        """Borrow a connection; with ``typed=True`` the backend's connection hook has run
        on it (when the database allows). Driver errors surface mapped to our categories."""
        conn = self._getconn()
        try:
            with self._mapped_errors():
                if typed and self._prepare is not None and conn not in self._prepared:
                    if self._prepare(conn):
                        self._prepared.add(conn)
                yield conn
        except BaseException as exc:
            if _READ_ONLY_STATE in _states(exc):  # the server stopped taking writes
                conn.close()
            raise
        finally:
            self._putconn(conn)

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """Driver errors raised in the block surface mapped to our categories."""
        try:
            yield
        except Exception as exc:
            mapped = translate_error(exc, self._config.display_uri, action="a query")
            if mapped is exc:
                raise
            raise mapped from exc

    @contextmanager
    def unpooled(self) -> Iterator[Any]:
        """A connection of the caller's own for a long pass (outside the pool, so a pass
        held open beside other reads starves none of them), driver errors mapped as
        :meth:`connection` maps them; closed afterwards."""
        conn = self.connect()
        try:
            with self._mapped_errors():
                yield conn
        finally:
            conn.close()

    def _putconn(self, conn: Any) -> None:
        """Back to the pool, which rolls back an open transaction and discards a broken
        connection; after close() the connection is just closed."""
        pool = self._pool
        try:
            if pool is None or self._closed:
                conn.close()
            else:
                pool.putconn(conn)
        except Exception:  # noqa: BLE001 - giving a connection back must not fail the caller
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass

    def forget_prepared_connections(self) -> None:
        """After an extension is created, connections must be prepared anew (its types
        have new identities)."""
        self._prepared = weakref.WeakSet()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            try:
                pool.close(timeout=5.0)
            except Exception:  # noqa: BLE001 - closing must not fail
                pass
