"""The Mongo backend against a REAL MongoDB: runs only when SEMVEC_TEST_MONGODB_URI is set.

    # a local single-node replica set (transactions work; no Atlas Search):
    docker run -d --name semvec-mongo -p 27017:27017 mongo:8 --replSet rs0
    docker exec semvec-mongo mongosh --quiet --eval 'rs.initiate()'
    SEMVEC_TEST_MONGODB_URI='mongodb://127.0.0.1:27017/?directConnection=true' \
        pytest tests/backends/mongo/test_mongo_integration.py

    # Atlas Search locally (replica set + mongot; every test here runs):
    docker run -d --name semvec-atlas -p 27018:27017 mongodb/mongodb-atlas-local:8
    SEMVEC_TEST_MONGODB_URI='mongodb://127.0.0.1:27018/?directConnection=true' pytest ...

    # or MongoDB Atlas itself: SEMVEC_TEST_MONGODB_URI='mongodb+srv://USER:PASS@cluster...'

Every test works in its own database (``semvec_it_<random>``) and drops it afterwards.
Cases the deployment cannot run (transactions on a standalone, Atlas Search off Atlas)
are skipped with the reason, never passed. ``SEMVEC_TEST_REQUIRE=mongo`` turns a missing
URI into a failure.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone

import pytest

from backends.conformance import ConformanceOptions, ConformanceSuite
from backends.contract import MemoryEvent, MemoryItem, RetrievalContext
from backends.errors import StateVersionConflict, UnsupportedOperation

URI = os.environ.get("SEMVEC_TEST_MONGODB_URI", "")
REQUIRED = "mongo" in {p.strip() for p in os.environ.get("SEMVEC_TEST_REQUIRE", "").split(",")}

if not URI:
    if REQUIRED:
        raise RuntimeError("SEMVEC_TEST_REQUIRE includes mongo but SEMVEC_TEST_MONGODB_URI is unset")
    pytest.skip("SEMVEC_TEST_MONGODB_URI is not set: no real MongoDB to test against",
                allow_module_level=True)

pytest.importorskip("pymongo")
pytestmark = pytest.mark.mongodb_real

DIMS = 8


@pytest.fixture(scope="module", autouse=True)
def reachable():
    """One ping for the module: an unreachable server skips everything (fails if required)."""
    import pymongo

    client = pymongo.MongoClient(URI, serverSelectionTimeoutMS=5000)
    try:
        client.admin.command("ping")
    except pymongo.errors.PyMongoError as exc:
        message = f"the MongoDB at SEMVEC_TEST_MONGODB_URI is unreachable ({type(exc).__name__})"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    finally:
        client.close()


@pytest.fixture
def database_name():
    import pymongo

    name = f"semvec_it_{uuid.uuid4().hex[:10]}"
    yield name
    client = pymongo.MongoClient(URI, serverSelectionTimeoutMS=5000)
    try:
        client.drop_database(name)
    finally:
        client.close()


@pytest.fixture
def make_adapter(database_name):
    from backends.mongo import MongoBackendAdapter

    made = []

    def make(**options):
        options.setdefault("database", database_name)
        adapter = MongoBackendAdapter(URI, **options)
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        adapter.close()


@pytest.fixture
def adapter(make_adapter):
    return make_adapter(item_sync=True, dimensions=DIMS)


def needs_transactions(adapter):
    if not adapter.topology().transactions:
        pytest.skip("standalone deployment: no multi-document transactions")


def needs_search(adapter):
    if not adapter.health_details(10)["search_indexes_supported"]:
        pytest.skip("this deployment has no Atlas Search")


# -- the conformance suite -------------------------------------------------------------


class TestMongoConformanceOnRealServer(ConformanceSuite):
    conformance_name = "mongo"
    conformance_options = ConformanceOptions(allow_provisioning=True, index_dimensions=DIMS,
                                             retrieval_dimensions=DIMS, retrieval_wait=120.0)

    @pytest.fixture
    def conformance_factory(self, database_name):
        from backends.mongo import MongoBackendAdapter

        def factory():
            return MongoBackendAdapter(URI, database=database_name, item_sync=True,
                                       dimensions=DIMS)

        return factory

    @pytest.fixture
    def adapter(self, conformance_factory, request):
        adapter = conformance_factory()
        if request.node.name.startswith("test_retrieval__"):
            # search indexes build asynchronously: provision and wait before the case
            if adapter.health_details(10).get("search_indexes_supported"):
                adapter.ensure_indexes(dimensions=DIMS)
                adapter.wait_for_search_indexes(timeout=300, poll=2)
        yield adapter
        adapter.close()


# -- transactions with events ------------------------------------------------------


def test_commit_turn_with_events_is_one_transaction(adapter):
    needs_transactions(adapter)
    adapter.ensure_indexes()
    session, user = f"s-{uuid.uuid4().hex[:8]}", f"u-{uuid.uuid4().hex[:8]}"
    ev = [MemoryEvent(str(uuid.uuid4()), user, f"c{i}") for i in range(3)]
    assert adapter.commit_turn(session, b"one", expected_version=None, owner_subject="t1",
                               events=ev) == 1
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1, 2, 3]
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(session, b"two", expected_version=7, owner_subject="t1",
                            events=[MemoryEvent(str(uuid.uuid4()), user, "lost")])
    assert adapter.state_store().load(session)[0] == b"one"
    assert len(adapter.event_store().list_events(user)) == 3
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(session, b"two", expected_version=1, owner_subject="t2",
                            events=[MemoryEvent(str(uuid.uuid4()), user, "foreign")])
    assert adapter.commit_turn(session, b"two", expected_version=1, owner_subject="t1",
                               events=[MemoryEvent(str(uuid.uuid4()), user, "next")]) == 2
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1, 2, 3, 4]


def test_fault_after_state_aborts_the_real_transaction(adapter):
    """The fault seam raises inside the server's transaction, after the state write: a
    real abort must leave neither the state nor the events nor the counter moved."""
    from backends.errors import InjectedFault

    needs_transactions(adapter)
    adapter.ensure_indexes()
    session, user = f"s-{uuid.uuid4().hex[:8]}", f"u-{uuid.uuid4().hex[:8]}"
    adapter.commit_turn(session, b"one", expected_version=None,
                        events=[MemoryEvent(str(uuid.uuid4()), user, "first")])
    with adapter.inject_fault("turn.after_state"):
        with pytest.raises(InjectedFault):
            adapter.commit_turn(session, b"two", expected_version=1,
                                events=[MemoryEvent(str(uuid.uuid4()), user, "lost")])
    assert adapter.state_store().load(session) == (b"one", 1)
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1]
    assert adapter.event_store().read_counter(user) == 1


def test_standalone_refuses_events_and_writes_nothing(adapter):
    if adapter.topology().transactions:
        pytest.skip("replica set / mongos: transactions available")
    with pytest.raises(UnsupportedOperation):
        adapter.commit_turn("s", b"x", expected_version=None,
                            events=[MemoryEvent(str(uuid.uuid4()), "u", "c")])
    assert adapter.state_store().load("s") is None


def test_health_details_report_the_topology(adapter):
    details = adapter.health_details(10)
    assert details["reachable"] is True
    assert details["topology"] in ("standalone", "replica set", "sharded")
    assert details["transactions_supported"] == (details["topology"] != "standalone")


def test_enumeration_sizes_blobs_server_side(adapter):
    store = adapter.state_store()
    store.save("a", b"x" * 10, expected_version=None)
    assert adapter.describe_session("a").blob_size == 10
    assert store._size_by_aggregate is True  # $binarySize ran on the server


# -- ensure / validate -------------------------------------------------------------


def test_ensure_then_validate_regular_indexes(make_adapter):
    adapter = make_adapter(session_ttl_s=3600)
    actions = adapter.ensure_indexes()
    assert {a.action for a in actions} == {"create"}
    reports = {r.name: r for r in adapter.validate_indexes()}
    assert all(r.status == "ok" for r in reports.values()), reports
    assert {a.action for a in adapter.ensure_indexes()} == {"exists"}
    # the TTL changes in place
    changed = make_adapter(session_ttl_s=60)
    assert {r.name: r.status for r in changed.validate_indexes()}["semvec_session_ttl"] == "drift"
    assert {a.name: a.action for a in changed.ensure_indexes()}["semvec_session_ttl"] == "update"
    assert all(r.status == "ok" for r in changed.validate_indexes())


def test_validate_sees_option_drift_on_a_real_server(make_adapter):
    adapter = make_adapter()
    db = adapter.database
    db["compliance_events"].create_index([("user_id", 1), ("sequence", 1)], name="ix_evt_user_seq")
    db["compliance_events"].create_index([("user_id", 1)], name="ix_evt_user",
                                         collation={"locale": "en", "strength": 2})
    reports = {r.name: r for r in adapter.validate_indexes()}
    assert {d.field for d in reports["ix_evt_user_seq"].differences} == {"unique"}
    assert {d.field for d in reports["ix_evt_user"].differences} == {"collation"}
    assert {a.name: a.action for a in adapter.ensure_indexes()}["ix_evt_user_seq"] == "mismatch"
    adapter.ensure_indexes(recreate=True)
    assert all(r.status == "ok" for r in adapter.validate_indexes())


def test_search_indexes_or_a_plain_unsupported(adapter):
    details = adapter.health_details(10)
    reports = {r.name: r for r in adapter.validate_indexes()}
    if not details["search_indexes_supported"]:
        assert reports["semvec_items_vec"].status == "unsupported"
        assert "no Atlas Search" in reports["semvec_items_vec"].detail
        return
    adapter.ensure_indexes()
    waited = adapter.wait_for_search_indexes(timeout=300, poll=2)
    assert waited.ready, waited.states
    assert all(r.status == "ok" for r in adapter.validate_indexes())


# -- retrieval diff on a seeded session --------------------------------------------


def test_retrieval_diff_on_a_seeded_session(adapter):
    needs_search(adapter)
    from backends.retrieval.diff import diff_query

    adapter.ensure_indexes()
    assert adapter.wait_for_search_indexes(timeout=300, poll=2).ready
    session = f"s-{uuid.uuid4().hex[:8]}"
    words = ["whale", "ocean", "krill", "tide", "coral", "reef", "storm", "harbor"]
    items = []
    for i, word in enumerate(words):
        vec = [0.0] * DIMS
        vec[i % DIMS] = 1.0
        vec[(i + 1) % DIMS] = 0.3
        items.append(MemoryItem(f"i{i}", f"note about the {word}", embedding=tuple(vec),
                                updated_at=datetime(2026, 1, 1, i, tzinfo=timezone.utc)))
    adapter.sync_items(session, items, owner_subject="t1")
    server = adapter.server_retriever()
    ctx = RetrievalContext(session_id=session, query_embedding=items[0].embedding,
                           query_text="whale", use_bm25=True, top_k=4, owner_subject="t1")
    import time

    deadline = time.monotonic() + 120
    while len(server.search(ctx)) < 4 and time.monotonic() < deadline:
        time.sleep(1)  # the search indexes catch up with the new documents
    live = list(adapter.iter_live_items(session, owner_subject="t1"))
    diff = diff_query(ctx, items=live, server=server)
    assert diff.in_process and diff.server
    assert diff.server[0].item_id == "i0"  # closest vector and the only lexical hit
    assert {n.code for n in diff.notes} >= {"recency-server-only", "mirror-lag"}
    assert all(u.session_id == session for u in diff.server)
