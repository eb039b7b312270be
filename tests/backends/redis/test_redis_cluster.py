"""A real three-master Redis Cluster on loopback ports: what works, what is refused.

Each node is a dedicated ``redis-server --cluster-enabled yes`` in its own temporary
directory, joined with ``redis-cli --cluster create ... --cluster-replicas 0``, and
killed at the end. Without redis-server/redis-cli the module skips, unless
SEMVEC_TEST_REQUIRE names redis: then it fails.
"""

from __future__ import annotations

import time
import uuid

import pytest

from backends.errors import BackendUnreachable, UnsupportedOperation
from backends.contract import MemoryEvent
from tests.support.dedicated_redis import start_cluster
from tests.support.bounds import bounded_by


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = start_cluster(tmp_path_factory.mktemp("cluster"), masters=3)
    yield nodes
    for node in nodes:
        node.kill()


@pytest.fixture
def cluster_url(cluster) -> str:
    return f"redis://127.0.0.1:{cluster[0].port}/0?cluster=true"


@pytest.fixture
def adapter(cluster_url):
    from backends.redis import RedisBackendAdapter

    made = RedisBackendAdapter(cluster_url, timeout=2.0)
    yield made
    made.close()


def sid(label: str) -> str:
    return f"cl-{label}-{uuid.uuid4().hex[:10]}"


def node_of(cluster, key: str) -> int:
    """Index of the node that holds ``key`` (asked with CLUSTER KEYSLOT + SLOTS)."""
    with cluster[0].client() as client:
        slot = client.execute_command("CLUSTER", "KEYSLOT", key)
        for start, end, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                port = primary[1]
                return next(i for i, n in enumerate(cluster) if n.port == port)
    raise AssertionError("slot not covered")


def test_cluster_mode_is_explicit_and_costs_no_io():
    from backends.redis import RedisBackendAdapter

    # nothing listens there: construction must still succeed (no I/O in the constructor)
    lazy = RedisBackendAdapter("redis://127.0.0.1:1/0?cluster=true")
    assert lazy.is_cluster and lazy.event_store() is None
    assert "cluster" not in lazy.settings.url  # not handed to redis-py
    assert not RedisBackendAdapter("redis://127.0.0.1:1/0").is_cluster
    assert RedisBackendAdapter("redis://127.0.0.1:1/0", cluster=True).is_cluster
    assert not RedisBackendAdapter("redis://127.0.0.1:1/0?cluster=true", cluster=False).is_cluster
    assert lazy.check_health(0.3) is False
    with pytest.raises(BackendUnreachable):
        lazy.state_store().load("x")


def test_health_is_true_and_details_report_the_topology(adapter):
    assert adapter.check_health(2.0) is True
    details = adapter.health_details(5.0)
    assert details["reachable"] and details["mode"] == "cluster"
    assert details["primaries"] == 3 and details["events_supported"] is False


def test_state_writes_without_events_work_on_every_node(adapter, cluster):
    store = adapter.state_store()
    ids = [sid(f"s{i}") for i in range(30)]
    for session_id in ids:
        assert store.save(session_id, b"v1", expected_version=None, owner_subject="t1") == 1
        assert adapter.commit_turn(session_id, b"v2", expected_version=1,
                                   owner_subject="t1") == 2
    assert {node_of(cluster, f"semvec:state:{i}") for i in ids} == {0, 1, 2}
    for session_id in ids:
        loaded = store.load_full(session_id, owner_subject="t1")
        assert (loaded.blob, loaded.version) == (b"v2", 2)
        assert store.load(session_id, owner_subject="other") is None
    from backends.errors import StateVersionConflict

    with pytest.raises(StateVersionConflict):
        store.save(ids[0], b"late", expected_version=1)
    assert store.delete(ids[0], owner_subject="t1") is True
    assert store.load(ids[0]) is None
    for session_id in ids[1:]:
        store.delete(session_id)


def test_enumeration_covers_all_primaries(adapter, cluster):
    store = adapter.state_store()
    tag = uuid.uuid4().hex[:8]
    ids = {f"enum-{tag}-{i}" for i in range(40)}
    for session_id in ids:
        store.save(session_id, b"x" * 5, expected_version=None, owner_subject="t1")
    try:
        found = {s.session_id: s for s in adapter.iter_sessions(match=f"enum-{tag}-*",
                                                                batch_size=7)}
        assert set(found) == ids
        assert {node_of(cluster, f"semvec:state:{i}") for i in ids} == {0, 1, 2}
        assert all(s.version == 1 and s.blob_size == 5 and s.owner_subject == "t1"
                   for s in found.values())
        one = sorted(ids)[0]
        described = adapter.describe_session(one)
        assert described is not None and described.session_id == one
        assert adapter.describe_session(one, owner_subject="t2") is None
        # the count scans every primary too (keys only; an owner filter is left to the listing)
        assert store.count_sessions(match=f"enum-{tag}-*") == 40
        assert store.count_sessions(match=f"enum-{tag}-*", owner_subject="t1") is None
    finally:
        for session_id in ids:
            store.delete(session_id)


