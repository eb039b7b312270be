"""A run in which nothing applies certifies nothing: level NONE, not ok, exit 1, from the
library, the CLI (table and JSON) and the pytest harness alike. In-process only (the
shipped ``memory`` backend: not persistent, no fault seam, no event store)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from backends.conformance import Level, Status, run_conformance
from backends.conformance.model import CaseResult, GroupResult, compute_level
from backends.memory import MemoryBackendAdapter
from semvecctl.app import app

runner = CliRunner()


def test_every_case_not_applicable_is_level_none_and_not_ok():
    report = run_conformance(MemoryBackendAdapter, only="durability,events")
    assert {c.status for c in report.cases} == {Status.NOT_APPLICABLE}
    assert report.level == Level.NONE
    assert report.ok is False
    assert "nothing applicable" in report.summary()
    assert report.to_dict()["level"] == "NONE" and report.to_dict()["ok"] is False


def test_one_passing_group_among_not_applicable_ones_is_full():
    report = run_conformance(MemoryBackendAdapter, only="durability,health")
    assert report.group("durability").status == Status.NOT_APPLICABLE
    assert report.level == Level.FULL and report.ok


def test_levels_of_failed_runs_are_unchanged_by_none():
    na = GroupResult("events", Status.NOT_APPLICABLE, cases=[
        CaseResult("events", "x", Status.NOT_APPLICABLE)])
    failed_core = GroupResult("state", Status.FAILED, cases=[
        CaseResult("state", "y", Status.FAILED)])
    failed_optional = GroupResult("retrieval", Status.FAILED, cases=[
        CaseResult("retrieval", "z", Status.FAILED)])
    assert compute_level([na]) == Level.NONE
    assert compute_level([]) == Level.NONE
    assert compute_level([na, failed_core]) == Level.FAILED
    assert compute_level([na, failed_optional]) == Level.PARTIAL


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_cli_exits_1_when_nothing_applies(fmt):
    result = runner.invoke(app, ["conformance", "run", "--backend", "memory",
                                 "--only", "durability", "-o", fmt])
    assert result.exit_code == 1, result.output
    assert "conformance level NONE" in result.stderr
    assert "nothing applicable" in result.stderr
    assert "Traceback" not in result.output
    if fmt == "json":
        data = json.loads(result.stdout)
        assert data["level"] == "NONE" and data["ok"] is False
    else:
        assert "level: NONE" in result.stdout
        assert "level: FULL" not in result.stdout


def test_pytest_harness_check_fails_when_nothing_applies():
    from backends.conformance.pytest_plugin import ConformanceHarness

    with pytest.raises(pytest.fail.Exception, match="level NONE"):
        ConformanceHarness().check(MemoryBackendAdapter, only="durability")
