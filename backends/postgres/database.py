"""What every store of one SQL backend shares: the pool, its layout, the table names and
lazy provisioning of the layout's table groups."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from backends.errors import BackendConfigError
from backends.postgres.config import SqlConfig
from backends.postgres.pool import ConnectionHook, ConnectionPool
from backends.postgres.schema import ENGINE_LAYOUT, SqlLayout, Tables, ensure_group

#: SQLSTATEs meaning "our table (or its schema) is not there": undefined_table,
#: invalid_schema_name. Reads treat them as "nothing stored".
_ABSENT_STATES = frozenset({"42P01", "3F000"})


def is_absent_table_error(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if getattr(seen, "sqlstate", None) in _ABSENT_STATES:
            return True
        seen = seen.__cause__
    return False


class Database:
    def __init__(self, config: SqlConfig, layout: SqlLayout = ENGINE_LAYOUT, *,
                 prepare_connection: ConnectionHook | None = None) -> None:
        """``prepare_connection`` is the backend's connection hook (see
        :mod:`backends.postgres.pool`), run on the connections of typed reads and of
        writes to a group that needs an extension."""
        self.config = config
        self.layout = layout
        self.tables = Tables(config.schema)
        self.pool = ConnectionPool(config, prepare_connection=prepare_connection)
        self._provisioned: set[str] = set()
        self._lock = threading.Lock()
        self._deployed_dimensions: int | None = None

    @property
    def dimensions(self) -> int:
        """The embedding width in force: the configured one when it was given, else the
        deployed width of the layout's sized column, else the default."""
        if self.config.dimensions_explicit:
            return self.config.dimensions
        if self._deployed_dimensions is None:
            self._deployed_dimensions = self.deployed_dimensions()
        return self._deployed_dimensions or self.config.dimensions

    def deployed_dimensions(self) -> int | None:
        """The type modifier (``n`` of ``type(n)``) of the layout's sized column, or None
        when there is none."""
        sized = self.layout.sized_column
        if sized is None:
            return None

        def work(conn: Any) -> int | None:
            row = conn.execute(
                "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s"
                " AND c.relname = %s AND a.attname = %s AND NOT a.attisdropped",
                (self.config.schema, *sized),
            ).fetchone()
            return int(row[0]) if row and row[0] and row[0] > 0 else None

        return self.read(work, lambda: None)

    @contextmanager
    def connection(self, *, typed: bool = False) -> Iterator[Any]:
        with self.pool.connection(typed=typed) as conn:
            yield conn

    def provision(self, name: str, *, explicit: bool = False) -> None:
        """Make sure the tables of the layout's group ``name`` exist before a write (once
        per adapter). ``explicit`` (an operator's ensure) creates them even with
        create_tables off."""
        if name in self._provisioned:
            return
        group = self.layout.group(name)
        with self._lock:
            if name in self._provisioned:
                return
            with self.connection() as conn:
                if not (self.config.create_tables or explicit):
                    from backends.postgres.schema import missing_tables

                    missing = missing_tables(conn, self.config.schema, group.tables)
                    if missing:
                        raise BackendConfigError(
                            f"{self.config.backend} tables {', '.join(missing)} are missing in schema "
                            f"{self.config.schema!r} and create_tables is off: run "
                            f"'semvecctl indexes ensure --uri {self.config.display_uri} --yes'"
                        )
                else:
                    executed = ensure_group(conn, self.tables, group, self.dimensions)
                    if executed and group.extension:
                        self.pool.forget_prepared_connections()
            self._provisioned.add(name)

    def forget_provisioning(self) -> None:
        with self._lock:
            self._provisioned.clear()

    def close(self) -> None:
        self.pool.close()

    def write(self, name: str, work):
        """Run ``work(conn)`` after provisioning the group ``name``; if the tables vanished
        since (dropped by an operator), provision again and retry once. A group that
        needs an extension writes on connections the backend's hook has prepared."""
        self.provision(name)
        typed = self.layout.group(name).extension is not None
        try:
            with self.connection(typed=typed) as conn:
                return work(conn)
        except Exception as exc:
            if not is_absent_table_error(exc):
                raise
            with self._lock:
                self._provisioned.discard(name)
        self.provision(name)
        with self.connection(typed=typed) as conn:
            return work(conn)

    def stream(self, sql: str, args: Sequence[Any], batch: int = 5000, *,
               unpooled: bool = False) -> Iterator[Any]:
        """Rows of ``sql`` through a server-side cursor, a page per round trip (memory
        stays flat); a missing table is no rows. ``unpooled``: on a connection of the
        stream's own (a pass held open while the caller reads through the pool)."""
        opened = self.pool.unpooled() if unpooled else self.connection()
        try:
            with opened as conn, conn.transaction():
                with conn.cursor(name="semvecctl_stream") as cur:
                    cur.execute(sql, list(args))
                    while rows := cur.fetchmany(batch):  # iterated in C
                        yield from rows
        except Exception as exc:
            if not is_absent_table_error(exc):
                raise

    def session_tables(self) -> tuple[str, ...]:
        """Tables besides the state whose rows belong to a session and go with it: this
        layout's and those of every backend sharing the database, whether or not this
        backend provisions them (deleting a session takes a flavour's rows too)."""
        from backends.postgres.schema import companion_tables

        return companion_tables(self.config.backend, self.layout)

    def read(self, work, absent, *, typed: bool = False):
        """Run ``work(conn)``; a missing table or schema means nothing is stored, so the
        read answers ``absent()`` instead of creating anything. ``typed``: on a connection
        the backend's hook has prepared."""
        try:
            with self.connection(typed=typed) as conn:
                return work(conn)
        except Exception as exc:
            if is_absent_table_error(exc):
                return absent()
            raise
