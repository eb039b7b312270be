"""Mongo state store: no silent loss (#14) and the engine's write rules (#12).

Runs in-process against ``mongomock`` (a FAKE: no real MongoDB can run on our machines).
Damaged and engine-written documents are planted directly in the collection; a lost
acknowledgement is simulated by a collection wrapper that performs the write and then
raises the driver's ``AutoReconnect``.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from tests.support.fixtures.mongo import db_name, make_adapter, mongo_client  # noqa: F401

from backends.contract import LoadedState, MemoryEvent, OwnerScope
from backends.errors import BackendTransient, CorruptState, StateVersionConflict


def sid() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def store(make_adapter):
    return make_adapter().state_store()


def plant(store, session_id, **fields):
    doc = {"_id": session_id, "version": 1, "blob": b"x", "blob_sha256": sha(b"x"),
           "owner_subject": None, "pending_message": None,
           "updated_at": datetime.now(timezone.utc)}
    doc.update(fields)
    for name in [k for k, v in fields.items() if v is _DROP]:
        del doc[name]
    store.collection.insert_one(doc)


_DROP = object()


# -- strict reads ------------------------------------------------------------------------


@pytest.mark.parametrize("fields, field", [
    ({"blob": _DROP}, "blob"),
    ({"blob": "a string"}, "blob"),
    ({"version": _DROP}, "version"),
    ({"version": 1.5}, "version"),
    ({"version": True}, "version"),
    ({"version": -4}, "version"),
    ({"version": 0}, "version"),
    ({"blob_sha256": sha(b"other")}, "blob_sha256"),
    ({"blob_sha256": sha(b"x").upper()[:-1] + "0"}, "blob_sha256"),
    ({"blob_sha256": 7}, "blob_sha256"),
    ({"owner_subject": 7}, "owner_subject"),
])
def test_damaged_documents_raise_corrupt_state(store, fields, field):
    s = sid()
    plant(store, s, **fields)
    for read in (store.load, store.load_full):
        with pytest.raises(CorruptState) as info:
            read(s)
        assert info.value.session_id == s and info.value.field == field
        assert s in str(info.value) and field in str(info.value)
    if field == "version":
        with pytest.raises(CorruptState):
            store.current_version(s)


@pytest.mark.parametrize("recorded", [_DROP, None, ""], ids=["missing", "null", "empty"])
def test_a_document_written_before_the_hash_existed_loads(store, recorded):
    """The engine verifies ``blob_sha256`` only when present (ENGINE-WIRE section 4): a
    document without one loads, with the engine and with us; its listing carries the
    blob's own digest, so a copy or verify compares it like any other."""
    s = sid()
    plant(store, s, blob=b"older", blob_sha256=recorded, owner_subject="acme",
          pending_message="held")
    assert store.load(s) == (b"older", 1)
    assert store.load_full(s) == LoadedState(b"older", 1, "acme", "held")
    assert store.load_full_many([s]) == [LoadedState(b"older", 1, "acme", "held")]
    (row,) = [r for r in store.iter_sessions() if r.session_id == s]
    assert row.blob_sha256 == sha(b"older") and "damaged" not in row.extra
    assert store.describe_session(s).blob_sha256 == sha(b"older")
    # the next write records the hash, and from then on it is verified
    assert store.save(s, b"newer", expected_version=1, owner_subject="acme") == 2
    assert store.collection.find_one({"_id": s})["blob_sha256"] == sha(b"newer")
    store.collection.update_one({"_id": s}, {"$set": {"blob": b"tampered"}})
    with pytest.raises(CorruptState):
        store.load(s)


def test_damaged_document_is_listed_as_damaged_not_fatal(store):
    good, bad = sid(), sid()
    plant(store, good)
    plant(store, bad, version=1.5)
    rows = {r.session_id: r for r in store.iter_sessions()}
    assert "damaged" not in rows[good].extra
    assert "version" in rows[bad].extra["damaged"]
    assert store.describe_session(bad).extra["damaged"]


# -- writes as the engine does them ----------------------------------------------------


