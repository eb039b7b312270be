"""``PostgresAdapter``: state and events in the engine's SQL tables, nothing else.

The implementation is the base of the flavours built on it (each this adapter plus its
own layout, connection hook and settings, over the same state and event tables): a
deployment can switch between them and keep every session.
Importing this module does not import psycopg.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from backends.info import declared
from backends.contract import (
    ClosesOnce,
    FAULT_POINTS,
    IndexAction,
    IndexReport,
    IndexSpec,
    LoadedState,
    MemoryEvent,
    OwnerFilter,
    SessionSummary,
    StateStoreSeams,
    UNSCOPED,
    speaks_both_conventions,
)
from backends.postgres.schema import ENGINE_LAYOUT


@speaks_both_conventions
class PostgresAdapter(ClosesOnce, StateStoreSeams):
    """Session state and the compliance log in ``semvec_session_state`` and
    ``semvec_memory_events``, exactly as the engine lays them out (ENGINE-WIRE section 5).

    ``PostgresAdapter(uri=None, **options)``: ``uri`` is ``postgresql://...`` (a
    SQLAlchemy-style ``postgresql+psycopg://`` is accepted), else ``DATABASE_URL`` as the
    engine reads it. Options: ``schema`` (also ``?schema=``, else the SQL backends' schema
    variable declared in :mod:`backends.info`, default ``public``), ``connect_timeout`` (s),
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
    #: what this backend provisions and validates (a flavour's adds its own tables)
    _layout = ENGINE_LAYOUT

    def __init__(self, uri: str | None = None, **options: Any) -> None:
        self._setup(uri, options)

    @classmethod
    def _variables(cls) -> Any:
        """Where this backend reads its settings (a flavour names its own)."""
        from backends.postgres.config import POSTGRES_VARIABLES

        return POSTGRES_VARIABLES

    @classmethod
    def _connection_hook(cls) -> Callable[[Any], bool] | None:
        """Run on a connection before typed use (see :mod:`backends.postgres.pool`); none
        here (a flavour's prepares its extension's types)."""
        return None

    def retire_shards(self, dsns: Sequence[str]) -> int:
        """Add the databases of ``dsns`` that are not in the shard list to the placement
        as retired (``doctor --shards-from``: a shrink's dropped shards, audited beside the
        deployment so the rows left on them are moved home or removed by doctor's
        placement repairs). Returns how many were added."""
        from backends.postgres.config import SqlConfig, database_key
        from backends.postgres.database import Database

        options = {"schema": self.config.schema, "connect_timeout": self.config.connect_timeout,
                   "statement_timeout_ms": self.config.statement_timeout_ms,
                   "pool_size": self.config.pool_size, "create_tables": False, "shards": ()}
        retired = []
        for i, dsn in enumerate(dsns):
            config = SqlConfig.resolve(dsn, dict(options), variables=self.config.variables,
                                       role=f"entry {i} of --shards-from")
            key = database_key(config.conninfo)
            if key not in self._databases:
                self._databases[key] = Database(config, self._layout,
                                                prepare_connection=self._connection_hook())
                retired.append(self._databases[key])
        self.placement.retired = tuple(retired)
        return len(retired)

    def _setup(self, uri: str | None, options: dict) -> None:
        from backends.postgres.config import SqlConfig
        from backends.postgres.errors import load_psycopg

        self.config = SqlConfig.resolve(uri, options, variables=self._variables())
        load_psycopg(self.name)  # MissingDriver now, not on first use

        from backends.postgres.config import database_key
        from backends.postgres.database import Database
        from backends.postgres.events import SqlEventStore
        from backends.postgres.placement import Placement
        from backends.postgres.state import SqlStateStore

        #: the primary (``DATABASE_URL``): metadata and out-of-turn events; with no shard
        #: list, the only database
        hook = self._connection_hook()
        self._db = Database(self.config, self._layout, prepare_connection=hook)
        databases = {database_key(self.config.conninfo): self._db}
        shards = []
        for config in self.config.shard_configs():
            key = database_key(config.conninfo)
            if key not in databases:
                databases[key] = Database(config, self._layout, prepare_connection=hook)
            shards.append(databases[key])
        self.placement = Placement(self._db, shards)
        self._databases = databases
        self._indexes: dict[Any, Any] = {}
        self._state = SqlStateStore(self.placement)
        self._events = SqlEventStore(self.placement)
        self._armed_fault: str | None = None
        self._closed = False

    def __repr__(self) -> str:
        shards = (f", shards={len(self.placement.shards)}" if self.placement.sharded else "")
        return (f"{type(self).__name__}({self.config.display_uri!r},"
                f" schema={self.config.schema!r}{shards})")

    # -- the contract -----------------------------------------------------------------

    def state_store(self):
        return self._state

    def event_store(self):
        return self._events

    def erasure_ledger(self) -> Any:
        """The erasure ledger, on the primary (see :mod:`backends.postgres.ledger`)."""
        from backends.postgres.ledger import SqlLedger

        return SqlLedger(self.placement.primary)

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
        from backends.postgres.events import append_in_transaction, validate_pg_events
        from backends.postgres.schema import STATE_GROUP
        from backends.postgres.state import save_in_transaction, validate_pg_save_args

        validate_pg_save_args(session_id, blob, expected_version, owner_subject,
                              pending_message)
        checked = validate_pg_events(events)
        db = self.placement.for_session(session_id)  # state and events on its shard

        def work(conn: Any) -> int:
            with conn.transaction():
                version = save_in_transaction(
                    conn, db.tables.state, session_id, blob,
                    expected_version=expected_version, owner_subject=owner_subject,
                    pending_message=pending_message,
                )
                self._trip_fault(conn, db)
                append_in_transaction(conn, db, checked)
                return version

        return db.write(STATE_GROUP, work)

    def check_health(self, timeout: float = 2.0) -> bool:
        """``SELECT 1`` on a fresh connection to every database of the deployment (the
        primary and each shard), bounded by ``timeout`` (connect and statement); any
        failure (or a closed adapter) is False, never an exception."""
        if self._closed:
            return False
        from backends.postgres.health import answers

        return all(answers(db, timeout) for db in self.placement.databases())

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

    def _trip_fault(self, conn: Any, db: Any) -> None:
        point, self._armed_fault = self._armed_fault, None
        if point is None:
            return
        if point == "turn.after_state":
            from backends.errors import InjectedFault

            raise InjectedFault("fault injected after the state write (turn.after_state)")
        killer = db.pool.connect()
        try:
            killer.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        finally:
            killer.close()

    # -- operator seams ---------------------------------------------------------------

    def index_plan(self, *, dimensions: int | None = None) -> list[IndexSpec]:
        return self._per_database(lambda m: m.index_plan(dimensions=dimensions))

    def ensure_indexes(self, *, dimensions: int | None = None, recreate: bool = False,
                       apply: bool = True) -> list[IndexAction]:
        return self._per_database(lambda m: m.ensure_indexes(
            dimensions=dimensions, recreate=recreate, apply=apply))

    def validate_indexes(self, *, dimensions: int | None = None) -> list[IndexReport]:
        return self._per_database(lambda m: m.validate_indexes(dimensions=dimensions))

    def _per_database(self, call: Any) -> list[Any]:
        """``call(index manager)`` on every database of the deployment (each holds the
        tables); on a sharded one each entry's target names its database."""
        import dataclasses

        from backends.postgres.indexes import SqlIndexManager

        found: list[Any] = []
        for db in self.placement.databases():
            manager = self._indexes.get(db)
            if manager is None:
                manager = self._indexes[db] = SqlIndexManager(db)
            entries = call(manager)
            if self.placement.sharded:
                label = self.placement.label(db)
                entries = [dataclasses.replace(e, target=f"{label}: {e.target}") for e in entries]
            found.extend(entries)
        return found

    def ensure_schema(self) -> None:
        """Create the engine's tables (with their keys) if missing."""
        from backends.postgres.schema import STATE_GROUP

        for db in self.placement.databases():
            db.provision(STATE_GROUP, explicit=True)

    def iter_session_states(self, *, owner_subject: OwnerFilter = UNSCOPED,
                            match: str | None = None, batch_size: int = 500
                            ) -> Iterator[tuple[SessionSummary, LoadedState]]:
        return self._state.iter_session_states(owner_subject=owner_subject, match=match,
                                               batch_size=batch_size)

    def iter_session_ids(self, *, owner_subject: OwnerFilter = UNSCOPED,
                         match: str | None = None) -> Iterator[str]:
        return self._state.iter_session_ids(owner_subject=owner_subject, match=match)

    def set_drift_exempt(self, session_id: str, exempt: bool) -> None:
        self._state.set_drift_exempt(session_id, exempt)

    def is_drift_exempt(self, session_id: str) -> bool:
        return self._state.is_drift_exempt(session_id)

    def _tables_of_interest(self) -> tuple[str, ...]:
        from backends.postgres.schema import EVENTS_TABLE, STATE_TABLE

        return (STATE_TABLE, EVENTS_TABLE)

    def health_details(self, timeout: float) -> dict[str, Any]:
        """Server version, tables, layout, durability and latency of every database,
        within ``timeout``; failures are reported, not raised (see
        :func:`backends.postgres.health.details`)."""
        from backends.postgres.health import details

        return details(self, timeout)

    def _more_health(self, conn: Any, details: dict[str, Any]) -> None:
        """Hook for a flavour's own facts (its extension, its embeddings)."""

    def _release(self) -> None:
        """Release the pool (once: see ClosesOnce)."""
        self.placement.close()
