"""`semvecctl doctor` on adapters without an audit of their own: the memory backend (state
only: strict reads over the session listing), a damaged double, and an adapter that
cannot list its sessions (refused as unsupported, exit 3)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.cli_doubles import Damaged

runner = CliRunner()


def seeded_damaged(uri=None):
    adapter = Damaged()
    store = adapter.state_store()
    for sid in ("good-1", "bad-1", "good-2", "bad-2"):
        store.save(sid, b"x", expected_version=None)
    return adapter


class _Bare:
    """The required contract only: nothing to enumerate, nothing to audit."""

    name = "bare"
    is_persistent = False

    def state_store(self):
        from backends.memory import MemoryBackendAdapter

        return MemoryBackendAdapter().state_store()

    def event_store(self):
        return None

    def retrieval_backend(self):
        return None

    def commit_turn(self, *args, **kwargs):
        raise NotImplementedError

    def check_health(self):
        return True

    def close(self):
        pass


def bare(uri=None):
    return _Bare()


def test_memory_store_is_clean():
    result = runner.invoke(app, ["doctor", "--uri", "memory://", "-o", "json"])
    assert result.exit_code == 0
    body = json.loads(result.stdout)
    assert body["findings"] == [] and body["backend"] == "memory"


def test_strict_read_failures_are_found_per_row():
    result = runner.invoke(app, ["doctor", "--adapter", f"{__name__}:seeded_damaged",
                                 "-o", "jsonl"])
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted((r["check"], r["where"]) for r in rows) == [
        ("state.unreadable", "session bad-1"), ("state.unreadable", "session bad-2")]
    assert all(r["severity"] == "error" and not r["safe_repair"] for r in rows)
    assert result.exit_code == 1
    assert "2 error(s)" in result.stderr


def test_fix_plan_marks_unsafe_findings_as_left():
    result = runner.invoke(app, ["doctor", "--adapter", f"{__name__}:seeded_damaged",
                                 "--fix", "-o", "json"])
    outcomes = {f["outcome"] for f in json.loads(result.stdout)["findings"]}
    assert outcomes == {"left (needs a human)"}
    assert "plan only, nothing written" in result.stderr
    assert result.exit_code == 1


def test_an_adapter_that_cannot_list_sessions_is_refused():
    result = runner.invoke(app, ["doctor", "--adapter", f"{__name__}:bare"])
    assert result.exit_code == 3
    assert "doctor is not supported by backend 'bare'" in result.stderr


def test_an_unreachable_server_is_exit_4_and_redacted():
    from tests.support.fixtures.redis_server import closed_port

    result = runner.invoke(app, ["doctor", "--uri",
                                 f"redis://:hunter2@127.0.0.1:{closed_port()}/0"])
    assert result.exit_code == 4
    assert "hunter2" not in result.output and "unreachable" in result.stderr
