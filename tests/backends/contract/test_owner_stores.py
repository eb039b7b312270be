"""The engine's ``scope=`` and the spec's ``owner_subject=`` give identical results on every
backend, and ``scope=None`` (unscoped) is never read as ``owner_subject=None`` (unowned
rows only). Real Redis and PostgreSQL (both SQL backends); memory; MongoDB through
``mongomock`` (a fake, in-process: no real server here)."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest

from backends.contract import MemoryEvent, OwnerScope
from backends.errors import StateVersionConflict
from tests.support.adapters import make_adapter

OWNER = OwnerScope("acme", "bot")
OTHER = OwnerScope("other")
READS = ("load", "load_full", "load_owner", "current_version")


@pytest.fixture(params=["memory", "redis", "postgres", "pgvector", "mongomock"])
def adapter(request):
    made = make_adapter(request, request.param, mongo_database="semvec_owners")
    yield made
    made.close()


def _ids() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:10]
    return f"owned-{tag}", f"unowned-{tag}"


def test_reads_agree_and_scope_none_is_unscoped(adapter):
    store = adapter.state_store()
    owned, unowned = _ids()
    store.save(owned, b"o", expected_version=None, scope=OWNER)
    store.save(unowned, b"u", expected_version=None, scope=None)
    for method in READS:
        read = getattr(store, method)
        for sid in (owned, unowned):
            assert read(sid, scope=OWNER) == read(sid, owner_subject="acme/bot"), (method, sid)
            assert read(sid, scope=OTHER) == read(sid, owner_subject="other"), (method, sid)
            assert read(sid, scope=None) == read(sid), (method, sid)  # unscoped
    # the two "None"s differ: scope=None sees the owned row, owner_subject=None does not
    assert store.load(owned, scope=None) == (b"o", 1)
    assert store.load(owned, owner_subject=None) is None
    assert store.load(unowned, owner_subject=None) == (b"u", 1)
    assert store.load_owner(owned) == "acme/bot" and store.load_owner(unowned) is None


def test_writes_and_deletes_agree(adapter):
    store = adapter.state_store()
    owned, unowned = _ids()
    store.save(owned, b"o", expected_version=None, owner_subject="acme/bot")
    store.save(unowned, b"u", expected_version=None)
    with pytest.raises(StateVersionConflict):  # another tenant's scoped update
        store.save(owned, b"x", expected_version=1, scope=OTHER)
    assert adapter.commit_turn(unowned, b"u2", expected_version=1, scope=OWNER) == 2
    assert store.load_owner(unowned) == "acme/bot"  # a scoped write adopts an unowned row
    assert store.delete(owned, scope=OTHER) is False
    assert store.load(owned) == (b"o", 1)
    assert store.delete(owned, scope=OWNER) is True
    assert store.delete(unowned, scope=None) is True  # unscoped: any owner


def test_event_reads_agree(adapter):
    events = adapter.event_store()
    if events is None:
        pytest.skip(f"{adapter.name} keeps no events")
    sid, _ = _ids()
    user = f"u-{uuid.uuid4().hex[:10]}"
    turn = [MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=f"e{n}",
                        created_at=datetime(2025, 1, 1, 0, 0, n, tzinfo=timezone.utc),
                        owner_subject=owner, session_id=sid)
            for n, owner in enumerate(("acme/bot", "", "other"))]
    try:
        adapter.commit_turn(sid, b"t", expected_version=None, scope=OWNER, events=turn)
    except Exception as exc:  # noqa: BLE001 - a standalone MongoDB refuses event turns
        from backends.errors import UnsupportedOperation

        if not isinstance(exc, UnsupportedOperation):
            raise
        for event in turn:
            events.append(event)

    def contents(**owner) -> list[str]:
        return sorted(e.content for e in events.list_events(user, **owner))

    assert contents(scope=OWNER) == contents(owner_subject="acme/bot") == ["e0"]
    assert contents(scope=None) == contents() == ["e0", "e1", "e2"]
    assert contents(owner_subject=None) == ["e1"]  # unowned only, whichever encoding
    for event in turn:
        mine = event.owner_subject == "acme/bot"
        assert (events.get_event(event.event_id, scope=OWNER) is not None) is mine
        assert (events.get_event(event.event_id, owner_subject="acme/bot") is not None) is mine
        assert events.get_event(event.event_id, scope=None) is not None
    events.purge_user(user)
