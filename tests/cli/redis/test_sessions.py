"""`semvecctl sessions ...` and `semvecctl health` against a real redis-server.

The sessions commands are generic; a pre-filled memory adapter (loaded with --adapter)
shows they work on a backend other than Redis too.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid

import pytest
from typer.testing import CliRunner

from backends.memory import MemoryBackendAdapter
from backends.redis import RedisBackendAdapter
from semvecctl.app import app
from tests.support.fixtures.redis_server import closed_port
from tests.support.bounds import bounded_by

pytestmark = pytest.mark.redis

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def tag() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture
def filled(redis_url, redis_server):
    """Three sessions written by us and one written by hand in the engine's layout."""
    t = tag()
    with RedisBackendAdapter(redis_url) as adapter:
        store = adapter.state_store()
        store.save(f"{t}-json", b'{"turns": [], "model": "m"}', expected_version=None,
                   owner_subject="acme")
        store.save(f"{t}-bytes", b"\x00\x01binary", expected_version=None)
        store.save(f"{t}-bytes", b"\x00\x01binary!", expected_version=1, pending_message="confirm?")
        store.save(f"{t}-other", b"[]", expected_version=None, owner_subject="other")
    redis_server.run_cli("HSET", f"semvec:state:{t}-engine", "blob", "SVB\x02snapshot",
                         "version", "9", "owner", "tenant/agent", "drift_exempt", "1",
                         "pending", "")
    redis_server.run_cli("EXPIRE", f"semvec:state:{t}-engine", "3600")
    return t


