"""A small thread-safe connection pool (psycopg_pool is not a dependency).

Each borrowed connection is used by one thread at a time; connections run in autocommit
mode and callers open explicit transactions, so a connection is never returned to the
pool inside an open transaction. Broken connections are discarded, not reused.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from backends.errors import BackendUnreachable
from backends.pgvector.config import PgVectorConfig
from backends.pgvector.driver import load_psycopg, translate_error, register_vector_type


class _Pooled:
    __slots__ = ("conn", "vector_ready")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.vector_ready = False


class ConnectionPool:
    def __init__(self, config: PgVectorConfig, *, acquire_timeout: float = 30.0) -> None:
        self._config = config
        self._acquire_timeout = acquire_timeout
        self._idle: list[_Pooled] = []
        self._open = 0
        self._closed = False
        self._cond = threading.Condition()

    # -- connections ----------------------------------------------------------------

    def connect(self, *, connect_timeout: float | None = None,
                statement_timeout_ms: int | None = None) -> Any:
        """A fresh, unpooled connection (UTC, statement timeout set). Caller closes it."""
        psycopg = load_psycopg()
        timeout = connect_timeout if connect_timeout is not None else self._config.connect_timeout
        try:
            conn = psycopg.connect(
                self._config.conninfo,
                autocommit=True,
                # libpq takes whole seconds and treats anything below 2 as 2
                connect_timeout=max(1, int(round(timeout))),
            )
        except Exception as exc:
            raise translate_error(exc, self._config.display_uri, action="connection") from exc
        try:
            ms = statement_timeout_ms or self._config.statement_timeout_ms
            conn.execute(f"SET statement_timeout = {int(ms)}")
            conn.execute("SET TIME ZONE 'UTC'")
        except Exception as exc:
            conn.close()
            raise translate_error(exc, self._config.display_uri, action="connection setup") from exc
        return conn

    def _acquire(self) -> _Pooled:
        deadline = time.monotonic() + self._acquire_timeout
        with self._cond:
            while True:
                if self._closed:
                    raise BackendUnreachable(
                        f"pgvector adapter for {self._config.display_uri} is closed"
                    )
                if self._idle:
                    return self._idle.pop()
                if self._open < self._config.pool_size:
                    self._open += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BackendUnreachable(
                        f"no free connection to {self._config.display_uri} within "
                        f"{self._acquire_timeout:.0f}s (pool_size={self._config.pool_size})"
                    )
                self._cond.wait(remaining)
        try:
            return _Pooled(self.connect())
        except BaseException:
            with self._cond:
                self._open -= 1
                self._cond.notify()
            raise

    def _release(self, pooled: _Pooled) -> None:
        conn = pooled.conn
        reusable = not conn.closed and not conn.broken
        if reusable:
            psycopg = load_psycopg()
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                try:
                    conn.rollback()
                except Exception:  # noqa: BLE001 - a failed rollback: the connection is not reused
                    reusable = False
        with self._cond:
            if reusable and not self._closed:
                self._idle.append(pooled)
            else:
                self._open -= 1
                if not conn.closed:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001 - closing must not fail
                        pass
            self._cond.notify()

    @contextmanager
    def connection(self, *, vector: bool = False) -> Iterator[Any]:
        """Borrow a connection; with ``vector=True`` the ``vector`` type is registered
        (when the extension exists). Driver errors surface mapped to our categories."""
        pooled = self._acquire()
        try:
            if vector and not pooled.vector_ready:
                pooled.vector_ready = register_vector_type(pooled.conn)
            yield pooled.conn
        except Exception as exc:
            mapped = translate_error(exc, self._config.display_uri, action="a query")
            if mapped is exc:
                raise
            raise mapped from exc
        finally:
            self._release(pooled)

    def forget_vector_registration(self) -> None:
        """After the extension is created, idle connections must register the type anew."""
        with self._cond:
            for pooled in self._idle:
                pooled.vector_ready = False

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cond.notify_all()
        for pooled in idle:
            try:
                pooled.conn.close()
            except Exception:  # noqa: BLE001 - closing must not fail
                pass
