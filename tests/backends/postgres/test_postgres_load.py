"""``load`` on the ``postgres`` backend (the engine's SQL layout) on a real PostgreSQL:
concurrent writers with retries, then the loss audit, through the library and the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from backends.ops.loadtest import LoadPlan, run_load
from semvecctl.app import app

pytestmark = pytest.mark.postgres


def test_postgres_writers_lose_nothing(postgres_adapter_factory):
    adapter = postgres_adapter_factory(pool_size=4)
    report = run_load(adapter, LoadPlan(writers=4, duration_s=1.5, sessions=2, events_per_turn=2))
    assert report.fatal is None, report.fatal
    assert report.verification.ok, report.verification.problems
    assert report.commits > 0 and report.unknown == 0 and not report.errors, report.errors
    assert report.verification.events_checked == report.commits * 2
    assert report.cleanup_problems == []


def test_load_run_over_the_uri_picks_postgres(pgvector_url):
    result = CliRunner().invoke(app, ["load", "run", "--uri", pgvector_url, "-w", "2", "-d", "1",
                                      "--events-per-turn", "1", "--apply", "--yes", "-o", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["backend"] == "postgres", report
