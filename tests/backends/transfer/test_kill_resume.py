"""A SIGKILL inside a batch write, then a resume, for every command that moves data:
``migrate run``, ``sessions copy``, ``sessions import`` and ``shards run``, with events and
without. The process kills itself right after a set-based write landed on the target and
before it recorded or counted it (tests/backends/transfer/killer.py); the same command
run again (``--on-conflict skip`` for copy and import, as their resume is documented)
must end with every session once, every event once, and on a store that numbers events,
each user's sequence gap-free with the counter at its top. Also: a conflict inside a
batch (a session, an event someone else wrote on the target) is reported for that one
alone and the rest of the batch lands.

Redis and PostgreSQL are the suite's real servers (each case its own databases)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent, RestoreRow
from semvecctl.app import app

ROOT = Path(__file__).resolve().parents[3]
SESSIONS, EVENTS = 1200, 3
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
runner = CliRunner()
pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
def stores(redis_url, postgres_server):
    """make(kind, side) -> URL of an empty store of that kind for that side."""
    made = []

    def make(kind, side):
        if kind == "redis":
            import redis

            url = redis_url.rsplit("/", 1)[0] + f"/{ {'src': 11, 'dst': 12}[side] }"
            redis.Redis.from_url(url).flushdb()
            return url
        name = postgres_server.take_database()
        made.append(name)
        return postgres_server.url(name)

    yield make
    for name in made:
        postgres_server.drop_database(name)


def adapter(url):
    if url.startswith("redis"):
        from backends.redis import RedisBackendAdapter

        return RedisBackendAdapter(url)
    from backends.postgres import PostgresAdapter

    return PostgresAdapter(url)


def seed(url, *, events=EVENTS, n=SESSIONS):
    """``n`` sessions, a user each with ``events`` numbered events in that session."""
    a = adapter(url)
    try:
        for start in range(0, n, 400):
            part = range(start, min(n, start + 400))
            a.state_store().restore_sessions([RestoreRow(
                f"s-{i:05d}", b"blob %d " % i * 40, 1 + i % 4, "acme" if i % 2 else None,
                "later" if i % 7 == 0 else None) for i in part]) if url.startswith("postgres") \
                else _seed_redis(a, part)
            if events:
                a.event_store().restore_events([MemoryEvent(
                    str(uuid.uuid4()), f"u-{i:05d}", f"turn {k} of {i}",
                    created_at=T0 + timedelta(seconds=k), embedding=[0.5, 0.25], meta={"k": k},
                    sequence=k + 1, owner_subject="acme" if i % 2 else "",
                    session_id=f"s-{i:05d}") for i in part for k in range(events)])
    finally:
        a.close()


def _seed_redis(a, part):
    for i in part:
        a.restore_session(f"s-{i:05d}", b"blob %d " % i * 40, version=1 + i % 4,
                          owner_subject="acme" if i % 2 else None,
                          pending_message="later" if i % 7 == 0 else None)


def contents(url, *, events=True):
    """Every session (blob, version, owner, pending) and every event (by id, its
    content and session) with each user's sequences and counter where kept."""
    a = adapter(url)
    try:
        store = a.state_store()
        ids = sorted(s.session_id for s in a.iter_sessions())
        sessions = {sid: tuple(store.load_full(sid)) for sid in ids}
        users = [f"u-{i:05d}" for i in range(SESSIONS)]
        logs = a.event_store().events_of_users(users) if events else {}
        listed = [(e.event_id, e.user_id, e.session_id, e.content)
                  for log in logs.values() for e in log]
        numbers = {u: sorted(e.sequence for e in log) for u, log in logs.items() if log}
        counters = a.event_store().read_counters(users) if events else {}
        return ids, sessions, listed, numbers, counters
    finally:
        a.close()


