"""Index manifest and explicit provisioning: ``plan``, ``ensure`` (the only path that
creates indexes) and ``validate`` (read-only, from the catalogs).

Drift is judged on access method, key columns, operator classes (``vector_cosine_ops``
— an HNSW index built with another class is never used for ``<=>``), sort direction,
uniqueness, validity, the dimension of the embedding column the vector index covers, and
the HNSW build options (``m``, ``ef_construction``: an index rebuilt with ``m = 8`` has
another recall/latency trade-off than the one planned, so it is drift). An option not
set on the index counts as the access method's default.

What is managed is the database's :class:`~backends.postgres.schema.SqlLayout`: for
``postgres`` exactly what the engine's schema needs (the two tables, their primary keys
and ``ix_semvec_memory_events_user_id``); a flavour's layout adds its tables, indexes and
extended-statistics objects, which ``ensure`` creates (and ANALYZEs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backends.contract import FieldDiff, IndexAction, IndexReport, IndexSpec
from backends.postgres.database import Database
from backends.postgres.schema import (
    IndexKey,
    StatisticsObject,
    ensure_group,
    missing_tables,
    qident,
    statistics_sql,
)

_CATALOG_SQL = """
SELECT ic.relname, tc.relname, am.amname, ix.indisunique, ix.indisvalid,
       ARRAY(SELECT a.attname FROM unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
             LEFT JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum
             ORDER BY k.ord),
       ARRAY(SELECT oc.opcname FROM unnest(ix.indclass::oid[]) WITH ORDINALITY AS c(opc, ord)
             JOIN pg_opclass oc ON oc.oid = c.opc ORDER BY c.ord),
       ARRAY(SELECT (o.opt & 1) = 1 FROM unnest(ix.indoption::int2[]) WITH ORDINALITY AS o(opt, ord)
             ORDER BY o.ord),
       coalesce(ic.reloptions, '{}'),
       pg_get_indexdef(ix.indexrelid),
       EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = ix.indexrelid),
       con.contype
FROM pg_index ix
JOIN pg_class ic ON ic.oid = ix.indexrelid
JOIN pg_class tc ON tc.oid = ix.indrelid
JOIN pg_namespace n ON n.oid = tc.relnamespace
JOIN pg_am am ON am.oid = ic.relam
LEFT JOIN pg_constraint con ON con.conindid = ix.indexrelid AND con.conrelid = ix.indrelid
WHERE n.nspname = %s AND tc.relname = ANY(%s)
"""

#: ``pg_statistic_ext.stxkind`` letters and the CREATE STATISTICS kinds they stand for
_STATISTICS_KINDS = {"d": "ndistinct", "f": "dependencies", "m": "mcv", "e": "expressions"}

_STATISTICS_SQL = """
SELECT s.stxname, c.relname,
       ARRAY(SELECT a.attname FROM unnest(s.stxkeys::int2[]) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = s.stxrelid AND a.attnum = k.attnum
             ORDER BY k.ord),
       s.stxkind::text[]
