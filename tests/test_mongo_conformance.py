"""The conformance suite against the Mongo adapter on ``mongomock`` (an in-process fake).

mongomock is a standalone without sessions and without Atlas Search, so every case that
needs a multi-document transaction (turns with events) or server-side search must come
out NOT APPLICABLE here: reported as such, never as passed. The real-server run is in
tests/test_mongo_integration.py.
"""

from __future__ import annotations

import uuid

import pytest

from tests.fixtures.mongo import locked_mongomock_client  # the bulk-write shim, and a lock
from backends.conformance import ConformanceOptions, ConformanceSuite, Status, run_conformance

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
