"""Known divergences (issue 25.5): a listed case that fails is an expected failure with its
reason, a listed case that passes fails the run, and every report carries the strict
level beside the level with the divergences accepted."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
import yaml
from typer.testing import CliRunner

from backends.conformance import Level, Status, run_conformance, to_junit_xml
from backends.conformance.known import (
    KnownFailuresError,
    load_known_failures,
    parse_known_failures,
    shipped_known_failures,
)
from semvecctl.app import app
from tests.support.conformance_doubles import NoOwnerCheckAdapter

OWNER_CHECK = {"case": "commit_turn.owner_check",
               "reason": "the turn checks the version but not the owner",
               "link": "https://example.org/issues/7"}


def _known(*entries):
    return parse_known_failures({"known_failures": list(entries)})


def test_a_listed_failure_is_expected_and_the_run_passes_with_the_strict_level_kept():
    report = run_conformance(NoOwnerCheckAdapter, known_failures=_known(OWNER_CHECK))
    case = report.case("commit_turn.owner_check")
    assert case.status == Status.EXPECTED_FAILURE
    assert case.strict_status == Status.FAILED
    assert "the turn checks the version but not the owner" in case.message
    assert "https://example.org/issues/7" in case.message
    assert report.ok
    assert report.level == Level.FULL and report.strict_level == Level.FAILED
    data = report.to_dict()
    assert data["level"] == "FULL" and data["strict_level"] == "FAILED"
    assert data["known_failures"]["cases"][0]["case"] == "commit_turn.owner_check"
    assert "strict level FAILED" in report.summary()


def test_without_the_list_the_same_run_fails():
    report = run_conformance(NoOwnerCheckAdapter, only="commit_turn")
    assert report.case("commit_turn.owner_check").status == Status.FAILED
    assert report.level == report.strict_level == Level.FAILED and not report.ok


def test_a_listed_case_that_passes_fails_the_run():
    report = run_conformance(NoOwnerCheckAdapter, only="state,commit_turn", known_failures=_known(
        OWNER_CHECK, {"case": "state.insert_never_overwrites", "reason": "fixed since"}))
    case = report.case("state.insert_never_overwrites")
    assert case.status == Status.FAILED and case.strict_status == Status.PASSED
    assert case.message.startswith("unexpectedly passing: remove it from the list")
    assert not report.ok and report.level == Level.FAILED


def test_a_listed_case_that_is_not_applicable_stays_not_applicable():
    report = run_conformance(NoOwnerCheckAdapter, only="indexes", known_failures=_known(
        {"case": "indexes.ensure_is_idempotent", "reason": "r"}))
    case = report.case("indexes.ensure_is_idempotent")
    assert case.status == Status.NOT_APPLICABLE and "listed as a known failure" in case.message


def test_junit_carries_both_levels_and_the_expected_failure():
    report = run_conformance(NoOwnerCheckAdapter, only="commit_turn",
                             known_failures=_known(OWNER_CHECK))
    root = to_junit_xml(report).getroot()
    props = {p.get("name"): p.get("value") for p in root.find("testsuite/properties")}
    assert props["level"] == "FULL" and props["strict_level"] == "FAILED"
    assert props["group_strict_status"] == "failed"
    case = root.find(".//testcase[@name='owner_check']")
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("type") == "expected-failure"
    assert "checks the version but not the owner" in skipped.get("message")
    assert case.find("failure") is None


@pytest.mark.parametrize("data, fragment", [
    ({"known_failures": [{"case": "state.nope", "reason": "r"}]}, "no case 'state.nope'"),
    ({"known_failures": [{"case": "state.insert_never_overwrites"}]}, "'reason' must say"),
    ({"known_failures": [OWNER_CHECK, OWNER_CHECK]}, "listed twice"),
    ({"known_failures": [{**OWNER_CHECK, "why": "x"}]}, "unknown key(s) why"),
    ({"known": []}, "a 'known_failures' list"),
    ("text", "a 'known_failures' list"),
])
def test_a_bad_list_is_refused_naming_the_entry(data, fragment):
    with pytest.raises(KnownFailuresError) as caught:
        parse_known_failures(data)
    assert fragment in str(caught.value)


def test_cli_known_failures_exit_status_and_reports(tmp_path):
    listed = tmp_path / "known.yaml"
    listed.write_text(yaml.safe_dump({"backend": "no-owner-check double",
                                      "known_failures": [OWNER_CHECK]}))
    runner = CliRunner()
    adapter = "tests.support.conformance_doubles:NoOwnerCheckAdapter"
    report_md = tmp_path / "out" / "report.md"
    junit = tmp_path / "out" / "junit.xml"
    result = runner.invoke(app, ["conformance", "run", "--adapter", adapter, "--only",
                                 "commit_turn", "--known-failures", str(listed),
                                 "--report", str(report_md), "--junit", str(junit),
                                 "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["level"] == "FULL" and data["strict_level"] == "FAILED"
    text = report_md.read_text()
    assert "strict level FAILED" in text and "Known divergences" in text
    assert "checks the version but not the owner" in text
    props = {p.get("name"): p.get("value")
             for p in ET.parse(junit).getroot().find("testsuite/properties")}
    assert props["strict_level"] == "FAILED"

    table = runner.invoke(app, ["conformance", "run", "--adapter", adapter, "--only",
                                "commit_turn", "--known-failures", str(listed)])
    assert table.exit_code == 0, table.output
    assert "level: FULL with known divergences accepted (strict level: FAILED)" in table.stdout


def test_cli_unexpected_pass_exits_1(tmp_path):
    listed = tmp_path / "known.yaml"
    listed.write_text(yaml.safe_dump({"known_failures": [
        {"case": "state.insert_never_overwrites", "reason": "was broken"}]}))
    result = CliRunner().invoke(app, ["conformance", "run", "--backend", "memory", "--only",
                                      "state", "--known-failures", str(listed)])
    assert result.exit_code == 1, result.output
    assert "unexpectedly passing: remove it from the list" in result.output


@pytest.mark.parametrize("content, fragment", [
    ("known_failures: [{case: state.nope, reason: r}]", "no case 'state.nope'"),
    ("known_failures: [", "is not valid YAML"),
])
def test_cli_bad_list_is_a_usage_error_before_any_store_is_touched(tmp_path, content, fragment):
    listed = tmp_path / "known.yaml"
    listed.write_text(content)
    result = CliRunner().invoke(app, ["conformance", "run", "--uri", "redis://127.0.0.1:1/0",
                                      "--known-failures", str(listed)])
    assert result.exit_code == 2, result.output
    assert fragment in result.output and "Traceback" not in result.output


def test_cli_missing_list_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(app, ["conformance", "run", "--backend", "memory",
                                      "--known-failures", str(tmp_path / "absent.yaml")])
    assert result.exit_code == 2 and "cannot read the known-failures file" in result.output


@pytest.mark.parametrize("name", ["engine-0.8.9-redis", "engine-0.8.9-postgres-psycopg"])
def test_the_shipped_engine_lists_are_valid(name):
    known = load_known_failures(shipped_known_failures(name))
    assert known.entries
    assert all(k.reason and k.link for k in known.entries.values())


def test_the_engine_postgres_lists_are_keyed_by_driver():
    """One list per driver of the engine's SQLAlchemy engine (issue 42): the duplicate-insert
    defect is psycopg 3's rowcount -1 (ENGINE-WIRE section 7), so it is listed for psycopg
    and for nothing else; psycopg2 lists nothing (its run is FULL strictly). No driver-less
    list is shipped: it would hold for one driver only. No comment blames SQLAlchemy 2.1."""
    psycopg = load_known_failures(shipped_known_failures("engine-0.8.9-postgres-psycopg"))
    psycopg2 = load_known_failures(shipped_known_failures("engine-0.8.9-postgres-psycopg2"))
    assert set(psycopg.entries) == {"state.insert_never_overwrites",
                                    "commit_turn.insert_and_update",
                                    "commit_turn.conflicting_turn_writes_no_event",
                                    "concurrency.racing_inserts"}
    assert psycopg2.entries == {}
    assert "psycopg 3" in psycopg.source["backend"] and "psycopg2" in psycopg2.source["backend"]
    assert not shipped_known_failures("engine-0.8.9-postgres").exists()
    for name in ("engine-0.8.9-postgres-psycopg", "engine-0.8.9-postgres-psycopg2"):
        text = shipped_known_failures(name).read_text(encoding="utf-8")
        assert "rowcount -1" in text or "rowcount 0" in text
        assert "differs on 2.1" not in text and "SQLAlchemy 2.1 " not in text
