"""``PgVectorAdapter``: the pgvector backend as the registry attaches it.

State and events live in the engine's SQL tables, through the same code as ``postgres``
(:class:`backends.postgres.PostgresAdapter`, which this extends), so an engine
deployment can switch ``SEMVEC_SESSION_BACKEND`` between the two and keep every session.
pgvector adds its own item table (``semvec_memory_items``), HNSW/GIN indexes and
server-side retrieval.

Advertised through the ``semvec.backends`` entry point (not in the shipped table), like a
third-party plugin, and loadable by the engine itself: ``PgVectorAdapter()`` with no
arguments configures itself from the environment (the engine configures plugins only that
way). Importing this module does not import psycopg.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from backends.info import declared
from backends.contract import (
    UNSCOPED,
    ItemSyncResult,
    MemoryItem,
    OwnerFilter,
    speaks_both_conventions,
)
from backends.postgres.adapter import PostgresAdapter
from backends.pgvector.schema import PGVECTOR_LAYOUT, register_vector_type


@speaks_both_conventions
class PgVectorAdapter(PostgresAdapter):
    """State, events, item mirror and server-side retrieval on PostgreSQL + pgvector.

    ``PgVectorAdapter(uri=None, **options)``. Environment (all optional when ``uri`` is
    given):

    - ``SEMVEC_PGVECTOR_URL``, else ``DATABASE_URL`` (the engine's variable; a
      SQLAlchemy-style ``postgresql+psycopg://`` is accepted): where to connect;
    - ``SEMVEC_PGVECTOR_SCHEMA`` (default ``public``; also ``?schema=`` in the URI);
    - ``SEMVEC_PGVECTOR_DIMENSIONS`` (default: the deployed item table's ``vector(n)``,
      else 384).

    Options: ``schema``, ``dimensions``, ``connect_timeout`` (s),
    ``statement_timeout_ms``, ``pool_size``, ``create_tables`` (see
    :mod:`backends.postgres.schema`), ``search_mode`` (auto/exact/hnsw) and
    ``exact_search_limit`` (see :mod:`backends.pgvector.retrieval`). The connection
    pool's URI parameters (``pool_max_lifetime``, ``pool_max_idle``, ``pool_timeout``,
    ``pool_check``) are described in :mod:`backends.postgres.pool`.
    """

    name = "pgvector"
    is_persistent = True
    #: driver modules, checked without importing them by ``backends list --check``
    required_modules = declared("pgvector").drivers
    _layout = PGVECTOR_LAYOUT

    @classmethod
    def _variables(cls) -> Any:
        from backends.pgvector.config import PGVECTOR_VARIABLES

        return PGVECTOR_VARIABLES

    @classmethod
    def _connection_hook(cls) -> Callable[[Any], bool] | None:
        """Connections that read or write items know the ``vector`` type."""
        return register_vector_type

    def __init__(self, uri: str | None = None, **options: Any) -> None:
        from backends.errors import BackendConfigError
        from backends.pgvector.retrieval import DEFAULT_EXACT_SEARCH_LIMIT, SEARCH_MODES

        search_mode = options.pop("search_mode", "auto")
        exact_limit = options.pop("exact_search_limit", None)
        if search_mode not in SEARCH_MODES:
            raise BackendConfigError(
                f"pgvector option search_mode must be one of {', '.join(SEARCH_MODES)},"
                f" got {search_mode!r}")
        if exact_limit is not None and (isinstance(exact_limit, bool)
                                        or not isinstance(exact_limit, int) or exact_limit < 0):
            raise BackendConfigError(
                f"pgvector option exact_search_limit must be a non-negative int, got {exact_limit!r}")
        self._setup(uri, options)

        from backends.pgvector.items import PgVectorItemMirror
        from backends.pgvector.retrieval import PgVectorRetrievalBackend

        self._items = PgVectorItemMirror(self.placement)
        self._retrieval = PgVectorRetrievalBackend(
            self.placement, search_mode=search_mode,
            exact_search_limit=DEFAULT_EXACT_SEARCH_LIMIT if exact_limit is None else exact_limit,
        )

    def retrieval_backend(self) -> None:
        """None: the engine calls this once with no arguments and drives what it returns
        with its own context, which names no session or owner, and nothing in the engine
        fills our item table (ENGINE-WIRE section 6). Retrieval stays in-process there;
        our server-side retriever is reached through :meth:`server_retriever`."""
        return None

    def server_retriever(self) -> Any:
        """Our server-side retriever (the :class:`backends.contract.ServerRetrieval`
        seam): ``search(ctx)`` with our RetrievalContext, which names session and owner."""
        return self._retrieval

    @property
    def dimensions(self) -> int:
        """The embedding width in force: configured, else the deployed item table's
        ``vector(n)``, else the default (what conformance and health read)."""
        return self._db.dimensions

    # -- operator seams ---------------------------------------------------------------

    def sync_items(self, session_id: str, items: Sequence[MemoryItem], *,
                   owner_subject: str | None = None) -> ItemSyncResult:
        return self._items.sync_items(session_id, items, owner_subject=owner_subject)

    def iter_live_items(self, session_id: str, *,
                        owner_subject: OwnerFilter = UNSCOPED) -> Iterator[MemoryItem]:
        return self._items.iter_live_items(session_id, owner_subject=owner_subject)

    def purge_items(self, session_id: str) -> int:
        """Hard-delete a session's mirrored items (sync only ever soft-evicts)."""
        return self._items.purge_items(session_id)

    def item_mirror_size(self) -> dict[str, int | None]:
        return self._items.mirror_size()

    def erasure_backend(self):
        """The engine's optional erasure seam (ENGINE-WIRE §6): an object whose
        ``erase_sessions(session_ids, *, user_id, scope) -> int`` removes those sessions'
        item rows (under the scope's owner; ``scope=None``: every owner's)."""
        from backends.pgvector.erasure import item_eraser

        return item_eraser(self.placement, self._state.items_taken_along)

    def ensure_schema(self) -> None:
        """Create the schema, extension and tables (with their keys) if missing; no
        secondary indexes (that is ``ensure_indexes``)."""
        from backends.pgvector.schema import ITEMS_GROUP

        super().ensure_schema()
        for db in self.placement.databases():
            db.provision(ITEMS_GROUP, explicit=True)

    def _tables_of_interest(self) -> tuple[str, ...]:
        from backends.pgvector.schema import ITEMS_TABLE

        return super()._tables_of_interest() + (ITEMS_TABLE,)

    def _more_health(self, conn: Any, details: dict[str, Any]) -> None:
        from backends.pgvector.schema import ITEMS_TABLE

        available = conn.execute(
            "SELECT default_version, installed_version FROM pg_available_extensions"
            " WHERE name = 'vector'"
        ).fetchone()
        column = conn.execute(
            "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'embedding'"
            " AND NOT a.attisdropped", (self.config.schema, ITEMS_TABLE),
        ).fetchone()
        details.update(
            # the width in force: configured, else the deployed column's vector(n)
            dimensions=self._db.dimensions,
            dimensions_configured=self.config.dimensions_explicit,
            extension_available=available is not None,
            extension_present=bool(available and available[1]),
            pgvector_version=available[1] if available else None,
            pgvector_default_version=available[0] if available else None,
            embedding_column=column[0] if column else None,
        )
