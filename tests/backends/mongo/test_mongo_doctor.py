"""The Mongo audit behind `semvecctl doctor`, run in-process against ``mongomock`` (a
fake: no real MongoDB can be installed here). mongomock answers no ``hello``, so the
deployment reads as a standalone and the transaction requirement is always reported;
everything else must come from the planted damage alone."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest

from tests.support.fixtures.mongo import db_name, make_adapter, mongo_client  # noqa: F401

from backends.contract import MemoryEvent, MemoryItem
from backends.ops.doctor import apply_repair, audit

DEPLOY = ("deploy.transactions", "server")


def found(adapter) -> list:
    return list(audit(adapter))


def keys(findings) -> set[tuple[str, str]]:
    return {(f.check, f.where) for f in findings}


def seeded(make_adapter, **options):
    adapter = make_adapter(**options)
    adapter.ensure_indexes()
    adapter.state_store().save("s-ok", b"blob", expected_version=None, owner_subject="acme")
    events = adapter.event_store()
    for i in range(3):
        adapter.database["compliance_events"].insert_one({
            "_id": (eid := str(uuid.uuid4())), "event_id": eid, "user_id": "alice",
            "owner_subject": "", "session_id": "s-ok",
            "created_at": datetime(2026, 1, 1, tzinfo=timezone.utc), "content": "c",
            "embedding": [0.1], "meta": {}, "source_event_id": None, "sequence": i + 1})
    events.raise_counter("alice", 3)
    return adapter


def test_clean_store_gives_only_the_deployment_finding(make_adapter):
    adapter = seeded(make_adapter)
    findings = [f for f in found(adapter) if f.check != "index.unsupported"]
    assert keys(findings) == {DEPLOY}
    assert findings[0].section.value == "engine requirements"
    assert findings[0].severity.value == "error"  # events exist: turns with events fail


def test_doctor_is_silent_on_a_document_written_before_the_hash_existed(make_adapter):
    """No blob_sha256: the engine loads it (ENGINE-WIRE section 4), so doctor has nothing to
    say, neither that it is unreadable nor that the engine refuses it."""
    adapter = seeded(make_adapter)
    adapter.state_store().save("s-old", b"older", expected_version=None)
    adapter.database["semvec_session_state"].update_one({"_id": "s-old"},
                                                        {"$unset": {"blob_sha256": ""}})
    findings = [f for f in found(adapter) if f.check != "index.unsupported"]
    assert keys(findings) == {DEPLOY}
    assert not any("s-old" in f.where or "s-old" in f.what for f in findings)


def test_finds_exactly_the_planted_problems_and_repairs_the_counter(make_adapter):
    adapter = seeded(make_adapter, session_ttl_s=3600, item_sync=True)
    db = adapter.database
    state = db["semvec_session_state"]
    store = adapter.state_store()
    for sid in ("s-digest", "s-noversion", "s-owner", "s-notime"):
        store.save(sid, b"blob", expected_version=None)
    state.update_one({"_id": "s-digest"}, {"$set": {"blob_sha256": "0" * 64}})
    state.update_one({"_id": "s-noversion"}, {"$unset": {"version": ""}})
    state.update_one({"_id": "s-owner"}, {"$set": {"owner_subject": 7}})
    state.update_one({"_id": "s-notime"}, {"$unset": {"updated_at": ""}})

    events = db["compliance_events"]
    events.drop_index("ix_evt_user_seq")  # else the duplicate could not be planted

    def put(user, seq, **over):
        eid = str(uuid.uuid4())
        doc = {"_id": eid, "event_id": eid, "user_id": user, "owner_subject": "",
               "session_id": "", "created_at": datetime(2026, 1, 1, tzinfo=timezone.utc),
               "content": "c", "embedding": [0.2], "meta": {}, "source_event_id": None,
               "sequence": seq}
        doc.update(over)
        events.insert_one(doc)
        return doc["_id"]

    put("dup", 1), put("dup", 1)
    adapter.event_store().raise_counter("dup", 1)
    put("gap", 1), put("gap", 4)
    adapter.event_store().raise_counter("gap", 4)
    put("behind", 1), put("behind", 2)
    adapter.event_store().raise_counter("behind", 1)
    put("badid", 1, _id="not-a-uuid", event_id="not-a-uuid")
    adapter.event_store().raise_counter("badid", 1)
    null = put("nullemb", 1, embedding=None)
    adapter.event_store().raise_counter("nullemb", 1)

    adapter.sync_items("s-ok", [MemoryItem("i1", "kept", embedding=(0.1,))])
    adapter.sync_items("s-gone", [MemoryItem("i1", "orphan", embedding=(0.1,)),
                                  MemoryItem("i2", "orphan", embedding=(0.1,))])
    db["semvec_mystery"].insert_one({"x": 1})

    findings = [f for f in found(adapter) if f.check != "index.unsupported"]
    doc = "document semvec_session_state"
    assert keys(findings) == {
        DEPLOY,
        ("index.missing", "index ix_evt_user_seq on compliance_events"),
        ("state.unreadable", f"{doc} 's-digest'"),
        ("state.unreadable", f"{doc} 's-noversion'"),
        ("state.unreadable", f"{doc} 's-owner'"),
        ("state.no-ttl", f"{doc} 's-notime'"),
        ("events.duplicate-sequence", "collection compliance_events user 'dup' sequence 1"),
        ("events.sequence-gap", "collection compliance_events user 'gap'"),
        ("counter.behind", "document compliance_event_counters 'behind'"),
        ("event.unreadable", "document compliance_events 'not-a-uuid' (user 'badid')"),
        ("event.unreadable", f"document compliance_events {null!r} (user 'nullemb')"),
        ("items.orphaned", "collection semvec_memory_items session 's-gone'"),
        ("namespace.unknown-collection", f"collection {db.name}.semvec_mystery"),
    }
    by = {f.where: f for f in findings}
    assert "blob_sha256" in by[f"{doc} 's-digest'"].what
    assert by["collection semvec_memory_items session 's-gone'"].what.startswith("2 item-mirror")
    assert by[("index ix_evt_user_seq on compliance_events")].section.value == "engine requirements"

    applied = [apply_repair(f) for f in findings]
    # the safe repairs: the counter, and (#23) the item rows of the session that is gone
    assert {f.check for f in applied if f.outcome == "repaired"} == {"counter.behind",
                                                                     "items.orphaned"}
    assert adapter.event_store().read_counter("behind") == 2
    assert db["semvec_memory_items"].count_documents({"session_id": "s-gone"}) == 0
    assert db["semvec_memory_items"].count_documents({"session_id": "s-ok"}) == 1
    after = [f for f in found(adapter) if f.check != "index.unsupported"]
    assert keys(after) == keys(findings) - {
        ("counter.behind", "document compliance_event_counters 'behind'"),
        ("items.orphaned", "collection semvec_memory_items session 's-gone'")}


def test_strict_audit_checks_every_number_and_the_meta(make_adapter):
    """#23 finding 8 on mongomock: an embedding holding NaN or a string, and a meta that
    is a string, are found with the field named; the gap alone is a note (#24)."""
    adapter = seeded(make_adapter)
    events = adapter.database["compliance_events"]
    planted = {}
    for seq, over, words in ((4, {"embedding": [float("nan")]}, "embedding holds a non-finite"),
                             (5, {"embedding": [0.1, "x"]}, "embedding holds a non-number"),
                             (6, {"meta": "{bad"}, "meta is not a document")):
        eid = str(uuid.uuid4())
        doc = {"_id": eid, "event_id": eid, "user_id": "alice", "owner_subject": "",
               "session_id": "s-ok", "created_at": datetime(2026, 1, 2, tzinfo=timezone.utc),
               "content": "c", "embedding": [0.1], "meta": {}, "source_event_id": None,
               "sequence": seq}
        doc.update(over)
        events.insert_one(doc)
        planted[f"document compliance_events {eid!r} (user 'alice')"] = words
    events.delete_one({"sequence": 2})  # the engine's single-event delete
    adapter.event_store().raise_counter("alice", 6)
    findings = [f for f in found(adapter) if f.check not in ("index.unsupported",
                                                               DEPLOY[0])]
    what = {f.where: f.what for f in findings if f.check == "event.unreadable"}
    assert set(what) == set(planted)
    for where, words in planted.items():
        assert words in what[where]
    gap = [f for f in findings if f.check == "events.sequence-gap"]
    assert [g.severity.value for g in gap] == ["info"]


# -- a store as the engine makes it (issue 42) ---------------------------------------------------

RECOMMENDED = {"ix_state_owner": "semvec_session_state",
               "ix_items_session": "semvec_memory_items",
               "ix_items_live_recency": "semvec_memory_items"}


def _stock_engine_store(make_adapter):
    """Only the indexes the engine creates (its three event indexes, and the TTL index
    when a TTL is configured), none of semvecctl's recommendations; the item mirror on."""
    adapter = seeded(make_adapter, item_sync=True)
    adapter.sync_items("s-ok", [MemoryItem("i1", "kept", embedding=(0.1,))])
    for name, collection in RECOMMENDED.items():
        adapter.database[collection].drop_index(name)
    return adapter


def test_a_stock_engine_store_gets_notes_not_warnings_for_our_recommendations(make_adapter):
    adapter = _stock_engine_store(make_adapter)
    findings = [f for f in found(adapter) if f.check != "index.unsupported"]
    recommended = [f for f in findings if f.check == "index.missing"]
    assert {f.where for f in recommended} == {f"index {n} on {c}" for n, c in RECOMMENDED.items()}
    assert {f.severity.value for f in recommended} == {"info"}
    assert {f.section.value for f in recommended} == {"semvecctl recommendations"}
    assert all("as the engine makes it" in f.what for f in recommended)
    assert [f for f in findings if f.severity.value == "warning"] == []
    assert keys(findings) - keys(recommended) == {DEPLOY}


def test_a_missing_recommendation_on_a_store_semvecctl_provisioned_is_still_a_warning(
        make_adapter):
    adapter = _stock_engine_store(make_adapter)
    adapter.ensure_indexes()  # semvecctl's recommendations are there now
    adapter.database["semvec_memory_items"].drop_index("ix_items_live_recency")
    findings = [f for f in found(adapter) if f.check == "index.missing"]
    assert [(f.where, f.severity.value) for f in findings] == [
        ("index ix_items_live_recency on semvec_memory_items", "warning")]
    # and an engine index missing is an error whatever else is there
    adapter.database["compliance_events"].drop_index("ix_evt_user_time")
    severities = {f.where: f.severity.value for f in found(adapter) if f.check == "index.missing"}
    assert severities["index ix_evt_user_time on compliance_events"] == "error"


def test_the_audit_reports_its_whole_count_for_the_summary_rate(make_adapter):
    """Fewer documents than a batch: the audit still reports how many it read (it used to
    report only at each full batch, so the summary's rate read 0/s)."""
    adapter = seeded(make_adapter)
    seen: list[int] = []
    list(audit(adapter, batch=500, progress=seen.append))
    assert seen == [4]  # one session document and three events
