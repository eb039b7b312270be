"""Mongo event store, counters and commit_turn atomicity.

Runs in-process against ``mongomock`` (a fake). mongomock has no transactions, so:
the standalone refusal path runs on plain mongomock; the transaction path runs on
``TransactionalFakeClient`` (mongomock behind a replica-set ``hello``, whose
``with_transaction`` restores a snapshot on failure, like an abort). The real
transaction path is exercised by tests/backends/mongo/test_mongo_integration.py.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from tests.support.fixtures.mongo import (  # noqa: F401
    TransactionalFakeClient,
    command_log,
    db_name,
    make_adapter,
    mongo_client,
)

from backends.contract import MemoryEvent
from backends.errors import InvalidEvent, StateVersionConflict, UnsupportedOperation


def uid() -> str:
    return f"u-{uuid.uuid4().hex[:8]}"


def event(user: str, n: int | str = 0, **kw) -> MemoryEvent:
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=f"content {n}", **kw)


@pytest.fixture
def txn_adapter(db_name):
    from backends.mongo import MongoBackendAdapter

    client = TransactionalFakeClient()
    adapter = MongoBackendAdapter(client=client, database=db_name)
    yield adapter, client
    adapter.close()
    client.close()


# -- event store on its own -------------------------------------------------------------


def test_append_assigns_gap_free_sequences_per_user(make_adapter):
    store = make_adapter().event_store()
    a, b = uid(), uid()
    seqs = [store.append(event(a, i)).sequence for i in range(3)]
    assert seqs == [1, 2, 3]
    assert store.append(event(b)).sequence == 1
    listed = store.list_events(a)
    assert [e.sequence for e in listed] == [1, 2, 3]
    assert [e.sequence for e in store.list_events(a, after_sequence=1, limit=1)] == [2]
    assert store.list_events(a, limit=0) == []


def test_event_round_trip_and_layout(make_adapter):
    adapter = make_adapter()
    store = adapter.event_store()
    user = uid()
    created = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
    original = event(user, "x", created_at=created, embedding=(0.5, -1.0), meta={"k": [1, "v"]},
                     source_event_id=str(uuid.uuid4()), owner_subject="t1", session_id="s1")
    stored = store.append(original)
    got = store.get_event(original.event_id)
    assert got == stored and got.sequence == 1 and got.created_at == created
    doc = adapter.database["compliance_events"].find_one({"_id": original.event_id})
    assert {"event_id", "user_id", "owner_subject", "session_id", "created_at", "content",
            "embedding", "meta", "source_event_id", "sequence"} <= set(doc)
    counter = adapter.database["compliance_event_counters"].find_one({"_id": user})
    assert counter == {"_id": user, "value": 1}
    assert store.get_event(str(uuid.uuid4())) is None


def test_list_events_owner_filter(make_adapter):
    store = make_adapter().event_store()
    user = uid()
    store.append(event(user, 1, owner_subject="t1"))
    store.append(event(user, 2))
    assert [e.sequence for e in store.list_events(user, owner_subject="t1")] == [1]
    assert [e.sequence for e in store.list_events(user, owner_subject=None)] == [2]
    assert len(store.list_events(user)) == 2


def test_invalid_event_refused_before_any_write(make_adapter):
    adapter = make_adapter()
    user = uid()
    with pytest.raises(InvalidEvent):
        adapter.event_store().append(MemoryEvent("", user, "x"))
    with pytest.raises(InvalidEvent):
        adapter.event_store().append(event(user, sequence=4))
    assert adapter.database["compliance_event_counters"].find_one({"_id": user}) is None


def test_duplicate_event_id_gives_the_number_back(make_adapter):
    store = make_adapter().event_store()
    user = uid()
    first = store.append(event(user))
    with pytest.raises(InvalidEvent, match="already recorded"):
        store.append(MemoryEvent(first.event_id, user, "again"))
    assert store.append(event(user)).sequence == 2  # no gap


def test_delete_older_than_is_strict(make_adapter):
    store = make_adapter().event_store()
    user, other = uid(), uid()
    base = datetime(2026, 3, 1, tzinfo=timezone.utc)
    for i in range(4):
        store.append(event(user, i, created_at=base + timedelta(hours=i)))
    store.append(event(other, created_at=base))
    assert store.delete_older_than(base + timedelta(hours=2), user_id=user) == 2
    assert [e.sequence for e in store.list_events(user)] == [3, 4]
    assert len(store.list_events(other)) == 1
    with pytest.raises(ValueError):
        store.delete_older_than(datetime(2026, 1, 1))


# -- commit_turn -----------------------------------------------------------------------


def test_commit_turn_without_events_is_a_cas(make_adapter):
    adapter = make_adapter()
    s = f"s-{uuid.uuid4().hex[:8]}"
    assert adapter.commit_turn(s, b"a", expected_version=None) == 1
    assert adapter.commit_turn(s, b"b", expected_version=1, owner_subject="t1") == 2
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"c", expected_version=1)
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"c", expected_version=2, owner_subject="t2")


def test_standalone_refuses_events_and_writes_nothing(make_adapter):
    adapter = make_adapter()
    s, user = f"s-{uuid.uuid4().hex[:8]}", uid()
    adapter.commit_turn(s, b"a", expected_version=None)
    with pytest.raises(UnsupportedOperation, match="replica set"):
        adapter.commit_turn(s, b"b", expected_version=1, events=[event(user)])
    assert adapter.state_store().load_full(s).version == 1
    assert adapter.event_store().list_events(user) == []
    assert adapter.database["compliance_event_counters"].count_documents({}) == 0
    assert adapter.topology().kind == "standalone"


def test_invalid_events_refused_before_topology_or_write(make_adapter):
    adapter = make_adapter()
    with pytest.raises(InvalidEvent):
        adapter.commit_turn("s", b"a", expected_version=None, events=["not an event"])
    with pytest.raises(InvalidEvent, match="twice"):
        ev = event(uid())
        adapter.commit_turn("s", b"a", expected_version=None, events=[ev, ev])
    assert adapter.state_store().load("s") is None


@pytest.mark.parametrize("hello, kind, txn", [
    ({"isWritablePrimary": True}, "standalone", False),
    ({"isWritablePrimary": True, "setName": "rs0"}, "replica set", True),
    ({"isWritablePrimary": True, "msg": "isdbgrid"}, "sharded", True),
])
def test_topology_from_hello(hello, kind, txn):
    from backends.mongo.topology import topology_from_hello

    topo = topology_from_hello(hello)
    assert (topo.kind, topo.transactions) == (kind, txn)


def test_topology_probe_uses_hello_and_is_cached(make_adapter, command_log):
    command_log.hello = {"isWritablePrimary": True, "setName": "rs0"}
    adapter = make_adapter()
    assert adapter.topology().transactions is True
    adapter.topology()
    assert [c for c in command_log.commands if "hello" in c] == [{"hello": 1}]


def test_transaction_path_writes_state_counters_events_together(txn_adapter):
    adapter, client = txn_adapter
    s, user = f"s-{uuid.uuid4().hex[:8]}", uid()
    events = [event(user, 1), event(user, 2), event(uid(), 3)]
    assert adapter.commit_turn(s, b"a", expected_version=None, owner_subject="t1",
                               events=events) == 1
    assert client.committed == 1
    # every operation inside the transaction carried the session
    inside = [op for op in client.ops if op[1] in ("insert_one", "find_one_and_update", "insert_many")]
    assert inside and all(with_session for _, _, with_session in inside)
    txn = client.transactions[0]
    assert txn["write_concern"].document == {"w": "majority"}
    assert txn["read_concern"].level == "snapshot"
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1, 2]


def test_transaction_rolls_back_state_and_events_on_conflict(txn_adapter):
    adapter, client = txn_adapter
    s, user = f"s-{uuid.uuid4().hex[:8]}", uid()
    adapter.commit_turn(s, b"a", expected_version=None, events=[event(user, 1)])
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"b", expected_version=5, events=[event(user, 2)])
    assert client.aborted == 1
    assert adapter.state_store().load(s)[0] == b"a"
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1]
    # the rolled-back turn left no gap
    adapter.commit_turn(s, b"c", expected_version=1, events=[event(user, 3)])
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1, 2]


def test_transaction_rolls_back_state_when_an_event_insert_fails(txn_adapter):
    adapter, client = txn_adapter
    s, user = f"s-{uuid.uuid4().hex[:8]}", uid()
    first = event(user, 1)
    adapter.commit_turn(s, b"a", expected_version=None, events=[first])
    with pytest.raises(InvalidEvent):
        adapter.commit_turn(s, b"b", expected_version=1,
                            events=[MemoryEvent(first.event_id, user, "dup")])
    assert adapter.state_store().load_full(s).version == 1
    counter = adapter.database["compliance_event_counters"].find_one({"_id": user})
    assert counter["value"] == 1


def test_append_uses_a_transaction_on_a_replica_set(txn_adapter):
    adapter, client = txn_adapter
    user = uid()
    assert adapter.event_store().append(event(user)).sequence == 1
    assert client.committed == 1


def test_health_details_durability_follows_topology(make_adapter, txn_adapter):
    standalone = make_adapter().health_details(1.0)
    assert standalone["topology"] == "standalone" and standalone["durable"] is False
    assert "replica set" in standalone["durability_reason"]
    adapter, _ = txn_adapter
    replicated = adapter.health_details(1.0)
    assert replicated["topology"] == "replica set" and replicated["durable"] is True
    assert replicated["transactions_supported"] is True


@pytest.mark.parametrize("transactional", [False, True])
def test_purge_user_erases_events_and_counter(make_adapter, txn_adapter, transactional):
    adapter = txn_adapter[0] if transactional else make_adapter()
    store = adapter.event_store()
    user, other = uid(), uid()
    for i in range(3):
        store.append(event(user, i))
    store.append(event(other))
    assert store.purge_user(user) == 3
    assert store.list_events(user) == []
    assert adapter.database["compliance_event_counters"].find_one({"_id": user}) is None
    assert store.append(event(user)).sequence == 1  # starts again
    assert len(store.list_events(other)) == 1
    if transactional:
        assert txn_adapter[1].committed >= 5


# -- engine wire (#12): counters, the engine's surface, restore, fault seam ------------


def test_legacy_seq_counter_is_folded_into_value_and_never_goes_back(make_adapter):
    """Older semvecctl wrote counters as {seq: n}; the engine uses {value: n}. The next
    append continues after the legacy number and leaves one field behind."""
    adapter = make_adapter()
    counters = adapter.database["compliance_event_counters"]
    user, mixed = uid(), uid()
    counters.insert_one({"_id": user, "seq": 7})
    counters.insert_one({"_id": mixed, "seq": 3, "value": 5})  # both wrote: the max wins
    store = adapter.event_store()
    assert store.read_counter(user) == 7
    assert store.append(event(user)).sequence == 8
    assert counters.find_one({"_id": user}) == {"_id": user, "value": 8}
    assert store.append(event(mixed)).sequence == 6
    assert counters.find_one({"_id": mixed}) == {"_id": mixed, "value": 6}


def test_engine_surface(make_adapter):
    store = make_adapter().event_store()
    user, other = uid(), uid()
    base = datetime(2026, 3, 1, tzinfo=timezone.utc)
    store.init_schema()
    made = [store.append(event(user, i, created_at=base + timedelta(hours=i),
                               embedding=[1.0, float(i)], session_id="sess-1"))
            for i in range(3)]
    store.append(event(other, session_id="sess-1", owner_subject="t9"))
    assert store.get(uuid.UUID(made[0].event_id)) == made[0]
    assert store.list_by_user(user) == made
    assert store.count_for_user(user) == 3
    assert [e.sequence for e in store.query_by_user(user, limit=2)] == [3, 2]  # newest first
    ranked = store.query_by_user(user, query_embedding=[0.0, 1.0], limit=3)
    assert ranked[0].sequence == 3
    assert store.session_subjects("sess-1") == sorted([user, other])
    assert store.session_subjects("sess-1", owner_subject="t9") == [other]
    assert store.session_subjects("nope") == []
    assert store.delete(uuid.UUID(made[0].event_id)) is True
    assert store.delete(made[0].event_id) is False
    assert store.delete_older_than(user, base + timedelta(hours=2)) == 1  # engine spelling
    assert store.delete_older_than(base + timedelta(hours=9), user_id=user) == 1  # ours
    assert store.delete_by_user(other) == 1
    assert store.append(event(other)).sequence == 1  # counter reset too


def test_unowned_events_are_stored_as_empty_strings_and_read_either_way(make_adapter):
    adapter = make_adapter()
    store = adapter.event_store()
    user = uid()
    mine = store.append(event(user))
    raw = adapter.database["compliance_events"].find_one({"_id": mine.event_id})
    assert raw["owner_subject"] == "" and raw["session_id"] == "" and raw["embedding"] == []
    planted = str(uuid.uuid4())  # an older writer's null owner
    adapter.database["compliance_events"].insert_one({
        "_id": planted, "event_id": planted, "user_id": user, "owner_subject": None,
        "session_id": None, "created_at": datetime(2026, 1, 1), "content": "legacy",
        "embedding": None, "meta": {}, "source_event_id": None, "sequence": 9})
    unowned = store.list_events(user, owner_subject=None)
    assert [e.event_id for e in unowned] == [mine.event_id, planted]
    assert unowned[1].owner_subject == "" and unowned[1].embedding == ()


@pytest.mark.parametrize("bad", [
    {"event_id": "not-a-uuid"},
    {"source_event_id": "not-a-uuid"},
    {"embedding": [float("nan")]},
])
def test_non_engine_readable_events_are_refused_before_any_write(make_adapter, bad):
    adapter = make_adapter()
    user = uid()
    fields = {"event_id": str(uuid.uuid4()), "user_id": user, "content": "c", **bad}
    with pytest.raises(InvalidEvent):
        adapter.event_store().append(MemoryEvent(**fields))
    assert adapter.database["compliance_events"].count_documents({}) == 0
    assert adapter.database["compliance_event_counters"].count_documents({}) == 0


@pytest.mark.parametrize("transactional", [False, True])
def test_restore_events_keeps_sequences_and_raises_the_counter(make_adapter, txn_adapter,
                                                               transactional):
    adapter = txn_adapter[0] if transactional else make_adapter()
    store = adapter.event_store()
    user = uid()
    restored = [event(user, i).with_sequence(n) for i, n in ((1, 4), (2, 9))]
    assert store.restore_events(restored) == 2
    assert [e.sequence for e in store.list_events(user)] == [4, 9]
    assert store.read_counter(user) == 9
    assert store.append(event(user)).sequence == 10
    # an id already stored is a conflict, and nothing of the batch is written
    again = [event(user, 3).with_sequence(20), restored[0]]
    with pytest.raises(StateVersionConflict):
        store.restore_events(again)
    assert [e.sequence for e in store.list_events(user)] == [4, 9, 10]
    with pytest.raises(StateVersionConflict):  # same user and sequence, new id
        store.restore_events([event(user, 5).with_sequence(9)])
    with pytest.raises(InvalidEvent):
        store.restore_events([event(user)])  # no sequence to keep


def test_raise_counter_never_lowers(make_adapter):
    store = make_adapter().event_store()
    user = uid()
    assert store.read_counter(user) == 0
    assert store.raise_counter(user, 5) == 5
    assert store.raise_counter(user, 2) == 5
    assert store.append(event(user)).sequence == 6
    with pytest.raises(ValueError):
        store.raise_counter(user, -1)


def test_fault_after_state_aborts_the_whole_turn(txn_adapter):
    """mongomock has no transactions: this runs on the replica-set stand-in, whose abort
    restores a snapshot. It shows the fault lands INSIDE the transaction (after the state
    write) and that our code leaves the abort to it; a real server's abort is exercised by
    tests/backends/mongo/test_mongo_integration.py only when SEMVEC_TEST_MONGODB_URI is set."""
    from backends.contract import FaultSeam
    from backends.errors import InjectedFault

    adapter, client = txn_adapter
    assert isinstance(adapter, FaultSeam)
    assert adapter.fault_points == frozenset({"turn.after_state"})
    s, user = f"s-{uuid.uuid4().hex[:8]}", uid()
    adapter.commit_turn(s, b"a", expected_version=None, events=[event(user, 1)])
    with adapter.inject_fault("turn.after_state"):
        with pytest.raises(InjectedFault):
            adapter.commit_turn(s, b"b", expected_version=1, events=[event(user, 2)])
    assert client.aborted == 1
    assert adapter.state_store().load(s) == (b"a", 1)
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1]
    assert adapter.event_store().read_counter(user) == 1
    # disarmed after one turn; the next one lands whole and without a gap
    assert adapter.commit_turn(s, b"b", expected_version=1, events=[event(user, 3)]) == 2
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1, 2]


def test_fault_seam_on_a_standalone_refuses_the_turn_before_writing(make_adapter):
    adapter = make_adapter()
    s, user = f"s-{uuid.uuid4().hex[:8]}", uid()
    adapter.commit_turn(s, b"a", expected_version=None)
    with adapter.inject_fault("turn.after_state"):
        with pytest.raises(UnsupportedOperation, match="replica set"):
            adapter.commit_turn(s, b"b", expected_version=1, events=[event(user)])
    with adapter.inject_fault("turn.after_state"):  # armed, even without events
        with pytest.raises(UnsupportedOperation):
            adapter.commit_turn(s, b"b", expected_version=1)
    assert adapter.state_store().load(s) == (b"a", 1)
    assert adapter.event_store().list_events(user) == []
    with pytest.raises(UnsupportedOperation):
        with adapter.inject_fault("turn.cut_connection"):
            pass


def test_fault_seam_check_does_no_io(monkeypatch):
    """isinstance(adapter, FaultSeam) must not probe an unreachable server."""
    from backends.contract import FaultSeam
    from backends.mongo import MongoBackendAdapter

    adapter = MongoBackendAdapter("mongodb://127.0.0.1:9/", server_selection_timeout_ms=30000)
    try:
        monkeypatch.setattr(adapter, "topology", lambda: pytest.fail("probed the server"))
        assert isinstance(adapter, FaultSeam)
    finally:
        adapter.close()


def test_a_transaction_the_driver_gave_up_on_is_transient(txn_adapter, monkeypatch):
    """Inside the transaction a labelled error passes through untouched (the driver's
    with_transaction retries it); once it escapes the transaction it is categorised."""
    from pymongo.errors import OperationFailure

    from backends.errors import BackendTransient
    from tests.support.fixtures.mongo import FakeSession

    adapter, _client = txn_adapter
    original = OperationFailure("write conflict", code=112,
                                details={"errorLabels": ["TransientTransactionError"]})

    def gave_up(self, callback, **kwargs):
        raise original

    monkeypatch.setattr(FakeSession, "with_transaction", gave_up)
    with pytest.raises(BackendTransient) as info:
        adapter.commit_turn("s", b"a", expected_version=None, events=[event(uid())])
    assert info.value.__cause__ is original


def test_legacy_counter_fold_under_concurrent_appends(make_adapter):
    """Six threads append for one user whose counter is legacy ({seq: 100}): every
    number is above 100 and none is handed out twice (gaps are allowed on a standalone).
    mongomock is serialised per call by the fixture's lock, so the threads interleave
    between the increment and the fold, which is the race the guard is for."""
    import threading

    adapter = make_adapter()
    user = uid()
    adapter.database["compliance_event_counters"].insert_one({"_id": user, "seq": 100})
    store = adapter.event_store()
    got: list[int] = []

    def worker():
        for _ in range(10):
            got.append(store.append(event(user)).sequence)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 60 and len(set(got)) == 60 and min(got) > 100
    counter = adapter.database["compliance_event_counters"].find_one({"_id": user})
    assert "seq" not in counter and counter["value"] >= max(got)


@pytest.mark.parametrize("hello,w,expect", [
    ({"isWritablePrimary": True, "setName": "rs0", "primary": "a:1",
      "hosts": ["a:1", "b:1", "c:1"]}, "majority", {"role": "primary", "replicated": True}),
    ({"isWritablePrimary": True, "setName": "rs0", "primary": "a:1",
      "hosts": ["a:1", "b:1", "c:1"]}, 1, {"role": "primary", "replicated": False}),
    ({"isWritablePrimary": False, "secondary": True, "setName": "rs0", "primary": "a:1",
      "hosts": ["a:1", "b:1"]}, None, {"role": "secondary", "durable": False, "primary": "a:1"}),
])
def test_health_details_give_the_replica_set_role_and_the_write_concern(db_name, hello, w,
                                                                        expect):
    """Shapes only (mongomock answers no real ``hello``): the member's role, the primary a
    secondary names, and whether the write concern waits for a majority."""
    from pymongo.write_concern import WriteConcern

    from backends.mongo import MongoBackendAdapter

    client = TransactionalFakeClient(hello, WriteConcern(w=w) if w is not None else None)
    adapter = MongoBackendAdapter(client=client, database=db_name)
    try:
        facts = adapter.health_details(1.0)
    finally:
        adapter.close()
    assert {k: facts[k] for k in expect} == expect
    assert facts["replica_set"] == "rs0" and facts["members"].startswith("a:1, b:1")
    if expect["role"] == "secondary":
        assert "writes go to the primary a:1" in facts["durability_reason"]
    elif expect["replicated"]:
        assert "a promotion keeps every acknowledged turn" in facts["replication"]
    else:
        assert "a promotion can lose acknowledged turns" in facts["replication"]
