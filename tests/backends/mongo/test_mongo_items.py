"""Mongo item mirror (sync by diff, live items, consistent read).

Runs in-process against ``mongomock`` (a fake). The bulk_write shape is asserted from the
operations we build, so it holds for a real server too.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest

from tests.support.fixtures.mongo import db_name, make_adapter, mongo_client  # noqa: F401

from backends.contract import ItemMirror, ItemSyncResult, LiveItemSource, MemoryItem


def item(i: str, text: str = "", **kw) -> MemoryItem:
    kw.setdefault("embedding", (1.0, 0.0, 0.5))
    return MemoryItem(item_id=i, text=text or f"text {i}", **kw)


@pytest.fixture
def adapter(make_adapter):
    return make_adapter(item_sync=True)


@pytest.fixture
def session() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def test_seams_present(adapter):
    assert isinstance(adapter, ItemMirror) and isinstance(adapter, LiveItemSource)


def test_add_update_evict_by_diff(adapter, session):
    coll = adapter.database["semvec_memory_items"]
    r = adapter.sync_items(session, [item("a"), item("b"), item("c")], owner_subject="t1")
    assert r == ItemSyncResult(added=3)
    r = adapter.sync_items(session, [item("a"), item("b", "changed text")], owner_subject="t1")
    assert r == ItemSyncResult(updated=1, evicted=1, unchanged=1)
    doc = coll.find_one({"_id": f"{session}:c"})
    assert doc["evicted"] is True  # soft, not deleted
    assert [i.item_id for i in adapter.iter_live_items(session)] == ["a", "b"]
    assert next(i for i in adapter.iter_live_items(session) if i.item_id == "b").text == "changed text"


def test_resync_is_idempotent(adapter, session):
    items = [item("a", tier="short_term", tiers=("short_term",), unit={"k": 1}), item("b")]
    adapter.sync_items(session, items)
    before = list(adapter.database["semvec_memory_items"].find({"session_id": session}))
    assert adapter.sync_items(session, items) == ItemSyncResult(unchanged=2)
    assert adapter.sync_items(session, items) == ItemSyncResult(unchanged=2)
    after = list(adapter.database["semvec_memory_items"].find({"session_id": session}))
    assert before == after  # not even updated_at moved


def test_evicted_item_coming_back_is_an_update(adapter, session):
    adapter.sync_items(session, [item("a"), item("b")])
    adapter.sync_items(session, [item("a")])
    assert adapter.sync_items(session, [item("a")]) == ItemSyncResult(unchanged=1)
    assert adapter.sync_items(session, [item("a"), item("b")]) == ItemSyncResult(updated=1, unchanged=1)
    assert {i.item_id for i in adapter.iter_live_items(session)} == {"a", "b"}


def test_document_layout(adapter, session):
    created = datetime(2026, 2, 3, 4, 5, 6, 789000, tzinfo=timezone.utc)
    adapter.sync_items(session, [item("a", tier="long_term", tiers=("long_term", "x"),
                                      unit={"role": "user"}, created_at=created,
                                      updated_at=created)], owner_subject="t/agent")
    doc = adapter.database["semvec_memory_items"].find_one({"_id": f"{session}:a"})
    assert set(doc) == {"_id", "session_id", "owner_subject", "item_id", "embedding", "text",
                        "tier", "tiers", "unit", "evicted", "updated_at", "created_at",
                        "content_sha256", "tier_positions"}
    assert doc["tier_positions"] == {"long_term": 0, "x": 0}  # its place in each tier
    assert doc["session_id"] == session and doc["owner_subject"] == "t/agent"
    assert doc["embedding"] == [1.0, 0.0, 0.5] and doc["evicted"] is False
    assert doc["tiers"] == ["long_term", "x"]


def test_one_unordered_bulk_write(adapter, session, monkeypatch):
    from pymongo import UpdateOne

    mirror = adapter.item_mirror()
    adapter.sync_items(session, [item("a"), item("b")])
    calls = []
    real = mirror.collection.bulk_write

    def spy(ops, **kwargs):
        calls.append((ops, kwargs))
        return real(ops, **kwargs)

    monkeypatch.setattr(mirror.collection, "bulk_write", spy)
    adapter.sync_items(session, [item("a", "new"), item("c")])
    assert len(calls) == 1
    ops, kwargs = calls[0]
    assert kwargs == {"ordered": False}
    kinds = sorted(type(op).__name__ for op in ops)
    assert kinds == ["UpdateOne", "UpdateOne", "UpdateOne"]  # the new item is upserted
    update_a = next(op for op in ops if isinstance(op, UpdateOne) and op._filter["_id"].endswith(":a"))
    assert update_a._filter == {"_id": f"{session}:a", "session_id": session}
    assert update_a._doc["$set"]["text"] == "new"
    assert {"text", "embedding", "content_sha256", "updated_at"} <= set(update_a._doc["$set"])
    evict_b = next(op for op in ops if isinstance(op, UpdateOne) and op._filter["_id"].endswith(":b"))
    assert set(evict_b._doc["$set"]) == {"evicted", "updated_at"} and evict_b._doc["$set"]["evicted"] is True
    upsert_c = next(op for op in ops if op._filter["_id"].endswith(":c"))
    assert upsert_c._filter == {"_id": f"{session}:c"} and upsert_c._upsert is True
    assert "created_at" in upsert_c._doc["$setOnInsert"]
    calls.clear()
    adapter.sync_items(session, [item("a", "new"), item("c")])
    assert calls == []  # nothing to do: no write at all


def test_live_items_scoped_by_owner_and_session(adapter, session):
    other = f"s-{uuid.uuid4().hex[:8]}"
    adapter.sync_items(session, [item("a")], owner_subject="t1")
    adapter.sync_items(other, [item("a")], owner_subject="t2")
    assert [i.session_id for i in adapter.iter_live_items(session, owner_subject="t1")] == [session]
    assert list(adapter.iter_live_items(session, owner_subject="t2")) == []
    assert list(adapter.iter_live_items(session, owner_subject=None)) == []


def test_consistent_read_drops_stale_evicted_and_foreign(adapter, session):
    mirror = adapter.item_mirror()
    other = f"s-{uuid.uuid4().hex[:8]}"
    adapter.sync_items(session, [item("a"), item("b"), item("c")], owner_subject="t1")
    adapter.sync_items(session, [item("a"), item("b")], owner_subject="t1")  # c evicted
    adapter.sync_items(other, [item("x")], owner_subject="t1")
    ids = [f"{session}:a", f"{session}:b", f"{session}:c", f"{other}:x", f"{session}:gone"]
    live = mirror.fetch_live(session, ids, owner_subject="t1")
    assert sorted(live) == [f"{session}:a", f"{session}:b"]
    assert mirror.fetch_live(session, ids, owner_subject="t2") == {}
    assert mirror.fetch_live(session, []) == {}


def test_rejects_bad_input(adapter):
    with pytest.raises(ValueError):
        adapter.sync_items("", [item("a")])
    with pytest.raises(ValueError):
        adapter.sync_items("s", [{"item_id": "a"}])


def test_resync_reads_whole_documents_only_of_the_items_it_compares(adapter, session, monkeypatch):
    """Ids and digests of every row, then the content of the rows being compared (#24
    Build 6: only the stored content tells whether an item changed); a row the sync does
    not name is never read whole."""
    mirror = adapter.item_mirror()
    adapter.sync_items(session, [item("a"), item("b"), item("gone")])
    queries = []
    real = mirror.collection.find

    def spy(flt=None, projection=None, *args, **kwargs):
        queries.append((flt, projection))
        return real(flt, projection, *args, **kwargs)

    monkeypatch.setattr(mirror.collection, "find", spy)
    assert adapter.sync_items(session, [item("a"), item("b")]) == ItemSyncResult(unchanged=2, evicted=1)
    assert queries[0][1] == {"_id": 1, "item_id": 1, "content_sha256": 1, "evicted": 1,
                             "updated_at": 1}
    assert len(queries) == 2 and queries[1][1] is None
    assert sorted(queries[1][0]["_id"]["$in"]) == [f"{session}:a", f"{session}:b"]


def test_resync_compares_content_not_a_digest_someone_else_made_stale(adapter, session):
    """The engine rewrites an item we mirrored (text and embedding) and leaves our
    content_sha256 as it was: a re-sync of our items must see the difference."""
    coll = adapter.database["semvec_memory_items"]
    adapter.sync_items(session, [item("a", "ours"), item("b")])
    digest = coll.find_one({"_id": f"{session}:a"})["content_sha256"]
    coll.update_one({"_id": f"{session}:a"}, {"$set": {"text": "engine's", "embedding": [0.0, 1.0, 0.0]}})
    assert coll.find_one({"_id": f"{session}:a"})["content_sha256"] == digest  # now stale
    assert adapter.sync_items(session, [item("a", "ours"), item("b")]) == ItemSyncResult(
        updated=1, unchanged=1)
    doc = coll.find_one({"_id": f"{session}:a"})
    assert doc["text"] == "ours" and doc["embedding"] == [1.0, 0.0, 0.5]
    assert doc["content_sha256"] == digest


def test_rows_without_digest_are_compared_field_by_field(adapter, session):
    """Rows written elsewhere (the engine) carry no digest: compared whole, then backfilled."""
    coll = adapter.database["semvec_memory_items"]
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for item_id, text in (("a", "text a"), ("b", "old b")):
        coll.insert_one({"_id": f"{session}:{item_id}", "session_id": session, "owner_subject": None,
                         "item_id": item_id, "embedding": [1.0, 0.0, 0.5], "text": text,
                         "tier": None, "tiers": [], "unit": {}, "evicted": False,
                         "updated_at": now, "created_at": now})
    result = adapter.sync_items(session, [item("a"), item("b", "new b")])
    assert result == ItemSyncResult(updated=1, unchanged=1)
    assert coll.find_one({"_id": f"{session}:a"})["content_sha256"]  # backfilled
    assert coll.find_one({"_id": f"{session}:a"})["tier_positions"] == {"short_term": 0}
    assert coll.find_one({"_id": f"{session}:a"})["updated_at"].replace(tzinfo=timezone.utc) == now
    assert coll.find_one({"_id": f"{session}:b"})["text"] == "new b"
    assert adapter.sync_items(session, [item("a"), item("b", "new b")]) == ItemSyncResult(unchanged=2)


def test_updated_at_from_the_engine_is_mirrored(adapter, session):
    t1 = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
    t2 = datetime(2026, 5, 1, 13, 0, tzinfo=timezone.utc)
    adapter.sync_items(session, [item("a", updated_at=t1)])
    assert adapter.sync_items(session, [item("a", updated_at=t1)]) == ItemSyncResult(unchanged=1)
    assert adapter.sync_items(session, [item("a", updated_at=t2)]) == ItemSyncResult(updated=1)
    assert next(adapter.iter_live_items(session)).updated_at == t2
