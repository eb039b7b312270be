"""SQL index manifests: plan, ensure (the only mutating path) and read-only validate.

``postgres`` manages exactly what the engine's schema needs; ``pgvector`` adds its item
table and HNSW/GIN indexes. Updated for the engine's layout (issue 13): the old
``compliance_*`` tables and the (user_id, sequence) key are gone, so the dropped-unique-
key test now drops the engine's ``ix_semvec_memory_events_user_id``."""

from __future__ import annotations

import psycopg
import pytest

from backends.contract import IndexManager
from backends.pgvector.schema import HNSW_DEFAULTS, HNSW_OPTIONS

pytestmark = pytest.mark.postgres

ENGINE_EXPECTED = {
    "semvec_session_state_pkey", "semvec_memory_events_pkey", "ix_semvec_memory_events_user_id",
}
EXPECTED = ENGINE_EXPECTED | {
    "semvec_memory_items_pkey", "semvec_items_session_recency", "semvec_items_vec",
    "semvec_items_lex", "semvec_items_session_owner",
}


@pytest.fixture
def adapter(pgvector_adapter_factory):
    return pgvector_adapter_factory(dimensions=16)


def sql(url: str, statement: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


def by_name(reports):
    return {r.name: r for r in reports}


def test_plan_lists_the_manifest(adapter):
    assert isinstance(adapter, IndexManager)
    plan = {spec.name: spec for spec in adapter.index_plan()}
    assert set(plan) == EXPECTED
    vec = plan["semvec_items_vec"]
    assert vec.kind == "hnsw" and vec.definition["opclasses"] == ["vector_cosine_ops"]
    assert vec.definition["dimensions"] == 16
    assert by_name(adapter.index_plan(dimensions=768))["semvec_items_vec"].definition[
        "column_type"] == "vector(768)"
    assert plan["semvec_items_lex"].definition["method"] == "gin"


def test_validate_on_an_empty_database_reports_missing_and_creates_nothing(adapter, pgvector_url):
    reports = adapter.validate_indexes()
    assert {r.status for r in reports} == {"missing"}
    assert not any(r.ok for r in reports)
    with psycopg.connect(pgvector_url) as conn:
        assert conn.execute("SELECT to_regclass('semvec_memory_items')").fetchone() == (None,)


def test_preview_changes_nothing_then_ensure_then_validate_ok(adapter, pgvector_url):
    preview = adapter.ensure_indexes(apply=False)
    assert {a.action for a in preview} == {"create"}
    assert not any(a.applied for a in preview)
    assert {r.status for r in adapter.validate_indexes()} == {"missing"}

    applied = adapter.ensure_indexes()
    tables = [a.name for a in applied if a.kind == "table"]
    assert set(tables) == {"semvec_session_state", "semvec_memory_events",
                           "semvec_memory_items"}
    reports = adapter.validate_indexes()
    assert all(r.ok for r in reports), [(r.name, r.status, r.differences) for r in reports]
    assert {r.name for r in reports if r.status == "ok"} == EXPECTED
    # idempotent
    assert {a.action for a in adapter.ensure_indexes()} == {"exists"}


def test_a_dropped_index_is_reported_missing_by_name(adapter, pgvector_url):
    adapter.ensure_indexes()
    sql(pgvector_url, "DROP INDEX semvec_items_lex")
    reports = by_name(adapter.validate_indexes())
    assert reports["semvec_items_lex"].status == "missing"
    assert [r.name for r in reports.values() if not r.ok] == ["semvec_items_lex"]
    actions = by_name(adapter.ensure_indexes())
    assert actions["semvec_items_lex"].action == "create"
    assert all(r.ok for r in adapter.validate_indexes())


def test_wrong_operator_class_is_drift_and_ensure_leaves_it_unless_recreate(adapter, pgvector_url):
    adapter.ensure_indexes()
    sql(pgvector_url, "DROP INDEX semvec_items_vec")
    sql(pgvector_url, "CREATE INDEX semvec_items_vec ON semvec_memory_items"
                      f" USING hnsw (embedding vector_l2_ops) WITH ({planned_options()})")
    report = by_name(adapter.validate_indexes())["semvec_items_vec"]
    assert report.status == "drift"
    assert [(d.field, d.expected, d.actual) for d in report.differences] == [
        ("opclasses", ["vector_cosine_ops"], ["vector_l2_ops"])
    ]
    assert by_name(adapter.ensure_indexes())["semvec_items_vec"].action == "mismatch"
    assert by_name(adapter.validate_indexes())["semvec_items_vec"].status == "drift"
    preview = by_name(adapter.ensure_indexes(recreate=True, apply=False))["semvec_items_vec"]
    assert preview.action == "recreate" and not preview.applied
    assert by_name(adapter.ensure_indexes(recreate=True))["semvec_items_vec"].applied
    assert by_name(adapter.validate_indexes())["semvec_items_vec"].status == "ok"


def test_wrong_method_is_drift(adapter, pgvector_url):
    adapter.ensure_indexes()
    sql(pgvector_url, "DROP INDEX semvec_items_vec")
    sql(pgvector_url, "CREATE INDEX semvec_items_vec ON semvec_memory_items"
                      " USING ivfflat (embedding vector_cosine_ops) WITH (lists = 1)")
    diffs = by_name(adapter.validate_indexes())["semvec_items_vec"].differences
    assert ("method", "hnsw", "ivfflat") in [(d.field, d.expected, d.actual) for d in diffs]


def test_wrong_embedding_dimension_is_drift_ensure_cannot_fix(adapter, pgvector_adapter_factory):
    adapter.ensure_indexes()  # vector(16)
    other = pgvector_adapter_factory(dimensions=32)
    report = by_name(other.validate_indexes())["semvec_items_vec"]
    assert report.status == "drift"
    assert ("dimensions", "vector(32)", "vector(16)") in [
        (d.field, d.expected, d.actual) for d in report.differences
    ]
    action = by_name(other.ensure_indexes(recreate=True))["semvec_items_vec"]
    assert action.action == "mismatch" and not action.applied
    # asking validate about the deployed dimension says ok
    assert by_name(other.validate_indexes(dimensions=16))["semvec_items_vec"].status == "ok"


def test_wrong_sort_direction_and_extra_indexes(adapter, pgvector_url):
    adapter.ensure_indexes()
    sql(pgvector_url, "DROP INDEX semvec_items_session_recency")
    sql(pgvector_url, "CREATE INDEX semvec_items_session_recency ON semvec_memory_items"
                      " (session_id, evicted, updated_at)")
    sql(pgvector_url, "CREATE INDEX my_own_index ON semvec_memory_items (tier)")
    reports = by_name(adapter.validate_indexes())
    assert reports["semvec_items_session_recency"].status == "drift"
    assert reports["semvec_items_session_recency"].differences[0].field == "descending"
    assert reports["my_own_index"].status == "extra" and reports["my_own_index"].ok


def test_a_dropped_engine_index_is_missing_and_ensure_restores_it(adapter, pgvector_url):
    adapter.ensure_indexes()
    sql(pgvector_url, "DROP INDEX ix_semvec_memory_events_user_id")
    assert by_name(adapter.validate_indexes())["ix_semvec_memory_events_user_id"].status == "missing"
    adapter.ensure_indexes()
    assert by_name(adapter.validate_indexes())["ix_semvec_memory_events_user_id"].status == "ok"


def planned_options(**changed: int) -> str:
    """The manifest's HNSW options as a WITH list, with some changed."""
    return ", ".join(f"{k} = {v}" for k, v in {**HNSW_OPTIONS, **changed}.items())


@pytest.mark.parametrize("option,value", [("m", 8), ("ef_construction", 32)])
def test_hnsw_build_options_are_compared(adapter, pgvector_url, option, value):
    adapter.ensure_indexes()
    sql(pgvector_url, "DROP INDEX semvec_items_vec")
    sql(pgvector_url, "CREATE INDEX semvec_items_vec ON semvec_memory_items"
                      f" USING hnsw (embedding vector_cosine_ops) WITH ({planned_options(**{option: value})})")
    report = by_name(adapter.validate_indexes())["semvec_items_vec"]
    assert report.status == "drift"
    assert [(d.field, d.actual) for d in report.differences] == [(option, value)]
    assert by_name(adapter.ensure_indexes())["semvec_items_vec"].action == "mismatch"
    assert by_name(adapter.ensure_indexes(recreate=True))["semvec_items_vec"].applied
    assert by_name(adapter.validate_indexes())["semvec_items_vec"].status == "ok"


def test_hnsw_built_without_options_is_read_with_pgvectors_defaults(adapter, pgvector_url):
    """An index made without WITH (...) has pgvector's defaults (m 16, ef_construction 64):
    only what the manifest plans differently (a deeper ef_construction) is drift."""
    adapter.ensure_indexes()
    sql(pgvector_url, "DROP INDEX semvec_items_vec")
    sql(pgvector_url, "CREATE INDEX semvec_items_vec ON semvec_memory_items"
                      " USING hnsw (embedding vector_cosine_ops)")
    report = by_name(adapter.validate_indexes())["semvec_items_vec"]
    expected = [(name, planned, HNSW_DEFAULTS[name]) for name, planned in HNSW_OPTIONS.items()
                if planned != HNSW_DEFAULTS[name]]
    assert expected == [("ef_construction", 128, 64)]
    assert [(d.field, d.expected, d.actual) for d in report.differences] == expected


def test_postgres_manages_the_engine_schema_and_nothing_else(postgres_adapter_factory,
                                                              pgvector_url):
    adapter = postgres_adapter_factory()
    assert {spec.name for spec in adapter.index_plan()} == ENGINE_EXPECTED
    assert {r.status for r in adapter.validate_indexes()} == {"missing"}
    actions = adapter.ensure_indexes()
    assert {a.name for a in actions if a.kind == "table"} == {"semvec_session_state",
                                                            "semvec_memory_events"}
    reports = adapter.validate_indexes()
    assert {r.name for r in reports if r.status == "ok"} == ENGINE_EXPECTED
    assert all(r.ok for r in reports)
    with psycopg.connect(pgvector_url) as conn:
        assert conn.execute("SELECT to_regclass('semvec_memory_items')").fetchone() == (None,)
    assert {a.action for a in adapter.ensure_indexes()} == {"exists"}


def test_ensure_in_a_named_schema(pgvector_adapter_factory):
    adapter = pgvector_adapter_factory(schema="ops", dimensions=16)
    adapter.ensure_indexes()
    reports = adapter.validate_indexes()
    assert all(r.ok for r in reports)
    assert {r.target.split(".")[0] for r in reports} == {"ops"}


def test_server_uses_the_indexes_for_retrieval(adapter, pgvector_url):
    """The manifest serves the queries: the HNSW index answers a cosine top-k."""
    adapter.ensure_indexes()
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT item_id FROM semvec_memory_items ORDER BY embedding <=> "
            "array_fill(0.1, ARRAY[16])::vector LIMIT 5"))
    assert "semvec_items_vec" in plan


