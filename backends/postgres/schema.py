"""Table layout of the SQL backends built on this base and the DDL that provisions it.

Table creation policy (operators asked for no surprises):

- reads never create anything: on a database without our tables a read answers "no such
  session" / "no events" / "no items";
- the write paths (save, commit_turn, append, sync_items, restore) create the tables they
  need on first use, with ``CREATE ... IF NOT EXISTS`` under an advisory lock, because a
  write into a store that was never provisioned is the first thing a new deployment does.
  Pass ``create_tables=False`` to the adapter to forbid that; writes then fail with advice
  to run ``semvecctl indexes ensure``;
- secondary indexes (HNSW, GIN, b-trees) are created ONLY by ``indexes ensure``
  (:mod:`backends.postgres.indexes`). Primary keys are part of the table DDL (a table
  without them would accept duplicate sessions), and so is the engine's
  ``ix_semvec_memory_events_user_id``, because the engine creates it with its table.

State and events use the engine's tables exactly (``semvec_session_state``,
``semvec_memory_events``), shared by every backend built on this base, so an engine
deployment can switch between them and keep every session. A flavour adds its own
tables, indexes and statistics as a :class:`SqlLayout` of its own, declared in its
``BackendInfo.sql_layout``: this module provisions whatever layout it is given and names
none of a flavour's tables or DDL.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

STATE_TABLE = "semvec_session_state"
EVENTS_TABLE = "semvec_memory_events"
EVENTS_USER_INDEX = "ix_semvec_memory_events_user_id"
#: the erasure ledger (ours; the engine never reads them): its secrets and its entries,
#: on the primary only (see backends.postgres.ledger)
LEDGER_KEYS_TABLE = "semvecctl_erasure_keys"
LEDGER_TABLE = "semvecctl_erasure_ledger"
#: the store's identity (one row), kept with its ledger on the primary
LEDGER_STORE_TABLE = "semvecctl_erasure_store"
#: the positions the ledger gives its entries (a sequence beside the tables)
LEDGER_SEQUENCE = "semvecctl_erasure_seq"
OWN_TABLES = (LEDGER_KEYS_TABLE, LEDGER_TABLE, LEDGER_STORE_TABLE)
#: advisory-lock key serialising DDL across processes ("semvecdd" as an int64)
_DDL_LOCK_KEY = 0x73656D7665636464

STATE_GROUP = "state"  # session state + events: the engine's SQL layout, no extension


def qident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Tables:
    """Fully qualified, quoted table names for one schema."""

    schema: str

    def _q(self, table: str) -> str:
        return f"{qident(self.schema)}.{qident(table)}"

    @property
    def state(self) -> str:
        return self._q(STATE_TABLE)

    @property
    def events(self) -> str:
        return self._q(EVENTS_TABLE)

    def of(self, table: str) -> str:
        """Any table of this schema, qualified and quoted."""
        return self._q(table)


#: the state table's columns as a batch restore writes them (binary COPY), with the types
#: of :func:`state_ddl`'s columns: binary COPY must name each column's own type
STATE_COPY_COLUMNS = ("session_id", "state_blob", "version", "drift_exempt", "owner_subject",
                      "pending_message", "updated_at")
STATE_COPY_TYPES = ("varchar", "bytea", "int4", "bool", "varchar", "text", "timestamp")


def state_ddl(t: Tables) -> list[str]:
    """The engine's own SQL layout (ENGINE-WIRE section 5), column for column, so either
    side can create the tables and the other reads and writes them unchanged. Events have
    no sequence column: the engine reads sequence 0, and so do we.

    Nullability follows the engine's model (semvec 0.8.9 declares every column NOT NULL
    except the state's owner_subject and pending_message and the events' source_event_id;
    its ``create_all`` emits no server DEFAULTs). The DEFAULTs ENGINE-WIRE lists are kept:
    they change nothing for a writer that names every column, as both sides do."""
    return [
        f"""CREATE TABLE IF NOT EXISTS {t.state} (
            session_id      VARCHAR(128) PRIMARY KEY,
            state_blob      BYTEA NOT NULL,
            version         INTEGER NOT NULL DEFAULT 1,
            drift_exempt    BOOLEAN NOT NULL DEFAULT false,
            owner_subject   VARCHAR(128) NULL,
            pending_message TEXT NULL,
            updated_at      TIMESTAMP NOT NULL
        )""",
        f"""CREATE TABLE IF NOT EXISTS {t.events} (
            event_id        VARCHAR(36) PRIMARY KEY,
            user_id         VARCHAR(128) NOT NULL,
            owner_subject   VARCHAR(128) NOT NULL DEFAULT '',
            session_id      VARCHAR(64) NOT NULL DEFAULT '',
            created_at      TIMESTAMP NOT NULL,
            content         TEXT NOT NULL,
            embedding       TEXT NOT NULL,
            meta            TEXT NOT NULL DEFAULT '{{}}',
            source_event_id VARCHAR(36) NULL
        )""",
        # part of the engine's table definition (it creates it with the table), so it
        # is created with the table here too
        f"CREATE INDEX IF NOT EXISTS {qident(EVENTS_USER_INDEX)} ON {t.events} (user_id)",
    ]




@dataclass(frozen=True)
class StatisticsObject:
    """An extended-statistics object: not an index, but planned, validated and ensured
    with them, because the searches' plans depend on it."""

    name: str
    table: str
    columns: tuple[str, ...]
    kinds: tuple[str, ...]


