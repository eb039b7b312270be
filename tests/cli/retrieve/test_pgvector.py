"""``retrieve run|diff`` end to end against a real PostgreSQL + pgvector (a server-side
retriever with a recency signal and a mirror), seeded through the adapter's item mirror."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryItem
from semvecctl.app import app

pytestmark = pytest.mark.postgres

BASE = datetime(2025, 1, 1, tzinfo=timezone.utc)


def seed(adapter, session: str, n: int = 30) -> list[MemoryItem]:
    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "omega"]
    items = [
        MemoryItem(item_id=f"i{k:03d}", text=f"{rng.choice(words)} {rng.choice(words)} note {k}",
                   embedding=tuple(rng.uniform(-1, 1) for _ in range(8)),
                   updated_at=BASE + timedelta(minutes=k))
        for k in range(n)
    ]
    adapter.sync_items(session, items)
    return items


def test_diff_against_pgvector(pgvector_adapter_factory, pgvector_url, tmp_path, monkeypatch):
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", "8")  # the CLI's adapter reads it
    adapter = pgvector_adapter_factory(dimensions=8)
    seed(adapter, "sess-a")
    runner = CliRunner()

    result = runner.invoke(app, ["retrieve", "run", "--uri", pgvector_url, "-s", "sess-a",
                                 "--like", "i007", "--side", "server", "-k", "5", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["results"]) == 5

    result = runner.invoke(app, ["retrieve", "diff", "--uri", pgvector_url, "-s", "sess-a",
                                 "--like", "i007", "-k", "5", "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (query,) = data["queries"]
    assert query["rows"][0]["in_process_item"] == "i007"
    codes = {n["code"] for n in query["notes"]}
    assert {"recency-server-only", "mirror-lag", "inert-field"} <= codes
    assert 0.0 <= query["metrics"]["rbo"] <= 1.0
    assert "pgvector-server" == data["server"]

    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps({"id": f"like-{k}", "like": f"i{k:03d}"})
                                 for k in (1, 12, 25)))
    result = runner.invoke(app, ["retrieve", "diff", "--uri", pgvector_url, "-s", "sess-a",
                                 "--queries", str(queries), "--min-rbo", "1.0", "-o", "json"])
    data = json.loads(result.stdout)
    assert data["aggregate"]["queries"] == 3
    # a recency-weighted server ranking cannot agree perfectly with pure cosine everywhere
    assert result.exit_code == (1 if data["gate"]["missed"] else 0)


def test_diff_exact_against_pgvector(pgvector_adapter_factory, pgvector_url, monkeypatch):
    """--exact on pgvector: the server side against its own search on the exact plan.
    A 30-item session is searched exactly already, so recall is 1 and the gate passes."""
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", "8")
    adapter = pgvector_adapter_factory(dimensions=8)
    seed(adapter, "sess-x")
    runner = CliRunner()
    result = runner.invoke(app, ["retrieve", "diff", "--uri", pgvector_url, "-s", "sess-x",
                                 "--like", "i007", "-k", "5", "--min-recall", "1.0", "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (query,) = data["queries"]
    assert query["exact"]["recall"] == 1.0 and query["exact"]["jaccard"] == 1.0
    assert query["exact"]["ranking"] == [r["server_item"] for r in query["rows"]]
    assert data["aggregate"]["min_exact_recall"] == 1.0
