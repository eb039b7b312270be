"""Opt-in: ``conformance run`` against the deployed engine's own adapters (Redis and
postgres), then the store holds nothing of the run and ``semvecctl doctor`` is clean.
Each run applies the known-failures list shipped for it
(``backends/conformance/known/engine-0.8.9-*.yaml``, made from this run): exit 0, strict
level FAILED, every listed case an expected failure.

Skipped unless the proprietary ``semvec`` engine is importable (never a dependency; run
with ``/work/engvenv``-style scratch environments). The engine is configured only through
its environment, as in production: ``REDIS_URL`` for Redis (a private redis-server with
AOF on, so the engine's own durability check passes and the suite's durability group can
certify it), ``DATABASE_URL`` for postgres (a fresh database of the suite's server).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.fixtures.engine import engine_database_url, engine_pg_driver

pytestmark = pytest.mark.engine

pytest.importorskip("semvec", reason="the semvec engine is not installed")

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args))


def _report(args: list[str]) -> tuple[int, dict]:
    result = _run("conformance", "run", *args, "-o", "json")
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def _cases(report: dict) -> dict[str, dict]:
    return {f"{c['group']}.{c['case']}": c for g in report["groups"] for c in g["cases"]}


def _strictly_failed(cases: dict[str, dict]) -> dict[str, str]:
    """Cases that failed before the known-failures list was applied."""
    return {k: v["message"] for k, v in cases.items()
            if v.get("strict_status", v["status"]) in ("failed", "error")}


def _shipped(name: str) -> str:
    from backends.conformance.known import shipped_known_failures

    return str(shipped_known_failures(name))


def _check_known(code: int, report: dict, cases: dict[str, dict], name: str) -> None:
    """With the shipped list the run passes at its level; the strict level is FAILED when
    the list names any case (FULL when it names none), every listed case is an expected
    failure (none passes unexpectedly), and the cross-process and isolation cases applied
    and passed."""
    from backends.conformance.known import load_known_failures

    listed = load_known_failures(_shipped(name)).entries
    assert code == 0, json.dumps({k: v["message"] for k, v in cases.items()
                                  if v["status"] in ("failed", "error")}, indent=1)
    assert report["level"] == "FULL", report["level"]
    assert report["strict_level"] == ("FAILED" if listed else "FULL"), report["strict_level"]
    for case_id in listed:
        assert cases[case_id]["status"] == "expected-failure", cases[case_id]
    for case_id in ("concurrency.processes", "durability.sigkill", "isolation.empty_values",
                    "isolation.owner_variants"):
        assert cases[case_id]["status"] == "passed", cases[case_id]
    faults = cases["faults.connection"]
    assert faults["status"] == "not-applicable" and "URI" in faults["message"], faults


@pytest.fixture
def durable_redis():
    from tests.support.dedicated_redis import DedicatedRedis

    workdir = Path(tempfile.mkdtemp(prefix="semvec-engine-conf-"))
    server = DedicatedRedis(workdir, extra=["--appendonly", "yes"])
    server.start()
    try:
        yield server
    finally:
        server.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def _engine_redis_factory_module(tmp_path: Path, monkeypatch) -> str:
    """A zero-argument factory that builds the engine's Redis adapter, importable by
    ``--adapter`` (the engine's adapter class itself takes no arguments)."""
    module = tmp_path / "engine_redis_factory.py"
    module.write_text(
        "def make():\n"
        "    from semvec.api.redis_backend_adapter import RedisBackendAdapter\n"
        "    return RedisBackendAdapter()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "engine_redis_factory:make"


@pytest.mark.redis
def test_engine_redis_adapter_run_leaves_nothing_and_doctor_is_clean(
        durable_redis, tmp_path, monkeypatch):
    from semvec.api import redis_client

    url = durable_redis.url
    monkeypatch.setenv("REDIS_URL", url)
    monkeypatch.delenv("SEMVEC_REDIS_SKIP_DURABILITY_CHECK", raising=False)
    monkeypatch.delenv("SEMVEC_REDIS_SESSION_TTL_S", raising=False)
    redis_client.reset_redis()
    first = _run("doctor", "--uri", url)
    assert first.exit_code == 0, first.output  # clean before the run ...
    raw = durable_redis.client()
    try:
        before = set(raw.scan_iter(count=1000))
        code, report = _report(["--adapter", _engine_redis_factory_module(tmp_path, monkeypatch),
                                "--known-failures", _shipped("engine-0.8.9-redis")])
        cases = _cases(report)
        failed = _strictly_failed(cases)
        # the engine's known Redis defects (ENGINE-WIRE §7) are what the suite reports
        assert set(failed) <= {"commit_turn.owner_check", "commit_turn.atomic_on_server_error"}, failed
        assert "commit_turn.atomic_on_server_error" in failed, failed
        assert not any("cleanup" in m for m in failed.values()), failed
        # issue 25: published as the shipped known-failures list, which the run holds
        _check_known(code, report, cases, "engine-0.8.9-redis")
        after = set(raw.scan_iter(count=1000))
        left = sorted(after - before)
        assert left == [], f"keys the run left behind: {left[:10]}"
        assert not [k for k in after if report["prefix"].encode() in k]
    finally:
        raw.close()
        redis_client.reset_redis()
    doctor = _run("doctor", "--uri", url)
    assert doctor.exit_code == 0, doctor.output  # ... and after it


@pytest.mark.postgres
def test_engine_postgres_adapter_run_is_not_failed_for_sequences_and_leaves_nothing(
        pgvector_url, tmp_path, monkeypatch):
    pytest.importorskip("semvec.api.postgres_backend_adapter",
                        reason="the engine's SQL extras are not installed")
    import psycopg
    from semvec.api import database

    # the driver named explicitly: psycopg 3 unless $SEMVEC_TEST_ENGINE_PG_DRIVER says psycopg2
    monkeypatch.setenv("DATABASE_URL", engine_database_url(pgvector_url))
    database.reset_engine()
    database.create_tables()
    module = tmp_path / "engine_pg_factory.py"
    module.write_text(
        "def make():\n"
        "    from semvec.api.postgres_backend_adapter import PostgresBackendAdapter\n"
        "    return PostgresBackendAdapter()\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def counts():
        with psycopg.connect(pgvector_url) as conn:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                    for t in ("semvec_session_state", "semvec_memory_events")}

    # the list that holds is the driver's: what the engine's own SQLAlchemy engine reports
    driver = database.get_engine().dialect.driver
    assert driver in ("psycopg", "psycopg2"), driver
    assert driver == engine_pg_driver()
    listed = f"engine-0.8.9-postgres-{driver}"
    try:
        before = counts()
        code, report = _report(["--adapter", "engine_pg_factory:make",
                                "--known-failures", _shipped(listed)])
        cases = _cases(report)
        failed = _strictly_failed(cases)
        # what is left on psycopg 3 is the engine's duplicate-insert defect (ENGINE-WIRE §7:
        # psycopg 3's rowcount for INSERT ... ON CONFLICT DO NOTHING is -1, never 0), a
        # true finding; on psycopg2 (rowcount 0) nothing is left
        duplicate_insert = {"state.insert_never_overwrites", "commit_turn.insert_and_update",
                            "commit_turn.conflicting_turn_writes_no_event",
                            "concurrency.racing_inserts"}
        assert set(failed) == (duplicate_insert if driver == "psycopg" else set()), \
            json.dumps(failed, indent=1)
        # no case fails for a sequence the engine's SQL layout never assigns
        for case_id in ("events.sequence_gap_free", "events.record_fidelity",
                        "events.tenants_isolated", "events.limit_after_owner_filter",
                        "events.engine_surface", "durability.fault_after_state"):
            assert case_id not in failed, (case_id, failed.get(case_id))
        seq = cases["events.sequence_gap_free"]
        assert seq["status"] == "not-applicable", seq
        assert "without a sequence" in seq["message"], seq["message"]
        assert not any("cleanup" in m for m in failed.values()), failed
        _check_known(code, report, cases, listed)
        with psycopg.connect(pgvector_url) as conn:
            left = conn.execute(
                "SELECT session_id FROM semvec_session_state WHERE session_id LIKE %s",
                (report["prefix"] + "%",)).fetchall()
            left_events = conn.execute(
                "SELECT event_id FROM semvec_memory_events WHERE user_id LIKE %s",
                (report["prefix"] + "%",)).fetchall()
        assert left == [] and left_events == []
        assert counts() == before
    finally:
        database.reset_engine()
    doctor = _run("doctor", "--uri", pgvector_url)
    assert doctor.exit_code == 0, doctor.output


def test_engine_memory_adapter_is_full_with_the_cross_process_cases_not_applicable():
    """The engine's in-process adapter: FULL without any list; the process, kill and
    connection cases are not applicable (not persistent), with that reason."""
    code, report = _report(["--adapter", "semvec.api.backend_adapter:MemoryBackendAdapter"])
    cases = _cases(report)
    assert code == 0 and report["level"] == "FULL", _strictly_failed(cases)
    assert report["strict_level"] == "FULL"
    for case_id in ("concurrency.processes", "durability.sigkill", "faults.connection"):
        case = cases[case_id]
        assert case["status"] == "not-applicable" and "is_persistent" in case["message"], case
    for case_id in ("isolation.empty_values", "isolation.owner_variants"):
        assert cases[case_id]["status"] == "passed", cases[case_id]
