"""`semvecctl health` on a real Redis primary with a real replica (two redis-server
processes on loopback, each owned by this test and killed at its end).

A replica refuses every write, so it is never a durable store to write to: the gate fails
and names the primary. On the primary the report says how far the replica is behind and
that a failover can lose the turns in that window; the replicated gate never passes on
Redis, because the engine sends no WAIT.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.dedicated_redis import DedicatedRedis, start_replica

pytestmark = pytest.mark.redis


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def primary_and_replica(tmp_path):
    primary = DedicatedRedis(tmp_path / "primary", extra=["--appendonly", "yes"])
    primary.start()
    replica = None
    try:
        replica = start_replica(primary, tmp_path / "replica")
        yield primary, replica
    finally:
        if replica is not None:
            replica.kill()
        primary.kill()


def test_require_durable_on_a_replica_fails_and_names_the_primary(primary_and_replica):
    primary, replica = primary_and_replica
    result = invoke("health", "--uri", replica.url, "--timeout", "3", "--require-durable")
    assert result.exit_code == 1, result.output
    assert f"read-only replica of 127.0.0.1:{primary.port}" in result.stderr
    report = json.loads(invoke("health", "--uri", replica.url, "--timeout", "3",
                               "-o", "json").stdout)
    assert report["details"]["writable"] is False
    assert report["details"]["primary"] == f"127.0.0.1:{primary.port}"


def test_the_primary_reports_its_asynchronous_replica_and_the_window(primary_and_replica):
    primary, replica = primary_and_replica
    result = invoke("health", "--uri", primary.url, "--timeout", "3", "--require-durable",
                    "-o", "json")
    assert result.exit_code == 0, result.output
    details = json.loads(result.stdout)["details"]
    assert details["durable"] is True and details["replicas"] == 1
    assert details["replica_addresses"] == f"127.0.0.1:{replica.port} (online)"
    assert isinstance(details["replication_lag_s"], int)
    # the lag is not the window: with min-replicas-to-write 0 there is no bound
    assert "acknowledged in the last" not in details["replication"]
    assert details["loss_bound_s"] is None and details["loss_bound"].startswith(
        "no bound: with min-replicas-to-write 0")
    table = invoke("health", "--uri", primary.url, "--timeout", "3")
    assert "1 asynchronous replica(s)" in table.stdout


def test_require_replicated_never_passes_on_redis(primary_and_replica):
    primary, _ = primary_and_replica
    result = invoke("health", "--uri", primary.url, "--timeout", "3", "--require-replicated")
    assert result.exit_code == 1, result.output
    assert "never wait for a replica" in result.stderr


def _doctor_findings(url: str) -> tuple[int, list[dict]]:
    result = invoke("doctor", "--uri", url, "--timeout", "3", "-o", "jsonl")
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return result.exit_code, [r for r in rows if str(r.get("check", "")).startswith("deploy.")]


def test_doctor_on_a_replica_is_an_error_naming_the_primary(primary_and_replica):
    primary, replica = primary_and_replica
    code, findings = _doctor_findings(replica.url)
    assert code == 1
    [finding] = [f for f in findings if f["check"] == "deploy.replica"]
    assert f"a read-only copy of 127.0.0.1:{primary.port}" in finding["what"]
    assert "deploy.durability" not in {f["check"] for f in findings}  # not the fix for it


def test_doctor_on_the_primary_tells_the_replication_window(primary_and_replica):
    primary, replica = primary_and_replica
    _, findings = _doctor_findings(primary.url)
    [finding] = [f for f in findings if f["check"] == "deploy.replication"]
    assert finding["severity"] == "info"
    assert "1 asynchronous replica(s)" in finding["what"]
    [bound] = [f for f in findings if f["check"] == "deploy.loss-bound"]
    assert "what a failover can lose: no bound" in bound["what"]
    assert "sends no WAIT" in bound["why"]
