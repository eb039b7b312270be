"""#23: `sessions list` shows a damaged row as damaged (not as version 0) and exits 1;
`load cleanup` finds what a run left by its prefix, not by a count it is told, and says
exactly what it removed and what is left. On the suite's real Redis and PostgreSQL."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from semvecctl.app import app


def run(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def damaged_redis(redis_url, redis_server):
    from backends.redis import RedisBackendAdapter

    t = uuid.uuid4().hex[:8]
    with RedisBackendAdapter(redis_url) as adapter:
        adapter.state_store().save(f"{t}-good", b"blob", expected_version=None)
    # the engine's layout with a version that is no number: damaged
    redis_server.run_cli("HSET", f"semvec:state:{t}-bad", "blob", "x", "version", "abc",
                         "owner", "", "drift_exempt", "0", "pending", "")
    return t


@pytest.mark.redis
def test_list_table_shows_damaged_and_exits_1(redis_url, damaged_redis):
    t = damaged_redis
    result = run("sessions", "list", "--uri", redis_url, "--match", f"{t}-*")
    assert result.exit_code == 1, result.output
    lines = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:]}
    assert lines[f"{t}-bad"][1] == "damaged"
    assert lines[f"{t}-good"][1] == "1"
    assert f"1 of them damaged ('{t}-bad')" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.redis
@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_list_json_rows_say_damaged(redis_url, damaged_redis, fmt):
    t = damaged_redis
    result = run("sessions", "list", "--uri", redis_url, "--match", f"{t}-*", "-o", fmt)
    assert result.exit_code == 1, result.output
    rows = (json.loads(result.stdout) if fmt == "json"
            else [json.loads(line) for line in result.stdout.splitlines()])
    by_id = {r["session_id"]: r for r in rows}
    assert by_id[f"{t}-bad"]["version"] is None
    assert "version" in by_id[f"{t}-bad"]["damaged"]
    assert by_id[f"{t}-good"]["version"] == 1 and "damaged" not in by_id[f"{t}-good"]


@pytest.mark.postgres
def test_list_damaged_on_postgresql(pgvector_url, pgvector_adapter_factory):
    import psycopg

    adapter = pgvector_adapter_factory()
    adapter.state_store().save("pg-good", b"blob", expected_version=None)
    adapter.state_store().save("pg-bad", b"blob", expected_version=None)
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("UPDATE semvec_session_state SET version = 0 WHERE session_id = 'pg-bad'")
    result = run("sessions", "list", "--uri", pgvector_url, "-o", "jsonl")
    assert result.exit_code == 1, result.output
    by_id = {r["session_id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert by_id["pg-bad"]["damaged"] and by_id["pg-bad"]["version"] is None
    assert by_id["pg-good"]["version"] == 1
    table = run("sessions", "list", "--uri", pgvector_url)
    assert table.exit_code == 1
    assert any(line.split()[:2] == ["pg-bad", "damaged"] for line in table.stdout.splitlines())


def _kept_run(adapter, sessions: int):
    """A 4-session load run whose rows were kept (as an interrupted cleanup leaves them)."""
    from backends.ops.loadtest import LoadPlan, new_load_prefix, run_load

    prefix = new_load_prefix()
    report = run_load(adapter, LoadPlan(writers=2, duration_s=0.6, sessions=sessions,
                                        events_per_turn=1, prefix=prefix), keep=True)
    assert report.commits > 0
    return prefix


def _left(adapter, prefix, sessions):
    store, events = adapter.state_store(), adapter.event_store()
    return ([j for j in range(sessions) if store.current_version(f"{prefix}s{j}") is not None],
            [j for j in range(sessions) if events.list_events(f"{prefix}u{j}")])


@pytest.mark.redis
def test_cleanup_with_a_short_count_still_removes_everything_on_redis(redis_url):
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(redis_url) as adapter:
        prefix = _kept_run(adapter, 4)
        sessions_before, users_before = _left(adapter, prefix, 4)
        assert len(sessions_before) == 4 and len(users_before) == 4
        result = run("load", "cleanup", "--prefix", prefix, "--sessions", "2", "--uri",
                     redis_url, "--apply", "--yes")
        assert result.exit_code == 0, result.output
        assert f"removed 4 session(s) and the events of 4 user(s) under {prefix}; nothing is left" \
            in result.stderr
        assert _left(adapter, prefix, 4) == ([], [])
        assert [k for k in adapter._client.scan_iter(match=f"*{prefix}*")] == []


@pytest.mark.postgres
def test_cleanup_without_a_count_on_postgresql(pgvector_url, pgvector_adapter_factory):
    adapter = pgvector_adapter_factory()
    prefix = _kept_run(adapter, 4)
    result = run("load", "cleanup", "--prefix", prefix, "--uri", pgvector_url, "--apply", "--yes")
    assert result.exit_code == 0, result.output
    assert "removed 4 session(s) and the events of 4 user(s)" in result.stderr
    assert _left(adapter, prefix, 4) == ([], [])


@pytest.mark.redis
def test_cleanup_that_leaves_rows_says_which_and_exits_1(redis_url):
    """Deletes that fail (the suite's double) leave the rows: exit 1 naming them."""
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(redis_url) as adapter:
        prefix = _kept_run(adapter, 2)
    result = run("load", "cleanup", "--prefix", prefix, "--uri", redis_url, "--adapter",
                 "tests.support.interrupt_doubles:failing_deletes", "--apply", "--yes")
    assert result.exit_code == 1, result.output
    assert f"left: 2 session(s) ({prefix}s0, {prefix}s1)" in result.stderr
    assert "nothing is left" not in result.stderr