def test_cas_is_a_set_that_keeps_unknown_fields(store):
    s = sid()
    store.save(s, b"a", expected_version=None)
    store.collection.update_one({"_id": s}, {"$set": {"engine_extra": {"k": 1}}})
    assert store.save(s, b"b", expected_version=1, pending_message="p") == 2
    doc = store.collection.find_one({"_id": s})
    assert doc["engine_extra"] == {"k": 1}
    assert (doc["version"], doc["blob"], doc["pending_message"]) == (2, b"b", "p")


def test_scoped_update_adopts_empty_owner_and_refuses_another(store):
    adopt, foreign = sid(), sid()
    plant(store, adopt, owner_subject="")
    plant(store, foreign, owner_subject="t2")
    assert store.save(adopt, b"y", expected_version=1, owner_subject="t1") == 2
    assert store.load_owner(adopt) == "t1"
    with pytest.raises(StateVersionConflict, match="another owner"):
        store.save(foreign, b"y", expected_version=1, owner_subject="t1")
    assert store.load_full(foreign).blob == b"x"


def test_empty_owner_reads_as_unowned(store):
    s = sid()
    plant(store, s, owner_subject="")
    assert store.load_full(s, owner_subject=None) == LoadedState(b"x", 1, None, None)
    assert store.load(s, owner_subject="t1") is None


def test_scope_and_owner_subject_agree(store):
    s = sid()
    store.save(s, b"a", expected_version=None, scope=OwnerScope("t1", "bot"))
    assert store.load(s, scope=OwnerScope("t1", "bot")) == (b"a", 1)
    assert store.load(s, owner_subject="t1/bot") == (b"a", 1)
    assert store.load(s, scope=OwnerScope("t2")) is None
    assert store.load(s, scope=None) == (b"a", 1)  # the engine's None: unscoped
    assert store.load(s, owner_subject=None) is None  # ours: unowned rows only


# -- idempotent retries ------------------------------------------------------------------


def test_identical_insert_retry_returns_1_while_still_at_1(store):
    s = sid()
    assert store.save(s, b"a", expected_version=None, owner_subject="t1", pending_message="p") == 1
    assert store.save(s, b"a", expected_version=None, owner_subject="t1", pending_message="p") == 1
    for different in ({"blob": b"b"}, {"owner_subject": "t2"}, {"pending_message": None}):
        args = {"blob": b"a", "owner_subject": "t1", "pending_message": "p", **different}
        with pytest.raises(StateVersionConflict):
            store.save(s, args.pop("blob"), expected_version=None, **args)
    store.save(s, b"a2", expected_version=1, owner_subject="t1")
    with pytest.raises(StateVersionConflict):  # the row moved on: no longer this write
        store.save(s, b"a", expected_version=None, owner_subject="t1", pending_message="p")


def test_identical_cas_retry_returns_expected_plus_one_only(store):
    s = sid()
    store.save(s, b"a", expected_version=None)
    assert store.save(s, b"b", expected_version=1) == 2
    assert store.save(s, b"b", expected_version=1) == 2  # the retry
    with pytest.raises(StateVersionConflict):
        store.save(s, b"other", expected_version=1)
    store.save(s, b"c", expected_version=2)
    with pytest.raises(StateVersionConflict):  # same payload, but now stale
        store.save(s, b"b", expected_version=1)


def test_retry_after_a_lost_acknowledgement_succeeds(store, monkeypatch):
    """The write lands, the driver reports a dropped connection; the caller's retry
    of the same call is told the version it produced."""
    from pymongo.errors import AutoReconnect

    s = sid()
    store.save(s, b"a", expected_version=None)
    real = store.collection

    class LosesAck:
        name = real.name

        def update_one(self, *a, **k):
            real.update_one(*a, **k)
            raise AutoReconnect("connection closed after the write")

        def __getattr__(self, attr):
            return getattr(real, attr)

    monkeypatch.setattr(store, "_collection", LosesAck())
    with pytest.raises(BackendTransient):
        store.save(s, b"b", expected_version=1)
    monkeypatch.setattr(store, "_collection", real)
    assert store.save(s, b"b", expected_version=1) == 2
    assert store.load(s) == (b"b", 2)


