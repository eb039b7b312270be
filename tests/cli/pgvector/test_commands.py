"""semvecctl end to end against a real PostgreSQL + pgvector: discovery, resolution,
index provisioning and drift, health, sessions, and `retrieve diff` on a seeded session."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from typer.testing import CliRunner

from backends.contract import MemoryItem
from semvecctl.app import app

BASE = datetime(2025, 1, 1, tzinfo=timezone.utc)


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def test_backends_list_shows_pgvector_installed_from_this_distribution():
    result = run("backends", "list", "-o", "json")
    assert result.exit_code == 0, result.output
    (row,) = [r for r in json.loads(result.stdout) if r["name"] == "pgvector"]
    assert row["source"].startswith("semvecctl")
    assert row["source"] != "shipped"
    assert row["target"] == "backends.pgvector:PgVectorAdapter"
    assert row["status"] == "ok"


def test_backends_list_check_imports_and_checks_pgvector():
    result = run("backends", "list", "--check", "-o", "json")
    (row,) = [r for r in json.loads(result.stdout) if r["name"] == "pgvector"]
    assert row["status"] == "ok", row


@pytest.mark.parametrize("spelling", ["pg-vector", "PgVector", "pg_vector", " pgvector "])
def test_folded_names_resolve_to_pgvector(spelling):
    result = run("backends", "resolve", "-o", "json", env={"SEMVEC_SESSION_BACKEND": spelling})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["resolved"] == "pgvector" and data["fell_back"] is False
    assert data["source"].startswith("semvecctl")


pg = pytest.mark.postgres


def _sql(url: str, statement: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


@pg
def test_indexes_ensure_validate_and_drift(pgvector_url, monkeypatch):
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", "16")
    # an empty database holds no item table, so the URI alone would pick postgres
    auto = run("backends", "resolve", "--uri", pgvector_url, "-o", "json")
    assert json.loads(auto.stdout)["resolved"] == "postgres", auto.output
    plan = run("indexes", "plan", "--backend", "pgvector", "--uri", pgvector_url, "-o", "json")
    assert plan.exit_code == 0, plan.output
    assert {r["action"] for r in json.loads(plan.stdout)["indexes"]} == {"create"}

    before = run("indexes", "validate", "--backend", "pgvector", "--uri", pgvector_url, "-o", "json")
    assert before.exit_code == 1  # nothing provisioned yet; validate wrote nothing
    assert {r["state"] for r in json.loads(before.stdout)["indexes"]} == {"missing"}

    ensured = run("indexes", "ensure", "--backend", "pgvector", "--uri", pgvector_url, "--apply", "--yes",
                  "-o", "json")
    assert ensured.exit_code == 0, ensured.output
    assert json.loads(ensured.stdout)["applied"] is True

    ok = run("indexes", "validate", "--uri", pgvector_url)
    assert ok.exit_code == 0, ok.output
    # now the database holds the item table and the extension: the URI picks pgvector
    auto = run("backends", "resolve", "--uri", pgvector_url, "-o", "json")
    data = json.loads(auto.stdout)
    assert data["resolved"] == "pgvector" and "vector extension" in data["chosen_by"]

    _sql(pgvector_url, "DROP INDEX semvec_items_session_recency")
    missing = run("indexes", "validate", "--uri", pgvector_url, "-o", "json")
    assert missing.exit_code == 1
    assert "semvec_items_session_recency" in missing.stderr
    bad = [r for r in json.loads(missing.stdout)["indexes"] if not r["ok"]]
    assert [(r["name"], r["state"]) for r in bad] == [("semvec_items_session_recency", "missing")]

    _sql(pgvector_url, "DROP INDEX semvec_items_vec")
    _sql(pgvector_url, "CREATE INDEX semvec_items_vec ON semvec_memory_items"
                       " USING hnsw (embedding vector_ip_ops)")
    drift = run("indexes", "validate", "--uri", pgvector_url)
    assert drift.exit_code == 1
    assert "semvec_items_vec" in drift.stderr + drift.stdout
    assert "vector_ip_ops" in drift.stdout

    # ensure restores the missing one, leaves the drifted one and says so (exit 1) ...
    partial = run("indexes", "ensure", "--uri", pgvector_url, "--apply", "--yes")
    assert partial.exit_code == 1
    assert "semvec_items_vec" in partial.stderr
    # ... and --recreate rebuilds it
    fixed = run("indexes", "ensure", "--uri", pgvector_url, "--recreate", "--apply", "--yes")
    assert fixed.exit_code == 0, fixed.output
    assert run("indexes", "validate", "--uri", pgvector_url).exit_code == 0

    # the session/owner statistics are a recommendation: a warning, a failure on --strict
    _sql(pgvector_url, "DROP STATISTICS semvec_items_session_owner")
    advisory = run("indexes", "validate", "--uri", pgvector_url)
    assert advisory.exit_code == 0, advisory.output
    assert "recommended statistics semvec_items_session_owner" in advisory.stderr
    assert run("indexes", "validate", "--uri", pgvector_url, "--strict").exit_code == 1
    assert run("indexes", "ensure", "--uri", pgvector_url, "--apply", "--yes").exit_code == 0
    assert run("indexes", "validate", "--uri", pgvector_url, "--strict").exit_code == 0


@pg
def test_health_and_sessions_over_the_uri(pgvector_url, pgvector_adapter_factory):
    adapter = pgvector_adapter_factory()
    adapter.commit_turn("cli-session", b"\x00blob", expected_version=None, owner_subject="acme")
    health = run("health", "--uri", pgvector_url, "-o", "json")
    assert health.exit_code == 0, health.output
    with psycopg.connect(pgvector_url) as conn:
        risky = conn.execute("SELECT count(*) FROM pg_settings WHERE name IN ('fsync',"
                             " 'synchronous_commit', 'full_page_writes') AND setting = 'off'"
                             ).fetchone()[0]
    durable = run("health", "--uri", pgvector_url, "--require-durable")
    # the suite's own server runs with fsync=off for speed, and the gate must say so
    assert durable.exit_code == (1 if risky else 0), durable.output
    listed = run("sessions", "list", "--uri", pgvector_url, "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert "cli-session" in listed.stdout


def _seed(adapter, session: str, n: int, dims: int) -> list[MemoryItem]:
    rng = random.Random(17)
    words = "ocean river mountain forest desert valley glacier canyon meadow island".split()
    centres = [[rng.gauss(0, 1) for _ in range(dims)] for _ in range(12)]
    items = []
    for k in range(n):
        centre = centres[k % len(centres)]
        items.append(MemoryItem(
            item_id=f"m{k:04d}",
            text=f"{rng.choice(words)} {rng.choice(words)} {rng.choice(words)} memory {k}",
            embedding=tuple(c + rng.gauss(0, 0.4) for c in centre),
            updated_at=BASE + timedelta(minutes=k),
        ))
    adapter.sync_items(session, items)
    return items


@pg
def test_retrieve_diff_end_to_end_on_a_seeded_session(pgvector_url, pgvector_adapter_factory,
                                                       monkeypatch):
    dims = 16
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", str(dims))
    adapter = pgvector_adapter_factory(dimensions=dims)
    _seed(adapter, "diff-session", 300, dims)
    assert run("indexes", "ensure", "--uri", pgvector_url, "--apply", "--yes").exit_code == 0

    result = run("retrieve", "diff", "--uri", pgvector_url, "-s", "diff-session",
                 "--like", "m0042", "-q", "glacier canyon", "--bm25", "-k", "8", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["server"] == "pgvector-server"
    (query,) = data["queries"]
    rows = query["rows"]
    assert sum(1 for r in rows if r.get("in_process_item")) == 8
    assert sum(1 for r in rows if r.get("server_item")) == 8
    metrics = query["metrics"]
    for name in ("rbo", "jaccard"):
        assert name in metrics and 0.0 <= metrics[name] <= 1.0
    notes = {(n["code"], n["message"]) for n in query["notes"]}
    recency = [m for code, m in notes if code == "recency-server-only"]
    assert recency and "recency" in recency[0] and "updated_at" in recency[0]
    inert = {m.rsplit(" ", 1)[-1] for code, m in notes if code == "inert-field"}
    # exactly what the retriever declares: rrf_k and stage are honoured, so not listed
    assert inert == {"rrf_weights", "fuse_with_bm25"}
    assert "mirror-lag" in {code for code, _ in notes}  # the third declared field, memory

    table = run("retrieve", "diff", "--uri", pgvector_url, "-s", "diff-session",
                "--like", "m0042", "-k", "5")
    assert table.exit_code == 0, table.output
    assert "recency" in (table.stdout + table.stderr).lower()