def test_list_as_jsonl(redis_url, filled):
    t = filled
    result = invoke("sessions", "list", "--uri", redis_url, "--match", f"{t}-*", "-o", "jsonl")
    assert result.exit_code == 0, result.output
    rows = {r["session_id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(rows) == {f"{t}-json", f"{t}-bytes", f"{t}-other", f"{t}-engine"}
    engine = rows[f"{t}-engine"]
    assert engine["version"] == 9
    assert engine["owner_subject"] == "tenant/agent"
    assert engine["pending_message"] is None
    assert engine["blob_size"] == len(b"SVB\x02snapshot")
    assert engine["blob_sha256"] == hashlib.sha256(b"SVB\x02snapshot").hexdigest()
    assert 3500 < engine["ttl_seconds"] <= 3600
    assert engine["drift_exempt"] is True
    assert rows[f"{t}-bytes"]["pending_message"] == "confirm?"
    assert rows[f"{t}-bytes"]["version"] == 2


def test_list_filters_by_owner_and_limit(redis_url, filled):
    t = filled
    base = ["sessions", "list", "--uri", redis_url, "--match", f"{t}-*", "-o", "json"]
    ids = lambda r: sorted(x["session_id"] for x in json.loads(r.stdout))  # noqa: E731
    assert ids(invoke(*base, "--owner", "acme")) == [f"{t}-json"]
    assert ids(invoke(*base, "--unowned")) == [f"{t}-bytes"]
    assert len(json.loads(invoke(*base, "--limit", "2").stdout)) == 2
    assert invoke(*base, "--owner", "acme", "--unowned").exit_code == 2


def test_list_as_table(redis_url, filled):
    result = invoke("sessions", "list", "--uri", redis_url, "--match", f"{filled}-engine")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["SESSION", "VERSION", "OWNER"]
    assert f"{filled}-engine" in lines[1] and "tenant/agent" in lines[1]
    assert "1 session(s)" in result.stderr


@pytest.mark.parametrize(
    "suffix, kind, version, owner",
    [("engine", "native", 9, "tenant/agent"), ("json", "json", 1, "acme"),
     ("bytes", "unknown", 2, None)],
)
def test_inspect(redis_url, filled, suffix, kind, version, owner):
    result = invoke("sessions", "inspect", f"{filled}-{suffix}", "--uri", redis_url, "-o", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["blob_kind"] == kind
    assert report["version"] == version
    assert report["owner_subject"] == owner
    if suffix == "engine":
        assert report["drift_exempt"] is True
        assert report["ttl_seconds"] > 3500
        assert report["blob_sha256"] == hashlib.sha256(b"SVB\x02snapshot").hexdigest()
    if suffix == "json":
        assert report["top_level_keys"] == ["turns", "model"]
    if suffix == "bytes":
        assert report["pending_message"] == "confirm?"


def test_inspect_table_and_missing(redis_url, filled):
    result = invoke("sessions", "inspect", f"{filled}-engine", "--uri", redis_url)
    assert result.exit_code == 0
    assert "native" in result.stdout and "tenant/agent" in result.stdout
    missing = invoke("sessions", "inspect", f"{filled}-nope", "--uri", redis_url)
    assert missing.exit_code == 1
    wrong_owner = invoke("sessions", "inspect", f"{filled}-json", "--uri", redis_url,
                         "--owner", "other")
    assert wrong_owner.exit_code == 1


def test_delete_needs_yes_without_a_tty(redis_url, filled):
    result = invoke("sessions", "delete", f"{filled}-json", "--uri", redis_url, "--apply")
    assert result.exit_code == 2
    assert "--yes" in result.stderr
    with RedisBackendAdapter(redis_url) as adapter:
        assert adapter.state_store().load(f"{filled}-json") is not None


def test_delete_scoped_by_owner(redis_url, filled):
    sid = f"{filled}-json"
    refused = invoke("sessions", "delete", sid, "--uri", redis_url, "--owner", "other", "--apply", "--yes")
    assert refused.exit_code == 1
    with RedisBackendAdapter(redis_url) as adapter:
        assert adapter.state_store().load(sid) is not None
    done = invoke("sessions", "delete", sid, "--uri", redis_url, "--owner", "acme", "--apply", "--yes")
    assert done.exit_code == 0, done.output
    with RedisBackendAdapter(redis_url) as adapter:
        assert adapter.state_store().load(sid) is None
    again = invoke("sessions", "delete", sid, "--uri", redis_url, "--apply", "--yes")
    assert again.exit_code == 1


def test_delete_unscoped_engine_session(redis_url, filled):
    result = invoke("sessions", "delete", f"{filled}-engine", "--uri", redis_url, "--apply", "--yes")
    assert result.exit_code == 0, result.output
    listed = invoke("sessions", "list", "--uri", redis_url, "--match", f"{filled}-*", "-o", "json")
    assert f"{filled}-engine" not in {r["session_id"] for r in json.loads(listed.stdout)}


# -- the same commands on another backend -----------------------------------------

_MEMORY = MemoryBackendAdapter()
_MEMORY.state_store().save("mem-1", b'{"a": 1}', expected_version=None, owner_subject="acme")
_MEMORY.state_store().save("mem-2", b"SVB", expected_version=None)


def memory_factory():
    return _MEMORY


def test_sessions_commands_are_generic():
    factory = f"{__name__}:memory_factory"
    listed = invoke("sessions", "list", "--adapter", factory, "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert [r["session_id"] for r in json.loads(listed.stdout)] == ["mem-1", "mem-2"]
    inspected = invoke("sessions", "inspect", "mem-2", "--adapter", factory, "-o", "json")
    assert json.loads(inspected.stdout)["blob_kind"] == "native"


# -- health against Redis ---------------------------------------------------------


def test_health_on_a_closed_port_exits_4_fast():
    started = time.monotonic()
    result = invoke("health", "--uri", f"redis://127.0.0.1:{closed_port()}", "--timeout", "1")
    elapsed = time.monotonic() - started
    assert result.exit_code == 4, result.output
    assert elapsed < bounded_by(1), f"took {elapsed:.2f}s"


def test_health_require_durable_fails_on_the_non_durable_test_server(redis_url):
    healthy = invoke("health", "--uri", redis_url, "--timeout", "2", "-o", "json")
    assert healthy.exit_code == 0, healthy.output
    assert json.loads(healthy.stdout)["details"]["aof_enabled"] is False
    gated = invoke("health", "--uri", redis_url, "--timeout", "2", "--require-durable")
    assert gated.exit_code == 1, gated.output
    assert "AOF" in gated.stderr


class _NoEnumeration:
    """The contract without the enumeration seam."""

    name = "plain"
    is_persistent = False

    def __init__(self):
        self._inner = _MEMORY

    def state_store(self):
        return self._inner.state_store()

    def event_store(self):
        return None

    def retrieval_backend(self):
        return None

    def commit_turn(self, *args, **kwargs):
        return self._inner.commit_turn(*args, **kwargs)

    def check_health(self):
        return True


def no_enumeration_factory():
    return _NoEnumeration()


def test_list_without_the_seam_exits_3_but_inspect_still_works():
    factory = f"{__name__}:no_enumeration_factory"
    listed = invoke("sessions", "list", "--adapter", factory)
    assert listed.exit_code == 3
    assert "not supported" in listed.stderr
    inspected = invoke("sessions", "inspect", "mem-1", "--adapter", factory, "-o", "json")
    assert inspected.exit_code == 0, inspected.output
    report = json.loads(inspected.stdout)
    assert report["blob_kind"] == "json" and report["ttl_seconds"] is None