def test_unconfigured_dimensions_follow_the_deployed_column(adapter, pgvector_url, monkeypatch):
    from backends.pgvector import PgVectorAdapter

    monkeypatch.delenv("SEMVEC_PGVECTOR_DIMENSIONS", raising=False)
    adapter.ensure_indexes()  # vector(16)
    unconfigured = PgVectorAdapter(pgvector_url)
    try:
        assert all(r.ok for r in unconfigured.validate_indexes())
        assert by_name(unconfigured.index_plan())["semvec_items_vec"].definition["dimensions"] == 16
        details = unconfigured.health_details(2.0)
        assert details["embedding_column"] == "vector(16)"
        assert details["dimensions"] == 16 and details["dimensions_configured"] is False
    finally:
        unconfigured.close()


def _rows_estimate(url: str, where: str) -> float:
    with psycopg.connect(url) as conn:
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM semvec_memory_items WHERE {where}"
                            ).fetchone()[0]
    return plan[0]["Plan"]["Plan Rows"]


def test_session_owner_statistics_are_recommended_and_teach_the_planner(adapter, pgvector_url):
    """Every item of a session has the session's owner: with the statistics object the
    planner knows the owner filter keeps all of a session's rows (without it, it expects
    a fraction of them and reads every row of the session for the recency signal)."""
    spec = by_name(adapter.index_plan())["semvec_items_session_owner"]
    assert spec.kind == "statistics" and spec.required is False
    assert spec.definition["columns"] == ["session_id", "owner_subject"]
    adapter.ensure_indexes()
    sql(pgvector_url, "INSERT INTO semvec_memory_items (session_id, item_id, owner_subject)"
                      " SELECT 's' || (i % 200), 'i' || i, 'tenant-' || (i % 200 % 40)"
                      " FROM generate_series(1, 20000) AS i")
    sql(pgvector_url, "ANALYZE semvec_memory_items")
    both = "session_id = 's7' AND owner_subject = 'tenant-7'"
    assert _rows_estimate(pgvector_url, both) == pytest.approx(
        _rows_estimate(pgvector_url, "session_id = 's7'"), rel=0.5)

    sql(pgvector_url, "DROP STATISTICS semvec_items_session_owner")
    sql(pgvector_url, "ANALYZE semvec_memory_items")
    assert by_name(adapter.validate_indexes())["semvec_items_session_owner"].status == "missing"
    assert _rows_estimate(pgvector_url, both) < _rows_estimate(pgvector_url, "session_id = 's7'") / 5
    action = by_name(adapter.ensure_indexes())["semvec_items_session_owner"]
    assert action.action == "create" and action.applied
    assert by_name(adapter.validate_indexes())["semvec_items_session_owner"].status == "ok"
    # ensure analysed the columns: the planner knows at once
    assert _rows_estimate(pgvector_url, both) == pytest.approx(
        _rows_estimate(pgvector_url, "session_id = 's7'"), rel=0.5)


def test_statistics_of_another_kind_are_drift_and_rebuilt_only_on_recreate(adapter, pgvector_url):
    adapter.ensure_indexes()
    sql(pgvector_url, "DROP STATISTICS semvec_items_session_owner")
    sql(pgvector_url, "CREATE STATISTICS semvec_items_session_owner (ndistinct)"
                      " ON session_id, owner_subject FROM semvec_memory_items")
    report = by_name(adapter.validate_indexes())["semvec_items_session_owner"]
    assert report.status == "drift"
    assert [(d.field, d.expected, d.actual) for d in report.differences] == [
        ("kinds", ["dependencies"], ["ndistinct"])]
    assert by_name(adapter.ensure_indexes())["semvec_items_session_owner"].action == "mismatch"
    assert by_name(adapter.ensure_indexes(recreate=True))["semvec_items_session_owner"].applied
    assert by_name(adapter.validate_indexes())["semvec_items_session_owner"].status == "ok"
