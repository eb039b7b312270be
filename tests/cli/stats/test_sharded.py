"""``semvecctl stats`` on a sharded SQL deployment (#38): the whole store's totals, and
each shard's sessions and blob bytes (the sessions the routing reads there: a misplaced
copy is not one) with their skew, in JSON and in the table; on real databases."""

from __future__ import annotations

import json

import psycopg
import pytest
from typer.testing import CliRunner

from backends.postgres.placement import shard_index
from semvecctl.app import app

pytestmark = pytest.mark.postgres


@pytest.fixture
def filled(sharded_sql):
    from backends.postgres import PostgresAdapter

    adapter = PostgresAdapter(sharded_sql.primary, shards=sharded_sql.shard_list)
    try:
        adapter.ensure_schema()
        store = adapter.state_store()
        for n in range(30):
            store.save(f"s-{n:02d}", b"x" * (n + 1), expected_version=None, owner_subject="acme")
    finally:
        adapter.close()
    wrong = sharded_sql.shards[(shard_index("s-00", 3) + 1) % 3]  # a misplaced copy: not counted
    with psycopg.connect(wrong, autocommit=True) as conn:
        conn.execute("INSERT INTO semvec_session_state (session_id, state_blob, version, drift_exempt,"
                     " owner_subject, pending_message, updated_at) VALUES ('s-00', 'stale', 1, false,"
                     " NULL, NULL, now())")
    return sharded_sql


def expected() -> tuple[list[int], list[int]]:
    sessions, sizes = [0, 0, 0], [0, 0, 0]
    for n in range(30):
        shard = shard_index(f"s-{n:02d}", 3)
        sessions[shard] += 1
        sizes[shard] += n + 1
    return sessions, sizes


def check(data: dict) -> None:
    sessions, sizes = expected()
    assert data["sessions"] == 30 and data["blob_bytes"]["sum"] == sum(sizes)
    shards = data["shards"]
    assert shards["count"] == 3
    assert [s["shard"] for s in shards["per_shard"]] == ["shard 0", "shard 1", "shard 2"]
    assert [s["sessions"] for s in shards["per_shard"]] == sessions
    assert sum(s["sessions"] for s in shards["per_shard"]) == data["sessions"]
    assert [s["blob_bytes"] for s in shards["per_shard"]] == sizes
    assert shards["skew"] == {"sessions": round(max(sessions) / 10, 3),
                              "blob_bytes": round(max(sizes) / (sum(sizes) / 3), 3)}
    assert all("@" in s["uri"] and s["database"] == s["shard"] for s in shards["per_shard"])


def test_stats_json_table_and_report_per_shard_with_uri_and_shards(filled, tmp_path):
    runner = CliRunner()
    args = ["--shards", filled.shard_list, "stats", "--uri", filled.primary, "-b", "postgres"]
    report = tmp_path / "stats.md"
    result = runner.invoke(app, [*args, "-o", "json", "--report", str(report)])
    assert result.exit_code == 0, result.output
    check(json.loads(result.stdout))
    assert "Shards (skew, largest / mean" in report.read_text()
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    sessions, _ = expected()
    assert "skew (largest / mean)" in table.stdout
    for i, count in enumerate(sessions):
        assert f"{count} session(s)" in table.stdout and f"shard {i}" in table.stdout


def test_stats_per_shard_from_the_engines_variables(filled, monkeypatch):
    monkeypatch.setenv("SEMVEC_SESSION_BACKEND", "postgres")
    for name, value in filled.environ.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["stats", "-o", "json"])
    assert result.exit_code == 0, result.output
    check(json.loads(result.stdout))


@pytest.mark.parametrize("backend", ["postgres"])
def test_an_unsharded_store_has_no_shard_figures(pgvector_url, postgres_adapter_factory, backend):
    postgres_adapter_factory().state_store().save("one", b"x", expected_version=None)
    result = CliRunner().invoke(app, ["stats", "--uri", pgvector_url, "-b", backend, "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["sessions"] == 1 and "shards" not in data
