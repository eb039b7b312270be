"""``semvecctl stats`` on MongoDB, through mongomock (no MongoDB server can run here)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401


def run(*args):
    return CliRunner().invoke(app, list(args))


@pytest.mark.usefixtures("cli_mongo")
def test_stats_on_mongo_reads_write_times_and_the_item_mirror():
    """On mongomock (no MongoDB server can run here): write times give idle ages; the
    event store lists no log shapes, which the output says instead of guessing."""
    from backends.contract import MemoryItem
    from tests.support.fixtures.mongo import cli_adapter

    adapter = cli_adapter()
    for i in range(3):
        adapter.state_store().save(f"m-{i}", b"z" * (10 * (i + 1)), expected_version=None,
                                   owner_subject="acme")
    adapter.sync_items("m-0", [MemoryItem(item_id="a", text="t", embedding=(0.1, 0.2),
                                          updated_at=datetime(2026, 10, 1, tzinfo=timezone.utc))])
    result = run("stats", "--adapter", "tests.support.fixtures.mongo:cli_adapter",
                 "--idle-for", "1d", "-o", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["sessions"] == 3 and data["blob_bytes"]["sum"] == 60
    assert data["idle_seconds"]["count"] == 3 and data["prune_preview"]["sessions"] == 0
    assert data["item_mirror"]["items"] == 1
    assert "cannot list" in data["events"]["note"] or "keeps no event log" in data["events"]["note"]
