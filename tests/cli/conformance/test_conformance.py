"""``semvecctl conformance run|list`` through Typer's CliRunner (memory, the test doubles
in tests/support/conformance_doubles.py via --adapter, and a real Redis)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from backends.conformance import select_cases
from semvecctl.app import app

runner = CliRunner()


def invoke(*args: str, **kwargs):
    return runner.invoke(app, ["conformance", *args], **kwargs)


def test_memory_passes_with_level_full():
    result = invoke("run", "--backend", "memory")
    assert result.exit_code == 0, result.output
    assert "level: FULL" in result.stdout
    assert "events        not-applicable" in result.stdout
    assert "capabilities: persistent=False event_store=none" in result.stdout
    assert "conformance level FULL for backend 'memory'" in result.stderr


def test_json_report():
    result = invoke("run", "--uri", "memory://", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["level"] == "FULL" and data["ok"] is True
    assert [g["name"] for g in data["groups"]][:3] == ["contract", "state", "commit_turn"]
    case = data["groups"][0]["cases"][0]
    assert set(case) >= {"group", "case", "status", "duration", "expected", "actual", "message"}


def test_yaml_report():
    import yaml

    result = invoke("run", "--backend", "memory", "--only", "health", "-o", "yaml")
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["level"] == "FULL"


def test_broken_adapter_exits_1_naming_expected_and_actual(tmp_path):
    junit = tmp_path / "reports" / "conformance.xml"
    result = invoke("run", "--adapter", "tests.support.conformance_doubles:OverwritingInsertAdapter",
                    "--only", "state", "--junit", str(junit))
    assert result.exit_code == 1, result.output
    assert "state.insert_never_overwrites [failed]" in result.stdout
    assert "check:    second insert of the same session" in result.stdout
    assert "expected: StateVersionConflict" in result.stdout
    assert "actual:   returned 1" in result.stdout
    assert "level: FAILED" in result.stdout
    root = ET.parse(junit).getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["conformance.state"]
    failing = [c for c in suites[0].findall("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failing] == ["insert_never_overwrites"]
    assert "expected: StateVersionConflict" in failing[0].find("failure").text


def test_junit_marks_not_applicable_as_skipped(tmp_path):
    junit = tmp_path / "c.xml"
    result = invoke("run", "--backend", "memory", "--only", "events,health", "--junit",
                    str(junit), "-o", "json")
    assert result.exit_code == 0, result.output
    root = ET.parse(junit).getroot()
    events = root.find("testsuite[@name='conformance.events']")
    assert events.get("skipped") == str(len(select_cases("events"))) and events.get("failures") == "0"
    assert all(c.find("skipped") is not None for c in events.findall("testcase"))
    assert "not-applicable" in events.find("testcase/skipped").get("message")


def test_adapter_with_selected_name_checks_it():
    result = invoke("run", "--adapter", "backends.memory:MemoryBackendAdapter",
                    "--backend", "pgvector", "--only", "contract.name_matches_selection")
    assert result.exit_code == 1
    assert "expected: 'pgvector' (folded)" in result.stdout


def test_unknown_backend_is_a_usage_error_not_a_memory_certificate():
    result = invoke("run", "--backend", "redsi")
    assert result.exit_code == 2
    assert "unknown backend 'redsi'" in result.stderr  # the CLI-wide rule (#15.1) answers first
    assert "did you mean 'redis'" in result.stderr


def test_no_backend_named_is_a_usage_error(monkeypatch):
    monkeypatch.delenv("SEMVEC_SESSION_BACKEND", raising=False)
    result = invoke("run")
    assert result.exit_code == 2
    assert "name the backend to certify" in result.stderr


def test_unknown_group_is_a_usage_error():
    result = invoke("run", "--backend", "memory", "--only", "stat")
    assert result.exit_code == 2
    assert "unknown conformance group or case: stat" in result.stderr


def test_list_cases():
    result = invoke("list", "--only", "state")
    assert result.exit_code == 0, result.output
    assert "state.insert_never_overwrites" in result.stdout
    assert "commit_turn." not in result.stdout
    data = json.loads(invoke("list", "-o", "json").stdout)
    assert "events" in data["groups"] and len(data["cases"]) > 30


@pytest.fixture
def durable_redis_url():
    """A private redis-server with AOF on: the suite's shared one runs without AOF, which
    the durability group rightly does not certify."""
    from tests.support.dedicated_redis import throwaway_redis

    with throwaway_redis("semvec-conf-cli-", extra=("--appendonly", "yes")) as url:
        yield url


@pytest.mark.redis
def test_redis_uri_passes(durable_redis_url):
    redis_url = durable_redis_url
    result = invoke("run", "--uri", redis_url, "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["level"] == "FULL"
    assert data["target"] == redis_url  # no credentials in this URL to redact
    # the target URI is the raw handle of the planted-key case: it runs, it is not n/a
    cases = {f"{g['name']}.{c['case']}": c for g in data["groups"] for c in g["cases"]}
    assert cases["commit_turn.atomic_on_server_error"]["status"] == "passed"
    assert cases["durability.survives_reopen"]["status"] == "passed"
    assert cases["durability.server_is_durable"]["status"] == "passed"


@pytest.mark.redis
def test_redis_without_aof_exits_1_naming_the_setting(redis_url):
    """The suite's shared server runs without AOF: not durable, so not certified."""
    result = invoke("run", "--uri", redis_url, "--only", "durability", "-o", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["level"] == "FAILED"
    cases = {f"{g['name']}.{c['case']}": c for g in data["groups"] for c in g["cases"]}
    message = cases["durability.server_is_durable"]["message"]
    assert "AOF is off (appendonly no)" in message and "set appendonly yes" in message
    assert "Traceback" not in result.output


@pytest.mark.redis
def test_redis_credentials_never_printed(redis_server):
    from tests.support.fixtures.redis_server import closed_port

    url = f"redis://user:s3cr3t-pw@127.0.0.1:{closed_port()}/0"
    result = invoke("run", "--uri", url, "--health-timeout", "2")
    assert result.exit_code == 4, result.output
    assert "unreachable" in result.stderr
    assert "s3cr3t-pw" not in result.stdout + result.stderr


@pytest.mark.postgres
def test_pgvector_uri_passes_every_group_with_provisioning(pgvector_url):
    # an empty database holds no item table: the URI alone would pick postgres
    result = invoke("run", "--backend", "pgvector", "--uri", pgvector_url,
                    "--allow-provisioning", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["level"] == "FULL"
    statuses = {g["name"]: g["status"] for g in data["groups"]}
    assert statuses["retrieval"] == "passed" and statuses["indexes"] == "passed", statuses


def test_live_table_on_a_tty(monkeypatch):
    from semvecctl.commands import conformance as command

    monkeypatch.setattr(command, "_stderr_is_tty", lambda: True)
    seen = []
    original = command._LiveTable.update

    def update(self, result):
        seen.append(result.case_id)
        original(self, result)

    monkeypatch.setattr(command._LiveTable, "update", update)
    result = invoke("run", "--backend", "memory", "--only", "health,concurrency")
    assert result.exit_code == 0, result.output
    assert seen == ["concurrency.racing_saves", "concurrency.racing_commit_turns",
                    "concurrency.racing_inserts", "concurrency.processes",
                    "health.answers_bool_promptly", "health.reports_up"]
    assert "level: FULL" in result.stdout


def test_no_live_table_without_a_tty(monkeypatch):
    from semvecctl.commands import conformance as command

    def boom(*args, **kwargs):
        raise AssertionError("live table built without a TTY")

    monkeypatch.setattr(command, "_LiveTable", boom)
    result = invoke("run", "--backend", "memory", "--only", "health")
    assert result.exit_code == 0, result.output
