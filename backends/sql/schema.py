"""Table layout of the SQL backends (``postgres``, ``pgvector``) and the DDL that provisions it.

Table creation policy (operators asked for no surprises):

- reads never create anything: on a database without our tables a read answers "no such
  session" / "no events" / "no items";
- the write paths (save, commit_turn, append, sync_items, restore) create the tables they
  need on first use, with ``CREATE ... IF NOT EXISTS`` under an advisory lock, because a
  write into a store that was never provisioned is the first thing a new deployment does.
  Pass ``create_tables=False`` to the adapter to forbid that; writes then fail with advice
  to run ``semvecctl indexes ensure``;
- secondary indexes (HNSW, GIN, b-trees) are created ONLY by ``indexes ensure``
  (:mod:`backends.sql.indexes`). Primary keys are part of the table DDL (a table
  without them would accept duplicate sessions), and so is the engine's
  ``ix_semvec_memory_events_user_id``, because the engine creates it with its table.

State and events use the engine's tables exactly (``semvec_session_state``,
``semvec_memory_events``), shared by the ``postgres`` and ``pgvector`` backends, so an
engine deployment can switch between them and keep every session; ``pgvector`` adds
only its own item table and vector indexes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STATE_TABLE = "semvec_session_state"
EVENTS_TABLE = "semvec_memory_events"
ITEMS_TABLE = "semvec_memory_items"
EVENTS_USER_INDEX = "ix_semvec_memory_events_user_id"
TEXT_SEARCH_CONFIG = "simple"

#: Tables an older semvecctl pgvector created (engine-incompatible shapes); reported by
#: health, never read or written.
LEGACY_TABLES = ("compliance_events", "compliance_event_counters")

#: advisory-lock key serialising DDL across processes ("semvecdd" as an int64)
_DDL_LOCK_KEY = 0x73656D7665636464

STATE_GROUP = "state"  # session state + events: the engine's SQL layout, no extension
ITEMS_GROUP = "items"  # the memory-item mirror (needs the vector extension)


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

    @property
    def items(self) -> str:
        return self._q(ITEMS_TABLE)


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


#: A session's items all have one owner, but without this object the planner multiplies
#: the session and owner selectivities, expects ~1/owners of a session's rows, and on a
#: store of many sessions reads every row of the session for the recency signal instead
#: of walking its b-tree for the newest 100 (1M items over 1,000 sessions: the fused
#: search 4.7 ms -> 2.3 ms). Recommended, not required: only plans depend on it.
STATISTICS: tuple[StatisticsObject, ...] = (
    StatisticsObject("semvec_items_session_owner", ITEMS_TABLE, ("session_id", "owner_subject"),
                     ("dependencies",)),
)


def statistics_sql(schema: str, stats: StatisticsObject) -> str:
    """CREATE STATISTICS for one entry (also run with the items table's DDL)."""
    return (f"CREATE STATISTICS IF NOT EXISTS {qident(schema)}.{qident(stats.name)}"
            f" ({', '.join(stats.kinds)}) ON {', '.join(qident(c) for c in stats.columns)}"
            f" FROM {qident(schema)}.{qident(stats.table)}")


def items_ddl(t: Tables, dimensions: int) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS {t.items} (
            session_id    text NOT NULL,
            item_id       text NOT NULL,
            owner_subject text,
            embedding     vector({int(dimensions)}),
            text          text NOT NULL DEFAULT '',
            text_tsv      tsvector GENERATED ALWAYS AS
                              (to_tsvector('{TEXT_SEARCH_CONFIG}'::regconfig, text)) STORED,
            tier          text,
            tiers         text[] NOT NULL DEFAULT '{{}}',
            unit          jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            tier_positions jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            evicted       boolean NOT NULL DEFAULT false,
            created_at    timestamptz NOT NULL DEFAULT now(),
            updated_at    timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (session_id, item_id)
        )""",
        *(statistics_sql(t.schema, stats) for stats in STATISTICS),
    ]


#: Columns added to the items table after its first release, with their definition:
#: an existing table gets them (``ADD COLUMN IF NOT EXISTS``, metadata only) when the
#: items group is provisioned; until then the mirror reads and writes without them.
ITEM_COLUMN_UPGRADES: tuple[tuple[str, str], ...] = (
    # each item's position in every tier it sits in ({"short_term": 3}), the engine's order
    ("tier_positions", "jsonb NOT NULL DEFAULT '{}'::jsonb"),
)


def missing_item_columns(conn: Any, schema: str) -> list[str]:
    """Upgrade columns (:data:`ITEM_COLUMN_UPGRADES`) the items table lacks; [] when the
    table is absent."""
    names = [name for name, _ in ITEM_COLUMN_UPGRADES]
    rows = conn.execute(
        "SELECT a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s"
        " AND c.relname = %s AND a.attname = ANY(%s) AND NOT a.attisdropped AND a.attnum > 0",
        (schema, ITEMS_TABLE, names)).fetchall()
    table = conn.execute(
        "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s", (schema, ITEMS_TABLE)).fetchone()
    if table is None:
        return []
    present = {row[0] for row in rows}
    return [name for name in names if name not in present]


def upgrade_items_sql(t: "Tables", missing: list[str]) -> list[str]:
    return [f"ALTER TABLE {t.items} ADD COLUMN IF NOT EXISTS {qident(name)} {definition}"
            for name, definition in ITEM_COLUMN_UPGRADES if name in missing]


def group_tables(group: str) -> tuple[str, ...]:
    if group == STATE_GROUP:
        return (STATE_TABLE, EVENTS_TABLE)
    return (ITEMS_TABLE,)


def missing_tables(conn: Any, schema: str, names: tuple[str, ...]) -> list[str]:
    """Names among ``names`` that do not exist in ``schema`` (one catalog query)."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p')",
        (schema, list(names)),
    ).fetchall()
    present = {row[0] for row in rows}
    return [name for name in names if name not in present]


def extension_version(conn: Any) -> str | None:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return row[0] if row else None


def ensure_group(conn: Any, t: Tables, group: str, dimensions: int) -> list[str]:
    """Create the schema, extension (items only) and tables of ``group`` if missing.

    Runs in one transaction under an advisory lock, so concurrent first writers do not
    race on the catalog. Returns the statements it executed (empty when all existed).
    """
    executed: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK_KEY,))
        if not missing_tables(conn, t.schema, group_tables(group)):
            if group == ITEMS_GROUP:  # an existing table from before an upgrade column
                for statement in upgrade_items_sql(t, missing_item_columns(conn, t.schema)):
                    conn.execute(statement)
                    executed.append(statement)
            return executed
        statements = [f"CREATE SCHEMA IF NOT EXISTS {qident(t.schema)}"]
        if group == ITEMS_GROUP:
            if extension_version(conn) is None:
                statements.append("CREATE EXTENSION IF NOT EXISTS vector")
            statements += items_ddl(t, dimensions)
        else:
            statements += state_ddl(t)
        for statement in statements:
            conn.execute(statement)
            executed.append(statement)
    return executed