def killed_then_resumed(kind, first, again, *, n=1):
    """``first`` (semvecctl's arguments) SIGKILLed after the ``n``-th ``kind`` batch
    write; then ``again`` run to its end (exit 0)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    proc = subprocess.run([sys.executable, "-c",
                           "from tests.backends.transfer.killer import main; main()",
                           kind, str(n), *first], env=env, capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    done = subprocess.run([sys.executable, "-m", "semvecctl", *again], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def assert_whole(src, dst, *, events):
    ids, sessions, listed, numbers, counters = contents(src, events=events)
    t_ids, t_sessions, t_listed, t_numbers, t_counters = contents(dst, events=events)
    assert t_ids == ids and len(ids) == SESSIONS  # every session once
    assert {k: v[:4] for k, v in t_sessions.items()} == {k: v[:4] for k, v in sessions.items()}
    if not events:
        assert t_listed == []
        return
    assert len(t_listed) == len({e[0] for e in t_listed}) == SESSIONS * EVENTS  # each once
    assert sorted(t_listed) == sorted(listed)  # none lost, none foreign
    if dst.startswith("redis"):  # numbered by the target: gap-free, counter at the top
        assert all(seq == list(range(1, EVENTS + 1)) for seq in t_numbers.values())
        assert all(t_counters[u] == EVENTS for u in t_numbers)


CASES = [("redis", "postgres", True), ("postgres", "redis", True),
         ("redis", "redis", False), ("postgres", "postgres", False)]


@pytest.mark.parametrize("src_kind,dst_kind,events", CASES)
def test_migrate_run_killed_inside_a_batch_write_resumes_whole(stores, tmp_path, src_kind,
                                                             dst_kind, events):
    src, dst = stores(src_kind, "src"), stores(dst_kind, "dst")
    seed(src, events=EVENTS if events else 0)
    run = ["migrate", "run", "--state", str(tmp_path / "m.state"), "--from", src, "--to", dst,
           "--allow-loss", "--apply", "--yes"]
    killed_then_resumed("events" if events else "sessions", run, run)
    assert_whole(src, dst, events=events)


@pytest.mark.parametrize("src_kind,dst_kind,events", CASES)
def test_sessions_copy_killed_inside_a_batch_write_resumes_whole(stores, src_kind, dst_kind,
                                                                events):
    src, dst = stores(src_kind, "src"), stores(dst_kind, "dst")
    seed(src, events=EVENTS if events else 0)
    copy = ["sessions", "copy", "--from", src, "--to", dst, "--allow-loss", "--apply", "--yes",
            *(["--with-events"] if events else [])]
    killed_then_resumed("events" if events else "sessions", copy,
                        [*copy, "--on-conflict", "skip"], n=2 if events else 1)
    assert_whole(src, dst, events=events)


@pytest.mark.parametrize("src_kind,dst_kind,events", CASES)
def test_sessions_import_killed_inside_a_batch_write_resumes_whole(stores, tmp_path, src_kind,
                                                                  dst_kind, events):
    src, dst = stores(src_kind, "src"), stores(dst_kind, "dst")
    seed(src, events=EVENTS if events else 0)
    archive = tmp_path / "a.jsonl"
    out = runner.invoke(app, ["sessions", "export", "--uri", src, "-O", str(archive),
                              *(["--with-events"] if events else [])])
    assert out.exit_code == 0, out.stderr
    load = ["sessions", "import", str(archive), "--uri", dst, "--allow-loss", "--apply", "--yes"]
    killed_then_resumed("events" if events else "sessions", load,
                        [*load, "--on-conflict", "skip"], n=2)
    assert_whole(src, dst, events=events)


def test_a_conflict_inside_a_batch_is_that_sessions_and_that_events_alone(stores, tmp_path):
    src, dst = stores("redis", "src"), stores("redis", "dst")
    seed(src)
    a, b = adapter(src), adapter(dst)
    try:
        b.state_store().save("s-00007", b"someone else's", expected_version=None)
        ours = a.event_store().list_events("u-00011")[1]
        b.event_store().restore_events([dataclasses.replace(ours, content="theirs")])  # its id
    finally:
        a.close()
        b.close()
    result = runner.invoke(app, ["migrate", "run", "--state", str(tmp_path / "m.state"),
                                 "--from", src, "--to", dst, "--apply", "--yes", "-o", "json"])
    assert result.exit_code == 1, result.stderr  # conflicts: reported, never overwritten
    (first,) = [json.loads(line) for line in result.stdout.splitlines() if line.strip()][:1] or [
        json.loads(result.stdout)]
    passes = first if isinstance(first, list) else first.get("passes", [first])
    bulk = passes[0]
    assert [c["session_id"] for c in bulk["new_conflicts"]] == ["s-00007"]
    assert bulk["copied"] == SESSIONS - 1
    # the conflicting session's log stays behind with it; of the rest one event clashes
    assert bulk["event_conflicts"] == 1
    assert bulk["events"] == SESSIONS * EVENTS - EVENTS - 1
    ids, sessions, listed, _, _ = contents(dst)
    assert len(ids) == SESSIONS and sessions["s-00007"][0] == b"someone else's"
    assert len(listed) == SESSIONS * EVENTS - EVENTS  # with theirs, kept as it was
    assert [e[3] for e in listed if e[1] == "u-00011"].count("theirs") == 1
