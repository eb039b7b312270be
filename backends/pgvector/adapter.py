"""``PgVectorAdapter``: the pgvector backend as the registry attaches it.

Advertised through the ``semvec.backends`` entry point (not in the shipped table), like a
third-party plugin. Importing this module does not import psycopg: the driver is loaded
when an adapter is constructed, so the registry can read ``is_persistent`` without it.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, Sequence

from backends.contract import (
    speaks_both_conventions,
    UNSCOPED,
    IndexAction,
    IndexReport,
    IndexSpec,
    ItemSyncResult,
    MemoryEvent,
    MemoryItem,
    OwnerFilter,
    StateStoreSeams,
)


@speaks_both_conventions
class PgVectorAdapter(StateStoreSeams):
    """State, events, item mirror and server-side retrieval on PostgreSQL + pgvector.

    ``PgVectorAdapter(uri=None, **options)``: ``uri`` is ``postgresql://...`` (else
    ``SEMVEC_PGVECTOR_URL``). Options: ``schema`` (also ``?schema=`` in the URI, else
    ``SEMVEC_PGVECTOR_SCHEMA``, default ``public``), ``dimensions`` (else
    ``SEMVEC_PGVECTOR_DIMENSIONS``, default 384), ``connect_timeout`` (s),
    ``statement_timeout_ms``, ``pool_size``, ``create_tables`` (see
    :mod:`backends.pgvector.schema`), ``search_mode`` (auto/exact/hnsw) and
    ``exact_search_limit`` (see :mod:`backends.pgvector.retrieval`).
    """

    name = "pgvector"
    is_persistent = True
    #: driver modules, checked without importing them by ``backends list --check``
    required_modules = ("psycopg", "pgvector")

    def __init__(self, uri: str | None = None, **options: Any) -> None:
        from backends.pgvector.config import PgVectorConfig
        from backends.pgvector.driver import load_psycopg

        search_mode = options.pop("search_mode", "auto")
        exact_limit = options.pop("exact_search_limit", None)
        self.config = PgVectorConfig.resolve(uri, options)
        load_psycopg()  # MissingDriver now, not on first use

        from backends.pgvector.database import Database
        from backends.pgvector.events import PgVectorEventStore
        from backends.pgvector.indexes import PgVectorIndexManager
        from backends.pgvector.items import PgVectorItemMirror
        from backends.pgvector.retrieval import (
            DEFAULT_EXACT_SEARCH_LIMIT,
            PgVectorRetrievalBackend,
        )
        from backends.pgvector.state import PgVectorStateStore

        from backends.errors import BackendConfigError
        from backends.pgvector.retrieval import SEARCH_MODES

        if search_mode not in SEARCH_MODES:
            raise BackendConfigError(
                f"pgvector option search_mode must be one of {', '.join(SEARCH_MODES)},"
                f" got {search_mode!r}")
        if exact_limit is not None and (isinstance(exact_limit, bool)
                                        or not isinstance(exact_limit, int) or exact_limit < 0):
            raise BackendConfigError(
                f"pgvector option exact_search_limit must be a non-negative int, got {exact_limit!r}")
        self._db = Database(self.config)
        self._state = PgVectorStateStore(self._db)
        self._events = PgVectorEventStore(self._db)
        self._items = PgVectorItemMirror(self._db)
        self._indexes = PgVectorIndexManager(self._db)
        self._retrieval = PgVectorRetrievalBackend(
            self._db, search_mode=search_mode,
            exact_search_limit=DEFAULT_EXACT_SEARCH_LIMIT if exact_limit is None else exact_limit,
        )
        self._closed = False

    def __repr__(self) -> str:
        return f"PgVectorAdapter({self.config.display_uri!r}, schema={self.config.schema!r})"

    # -- the contract -----------------------------------------------------------------

    def state_store(self):
        return self._state

    def event_store(self):
        return self._events

    def retrieval_backend(self):
        return self._retrieval

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
        """State and events in one transaction: a conflict or a bad event leaves both
        untouched, and a rolled-back turn leaves no gap in any user's sequence."""
        from backends.pgvector.events import append_in_transaction, validate_pg_events
        from backends.pgvector.schema import STATE_GROUP
        from backends.pgvector.state import save_in_transaction, validate_pg_save_args

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
        except Exception:
            return False
        try:
            return conn.execute("SELECT 1").fetchone() == (1,)
        except Exception:
            return False
        finally:
            try:
                conn.close()
            except Exception:
                pass

    # -- operator seams ---------------------------------------------------------------

    def index_plan(self, *, dimensions: int | None = None) -> list[IndexSpec]:
        return self._indexes.index_plan(dimensions=dimensions)

    def ensure_indexes(self, *, dimensions: int | None = None, recreate: bool = False,
                       apply: bool = True) -> list[IndexAction]:
        return self._indexes.ensure_indexes(dimensions=dimensions, recreate=recreate, apply=apply)

    def validate_indexes(self, *, dimensions: int | None = None) -> list[IndexReport]:
        return self._indexes.validate_indexes(dimensions=dimensions)

    def sync_items(self, session_id: str, items: Sequence[MemoryItem], *,
                   owner_subject: str | None = None) -> ItemSyncResult:
        return self._items.sync_items(session_id, items, owner_subject=owner_subject)

    def iter_live_items(self, session_id: str, *,
                        owner_subject: OwnerFilter = UNSCOPED) -> Iterator[MemoryItem]:
        return self._items.iter_live_items(session_id, owner_subject=owner_subject)

    def purge_items(self, session_id: str) -> int:
        """Hard-delete a session's mirrored items (sync only ever soft-evicts)."""
        return self._items.purge_items(session_id)

    def ensure_schema(self) -> None:
        """Create the schema, extension and tables (with their keys) if missing; no
        secondary indexes (that is ``ensure_indexes``)."""
        from backends.pgvector.schema import ITEMS_GROUP, STATE_GROUP

        self._db.provision(STATE_GROUP, explicit=True)
        self._db.provision(ITEMS_GROUP, explicit=True)

    def health_details(self, timeout: float) -> dict[str, Any]:
        """Server version, pgvector presence/version, schema, tables present, latency.
        Bounded by ``timeout``; failures are reported in the dict, not raised."""
        from backends.pgvector.schema import (
            COUNTERS_TABLE, EVENTS_TABLE, ITEMS_TABLE, STATE_TABLE, missing_tables,
        )

        details: dict[str, Any] = {"backend": self.name, "uri": self.config.display_uri,
                                   "schema": self.config.schema,
                                   "dimensions": self.config.dimensions,
                                   "dimensions_configured": self.config.dimensions_explicit}
        started = time.perf_counter()
        try:
            conn = self._db.pool.connect(connect_timeout=timeout,
                                         statement_timeout_ms=max(1, int(timeout * 1000)))
        except Exception as exc:
            details.update(reachable=False, error=str(exc))
            return details
        try:
            server = conn.execute("SHOW server_version").fetchone()[0]
            available = conn.execute(
                "SELECT default_version, installed_version FROM pg_available_extensions"
                " WHERE name = 'vector'"
            ).fetchone()
            tables = (STATE_TABLE, EVENTS_TABLE, COUNTERS_TABLE, ITEMS_TABLE)
            missing = missing_tables(conn, self.config.schema, tables)
            in_recovery = conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
            column = conn.execute(
                "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
                " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'embedding'"
                " AND NOT a.attisdropped", (self.config.schema, ITEMS_TABLE),
            ).fetchone()
            settings = dict(conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN"
                " ('fsync', 'synchronous_commit', 'full_page_writes')"
            ).fetchall())
            risky = [f"{name}={value}" for name, value in sorted(settings.items())
                     if value == "off"]
            details.update(
                durable=not risky,
                durability_reason=("" if not risky else
                                   "acknowledged writes can be lost on a crash: " + ", ".join(risky)),
                settings=settings,
            )
            details.update(
                reachable=True,
                server_version=server,
                read_only_replica=bool(in_recovery),
                extension_available=available is not None,
                extension_present=bool(available and available[1]),
                pgvector_version=available[1] if available else None,
                pgvector_default_version=available[0] if available else None,
                tables={t: t not in missing for t in tables},
                embedding_column=column[0] if column else None,
                latency_ms=round((time.perf_counter() - started) * 1000, 2),
            )
        except Exception as exc:
            details.update(reachable=False, error=str(exc).splitlines()[0] if str(exc) else
                           type(exc).__name__)
        finally:
            try:
                conn.close()
            except Exception:
                pass
        return details

    def close(self) -> None:
        """Release the pool; idempotent."""
        if not self._closed:
            self._closed = True
            self._db.close()
