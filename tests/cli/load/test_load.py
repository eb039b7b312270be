"""``semvecctl load run``: confirmation, exit codes and the report, on memory and Redis."""

from __future__ import annotations

import json
import threading

from typer.testing import CliRunner

from backends.errors import UnsupportedOperation
from backends.memory import MemoryBackendAdapter
from semvecctl.app import app
from tests.support.fixtures.redis_server import closed_port


class ForgetfulAdapter(MemoryBackendAdapter):
    """Acknowledges one commit it never writes: the audit must catch it."""

    def __init__(self, uri=None):
        super().__init__()
        self._lock = threading.Lock()
        self._dropped = False

    def commit_turn(self, session_id, blob, *, expected_version, **kwargs):
        with self._lock:
            if expected_version == 2 and not self._dropped:
                self._dropped = True
                return 3
        return super().commit_turn(session_id, blob, expected_version=expected_version, **kwargs)


class NoTurnsAdapter(MemoryBackendAdapter):
    def commit_turn(self, *args, **kwargs):
        raise UnsupportedOperation("this store takes no turns")


def forgetful(uri=None):
    return ForgetfulAdapter()


def no_turns(uri=None):
    return NoTurnsAdapter()


def invoke(*args):
    return CliRunner().invoke(app, ["load", "run", *args])


def test_memory_run_reports_rates_and_passes():
    result = invoke("--backend", "memory", "--duration", "0.3", "--apply", "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["commits"] > 0
    assert data["commits_per_s"] > 0 and "conflicts_per_s" in data
    assert data["verification"]["problems"] == []


def test_redis_run_with_events_cleans_up(redis_url, redis_server):
    result = invoke("--uri", redis_url, "--writers", "3", "--duration", "0.5",
                    "--events-per-turn", "2", "--apply", "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["events_per_turn"] == 2 and data["verification"]["events_checked"] > 0
    with redis_server.client() as client:
        assert list(client.scan_iter(match=f"*{data['prefix']}*")) == []


def test_table_output_and_success_line():
    result = invoke("--backend", "memory", "--duration", "0.2", "--apply", "--yes")
    assert result.exit_code == 0
    assert "verdict" in result.stdout and "nothing lost" in result.stderr


def test_refuses_without_yes_when_no_tty():
    result = invoke("--backend", "memory", "--duration", "0.2", "--apply")
    assert result.exit_code == 2
    assert "--yes" in result.stderr and result.stdout == ""


def test_unreachable_store_is_exit_4_and_nothing_written():
    result = invoke("--uri", f"redis://127.0.0.1:{closed_port()}/0", "--apply", "--yes")
    assert result.exit_code == 4
    assert result.stderr.count("error:") == 1 and "nothing was written" in result.stderr


def test_audit_failure_is_exit_1():
    result = invoke("--adapter", "tests.cli.load.test_load:forgetful", "--writers", "1",
                    "--sessions", "1", "--duration", "0.3", "--events-per-turn", "0",
                    "--apply", "--yes", "-o", "json")
    assert result.exit_code == 1, result.stderr
    assert json.loads(result.stdout)["ok"] is False
    assert "audit failed" in result.stderr


def test_store_refusing_every_turn_is_exit_3():
    result = invoke("--adapter", "tests.cli.load.test_load:no_turns", "--duration", "5", "--apply", "--yes")
    assert result.exit_code == 3
    assert "refused the load run" in result.stderr


def test_load_cleanup_refuses_anything_but_a_load_prefix():
    for prefix in ("", "semvec-load-", "chat-", "semvec:state:"):
        result = CliRunner().invoke(app, ["load", "cleanup", "--prefix", prefix, "--sessions", "2",
                                          "--backend", "memory", "--apply", "--yes"])
        assert result.exit_code == 2, (prefix, result.stderr)
        assert "not a load-run prefix" in result.stderr


def test_load_cleanup_removes_only_the_named_run(redis_url):
    from backends.ops.loadtest import LoadPlan, run_load
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(uri=redis_url)
    try:
        adapter.state_store().save("keep-me", b"x", expected_version=None)
        report = run_load(adapter, LoadPlan(writers=1, duration_s=0.3, sessions=2,
                                            events_per_turn=1), keep=True)
        assert adapter.state_store().load_full(f"{report.prefix}s0") is not None
    finally:
        adapter.close()
    result = CliRunner().invoke(app, ["load", "cleanup", "--prefix", report.prefix, "--sessions", "2",
                                      "--uri", redis_url, "--apply", "--yes"])
    assert result.exit_code == 0, result.stderr
    import redis

    client = redis.Redis.from_url(redis_url)
    assert sorted(client.scan_iter(count=1000)) == [b"semvec:state:keep-me"]
