"""Opt-in (marker `engine`): our erasure against the deployed engine, semvec 0.8.9.

Skipped unless the proprietary `semvec` engine is importable (never a dependency; a
scratch environment only).
- After our `erase --user --owner`, the engine can resume nothing of that subject: no
  state of the derived sessions under its scope, no event of the subject, and the engine's
  own erasure finds nothing left to do. Real redis-server from the suite, written by the
  engine's own Redis adapter.
- The engine's own ErasureCoordinator over our adapters removes our item rows (pgvector
  on the suite's real PostgreSQL; MongoDB on mongomock, a fake: no real MongoDB here).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent, MemoryItem
from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import make_target

pytestmark = pytest.mark.engine

pytest.importorskip("semvec", reason="the semvec engine is not installed")

from tests.backends.redis.test_engine_interop_redis import engine  # noqa: E402,F401


def _scope(tenant: str):
    from semvec.api.owner_scope import OwnerScope

    return OwnerScope(tenant)


def _event(user: str, session: str, owner: str, content: str):
    from semvec.compliance.event_store import MemoryEvent as EngineEvent

    return EngineEvent(event_id=uuid.uuid4(), user_id=user, created_at=datetime.now(timezone.utc),
                       content=content, embedding=[0.5, -0.25], owner_subject=owner,
                       session_id=session)


@pytest.mark.redis
def test_after_our_erase_the_engine_can_resume_nothing_of_the_subject(engine, redis_url, tmp_path):
    from semvec.compliance.erasure import ErasureCoordinator

    tag = uuid.uuid4().hex[:8]
    alice, bob = f"{tag}-alice", f"{tag}-bob"
    mine, shared, foreign = f"{tag}-mine", f"{tag}-shared", f"{tag}-globex"
    acme, globex = _scope("acme"), _scope("globex")
    engine.commit_turn(mine, b"alice's state", expected_version=None, scope=acme,
                       events=[_event(alice, mine, "acme", "alice secret 1")])
    engine.commit_turn(shared, b"blended state", expected_version=None, scope=acme,
                       events=[_event(alice, shared, "acme", "alice secret 2"),
                               _event(bob, shared, "acme", "bob says hi")])
    engine.commit_turn(foreign, b"globex alice", expected_version=None, scope=globex,
                       events=[_event(alice, foreign, "globex", "another alice")])
    receipt = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["erase", "--uri", redis_url, "--user", alice, "--owner",
                                      "acme", "--apply", "--yes", "--receipt", str(receipt)])
    assert result.exit_code == 0, result.output
    data = json.loads(receipt.read_text())
    assert sorted(data["sessions"]) == sorted([mine, shared])
    assert data["shared_sessions"] == [shared] and data["states_deleted"] == 2
    state, events = engine.state_store(), engine.event_store()
    assert state.load(mine, scope=acme) is None and state.load(shared, scope=acme) is None
    assert [e.owner_subject for e in events.list_by_user(alice)] == ["globex"]
    assert [e.content for e in events.list_by_user(bob)] == ["bob says hi"]
    assert state.load(foreign, scope=globex) is not None  # the other tenant's alice
    again = ErasureCoordinator.from_adapter(engine).erase_user(alice, scope=acme)
    assert again.sessions == () and again.events_deleted == 0 and again.state_survivors == ()


@pytest.mark.parametrize("name", [pytest.param("pgvector", marks=pytest.mark.postgres), "mongo"])
def test_the_engines_erasure_through_our_adapter_removes_our_item_rows(request, name):
    from semvec.compliance.erasure import ErasureCoordinator

    target = make_target(request, name, **({"item_sync": True} if name == "mongo" else {}))
    adapter = target.adapter
    tag = uuid.uuid4().hex[:8]
    sid, other = f"{tag}-s", f"{tag}-other"
    adapter.state_store().save(sid, b"state", expected_version=None, owner_subject="acme")
    adapter.event_store().append(MemoryEvent(
        event_id=str(uuid.uuid4()), user_id=f"{tag}-alice", content="hi", embedding=[0.1] * 8,
        created_at=datetime.now(timezone.utc), owner_subject="acme", session_id=sid))
    items = [MemoryItem(item_id=f"i{n}", text=f"t{n}", embedding=(0.5,) * 8) for n in range(3)]
    adapter.sync_items(sid, items, owner_subject="acme")
    adapter.sync_items(other, items, owner_subject="acme")
    result = ErasureCoordinator.from_adapter(adapter).erase_user(f"{tag}-alice", scope=_scope("acme"))
    assert result.hook_present and result.states_deleted == 1 and result.events_deleted == 1
    assert list(adapter.iter_live_items(sid)) == []
    assert len(list(adapter.iter_live_items(other))) == 3
    # pgvector's state delete takes the item rows in its transaction, before the hook runs;
    # the hook reports them all the same (ENGINE-WIRE section 6)
    assert result.materialized_deleted == 3


@pytest.mark.redis
def test_after_our_erase_the_users_next_engine_event_continues_its_sequence(engine, redis_url,
                                                                           tmp_path):
    """Erasing every event of a user id keeps its counter, as the engine's own erasure does
    (ENGINE-WIRE section 9): the engine's next event for that user continues at 4."""
    tag = uuid.uuid4().hex[:8]
    carol, sid, acme = f"{tag}-carol", f"{tag}-s", _scope("acme")
    engine.commit_turn(sid, b"state", expected_version=None, scope=acme,
                       events=[_event(carol, sid, "acme", f"turn {n}") for n in range(3)])
    assert [e.sequence for e in engine.event_store().list_by_user(carol)] == [1, 2, 3]
    result = CliRunner().invoke(app, ["erase", "--uri", redis_url, "--user", carol, "--owner",
                                      "acme", "--apply", "--yes", "--receipt",
                                      str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert engine.event_store().list_by_user(carol) == []
    after = engine.event_store().append(_event(carol, "", "acme", "came back"))
    assert after.sequence == 4
