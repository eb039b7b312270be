"""What ``pgvector`` adds to the engine's SQL layout: the item-mirror table (with its
full-text column and later upgrade columns), its indexes (recency b-tree, HNSW, GIN) and
one extended-statistics object, as a :class:`~backends.postgres.schema.SqlLayout` the shared
SQL layer provisions, validates and ensures like the engine's own tables.
"""

from __future__ import annotations

from typing import Any

from backends.postgres.schema import (
    ENGINE_INDEXES,
    STATE,
    IndexKey,
    SqlLayout,
    StatisticsObject,
    TableGroup,
    Tables,
    qident,
    statistics_sql,
)

ITEMS_TABLE = "semvec_memory_items"
ITEMS_GROUP = "items"  # the memory-item mirror (needs the vector extension)
TEXT_SEARCH_CONFIG = "simple"

#: A session's items all have one owner, but without this object the planner multiplies
#: the session and owner selectivities, expects ~1/owners of a session's rows, and on a
#: store of many sessions reads every row of the session for the recency signal instead
#: of walking its b-tree for the newest 100 (1M items over 1,000 sessions: the fused
#: search 4.7 ms -> 2.3 ms). Recommended, not required: only plans depend on it.
STATISTICS: tuple[StatisticsObject, ...] = (
    StatisticsObject("semvec_items_session_owner", ITEMS_TABLE, ("session_id", "owner_subject"),
                     ("dependencies",)),
)


def items_ddl(t: Tables, dimensions: int) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS {t.of(ITEMS_TABLE)} (
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
    return [f"ALTER TABLE {t.of(ITEMS_TABLE)} ADD COLUMN IF NOT EXISTS {qident(name)} {definition}"
            for name, definition in ITEM_COLUMN_UPGRADES if name in missing]



def _upgrade(conn: Any, t: Tables) -> list[str]:
    return upgrade_items_sql(t, missing_item_columns(conn, t.schema))


#: The HNSW graph we plan: pgvector's m, a deeper ef_construction. A better-built graph is
#: what lifts recall at a given ef_search (100k items, recall@10 against exact search:
#: 0.906 at ef_search 40 with pgvector's default 64, 0.966 with 128), so searches stay
#: shallow and fast; the price is a build about 1.5x longer (bench/bench_pgvector_scale.py).
HNSW_OPTIONS = {"m": 16, "ef_construction": 128}
#: pgvector's own defaults, which an index built without WITH (...) has
HNSW_DEFAULTS = {"m": 16, "ef_construction": 64}

ITEM_INDEXES: tuple[IndexKey, ...] = (
    IndexKey("semvec_memory_items_pkey", ITEMS_TABLE, "unique", "btree", ("session_id", "item_id"),
             ("text_ops", "text_ops"), unique=True, constraint="primary key"),
    IndexKey("semvec_items_session_recency", ITEMS_TABLE, "btree", "btree",
             ("session_id", "evicted", "updated_at"), ("text_ops", "bool_ops", "timestamptz_ops"),
             descending=(False, False, True)),
    IndexKey("semvec_items_vec", ITEMS_TABLE, "hnsw", "hnsw", ("embedding",),
             ("vector_cosine_ops",), options=tuple(HNSW_OPTIONS.items()),
             option_defaults=tuple(HNSW_DEFAULTS.items()), column_type="vector({dims})"),
    IndexKey("semvec_items_lex", ITEMS_TABLE, "gin", "gin", ("text_tsv",), ("tsvector_ops",)),
)

ITEMS = TableGroup(ITEMS_GROUP, (ITEMS_TABLE,), items_ddl, upgrade=_upgrade, extension="vector")
#: the ``pgvector`` backend: the engine's layout plus the item mirror
PGVECTOR_LAYOUT = SqlLayout((STATE, ITEMS), ENGINE_INDEXES + ITEM_INDEXES, STATISTICS,
                            sized_column=(ITEMS_TABLE, "embedding"),
                            # an older semvecctl pgvector's (engine-incompatible shapes)
                            legacy_tables=("compliance_events", "compliance_event_counters"))


def register_vector_type(conn: Any) -> bool:
    """Teach this connection the ``vector`` type if the extension exists (else False, and
    the pool asks again on the connection's next typed use): the hook the adapter hands
    the pool."""
    try:
        from pgvector.psycopg import register_vector
    except ImportError as exc:
        from backends.info import declared

        raise declared("pgvector").missing_driver("pgvector") from exc
    try:
        register_vector(conn)
    except Exception:  # noqa: BLE001 - psycopg.ProgrammingError: no vector type in the database
        return False
    return True