def test_commit_turn_with_events_is_refused_up_front(adapter, cluster):
    store = adapter.state_store()
    session_id = sid("turn")
    store.save(session_id, b"before", expected_version=None)
    user = f"user-{uuid.uuid4().hex[:8]}"
    events = [MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content="hi",
                          session_id=session_id)]
    with pytest.raises(UnsupportedOperation) as refused:
        adapter.commit_turn(session_id, b"after", expected_version=1, events=events)
    message = str(refused.value)
    assert "cluster" in message and "nothing was written" in message
    state = store.load_full(session_id)
    assert (state.blob, state.version) == (b"before", 1)  # never half-written
    for node in cluster:  # and no event key anywhere
        with node.client() as client:
            assert list(client.scan_iter(match=f"semvec:events:*{user}*")) == []
            assert list(client.scan_iter(match=f"semvec:events:e:{events[0].event_id}")) == []
    store.delete(session_id)


def test_load_run_on_a_cluster_commits_state_and_refuses_events(cluster_url):
    from backends.ops.loadtest import LoadPlan, run_load
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(cluster_url, timeout=2.0) as adapter:
        report = run_load(adapter, LoadPlan(writers=3, duration_s=0.8, sessions=4,
                                            events_per_turn=2))
    # no event store on a cluster: the run says so and commits state only
    assert report.events_per_turn == 0 and report.notes
    assert report.verification.ok, report.verification.problems
    assert report.commits > 0 and report.fatal is None


def test_standalone_client_on_a_cluster_node_gets_advice(cluster):
    """Forgetting ?cluster=true: a MOVED reply is an UnsupportedOperation with advice."""
    from backends.redis import RedisBackendAdapter

    plain = RedisBackendAdapter(f"redis://127.0.0.1:{cluster[0].port}/0", timeout=2.0)
    store = plain.state_store()
    started = time.monotonic()
    with pytest.raises(UnsupportedOperation) as refused:
        for i in range(50):  # some key lands on another node
            store.save(sid(f"m{i}"), b"x", expected_version=None)
    assert "?cluster=true" in str(refused.value)
    assert time.monotonic() - started < bounded_by(2.0)
    plain.close()


@pytest.mark.parametrize("query, expected", [("?cluster=true", True), ("?cluster=1", True),
                                             ("?cluster=false", False), ("", False),
                                             ("?x=1&cluster=yes", True)])
def test_cluster_flag_parsing(query, expected):
    from backends.redis.config import RedisSettings

    settings = RedisSettings.resolve(f"redis://h:1/0{query}", {}, environ={})
    assert settings.cluster is expected and "cluster" not in settings.url


def test_cluster_flag_nonsense_is_a_config_error():
    from backends.errors import BackendConfigError
    from backends.redis.config import RedisSettings

    with pytest.raises(BackendConfigError, match="cluster"):
        RedisSettings.resolve("redis://h:1/0?cluster=maybe", {}, environ={})
    with pytest.raises(BackendConfigError, match="unix"):
        RedisSettings.resolve("unix:///tmp/r.sock?cluster=true", {}, environ={})


def test_cli_health_list_and_export_on_a_cluster(cluster_url, adapter, tmp_path):
    import json

    from typer.testing import CliRunner

    from semvecctl.app import app

    tag = uuid.uuid4().hex[:8]
    ids = {f"cli-{tag}-{i}" for i in range(12)}
    for session_id in ids:
        adapter.state_store().save(session_id, b"blob", expected_version=None)
    runner = CliRunner()
    try:
        health = runner.invoke(app, ["health", "--uri", cluster_url, "-o", "json"])
        assert health.exit_code == 0, health.stderr
        assert json.loads(health.stdout)["details"]["mode"] == "cluster"
        listed = runner.invoke(app, ["sessions", "list", "--uri", cluster_url,
                                     "--match", f"cli-{tag}-*", "-o", "json"])
        assert listed.exit_code == 0, listed.stderr
        assert {row["session_id"] for row in json.loads(listed.stdout)} == ids
        archive = tmp_path / "cluster.jsonl"
        exported = runner.invoke(app, ["sessions", "export", "--uri", cluster_url,
                                       "--match", f"cli-{tag}-*", "--out", str(archive),
                                       "--yes"])
        assert exported.exit_code == 0, exported.stderr
        from backends.archive import verify_archive

        assert verify_archive(archive).count == len(ids)
    finally:
        for session_id in ids:
            adapter.state_store().delete(session_id)


def test_no_fault_points_on_a_cluster(cluster_url):
    """A cluster's turns carry no events: the fault seam offers nothing there, rather
    than a point that would never fire."""
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(cluster_url) as adapter:
        assert adapter.fault_points == frozenset()
        with pytest.raises(ValueError):
            with adapter.inject_fault("turn.cut_connection"):
                pass
