"""The suite drives an engine-style adapter natively (tests/support/engine_style: ``scope=``,
``load`` -> ``(blob, version)``, its own event class and the engine's event surface, the
engine's Redis layout) over a real redis-server, reaching FULL without a shim; the copies
with the engine's two Redis defects (ENGINE-WIRE §7) are each caught by a named case."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from backends.conformance import ConformanceOptions, Level, Status, run_conformance
from semvecctl.app import app

pytestmark = pytest.mark.redis

runner = CliRunner()

REFERENCE = "tests.support.engine_style:Factory"
NO_OWNER_CHECK = "tests.support.engine_style.defective:NoOwnerCheckFactory"
NON_ATOMIC = "tests.support.engine_style.defective:NonAtomicTurnFactory"


@pytest.fixture
def engine_env(durable_redis_url, monkeypatch):
    """The engine configures its Redis through REDIS_URL only; so does the plugin. The
    server has AOF on (tests/backends/conformance/conftest.py): the engine requires a durable Redis,
    and the suite certifies that too."""
    monkeypatch.setenv("REDIS_URL", durable_redis_url)
    return durable_redis_url


@pytest.fixture
def engine_server(durable_redis):
    return durable_redis


def _run_cli(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["conformance", "run", *args, "-o", "json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def _cases(report: dict) -> dict[str, dict]:
    return {f"{c['group']}.{c['case']}": c for g in report["groups"] for c in g["cases"]}


def _no_run_keys_left(raw, prefix: str) -> list[bytes]:
    return [k for k in raw.scan_iter(count=1000) if prefix.encode() in k]


def test_reference_adapter_reaches_full_through_the_cli(engine_env, engine_server):
    code, report = _run_cli("--adapter", REFERENCE)
    assert code == 0, report
    assert report["level"] == "FULL"
    cases = _cases(report)
    caps = report["capabilities"]
    assert caps["owner_convention"] == "scope" and caps["event_surface"] == "engine"
    # the cases that matter for an engine adapter ran and passed, natively
    for case_id in ("state.owner_filter_reads", "state.owner_takeover_refused",
                    "commit_turn.owner_check", "commit_turn.atomic_on_server_error",
                    "durability.survives_reopen", "durability.server_is_durable",
                    "events.sequence_gap_free",
                    "events.record_fidelity", "events.engine_surface",
                    "events.tenants_isolated", "concurrency.racing_commit_turns"):
        assert cases[case_id]["status"] == "passed", (case_id, cases[case_id]["message"])
    # what scope= cannot say is skipped with its reason, never failed
    reads = cases["state.owner_filter_reads"]["message"]
    assert "no 'unowned rows only' read" in reads
    assert "takes no owner" in reads  # load_owner / current_version take the id alone
    assert cases["events.limit_after_owner_filter"]["status"] == "not-applicable"
    assert cases["state.delete_checks_version"]["status"] == "not-applicable"
    # NaN in an embedding is accepted, as by the engine: advisory, FULL all the same
    nan = cases["commit_turn.malformed_event_changes_nothing"]
    assert nan["status"] == "advisory" and "NaN" in nan["message"]
    assert report["ok"] is True
    raw = engine_server.client()
    try:
        assert _no_run_keys_left(raw, report["prefix"]) == []
    finally:
        raw.close()


@pytest.mark.parametrize("target, case_id, fragment", [
    pytest.param(NO_OWNER_CHECK, "commit_turn.owner_check",
                 "commit_turn naming another owner on the right version: expected "
                 "StateVersionConflict, got returned 2", id="commit-turn-skips-owner-check"),
    pytest.param(NON_ATOMIC, "commit_turn.atomic_on_server_error",
                 "state version b'1' -> b'2'", id="non-atomic-turn-on-server-error"),
])
def test_each_engine_defect_is_caught_by_its_named_case(engine_env, engine_server, target,
                                                         case_id, fragment):
    code, report = _run_cli("--adapter", target)
    assert code == 1
    assert report["level"] == "FAILED"
    failed = {cid: c for cid, c in _cases(report).items() if c["status"] in ("failed", "error")}
    assert set(failed) == {case_id}, {k: v["message"] for k, v in failed.items()}
    assert fragment in failed[case_id]["message"], failed[case_id]["message"]
    raw = engine_server.client()
    try:
        assert _no_run_keys_left(raw, report["prefix"]) == []  # the planted key too
    finally:
        raw.close()


def test_non_atomic_turn_reports_what_landed(engine_env):
    from tests.support.engine_style.defective import NonAtomicTurnFactory

    report = run_conformance(NonAtomicTurnFactory, only="commit_turn.atomic_on_server_error")
    result = report.cases[0]
    assert result.status == Status.FAILED
    assert "semvec:events:e:" in result.actual and "created" in result.actual
    assert "semvec:events:seq:" in result.actual  # the first user's counter moved


def test_atomic_case_takes_the_uri_from_options(redis_url, monkeypatch):
    """Without REDIS_URL in the environment, ConformanceOptions.redis_url names the server."""
    from tests.support.engine_style.defective import NonAtomicTurnAdapter

    monkeypatch.setenv("REDIS_URL", redis_url)
    adapter = NonAtomicTurnAdapter()
    monkeypatch.delenv("REDIS_URL")
    try:
        na = run_conformance(adapter, only="commit_turn.atomic_on_server_error").cases[0]
        assert na.status == Status.NOT_APPLICABLE and "no Redis URI" in na.message
        caught = run_conformance(adapter, only="commit_turn.atomic_on_server_error",
                                 options=ConformanceOptions(redis_url=redis_url)).cases[0]
        assert caught.status == Status.FAILED, caught.message
    finally:
        adapter.close()


def test_atomic_case_is_not_applicable_off_the_engine_layout(redis_url):
    """A Redis URI is not enough: the adapter's rows must be there, in the engine's layout."""
    from tests.support.conformance_doubles import EventfulMemoryAdapter

    report = run_conformance(EventfulMemoryAdapter, only="commit_turn.atomic_on_server_error",
                             options=ConformanceOptions(redis_url=redis_url))
    result = report.cases[0]
    assert result.status == Status.NOT_APPLICABLE
    assert "not in the engine's Redis layout" in result.message


def test_reference_adapter_is_driven_without_any_owner_subject(engine_env, monkeypatch):
    """Every call the suite makes names the owner as scope= (an OwnerScope), never
    owner_subject=: the adapter would raise TypeError otherwise."""
    from backends.contract.owner import OwnerScope
    from tests.support.engine_style import adapter as module

    seen = []
    original = module._owner

    def spy(scope):
        seen.append(scope)
        return original(scope)

    monkeypatch.setattr(module, "_owner", spy)
    report = run_conformance(module.Factory, only="state,commit_turn")
    assert report.level == Level.FULL, [c.message for c in report.failures]
    scopes = [s for s in seen if s is not None]
    assert scopes and all(isinstance(s, OwnerScope) for s in scopes)


def _event_hashes(raw) -> set[bytes]:
    return set(raw.scan_iter(match="semvec:events:e:*", count=1000))


def test_a_failed_atomic_case_leaves_no_event_hash_behind(engine_env, engine_server):
    """After commit_turn.atomic_on_server_error fails against the non-atomic adapter, the
    event hashes its half-written turn left (one of them indexed under a key the case had
    planted, so no index leads to it) are removed by the run's own event ids."""
    from tests.support.engine_style.defective import NonAtomicTurnFactory

    raw = engine_server.client()
    try:
        before = _event_hashes(raw)
        report = run_conformance(NonAtomicTurnFactory, only="commit_turn.atomic_on_server_error")
        assert report.cases[0].status == Status.FAILED
        assert "cleanup" not in report.cases[0].message, report.cases[0].message
        left = _event_hashes(raw) - before
        assert left == set(), f"event hashes of the run left behind: {sorted(left)}"
        assert _no_run_keys_left(raw, report.prefix) == []
    finally:
        raw.close()


def test_engine_style_adapter_on_a_redis_without_aof_is_not_certified(redis_url, monkeypatch):
    """Without a health-details seam (as the engine's own adapter), the verdict is read
    from the run's Redis once the adapter's session is seen there: the suite's shared
    server runs without AOF, so the case fails saying so."""
    from tests.support.engine_style import Factory

    monkeypatch.setenv("REDIS_URL", redis_url)
    report = run_conformance(Factory, only="durability.server_is_durable")
    case = report.cases[0]
    assert case.status == Status.FAILED, case.message
    assert "as the run's Redis reports it (INFO)" in case.message
    assert "AOF is off (appendonly no)" in case.message
    assert report.level == Level.FAILED


def test_durability_case_is_not_applicable_off_the_runs_redis(redis_url):
    """A Redis URI the adapter does not write to is not judged for it."""
    from tests.support.conformance_doubles import EventfulMemoryAdapter

    report = run_conformance(EventfulMemoryAdapter, only="durability.server_is_durable",
                             options=ConformanceOptions(redis_url=redis_url))
    case = report.cases[0]
    assert case.status == Status.NOT_APPLICABLE
    assert "no server to judge" in case.message