FROM pg_statistic_ext s
JOIN pg_class c ON c.oid = s.stxrelid
JOIN pg_namespace n ON n.oid = s.stxnamespace
WHERE n.nspname = %s AND c.relname = ANY(%s)
"""


@dataclass(frozen=True)
class _Found:
    name: str
    table: str
    method: str
    unique: bool
    valid: bool
    columns: tuple[str | None, ...]
    opclasses: tuple[str, ...]
    descending: tuple[bool, ...]
    options: dict
    definition: str
    building: bool
    constraint: str | None


def _found(row: Any) -> _Found:
    options = {}
    for entry in row[8] or ():
        key, _, value = str(entry).partition("=")
        options[key] = value
    contype = {"p": "primary key", "u": "unique"}.get(row[11]) if row[11] else None
    return _Found(row[0], row[1], row[2], bool(row[3]), bool(row[4]), tuple(row[5]),
                  tuple(row[6]), tuple(bool(x) for x in row[7]), options, row[9], bool(row[10]),
                  contype)


def _summary(report: IndexReport) -> str:
    """A drift report's differences in one line, for ensure's "mismatch" actions."""
    return "; ".join(f"{d.field}: expected {d.expected}, found {d.actual}"
                     for d in report.differences)


def _number(text: Any) -> Any:
    try:
        return int(text)
    except (TypeError, ValueError):
        return text


class SqlIndexManager:
    """Plan, validate and ensure the indexes of the database's layout (``db.layout``)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._schema = db.config.schema
        self._layout = db.layout
        self._manifest = db.layout.indexes
        self._statistics = db.layout.statistics
        self._tables = list(db.layout.tables)

    # -- plan -------------------------------------------------------------------------

    def _dims(self, dimensions: int | None) -> int:
        if dimensions is None:
            return self._db.dimensions
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ValueError("dimensions must be a positive int")
        return dimensions

    def _target(self, table: str) -> str:
        return f"{self._schema}.{table}"

    def index_plan(self, *, dimensions: int | None = None) -> list[IndexSpec]:
        dims = self._dims(dimensions)
        specs = []
        for key in self._manifest:
            definition: dict[str, Any] = {
                "method": key.method,
                "columns": list(key.columns),
                "opclasses": list(key.opclasses),
                "unique": key.unique,
                "sql": self._create_sql(key, dims),
            }
            if any(key.desc()):
                definition["descending"] = list(key.desc())
            if key.constraint:
                definition["constraint"] = key.constraint
            if key.options:
                definition["options"] = dict(key.options)
            if key.column_type:
                definition["dimensions"] = dims
                definition["column_type"] = key.column_type.format(dims=dims)
            specs.append(IndexSpec(key.name, self._target(key.table), key.kind, definition))
        for stats in self._statistics:
            specs.append(IndexSpec(stats.name, self._target(stats.table), "statistics",
                                   {"columns": list(stats.columns), "kinds": list(stats.kinds),
                                    "sql": statistics_sql(self._schema, stats)},
                                   required=False))
        return specs

    def _create_sql(self, key: IndexKey, dims: int) -> str:
        table = f"{qident(self._schema)}.{qident(key.table)}"
        if key.constraint:
            what = "PRIMARY KEY" if key.constraint == "primary key" else "UNIQUE"
            cols = ", ".join(qident(c) for c in key.columns)
            return f"ALTER TABLE {table} ADD CONSTRAINT {qident(key.name)} {what} ({cols})"
        parts = []
        for column, opclass, desc in zip(key.columns, key.opclasses, key.desc()):
            default_opclass = key.method == "btree"
            part = qident(column) + ("" if default_opclass else f" {opclass}")
            parts.append(part + (" DESC" if desc else ""))
        sql = (f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {qident(key.name)} ON {table}"
               f" USING {key.method} ({', '.join(parts)})")
        if key.options:
            sql += " WITH (" + ", ".join(f"{k} = {v}" for k, v in key.options) + ")"
        return sql

    # -- validate ---------------------------------------------------------------------

    def _catalog(self, conn: Any) -> tuple[dict[str, _Found], list[str], str | None]:
        tables = self._tables
        found = {f.name: f for f in map(_found, conn.execute(_CATALOG_SQL, (self._schema, tables)))}
        absent = missing_tables(conn, self._schema, tuple(tables))
        column_type = None
        sized = self._layout.sized_column
        if sized is not None and sized[0] not in absent:
            row = conn.execute(
                "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
                " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relname = %s AND a.attname = %s"
                " AND NOT a.attisdropped",
                (self._schema, sized[0], sized[1]),
            ).fetchone()
            column_type = row[0] if row else None
        return found, absent, column_type

    def _judge(self, key: IndexKey, found: dict[str, _Found], absent: list[str],
               column_type: str | None, dims: int) -> IndexReport:
        target = self._target(key.table)
        if key.table in absent:
            return IndexReport(key.name, target, key.kind, "missing",
                               detail=f"table {target} does not exist")
        have = found.get(key.name)
        if have is None:
            expected_type = key.column_type.format(dims=dims) if key.column_type else None
            if expected_type and column_type is not None and column_type != expected_type:
                # the index could be created, but on a column of another dimension: the
                # index ensure would build is one validate rejects, so this is drift
                return IndexReport(key.name, target, key.kind, "drift",
                                   (FieldDiff("dimensions", expected_type, column_type),),
                                   f"index missing; the embedding column is {column_type}")
            return IndexReport(key.name, target, key.kind, "missing")
        if have.table != key.table:
            return IndexReport(key.name, target, key.kind, "drift",
                               (FieldDiff("table", key.table, have.table),), have.definition)
        diffs = []
        if have.method != key.method:
            diffs.append(FieldDiff("method", key.method, have.method))
        if have.columns != key.columns:
            diffs.append(FieldDiff("columns", list(key.columns), list(have.columns)))
        if have.method == key.method and have.opclasses != key.opclasses:
            diffs.append(FieldDiff("opclasses", list(key.opclasses), list(have.opclasses)))
        if key.method == "btree" and have.descending != key.desc():
            diffs.append(FieldDiff("descending", list(key.desc()), list(have.descending)))
        if have.unique != key.unique:
            diffs.append(FieldDiff("unique", key.unique, have.unique))
        if key.column_type:
            expected_type = key.column_type.format(dims=dims)
            if column_type != expected_type:
                diffs.append(FieldDiff("dimensions", expected_type, column_type))
        if key.options and have.method == key.method:
            defaults = dict(key.option_defaults)
            for option, wanted in key.options:
                actual = have.options.get(option, str(defaults.get(option, "")))
                if str(actual) != str(wanted):
                    diffs.append(FieldDiff(option, wanted, _number(actual)))
        if have.building:
            return IndexReport(key.name, target, key.kind, "pending", tuple(diffs),
                               "index build in progress")
        if not have.valid:
            diffs.append(FieldDiff("valid", True, False))
        detail = have.definition
        if key.options:
            tuning = {k: have.options.get(k, "default") for k, _ in key.options}
            detail += f" (options: {tuning})"
        return IndexReport(key.name, target, key.kind, "drift" if diffs else "ok",
                           tuple(diffs), detail)

    def _statistics_catalog(self, conn: Any) -> dict[str, tuple[str, tuple, tuple]]:
        """name -> (table, columns, kinds) of the statistics objects on our tables."""
        if not self._statistics:
            return {}
        rows = conn.execute(_STATISTICS_SQL, (self._schema, self._tables)).fetchall()
        return {row[0]: (row[1], tuple(row[2]),
                         tuple(sorted(_STATISTICS_KINDS.get(k, k) for k in row[3] or ())))
                for row in rows}

    def _judge_statistics(self, stats: StatisticsObject, found: dict, absent: list[str]) -> IndexReport:
        target = self._target(stats.table)
        if stats.table in absent:
            return IndexReport(stats.name, target, "statistics", "missing",
                               detail=f"table {target} does not exist")
        have = found.get(stats.name)
        if have is None:
            return IndexReport(stats.name, target, "statistics", "missing")
        table, columns, kinds = have
        diffs = []
        if table != stats.table:
            diffs.append(FieldDiff("table", stats.table, table))
        if columns != stats.columns:
            diffs.append(FieldDiff("columns", list(stats.columns), list(columns)))
        if kinds != tuple(sorted(stats.kinds)):
            diffs.append(FieldDiff("kinds", sorted(stats.kinds), list(kinds)))
        detail = f"statistics ({', '.join(kinds)}) on ({', '.join(columns)})"
        return IndexReport(stats.name, target, "statistics", "drift" if diffs else "ok",
                           tuple(diffs), detail)

    def validate_indexes(self, *, dimensions: int | None = None) -> list[IndexReport]:
        """Read-only: one report per manifest entry, plus ``extra`` for unknown indexes
        on our tables (informational)."""
        dims = self._dims(dimensions)
        with self._db.connection() as conn:
            found, absent, column_type = self._catalog(conn)
            stats_found = self._statistics_catalog(conn)
        reports = [self._judge(key, found, absent, column_type, dims) for key in self._manifest]
        reports += [self._judge_statistics(stats, stats_found, absent) for stats in self._statistics]
        known = {key.name for key in self._manifest}
        for extra in sorted(set(found) - known):
            have = found[extra]
            reports.append(IndexReport(extra, self._target(have.table), have.method, "extra",
                                       detail=have.definition))
        return reports

    # -- ensure -----------------------------------------------------------------------

    def ensure_indexes(
        self,
        *,
        dimensions: int | None = None,
        recreate: bool = False,
        apply: bool = True,
    ) -> list[IndexAction]:
        """Create missing tables and indexes; with ``recreate``, rebuild drifted ones.
        ``apply=False`` previews the same actions without touching anything. Indexes are
        built CONCURRENTLY so provisioning a live table does not block its writers."""
        dims = self._dims(dimensions)
        actions: list[IndexAction] = []
        with self._db.connection() as conn:
            if apply:
                # an HNSW build over a large table outlives any sane statement timeout
                conn.execute("SET statement_timeout = 0")
            try:
                self._ensure_all(conn, actions, dims, recreate, apply)
            finally:
                if apply and not conn.closed:
                    conn.execute(f"SET statement_timeout = {self._db.config.statement_timeout_ms}")
        return actions

    def _ensure_all(self, conn: Any, actions: list[IndexAction], dims: int, recreate: bool,
                    apply: bool) -> None:
        found, absent, column_type = self._catalog(conn)
        for group in self._layout.groups:
            need = [t for t in group.tables if t in absent]
            if not need:
                continue
            for table in need:
                actions.append(IndexAction(table, self._target(table), "table", "create",
                                           "table with its keys", applied=apply))
            if apply:
                ensure_group(conn, self._db.tables, group, dims)
        if apply and absent:
            self._db.pool.forget_prepared_connections()
            found, absent, column_type = self._catalog(conn)
        for key in self._manifest:
            report = self._judge(key, found, absent, column_type, dims)
            actions.append(self._ensure_one(conn, key, report, dims, recreate, apply))
        stats_found = self._statistics_catalog(conn)
        for stats in self._statistics:
            report = self._judge_statistics(stats, stats_found, absent)
            actions.append(self._ensure_statistics(conn, stats, report, recreate, apply))

    def _ensure_statistics(self, conn: Any, stats: StatisticsObject, report: IndexReport,
                           recreate: bool, apply: bool) -> IndexAction:
        """Create (or, with ``recreate``, rebuild) one statistics object, then ANALYZE its
        columns so the planner has it now rather than after the next autovacuum."""
        target = self._target(stats.table)
        if report.status == "ok":
            return IndexAction(stats.name, target, "statistics", "exists", report.detail)
        if report.status == "drift" and not recreate:
            return IndexAction(stats.name, target, "statistics", "mismatch",
                               f"{_summary(report)}; left alone (use recreate to rebuild)")
        if apply:
            if report.status == "drift":
                conn.execute(f"DROP STATISTICS IF EXISTS {qident(self._schema)}.{qident(stats.name)}")
            conn.execute(statistics_sql(self._schema, stats))
            conn.execute(f"ANALYZE {qident(self._schema)}.{qident(stats.table)}"
                         f" ({', '.join(qident(c) for c in stats.columns)})")
        action = "recreate" if report.status == "drift" else "create"
        return IndexAction(stats.name, target, "statistics", action, report.detail, applied=apply)

    def _ensure_one(self, conn: Any, key: IndexKey, report: IndexReport, dims: int,
                    recreate: bool, apply: bool) -> IndexAction:
        target = self._target(key.table)
        if report.status in ("ok", "pending"):
            detail = "build in progress" if report.status == "pending" else ""
            return IndexAction(key.name, target, key.kind, "exists", detail)
        if report.status == "missing":
            if apply:
                conn.execute(self._create_sql(key, dims))
            return IndexAction(key.name, target, key.kind, "create", report.detail, applied=apply)
        names = {d.field for d in report.differences}
        summary = _summary(report)
        if "dimensions" in names:
            return IndexAction(
                key.name, target, key.kind, "mismatch",
                f"{summary}; the embedding column's dimension cannot be changed by ensure"
                " (re-embed the items into a new table, or pass the matching dimensions)",
            )
        if not recreate:
            return IndexAction(key.name, target, key.kind, "mismatch",
                               f"{summary}; left alone (use recreate to rebuild)")
        if apply:
            table = f"{qident(self._schema)}.{qident(key.table)}"
            if key.constraint:
                conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {qident(key.name)}")
            conn.execute(
                f"DROP INDEX CONCURRENTLY IF EXISTS {qident(self._schema)}.{qident(key.name)}"
            )
            conn.execute(self._create_sql(key, dims))
        return IndexAction(key.name, target, key.kind, "recreate", summary, applied=apply)
