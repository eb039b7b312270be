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


def _commands(url: str, tag: str, tmp_path) -> list[list[str]]:
    """Every store command, read-only or writing only its own ids (``tag``)."""
    archive = str(tmp_path / f"export-{tag}.jsonl.gz")
    return [
        ["health", "--uri", url, "--timeout", "3"],
        ["sessions", "list", "--uri", url],
        ["sessions", "count", "--uri", url],
        ["sessions", "inspect", "kept", "--uri", url],
        ["sessions", "export", "--uri", url, "--out", archive, "--with-events"],
        ["sessions", "import", archive, "--uri", url, "--on-conflict", "skip"],
        ["sessions", "copy", "--from", url, "--to", "memory://", "--on-conflict", "skip",
         "--allow-loss"],
        ["sessions", "delete", f"doomed-{tag}", "--uri", url, "--apply", "--yes"],
        ["events", "list", "--uri", url, "--user", "u-kept"],
        ["events", "count", "--uri", url, "--user", "u-kept"],
        ["stats", "--uri", url],
        ["erase", "--uri", url, "--user", f"u-erased-{tag}", "--unowned", "--apply", "--yes",
         "--receipt", str(tmp_path / f"receipt-{tag}.json")],
        ["load", "run", "--uri", url, "--writers", "2", "--duration", "0.3", "--apply",
         "--yes"],
        ["conformance", "run", "--uri", url, "--only", "state"],
    ]


def _seed(url: str, tag: str) -> None:
    from backends.contract import MemoryEvent
    from backends.redis import RedisBackendAdapter

    def event(user: str) -> MemoryEvent:
        return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content="said")

    adapter = RedisBackendAdapter(url)
    try:
        store = adapter.state_store()
        for sid in ("kept", f"doomed-{tag}"):
            if store.load_full(sid) is None:
                store.save(sid, b"blob", expected_version=None)
        adapter.event_store().append(event(f"u-erased-{tag}"))
        adapter.event_store().append(event("u-kept"))
    finally:
        adapter.close()


def test_every_store_command_works_through_sentinel_before_and_after_a_failover(
        deployment, tmp_path):
    url, primary, replica, sentinel = deployment
    for tag in ("before", "after"):
        if tag == "after":
            _promote(sentinel, primary, replica)
        _seed(url, tag)
        failed = {}
        for argv in _commands(url, tag, tmp_path):
            result = invoke(*argv)
            if result.exit_code != 0:
                failed[" ".join(argv[:2])] = result.output[-300:]
        assert not failed, (tag, failed)
    assert replica.client().exists("semvec:state:doomed-after") == 0
    assert replica.client().exists("semvec:state:kept") == 1
    assert replica.client().zcard("semvec:events:u:u-erased-after") == 0
    receipt = json.loads((tmp_path / "receipt-after.json").read_text())
    assert receipt["verification"]["ok"] is True and receipt["events_deleted"] == 1
