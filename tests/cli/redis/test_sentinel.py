"""A Redis deployment watched by Sentinel, named by ``redis+sentinel://``: a real primary,
a real replica and a real sentinel (three redis-server processes on loopback, owned by
the test and killed at its end).

The store is the primary the sentinels name, wherever it is now: after a failover the
same URI writes to the promoted replica, and `health` says which server that is.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.dedicated_redis import DedicatedRedis, DedicatedSentinel, start_replica

pytestmark = pytest.mark.redis

FAILOVER_TIMEOUT_S = 30.0


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def deployment(tmp_path):
    service = f"svc{uuid.uuid4().hex[:6]}"
    primary = DedicatedRedis(tmp_path / "primary", extra=["--appendonly", "yes"])
    primary.start()
    started: list[DedicatedRedis] = [primary]
    try:
        started.append(start_replica(primary, tmp_path / "replica"))
        sentinel = DedicatedSentinel(tmp_path / "sentinel", primary.port, service)
        sentinel.start()
        started.append(sentinel)
        url = f"redis+sentinel://127.0.0.1:{sentinel.port}/{service}/0"
        yield url, primary, started[1], sentinel
    finally:
        for server in reversed(started):
            server.kill()


def _promote(sentinel: DedicatedSentinel, primary: DedicatedRedis,
             replica: DedicatedRedis) -> None:
    """SENTINEL FAILOVER, then wait until the sentinel names the replica, the replica
    takes writes and the old primary follows it (until then the old primary still takes
    writes that the promoted replica never sees: the window `health` warns about)."""
    deadline = time.monotonic() + FAILOVER_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            sentinel.client().execute_command("SENTINEL", "FAILOVER", sentinel.service)
            break
        except Exception:  # noqa: BLE001 - "no good replica" until it has seen the replica
            time.sleep(0.2)
    while time.monotonic() < deadline:
        if sentinel.primary()[1] == replica.port and \
                replica.client().info("replication")["role"] == "master" and \
                primary.client().info("replication")["role"] == "slave":
            return
        time.sleep(0.1)
    raise AssertionError("the sentinel did not promote the replica in time")


def test_health_through_sentinel_names_the_primary_it_found(deployment):
    url, primary, replica, sentinel = deployment
    result = invoke("health", "--uri", url, "--timeout", "3", "--require-durable", "-o", "json")
    assert result.exit_code == 0, result.output
    details = json.loads(result.stdout)["details"]
    assert details["sentinel_primary"] == f"127.0.0.1:{primary.port}"
    assert details["sentinels_answering"] == 1
    assert details["role"] == "master" and details["replicas"] == 1
    table = invoke("health", "--uri", url, "--timeout", "3")
    assert f"service {sentinel.service}: primary 127.0.0.1:{primary.port}" in table.stdout
    doctor = invoke("doctor", "--uri", url, "--timeout", "3", "-o", "jsonl")
    checks = {json.loads(line)["check"] for line in doctor.stdout.splitlines() if line.strip()}
    assert {"deploy.sentinel", "deploy.replication"} <= checks


def test_the_same_uri_follows_a_promotion(deployment):
    from backends.redis import RedisBackendAdapter

    url, primary, replica, sentinel = deployment
    adapter = RedisBackendAdapter(url)
    try:
        adapter.state_store().save("before", b"one", expected_version=None)
        _promote(sentinel, primary, replica)
        adapter.state_store().save("after", b"two", expected_version=None)
    finally:
        adapter.close()
    assert replica.client().hget("semvec:state:after", "blob") == b"two"
    assert replica.client().hget("semvec:state:before", "blob") == b"one"  # replicated
    result = invoke("health", "--uri", url, "--timeout", "3", "-o", "json")
    assert json.loads(result.stdout)["details"]["sentinel_primary"] == f"127.0.0.1:{replica.port}"
    listed = invoke("sessions", "list", "--uri", url, "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert {"before", "after"} <= {row["session_id"] for row in json.loads(listed.stdout)}
    faults = invoke("conformance", "run", "--uri", url, "--only", "faults", "-o", "json")
    assert "names the servers that find the primary" in faults.stdout


@pytest.mark.parametrize("uri,says", [
    ("redis+sentinel://127.0.0.1:26379", "names no service"),
    ("redis+sentinel://127.0.0.1:26379/svc/x", "is not a database number"),
    ("redis+sentinel://127.0.0.1:26379,127.0.0.1:nope/svc", "the port is not a number"),
    ("redis+sentinel://127.0.0.1:26379/svc?ssl_ca_certs=x", "not used through Sentinel"),
])
def test_a_malformed_sentinel_uri_is_one_line_naming_the_part(uri, says):
    result = invoke("health", "--uri", uri, "--timeout", "1")
    assert result.exit_code == 2, result.output
    assert says in result.stderr and "Traceback" not in result.output


def test_the_password_of_a_sentinel_uri_is_never_printed():
    result = invoke("health", "--uri", "redis+sentinel://:hunter2@127.0.0.1:1/svc/0",
                    "--timeout", "1", "-o", "json")
    assert result.exit_code != 0
    assert "hunter2" not in result.output
