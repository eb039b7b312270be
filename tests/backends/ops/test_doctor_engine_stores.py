"""Opt-in (#24 Build 5): ``doctor`` on stores the deployed engine wrote is clean.

Skipped unless the proprietary ``semvec`` engine is importable (never a dependency). The
engine writes sessions and turns with events through its own Redis and ``postgres``
adapters (driven as in the interop tests), deletes one event by id the way its API does
(leaving a sequence gap on Redis), and creates its other tables; then ``semvecctl
doctor`` finds no error and no warning and exits 0. The Redis server runs with AOF on, as
the engine requires; the suite's PostgreSQL runs with fsync off on purpose (speed), which
doctor rightly reports as advice, so that one advice finding is set aside here.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.dedicated_redis import throwaway_redis
from tests.support.fixtures.engine import engine_database_url

pytestmark = pytest.mark.engine

semvec = pytest.importorskip("semvec", reason="the semvec engine is not installed")

runner = CliRunner()
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def engine_event(user: str, content: str, session: str, owner: str, at: datetime):
    from semvec.compliance.event_store import MemoryEvent as EngineEvent

    return EngineEvent(event_id=uuid.uuid4(), user_id=user, created_at=at, content=content,
                       embedding=[0.5, -0.25], meta={"turn": content}, owner_subject=owner,
                       session_id=session)


def engine_writes(adapter) -> None:
    """Two sessions, three turns with events, and one event deleted by id."""
    from semvec.api.owner_scope import OwnerScope

    scope = OwnerScope("acme", "bot")
    store = adapter.state_store()
    store.save("eng-a", b"\x00a", expected_version=None, scope=scope)
    store.save("eng-b", b"\x00b", expected_version=None)
    version = 1
    events = []
    for i in range(3):
        turn = [engine_event("alice", f"t{i}-{j}", "eng-a", "acme/bot",
                             T0 + timedelta(seconds=10 * i + j)) for j in range(2)]
        version = adapter.commit_turn("eng-a", f"v{i}".encode(), expected_version=version,
                                      scope=scope, events=turn)
        events.extend(turn)
    store.set_drift_exempt("eng-b", True)
    assert adapter.event_store().delete(events[2].event_id)  # the engine's single-event delete


def findings(result) -> list[dict]:
    assert result.stdout.strip(), result.output
    return json.loads(result.stdout)["findings"]


@pytest.mark.redis
def test_doctor_is_clean_on_a_redis_store_the_engine_wrote(monkeypatch):
    from semvec.api import redis_client

    with throwaway_redis("semvec-doctor-engine-", extra=("--appendonly", "yes")) as url:
        monkeypatch.setenv("REDIS_URL", url)
        monkeypatch.delenv("SEMVEC_REDIS_SKIP_DURABILITY_CHECK", raising=False)
        monkeypatch.delenv("SEMVEC_REDIS_SESSION_TTL_S", raising=False)
        redis_client.reset_redis()
        try:
            from semvec.api.redis_backend_adapter import RedisBackendAdapter as EngineAdapter

            engine_writes(EngineAdapter())
            # the engine's other key families (ENGINE-WIRE 6b), as its services leave them
            client = redis_client.get_redis()
            client.set("semvec:ratelimit:tenant-a", 3)
            client.hset("semvec:cortex:global:state", "v", 1)
            client.sadd("semvec:clusters", "c1")
        finally:
            redis_client.reset_redis()
        result = runner.invoke(app, ["doctor", "--uri", url, "-o", "json"])
    found = findings(result)
    assert [f for f in found if f["severity"] in ("error", "warning")] == []
    assert {f["check"] for f in found} <= {"events.sequence-gap"}  # a note at most
    assert result.exit_code == 0


@pytest.mark.postgres
def test_doctor_is_clean_on_a_postgres_store_the_engine_wrote(pgvector_url, monkeypatch):
    engine_adapter = pytest.importorskip(
        "semvec.api.postgres_backend_adapter",
        reason="the semvec engine's SQL extras are not installed")
    from semvec.api import database

    # the driver named explicitly: psycopg 3 unless $SEMVEC_TEST_ENGINE_PG_DRIVER says psycopg2
    monkeypatch.setenv("DATABASE_URL", engine_database_url(pgvector_url))
    database.reset_engine()
    database.create_tables()  # every table of its own, not only state and events
    try:
        engine_writes(engine_adapter.PostgresBackendAdapter())
    finally:
        database.reset_engine()
    result = runner.invoke(app, ["doctor", "--uri", pgvector_url, "--backend", "postgres",
                                 "-o", "json"])
    found = [f for f in findings(result) if f["check"] != "advice.durability"]
    assert found == []
    assert result.exit_code == 0
