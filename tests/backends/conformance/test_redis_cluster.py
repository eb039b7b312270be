"""The conformance suite against a real three-master Redis Cluster (tests/support/dedicated_redis.py).

A cluster cannot run one script over a session's key and its events' keys (they hash to
different slots), so in cluster mode the adapter offers no event store and refuses turns with
events; the suite must report the event cases not applicable (never passed) and check the
refusal, and pass everything else.
"""

from __future__ import annotations

import pytest

from backends.conformance import Level, Status, run_conformance
from tests.support.dedicated_redis import start_cluster

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory):
    nodes = start_cluster(tmp_path_factory.mktemp("conformance-cluster"), masters=3)
    for node in nodes:  # durable, as the engine requires (durability.server_is_durable)
        with node.client() as client:
            client.config_set("appendonly", "yes")
    yield f"redis://127.0.0.1:{nodes[0].port}/0?cluster=true"
    for node in nodes:
        node.kill()


def test_cluster_conforms_with_event_turns_not_applicable(cluster_url):
    from backends.redis import RedisBackendAdapter

    report = run_conformance(lambda: RedisBackendAdapter(cluster_url, timeout=2.0),
                             selected_name="redis")
    assert report.level == Level.FULL, [f"{c.case_id}: {c.message}" for c in report.failures]
    for group in ("contract", "state", "commit_turn", "durability", "concurrency", "health"):
        assert report.group(group).status == Status.PASSED, group
    assert report.group("events").status == Status.NOT_APPLICABLE
    assert report.case("commit_turn.state_and_events_land_together").status == \
        Status.NOT_APPLICABLE
    assert report.case("commit_turn.refuses_events_without_event_store").status == \
        Status.PASSED
    assert report.case("commit_turn.owner_check").status == Status.PASSED

    adapter = RedisBackendAdapter(cluster_url, timeout=2.0)
    try:
        left = [s.session_id for s in adapter.iter_sessions(match=f"{report.prefix}*")]
    finally:
        adapter.close()
    assert left == []
