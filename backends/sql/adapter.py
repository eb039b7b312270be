"""``PostgresAdapter``: state and events in the engine's SQL tables, nothing else.

The implementation is shared with ``pgvector`` (:mod:`backends.pgvector`), which is this
adapter plus an item mirror, vector indexes and server-side retrieval over the same
state and event tables: a deployment can switch between the two and keep every session.
Importing this module does not import psycopg.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator, Sequence

from backends.info import declared
from backends.contract import (
    ClosesOnce,
    FAULT_POINTS,
    IndexAction,
    IndexReport,
    IndexSpec,
    MemoryEvent,
    StateStoreSeams,
    speaks_both_conventions,
)
from backends.sql.schema import ENGINE_LAYOUT


@speaks_both_conventions
class PostgresAdapter(ClosesOnce, StateStoreSeams):
    """Session state and the compliance log in ``semvec_session_state`` and
    ``semvec_memory_events``, exactly as the engine lays them out (ENGINE-WIRE section 5).

    ``PostgresAdapter(uri=None, **options)``: ``uri`` is ``postgresql://...`` (a
    SQLAlchemy-style ``postgresql+psycopg://`` is accepted), else ``DATABASE_URL`` as the
    engine reads it. Options: ``schema`` (also ``?schema=``, else
    ``SEMVEC_PGVECTOR_SCHEMA``, default ``public``), ``connect_timeout`` (s),
    ``statement_timeout_ms``, ``pool_size``, ``create_tables``.

    Events carry no sequence in this layout (``event_store().assigns_sequences`` is
    False) and are listed newest first, as the engine lists them.
    """

    name = "postgres"
    is_persistent = True
    #: driver modules, checked without importing them by ``backends list --check``
    required_modules = declared("postgres").drivers
    #: points of the conformance fault seam (:class:`backends.contract.FaultSeam`)
    fault_points = FAULT_POINTS
    #: what this backend provisions and validates (pgvector's adds its item mirror)
    _layout = ENGINE_LAYOUT

    def __init__(self, uri: str | None = None, **options: Any) -> None:
        self._setup(uri, options)

    def _setup(self, uri: str | None, options: dict) -> None:
        from backends.sql.config import SqlConfig
        from backends.sql.driver import load_psycopg

        self.config = SqlConfig.resolve(uri, options, backend=self.name)
        load_psycopg(self.name)  # MissingDriver now, not on first use

        from backends.sql.database import Database
        from backends.sql.events import SqlEventStore
        from backends.sql.indexes import SqlIndexManager
        from backends.sql.state import SqlStateStore

        self._db = Database(self.config, self._layout)
        self._state = SqlStateStore(self._db)
        self._events = SqlEventStore(self._db)
        self._indexes = SqlIndexManager(self._db)
        self._armed_fault: str | None = None
        self._closed = False

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.config.display_uri!r},"
                f" schema={self.config.schema!r})")

    # -- the contract -----------------------------------------------------------------

    def state_store(self):
        return self._state

    def event_store(self):
        return self._events

    def retrieval_backend(self):
        return None

    def commit_turn(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
        events: Sequence[MemoryEvent] | None = None,
    ) -> int:
        """State and events in one transaction: a conflict, a bad event or a failure
        between the two writes leaves both tables untouched."""
        from backends.sql.events import append_in_transaction, validate_pg_events
        from backends.sql.schema import STATE_GROUP
        from backends.sql.state import save_in_transaction, validate_pg_save_args

        validate_pg_save_args(session_id, blob, expected_version, owner_subject,
                              pending_message)
        checked = validate_pg_events(events)

        def work(conn: Any) -> int:
            with conn.transaction():
                version = save_in_transaction(
                    conn, self._db.tables.state, session_id, blob,
                    expected_version=expected_version, owner_subject=owner_subject,
                    pending_message=pending_message,
                )
                self._trip_fault(conn)
                append_in_transaction(conn, self._db, checked)
                return version

        return self._db.write(STATE_GROUP, work)

    def check_health(self, timeout: float = 2.0) -> bool:
        """``SELECT 1`` on a fresh connection bounded by ``timeout`` (connect and
        statement); any failure (or a closed adapter) is False, never an exception."""
        if self._closed:
            return False
        try:
            conn = self._db.pool.connect(connect_timeout=timeout,
                                         statement_timeout_ms=max(1, int(timeout * 1000)))
        except Exception:  # noqa: BLE001 - a health probe answers False, never raises
            return False
        try:
            return conn.execute("SELECT 1").fetchone() == (1,)
        except Exception:  # noqa: BLE001 - a health probe answers False, never raises
            return False
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    # -- fault seam (conformance only) ------------------------------------------------

    @contextlib.contextmanager
    def inject_fault(self, point: str) -> Iterator[None]:
        """Arm ``point`` for the next commit_turn: ``turn.after_state`` raises
        InjectedFault inside the transaction after the state write; ``turn.cut_connection``
        has a second connection terminate this one (``pg_terminate_backend``) there."""
        if point not in self.fault_points:
            raise ValueError(f"unknown fault point {point!r}; known: "
                             + ", ".join(sorted(self.fault_points)))
        self._armed_fault = point
        try:
            yield
        finally:
            self._armed_fault = None

    def _trip_fault(self, conn: Any) -> None:
        point, self._armed_fault = self._armed_fault, None
        if point is None:
            return
        if point == "turn.after_state":
            from backends.errors import InjectedFault

            raise InjectedFault("fault injected after the state write (turn.after_state)")
        killer = self._db.pool.connect()
        try:
            killer.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        finally:
            killer.close()

    # -- operator seams ---------------------------------------------------------------

    def index_plan(self, *, dimensions: int | None = None) -> list[IndexSpec]:
        return self._indexes.index_plan(dimensions=dimensions)

    def ensure_indexes(self, *, dimensions: int | None = None, recreate: bool = False,
                       apply: bool = True) -> list[IndexAction]:
        return self._indexes.ensure_indexes(dimensions=dimensions, recreate=recreate, apply=apply)

    def validate_indexes(self, *, dimensions: int | None = None) -> list[IndexReport]:
        return self._indexes.validate_indexes(dimensions=dimensions)

    def ensure_schema(self) -> None:
        """Create the engine's tables (with their keys) if missing."""
        from backends.sql.schema import STATE_GROUP

        self._db.provision(STATE_GROUP, explicit=True)

    def set_drift_exempt(self, session_id: str, exempt: bool) -> None:
        self._state.set_drift_exempt(session_id, exempt)

    def is_drift_exempt(self, session_id: str) -> bool:
        return self._state.is_drift_exempt(session_id)

    def _tables_of_interest(self) -> tuple[str, ...]:
        from backends.sql.schema import EVENTS_TABLE, STATE_TABLE

        return (STATE_TABLE, EVENTS_TABLE)

    def health_details(self, timeout: float) -> dict[str, Any]:
        """Server version, the tables present, the layout the database holds (what
        ``postgresql://`` auto-selection would pick), durability settings, latency.
        Bounded by ``timeout``; failures are reported in the dict, not raised."""
        from backends.selection import detector_for
        from backends.sql.schema import LEGACY_TABLES, missing_tables

        details: dict[str, Any] = {"backend": self.name, "uri": self.config.display_uri,
                                   "schema": self.config.schema}
        started = time.perf_counter()
        try:
            conn = self._db.pool.connect(connect_timeout=timeout,
                                         statement_timeout_ms=max(1, int(timeout * 1000)))
        except Exception as exc:  # noqa: BLE001 - reported in the details
            details.update(reachable=False, error=str(exc))
            return details
        try:
            server = conn.execute("SHOW server_version").fetchone()[0]
            tables = self._tables_of_interest()
            missing = missing_tables(conn, self.config.schema, tables)
            legacy = [t for t in LEGACY_TABLES
                      if t not in missing_tables(conn, self.config.schema, (t,))]
            in_recovery = conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
            settings = dict(conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN"
                " ('fsync', 'synchronous_commit', 'full_page_writes')"
            ).fetchall())
            risky = [f"{name}={value}" for name, value in sorted(settings.items())
                     if value == "off"]
            detector = detector_for(declared(self.name).schemes[0])
            chosen, reason = (detector.from_catalog(conn, self.config.schema) if detector
                              else (self.name, "no other backend shares the scheme"))
            details.update(
                reachable=True,
                server_version=server,
                read_only_replica=bool(in_recovery),
                tables={t: t not in missing for t in tables},
                database_layout=chosen,
                database_layout_reason=reason,
                durable=not risky,
                durability_reason=("" if not risky else
                                   "acknowledged writes can be lost on a crash: " + ", ".join(risky)),
                settings=settings,
            )
            if legacy:
                details["legacy_tables"] = legacy
            self._more_health(conn, details)
            details["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
        except Exception as exc:  # noqa: BLE001 - reported in the details
            details.update(reachable=False, error=str(exc).splitlines()[0] if str(exc) else
                           type(exc).__name__)
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return details

    def _more_health(self, conn: Any, details: dict[str, Any]) -> None:
        """Hook for pgvector's extension and embedding facts."""

    def _release(self) -> None:
        """Release the pool (once: see ClosesOnce)."""
        self._db.close()