def statistics_sql(schema: str, stats: StatisticsObject) -> str:
    """CREATE STATISTICS for one entry (also run with its table's DDL)."""
    return (f"CREATE STATISTICS IF NOT EXISTS {qident(schema)}.{qident(stats.name)}"
            f" ({', '.join(stats.kinds)}) ON {', '.join(qident(c) for c in stats.columns)}"
            f" FROM {qident(schema)}.{qident(stats.table)}")



@dataclass(frozen=True)
class IndexKey:
    """One index (or key constraint) of a layout, in the shape the catalog query returns.
    ``column_type`` (``vector({dims})``) marks a key over a column whose type depends on
    the configured dimensions; ``option_defaults`` are the access method's own defaults,
    which an index built without ``WITH (...)`` has."""

    name: str
    table: str
    kind: str
    method: str
    columns: tuple[str, ...]
    opclasses: tuple[str, ...]
    descending: tuple[bool, ...] = ()
    unique: bool = False
    constraint: str | None = None  # "primary key" / "unique" when the key is a constraint
    options: tuple[tuple[str, Any], ...] = ()
    option_defaults: tuple[tuple[str, Any], ...] = ()
    column_type: str | None = None

    def desc(self) -> tuple[bool, ...]:
        return self.descending or tuple(False for _ in self.columns)


@dataclass(frozen=True)
class TableGroup:
    """Tables provisioned together, in one transaction, on the first write that needs them.
    ``create`` returns their DDL for a schema and embedding width; ``upgrade`` the
    statements an existing table from an older release needs; ``extension`` the
    PostgreSQL extension they need (created with them, its types registered on the
    connections that write them)."""

    name: str
    tables: tuple[str, ...]
    create: Callable[["Tables", int], list[str]]
    upgrade: Callable[[Any, "Tables"], list[str]] | None = None
    extension: str | None = None


@dataclass(frozen=True)
class SqlLayout:
    """Everything a SQL backend provisions and validates: its table groups, its indexes,
    its statistics objects, and the column whose ``vector(n)`` fixes the deployed width."""

    groups: tuple[TableGroup, ...]
    indexes: tuple[IndexKey, ...]
    statistics: tuple[StatisticsObject, ...] = ()
    #: (table, column) whose type is ``vector(n)``: the deployed embedding width
    sized_column: tuple[str, str] | None = None
    #: tables an older release of the backend created (engine-incompatible shapes):
    #: reported by health and doctor, never read or written
    legacy_tables: tuple[str, ...] = ()

    def group(self, name: str) -> TableGroup:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(f"the SQL layout has no table group {name!r}")

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(t for g in self.groups for t in g.tables)


#: What the engine's SQL schema needs (VARCHAR keys use text_ops, as PostgreSQL picks).
ENGINE_INDEXES: tuple[IndexKey, ...] = (
    IndexKey("semvec_session_state_pkey", STATE_TABLE, "unique", "btree", ("session_id",),
             ("text_ops",), unique=True, constraint="primary key"),
    IndexKey("semvec_memory_events_pkey", EVENTS_TABLE, "unique", "btree", ("event_id",),
             ("text_ops",), unique=True, constraint="primary key"),
    IndexKey(EVENTS_USER_INDEX, EVENTS_TABLE, "btree", "btree", ("user_id",), ("text_ops",)),
)

