"""Opt-in: the deployed engine and our Redis store read each other's data.

Skipped unless the proprietary ``semvec`` engine is importable (it is never a dependency
of this project; install it only in a scratch environment). Real redis-server from the
suite's fixture; the engine is pointed at it through its own environment
(``REDIS_URL``; the durability check is skipped because the test server runs without
AOF). Engine writes -> we read; we write -> the engine reads; both for session state
and for the compliance events.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest

pytestmark = [pytest.mark.redis, pytest.mark.engine]

semvec = pytest.importorskip("semvec", reason="the semvec engine is not installed")

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


@pytest.fixture
def engine(redis_url, monkeypatch):
    """The engine's Redis adapter, talking to the suite's server."""
    from semvec.api import redis_client

    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("SEMVEC_REDIS_SKIP_DURABILITY_CHECK", "1")
    monkeypatch.delenv("SEMVEC_REDIS_SESSION_TTL_S", raising=False)
    redis_client.reset_redis()
    from semvec.api.redis_backend_adapter import RedisBackendAdapter as EngineAdapter

    yield EngineAdapter()
    redis_client.reset_redis()


@pytest.fixture
def ours(redis_url):
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(redis_url) as adapter:
        yield adapter


def engine_scope(tenant: str, agent: str | None = None):
    from semvec.api.owner_scope import OwnerScope

    return OwnerScope(tenant, agent)


def engine_event(user: str, content: str, **kw):
    from semvec.compliance.event_store import MemoryEvent as EngineEvent

    return EngineEvent(event_id=uuid.uuid4(), user_id=user, created_at=kw.pop("created_at", T0),
                       content=content, embedding=kw.pop("embedding", [0.5, -0.25]), **kw)


def sid() -> str:
    return f"interop-{uuid.uuid4().hex}"


def test_engine_state_reads_back_through_our_store(engine, ours):
    from backends.contract import LoadedState, OwnerScope

    s = sid()
    store = engine.state_store()
    assert store.save(s, b"\x00engine\xff", expected_version=None,
                      scope=engine_scope("acme", "bot"), pending_message="p") == 1
    assert ours.state_store().load_full(s) == LoadedState(b"\x00engine\xff", 1, "acme/bot", "p")
    assert store.save(s, b"engine v2", expected_version=1, scope=engine_scope("acme", "bot")) == 2
    store.set_drift_exempt(s, True)
    mine = ours.state_store()
    assert mine.load_full(s) == LoadedState(b"engine v2", 2, "acme/bot", None)
    assert mine.load(s, scope=OwnerScope("acme", "bot")) == (b"engine v2", 2)
    assert mine.load(s, owner_subject="acme") is None
    assert mine.is_drift_exempt(s) is True
    # and we continue where the engine left off, with the engine's own scope object
    assert mine.save(s, b"ours v3", expected_version=2, scope=engine_scope("acme", "bot")) == 3
    assert store.load_full(s, scope=engine_scope("acme", "bot"))[:2] == (b"ours v3", 3)
    assert store.is_drift_exempt(s) is True


def test_our_state_and_turn_read_back_through_the_engine(engine, ours):
    s, user = sid(), f"user-{uuid.uuid4().hex}"
    from backends.contract import MemoryEvent

    turn = [MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content="one",
                        created_at=T0, session_id=s, owner_subject="acme"),
            MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content="two",
                        created_at=T0, embedding=(1.0, 2.0), meta={"k": [1]})]
    assert ours.commit_turn(s, b"ours", expected_version=None, owner_subject="acme",
                            pending_message="waiting", events=turn) == 1
    loaded = engine.state_store().load_full(s, scope=engine_scope("acme"))
    assert (loaded.blob, loaded.version, loaded.owner_subject, loaded.pending_message) == (
        b"ours", 1, "acme", "waiting")
    assert engine.state_store().load_owner(s) == "acme"
    assert engine.state_store().current_version(s) == 1
    events = engine.event_store()
    listed = events.list_by_user(user)  # the engine parses UUIDs and list embeddings
    assert [(str(e.event_id), e.sequence, e.content) for e in listed] == [
        (turn[0].event_id, 1, "one"), (turn[1].event_id, 2, "two")]
    assert listed[0].embedding == [] and listed[1].embedding == [1.0, 2.0]
    assert listed[0].owner_subject == "acme" and listed[1].owner_subject == ""
    assert listed[1].meta == {"k": [1]} and listed[0].session_id == s
    assert events.get(uuid.UUID(turn[1].event_id)).content == "two"
    assert events.count_for_user(user) == 2
    # the engine's append continues our counter
    assert events.append(engine_event(user, "three")).sequence == 3
    assert events.session_subjects(s) == [user]
    ours.event_store().purge_user(user)


def test_engine_events_read_back_through_our_store(engine, ours):
    user, s = f"user-{uuid.uuid4().hex}", sid()
    events = engine.event_store()
    first = events.append(engine_event(user, "from the engine", owner_subject="acme",
                                       session_id=s))
    second = events.append(engine_event(user, "derived", embedding=[],
                                        source_event_id=first.event_id))
    mine = ours.event_store()
    listed = mine.list_events(user)
    # the engine's to_dict() carries no sequence; everything else must be identical
    assert [{k: v for k, v in e.to_dict().items() if k != "sequence"} for e in listed] == [
        first.to_dict(), second.to_dict()]
    assert [e.sequence for e in listed] == [first.sequence, second.sequence] == [1, 2]
    assert mine.get_event(str(first.event_id), owner_subject="acme").content == "from the engine"
    assert mine.get_event(str(first.event_id), owner_subject=None) is None
    assert mine.list_events(user, owner_subject=None) == listed[1:]
    assert mine.count_for_user(user) == 2 and mine.session_subjects(s) == [user]
    assert mine.append(listed[1].__class__(event_id=str(uuid.uuid4()), user_id=user,
                                           content="ours")).sequence == 3
    mine.purge_user(user)
    assert events.list_by_user(user) == []


def test_engine_commit_turn_reads_back_and_our_owner_check_holds(engine, ours):
    s, user = sid(), f"user-{uuid.uuid4().hex}"
    assert engine.commit_turn(s, b"engine turn", expected_version=None,
                              scope=engine_scope("acme"),
                              events=[engine_event(user, "turn event", session_id=s)]) == 1
    assert ours.state_store().load(s, owner_subject="acme") == (b"engine turn", 1)
    assert [e.content for e in ours.event_store().list_events(user)] == ["turn event"]
    # our commit_turn, given the engine's scope and event objects, refuses a takeover
    from backends.errors import StateVersionConflict

    with pytest.raises(StateVersionConflict):
        ours.commit_turn(s, b"taken", expected_version=1, scope=engine_scope("evil"),
                         events=[engine_event(user, "evil")])
    assert ours.commit_turn(s, b"ours", expected_version=1, scope=engine_scope("acme"),
                            events=[engine_event(user, "ours")]) == 2
    assert [e.sequence for e in engine.event_store().list_by_user(user)] == [1, 2]
    ours.event_store().purge_user(user)
