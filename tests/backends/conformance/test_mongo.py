"""The conformance suite against the Mongo adapter.

Runs in-process on ``mongomock`` (a FAKE: no real MongoDB can run on our machines), as
the pytest suite class and through ``run_conformance``: plain (a standalone server: turns
with events are refused and there is no Atlas Search, so those cases must come out NOT
APPLICABLE, never passed) and behind the replica-set stand-in from
tests/support/fixtures/mongo.py (transactions by snapshot/restore). Foreign documents in
semvec's own collections must come out unchanged. The real-server run is in
tests/backends/mongo/test_mongo_integration.py.
"""

from __future__ import annotations

import copy
import logging
import uuid

import pytest

from tests.support.fixtures.mongo import TransactionalFakeClient, db_name, mongo_client  # noqa: F401
from tests.support.fixtures.mongo import locked_mongomock_client  # the bulk-write shim, and a lock

from backends.conformance import (ConformanceOptions, ConformanceSuite, Level, Status,
                                  run_conformance)

COLLECTIONS = ("semvec_session_state", "compliance_events", "compliance_event_counters")


@pytest.fixture(autouse=True)
def _quiet_mongo_logs(caplog):
    caplog.set_level(logging.CRITICAL)


def _seed(db) -> None:
    db["semvec_session_state"].insert_one({
        "_id": "foreign-session", "version": 3, "blob": b"\x00foreign", "blob_sha256": "x",
        "owner_subject": "tenant-x", "pending_message": None})
    db["compliance_events"].insert_one({
        "_id": "foreign-event", "event_id": "foreign-event", "user_id": "foreign-user",
        "sequence": 1, "content": "keep"})
    db["compliance_event_counters"].insert_one({"_id": "foreign-user", "seq": 1})
    db["unrelated"].insert_one({"_id": 1, "x": [1, 2, 3]})


def _snapshot(db) -> dict:
    return {name: sorted(copy.deepcopy(list(db[name].find())), key=lambda d: str(d["_id"]))
            for name in db.list_collection_names()}


def _run(client, database, raw_db):
    from backends.mongo import MongoBackendAdapter

    _seed(raw_db)
    before = _snapshot(raw_db)
    report = run_conformance(lambda: MongoBackendAdapter(client=client, database=database),
                             selected_name="mongo")
    after = _snapshot(raw_db)
    return report, before, after


def _foreign_unchanged(before, after, prefix):
    for name, docs in before.items():
        kept = [d for d in after.get(name, []) if not str(d["_id"]).startswith(prefix)
                and prefix not in str(d.get("user_id", "")) + str(d.get("_id", ""))]
        assert kept == docs, f"foreign documents of {name} changed"


def _leftovers(after, prefix) -> dict[str, list]:
    return {name: [d["_id"] for d in docs if prefix in str(d["_id"]) or
                   prefix in str(d.get("user_id", ""))]
            for name, docs in after.items()
            if any(prefix in str(d["_id"]) or prefix in str(d.get("user_id", "")) for d in docs)}


def test_standalone_mongo_refuses_event_turns_and_otherwise_conforms(mongo_client, db_name):
    report, before, after = _run(mongo_client, db_name, mongo_client[db_name])
    assert report.level == Level.FULL, [f"{c.case_id}: {c.message}" for c in report.failures]
    turn = report.case("commit_turn.state_and_events_land_together")
    assert turn.status == Status.NOT_APPLICABLE
    assert "standalone" in turn.message
    assert report.case("events.delete_older_than_is_strict").status == Status.PASSED
    _foreign_unchanged(before, after, report.prefix)
    left = _leftovers(after, report.prefix)
    assert left == {}, f"documents of the run left behind: {left}"


def test_replica_set_mongo_conforms_fully():
    client = TransactionalFakeClient()
    database = "semvec_conf_rs"
    report, before, after = _run(client, database, client.inner[database])
    assert report.level == Level.FULL, [f"{c.case_id}: {c.message}" for c in report.failures]
    for case_id in ("commit_turn.state_and_events_land_together",
                    "commit_turn.conflicting_turn_writes_no_event",
                    "events.sequence_gap_free", "events.tenants_isolated",
                    "events.record_fidelity"):
        assert report.case(case_id).status == Status.PASSED, case_id
    _foreign_unchanged(before, after, report.prefix)
    left = _leftovers(after, report.prefix)
    assert left == {}, f"documents of the run left behind: {left}"


# -- the pytest suite class, on plain mongomock ------------------------------------------

mongomock = pytest.importorskip("mongomock")


def _factory():
    from backends.mongo import MongoBackendAdapter

    client = locked_mongomock_client()
    database = f"semvec_conf_{uuid.uuid4().hex[:10]}"
    return lambda: MongoBackendAdapter(client=client, database=database, item_sync=True,
                                       dimensions=8)


class TestMongoConformanceOnMongomock(ConformanceSuite):
    conformance_name = "mongo"
    conformance_options = ConformanceOptions(writers=4, attempts=6, allow_provisioning=True,
                                             index_dimensions=8)

    @pytest.fixture
    def conformance_factory(self):
        return _factory()

    @pytest.fixture
    def adapter(self, conformance_factory):
        adapter = conformance_factory()
        yield adapter
        adapter.close()


def test_transactions_and_search_are_not_applicable_not_passed():
    report = run_conformance(_factory(), selected_name="mongo",
                             options=ConformanceOptions(writers=4, attempts=6,
                                                        allow_provisioning=True, index_dimensions=8))
    cases = {(c.group, c.case): c for g in report.groups for c in g.cases}
    assert not [c for c in cases.values() if c.status in (Status.FAILED, Status.ERROR)], [
        (c.group, c.case, c.message) for c in cases.values()
        if c.status in (Status.FAILED, Status.ERROR)]
    refused = [c for c in cases.values() if c.status == Status.NOT_APPLICABLE
               and ("standalone" in c.message or "Atlas Search" in c.message)]
    assert any(c.group == "commit_turn" for c in refused)
    assert any(c.group == "events" for c in refused)
    assert cases[("retrieval", "filter_before_top_k")].status == Status.NOT_APPLICABLE
    assert cases[("state", next(n for g, n in cases if g == "state"))].status == Status.PASSED