STATE = TableGroup(STATE_GROUP, (STATE_TABLE, EVENTS_TABLE), lambda t, _dims: state_ddl(t))
#: the ``postgres`` backend: the engine's layout and nothing else
ENGINE_LAYOUT = SqlLayout((STATE,), ENGINE_INDEXES)


@lru_cache(maxsize=None)
def shared_layouts(backend: str) -> tuple[tuple[str, SqlLayout], ...]:
    """(backend, layout) of every declared backend sharing ``backend``'s URI schemes that
    declares a layout (``BackendInfo.sql_layout``, loaded by name: this base imports no
    flavour). Every backend built on this base reads one database whatever backend
    provisioned it, so none reports another's table as unknown (doctor) or leaves its rows
    behind when a session is deleted."""
    import importlib

    from backends.info import KNOWN_INFO, known

    own = known(backend)
    if own is None:
        return ()
    found = []
    for info in KNOWN_INFO:
        if info.sql_layout and set(info.schemes) & set(own.schemes):
            module, _, name = info.sql_layout.partition(":")
            found.append((info.name, getattr(importlib.import_module(module), name)))
    return tuple(found)


def companion_tables(backend: str, layout: SqlLayout) -> tuple[str, ...]:
    """Tables besides the state whose rows are keyed by ``session_id``: ``layout``'s and
    those of the layouts ``backend`` shares a database with (:func:`shared_layouts`)."""
    tables = list(layout.tables)
    for _name, other in shared_layouts(backend):
        tables += other.tables
    return tuple(t for t in dict.fromkeys(tables) if t not in (STATE_TABLE, EVENTS_TABLE))


def legacy_tables(backend: str, layout: SqlLayout) -> dict[str, str]:
    """Legacy table -> the backend whose older release created it (``layout``'s own, then
    those of :func:`shared_layouts`)."""
    found = {t: backend for t in layout.legacy_tables}
    for name, other in shared_layouts(backend):
        for table in other.legacy_tables:
            found.setdefault(table, name)
    return found


def has_copy_types(conn: Any, table: str) -> bool:
    """Whether ``table``'s state columns have exactly the types of
    :data:`STATE_COPY_TYPES` (the engine's), as a binary COPY of them needs."""
    return bool(conn.execute(
        "SELECT count(*) = %s FROM unnest(%s::text[], %s::text[]) AS c(name, type)"
        " JOIN pg_attribute a ON a.attrelid = %s::regclass AND a.attname = c.name"
        " AND NOT a.attisdropped AND a.atttypid = c.type::regtype",
        (len(STATE_COPY_COLUMNS), list(STATE_COPY_COLUMNS), list(STATE_COPY_TYPES),
         table)).fetchone()[0])


def missing_tables(conn: Any, schema: str, names: tuple[str, ...]) -> list[str]:
    """Names among ``names`` that do not exist in ``schema`` (one catalog query)."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p')",
        (schema, list(names)),
    ).fetchall()
    present = {row[0] for row in rows}
    return [name for name in names if name not in present]


def extension_version(conn: Any, name: str = "vector") -> str | None:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", (name,)).fetchone()
    return row[0] if row else None


def ensure_group(conn: Any, t: Tables, group: TableGroup, dimensions: int) -> list[str]:
    """Create the schema, extension and tables of ``group`` if missing (or upgrade them).

    Runs in one transaction under an advisory lock, so concurrent first writers do not
    race on the catalog. Returns the statements it executed (empty when all existed).
    """
    executed: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK_KEY,))
        if not missing_tables(conn, t.schema, group.tables):
            for statement in (group.upgrade(conn, t) if group.upgrade else ()):
                conn.execute(statement)  # an existing table from before an upgrade column
                executed.append(statement)
            return executed
        statements = [f"CREATE SCHEMA IF NOT EXISTS {qident(t.schema)}"]
        if group.extension and extension_version(conn, group.extension) is None:
            statements.append(f"CREATE EXTENSION IF NOT EXISTS {qident(group.extension)}")
        statements += group.create(t, dimensions)
        for statement in statements:
            conn.execute(statement)
            executed.append(statement)
    return executed
