"""``pgvector`` loaded the way the deployed engine loads a plugin (ENGINE-WIRE section 6),
on the real PostgreSQL the suite starts: entry points read from the installed metadata
(the editable install carries ours), names folded the engine's way, its four shipped
names winning, the adapter built with NO arguments from the environment (the engine's
``DATABASE_URL``, SQLAlchemy-style), then driven with the engine's convention: ``scope=``
objects, ``load`` unpacked as a tuple, the engine's own (duck-typed) event objects in
``commit_turn`` and its event-store surface. No engine code is imported."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from importlib.metadata import entry_points

import pytest
from tests.support.fixtures.engine import engine_database_url

pytestmark = pytest.mark.postgres

ENGINE_SHIPPED = ("memory", "redis", "postgres", "mongo")
REQUIRED = ("name", "is_persistent", "state_store", "event_store", "retrieval_backend",
            "commit_turn", "check_health")


def engine_fold(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(".", "_")


def engine_discover(wanted: str):
    """The engine's lookup: shipped names win, else the entry point of that folded name."""
    folded = engine_fold(wanted)
    if folded in ENGINE_SHIPPED:
        return None  # the engine's own backend; a plugin of that name is never reached
    found = [ep for ep in entry_points(group="semvec.backends") if engine_fold(ep.name) == folded]
    assert len(found) == 1, found
    return found[0].load()


@dataclass(frozen=True)
class EngineScope:
    """Shaped like the engine's owner scope: frozen (tenant, agent), ``owner_subject``."""

    tenant: str
    agent: str | None = None

    @property
    def owner_subject(self) -> str:
        return self.tenant if self.agent is None else f"{self.tenant}/{self.agent}"


@dataclass
class EngineEvent:
    """Shaped like the engine's event object: UUID objects, list embedding."""

    user_id: str
    content: str
    event_id: uuid.UUID = field(default_factory=uuid.uuid4)
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    embedding: list = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    source_event_id: uuid.UUID | None = None
    sequence: int = 0
    owner_subject: str = ""
    session_id: str = ""


@pytest.fixture
def engine_env(pgvector_url, monkeypatch):
    for name in ("SEMVEC_PGVECTOR_URL", "SEMVEC_PGVECTOR_SCHEMA", "SEMVEC_PGVECTOR_DIMENSIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", engine_database_url(pgvector_url))
    monkeypatch.setenv("SEMVEC_SESSION_BACKEND", "PgVector")


def test_our_postgres_entry_point_is_shadowed_by_the_engines_own():
    names = {engine_fold(ep.name) for ep in entry_points(group="semvec.backends")}
    assert {"pgvector", "postgres"} <= names
    assert engine_discover("postgres") is None


def test_the_engine_loads_pgvector_and_runs_a_turn_with_events(engine_env):
    import os

    factory = engine_discover(os.environ["SEMVEC_SESSION_BACKEND"])
    adapter = factory()  # no arguments: configured from the environment only
    try:
        missing = [m for m in REQUIRED if not hasattr(adapter, m)]
        assert not missing
        assert adapter.name == "pgvector" and adapter.is_persistent is True
        assert adapter.check_health() is True

        store = adapter.state_store()
        scope = EngineScope("acme", "bot")
        assert store.save("sess", b"v1", expected_version=None, scope=scope) == 1
        blob, version = store.load("sess", scope=scope)
        assert (blob, version) == (b"v1", 1)
        assert store.load("sess", scope=EngineScope("other")) is None
        assert store.load_full("sess", scope=scope).owner_subject == "acme/bot"
        assert store.load_owner("sess") == "acme/bot" and store.current_version("sess") == 1
        store.set_drift_exempt("sess", True)
        assert store.is_drift_exempt("sess") is True and store.is_drift_exempt("nope") is False

        events_store = adapter.event_store()
        events_store.init_schema()
        first = EngineEvent("alice", "hello", embedding=[1.0, 0.0], owner_subject="acme/bot",
                            session_id="sess",
                            created_at=datetime.now(timezone.utc) - timedelta(minutes=1))
        second = EngineEvent("alice", "again", embedding=[0.0, 1.0], source_event_id=first.event_id,
                             owner_subject="acme/bot", session_id="sess")
        version = adapter.commit_turn("sess", b"v2", expected_version=1, scope=scope,
                                      pending_message="next", events=[first, second])
        assert version == 2
        assert store.load("sess", scope=scope) == (b"v2", 2)
        assert store.is_drift_exempt("sess") is True  # a turn never changes it

        got = events_store.get(first.event_id)
        assert uuid.UUID(got.event_id) == first.event_id and got.embedding == (1.0, 0.0)
        assert got.to_dict()["embedding"] == [1.0, 0.0]
        listed = events_store.list_by_user("alice")
        assert [e.content for e in listed] == ["again", "hello"]  # newest first, as on SQL
        assert uuid.UUID(listed[0].source_event_id) == first.event_id
        assert events_store.count_for_user("alice") == 2
        assert [e.content for e in events_store.query_by_user(
            "alice", query_embedding=[1.0, 0.1], limit=1)] == ["hello"]
        assert [e.content for e in events_store.query_by_user("alice", query_embedding=None,
                                                               limit=5)] == ["again", "hello"]
        assert events_store.session_subjects("sess") == ["alice"]
        appended = events_store.append(EngineEvent("bob", "solo"))
        assert appended.sequence == 0 and appended.owner_subject == ""
        cutoff = datetime.now(timezone.utc) - timedelta(seconds=30)
        assert events_store.delete_older_than("alice", cutoff) == 1
        assert events_store.delete(second.event_id) is True
        assert events_store.delete(second.event_id) is False
        assert events_store.delete_by_user("bob") == 1

        # a scoped turn by another tenant is refused whole
        from backends.errors import StateVersionConflict

        with pytest.raises(StateVersionConflict):
            adapter.commit_turn("sess", b"evil", expected_version=2, scope=EngineScope("evil"),
                                events=[EngineEvent("alice", "evil")])
        assert events_store.count_for_user("alice") == 0
        assert store.delete("sess", scope=EngineScope("other")) is False
        assert store.delete("sess", scope=scope) is True
    finally:
        adapter.close()


def test_zero_argument_construction_without_a_location_says_which_variables(monkeypatch):
    from backends.errors import BackendConfigError
    from backends.pgvector import PgVectorAdapter

    for name in ("SEMVEC_PGVECTOR_URL", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(BackendConfigError, match="SEMVEC_PGVECTOR_URL or DATABASE_URL"):
        PgVectorAdapter()