# -- version-checked delete --------------------------------------------------------------


def test_delete_with_expected_version(store):
    s = sid()
    store.save(s, b"a", expected_version=None)
    store.save(s, b"b", expected_version=1)
    with pytest.raises(StateVersionConflict):
        store.delete(s, expected_version=1)
    assert store.load(s) == (b"b", 2)  # nothing deleted
    assert store.delete(s, expected_version=2) is True
    assert store.delete(s, expected_version=2) is False  # missing
    with pytest.raises(ValueError):
        store.delete(s, expected_version=0)


def test_delete_expected_version_honours_the_owner_filter(store):
    s = sid()
    store.save(s, b"a", expected_version=None, owner_subject="t1")
    assert store.delete(s, owner_subject="t2", expected_version=1) is False
    assert store.delete(s, scope=OwnerScope("t1"), expected_version=1) is True


# -- expired but not yet reaped ---------------------------------------------------------


def test_expired_session_reads_absent_and_refuses_updates(make_adapter):
    adapter = make_adapter(session_ttl_s=60)
    store = adapter.state_store()
    assert store.ttl_seconds() == 60
    s, live = sid(), sid()
    store.save(s, b"old", expected_version=None)
    store.save(live, b"live", expected_version=None)
    store.collection.update_one({"_id": s}, {"$set": {
        "updated_at": datetime.now(timezone.utc) - timedelta(seconds=120)}})
    assert store.load(s) is None and store.load_full(s) is None
    assert store.current_version(s) is None and store.load_owner(s) is None
    assert [r.session_id for r in store.iter_sessions()] == [live]
    assert store.describe_session(s) is None
    with pytest.raises(StateVersionConflict, match="expired"):
        store.save(s, b"new", expected_version=1)
    assert store.collection.find_one({"_id": s})["blob"] == b"old"  # refused, not written
    assert store.save(s, b"fresh", expected_version=None) == 1  # an insert over it succeeds
    assert store.load(s) == (b"fresh", 1)


def test_expired_session_delete_reports_absent(make_adapter):
    store = make_adapter(session_ttl_s=60).state_store()
    s = sid()
    store.save(s, b"old", expected_version=None)
    store.collection.update_one({"_id": s}, {"$set": {
        "updated_at": datetime.now(timezone.utc) - timedelta(seconds=120)}})
    assert store.delete(s, expected_version=1) is False
    assert store.collection.find_one({"_id": s}) is None


def test_without_ttl_nothing_expires(store):
    s = sid()
    plant(store, s, updated_at=datetime(2000, 1, 1, tzinfo=timezone.utc))
    assert store.load(s) == (b"x", 1)


# -- owner filters on event reads --------------------------------------------------------


def test_get_event_honours_the_owner_filter(make_adapter):
    events = make_adapter().event_store()
    owned = events.append(MemoryEvent(str(uuid.uuid4()), "u1", "c", owner_subject="t1"))
    unowned = events.append(MemoryEvent(str(uuid.uuid4()), "u1", "c"))
    assert events.get_event(owned.event_id, owner_subject="t1") == owned
    assert events.get_event(owned.event_id, owner_subject="t2") is None
    assert events.get_event(owned.event_id, owner_subject=None) is None
    assert events.get_event(unowned.event_id, owner_subject=None) == unowned
    assert events.get_event(unowned.event_id, scope=OwnerScope("t1")) is None
    assert events.get_event(owned.event_id, scope=OwnerScope("t1")) == owned


def test_batch_read_is_strict_and_ordered(store):
    good, bad, missing = sid(), sid(), sid()
    plant(store, good)
    plant(store, bad, blob_sha256=sha(b"other"))
    assert store.load_full_many([good, missing]) == [LoadedState(b"x", 1, None, None), None]
    with pytest.raises(CorruptState):
        store.load_full_many([good, bad])
