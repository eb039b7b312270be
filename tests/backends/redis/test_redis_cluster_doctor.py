"""`semvecctl doctor` on a real three-primary Redis Cluster: every primary is scanned,
state rows are judged with per-key reads (a script may not span slots), and the cluster
itself is reported as an engine requirement (its commit_turn needs one slot per turn)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.backends.redis.test_redis_cluster import adapter, cluster, cluster_url, sid  # noqa: F401

pytestmark = pytest.mark.redis


def test_doctor_scans_every_primary(adapter, cluster_url):  # noqa: F811
    store = adapter.state_store()
    ids = [sid(f"doc{i}") for i in range(12)]
    for session_id in ids:
        store.save(session_id, b"blob", expected_version=None)
    damaged = ids[:3]
    for session_id in damaged:
        adapter.client.hdel(f"semvec:state:{session_id}", "version")
    result = CliRunner().invoke(app, ["doctor", "--uri", cluster_url, "-o", "json"])
    findings = json.loads(result.stdout)["findings"]
    mine = {f["where"] for f in findings if f["check"] == "state.unreadable"
            and f["where"].startswith("key semvec:state:cl-doc")}
    assert mine == {f"key semvec:state:{s}" for s in damaged}
    deploy = {(f["check"], f["section"]) for f in findings if f["where"] == "server"}
    assert ("deploy.cluster", "engine requirements") in deploy
    assert result.exit_code == 1
    for session_id in ids:
        adapter.client.delete(f"semvec:state:{session_id}")
