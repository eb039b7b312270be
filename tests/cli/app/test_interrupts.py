"""#15.3: SIGINT and SIGTERM mid-run clean up, then exit 130/143.

Real subprocesses (``python -m semvecctl``) against the suite's real Redis: ``load run``
must leave no ``semvec-load-*`` key behind, ``sessions export`` no ``.partial`` file (and
no archive under the target name). When cleanup cannot finish, the exact prefix and the
command that removes it are printed, and that command works.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def spawn(*args: str, env: dict | None = None) -> subprocess.Popen:
    """``python -m semvecctl ARGS`` as a child, with faulthandler on: a crash while a
    signal is handled prints where it happened instead of a bare -11."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "SEMVEC_SESSION_BACKEND": "",
                "NO_COLOR": "1", "PYTHONFAULTHANDLER": "1", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "semvecctl", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env)


def wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def load_keys(client) -> list[bytes]:
    """Keys a load run wrote: state and per-user keys carry the prefix, event hashes are
    named by UUID (the test database is flushed at test start, so every key counts)."""
    return list(client.scan_iter(count=1000))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_load_run_interrupted_removes_everything(redis_server, redis_url, signum):
    client = redis_server.client()
    proc = spawn("load", "run", "--uri", redis_url, "--duration", "120", "--apply", "--yes",
                 "--sessions", "4", "--events-per-turn", "2", "--writers", "2")
    try:
        wait_for(lambda: len(load_keys(client)) > 50 or proc.poll() is not None,
                 what="load keys in Redis")
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.5)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT[signum], err
    assert "removed everything written under prefix semvec-load-" in err
    assert load_keys(client) == []
    assert "Traceback" not in err


def _seed(redis_url: str, n: int) -> None:
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(uri=redis_url)
    try:
        store = adapter.state_store()
        for i in range(n):
            store.save(f"intr-{i:06d}", b"x" * 256, expected_version=None, owner_subject="t1")
    finally:
        adapter.close()


def interrupted_import(redis_server, redis_url: str, tmp_path, count: int,
                       after: int) -> tuple[int, str, object]:
    """Export ``count`` seeded sessions, empty the server, start ``sessions import --apply``
    and send SIGINT once more than ``after`` rows have landed: (exit code, stderr, client)."""
    _seed(redis_url, count)
    archive = tmp_path / "a.jsonl"
    done = subprocess.run([sys.executable, "-m", "semvecctl", "sessions", "export", "--uri",
                           redis_url, "--out", str(archive)], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr
    client = redis_server.client()
    client.flushdb()
    proc = spawn("sessions", "import", str(archive), "--uri", redis_url, "--apply", "--yes")
    try:
        wait_for(lambda: proc.poll() is not None or client.dbsize() > after, what="imported rows")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err, client


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_sessions_export_interrupted_leaves_no_partial_file(redis_url, tmp_path, signum):
    _seed(redis_url, 6000)
    target = tmp_path / "out.jsonl"
    proc = spawn("sessions", "export", "--uri", redis_url, "--out", str(target),
                 "--batch-size", "1")
    try:
        wait_for(lambda: any(p.name.endswith(".partial") for p in tmp_path.iterdir())
                 or proc.poll() is not None, what="the .partial file")
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.3)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT[signum], err
    assert list(tmp_path.iterdir()) == [], "interrupted export left files behind"
    assert "Traceback" not in err


def test_cleanup_that_cannot_finish_prints_prefix_and_a_working_command(redis_url):
    """Interrupt a run whose cleanup is refused (deletes fail, through --adapter), then run
    the printed command (without the failing double: the cause is fixed) against the same
    store and find nothing left."""
    proc = spawn("load", "run", "--adapter", "tests.support.interrupt_doubles:failing_deletes",
                 "--uri", redis_url, "--duration", "120", "--apply", "--yes", "--sessions", "3")
    import redis as redis_lib

    client = redis_lib.Redis.from_url(redis_url)
    try:
        wait_for(lambda: len(load_keys(client)) > 20 or proc.poll() is not None,
                 what="load keys in Redis")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert load_keys(client), "the double should have kept its rows"
    line = next(ln for ln in err.splitlines() if "remove them with:" in ln)
    command = line.split("remove them with: ", 1)[1]
    assert command.startswith("semvecctl load cleanup --prefix semvec-load-")
    args = command.split()[1:]
    args = [a.strip("'") for a in args]
    at = args.index("--adapter")
    del args[at:at + 2]
    again = spawn(*args)
    out, err2 = again.communicate(timeout=60)
    assert again.returncode == 0, err2
    assert load_keys(client) == []


@pytest.mark.postgres
def test_load_run_interrupted_on_postgresql_removes_sessions_and_events(pgvector_url):
    """The issue saw sessions and events left in PostgreSQL too."""
    import psycopg

    def leftovers() -> int:
        with psycopg.connect(pgvector_url, autocommit=True) as conn:
            tables = {r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
            total = 0
            for table, column in (("semvec_session_state", "session_id"),
                                  ("semvec_memory_events", "user_id")):
                if table in tables:
                    total += conn.execute(
                        f"SELECT count(*) FROM {table} WHERE {column} LIKE 'semvec-load-%'"
                    ).fetchone()[0]
            return total

    proc = spawn("load", "run", "--uri", pgvector_url, "--duration", "120", "--apply", "--yes",
                 "--sessions", "3", "--events-per-turn", "2", "--writers", "2")
    try:
        wait_for(lambda: proc.poll() is not None or leftovers() > 20, timeout=60,
                 what="load rows in PostgreSQL")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "removed everything written under prefix" in err
    assert leftovers() == 0


def test_sessions_import_interrupted_says_how_far_it_got(redis_server, redis_url, tmp_path):
    """An import cannot un-write what it wrote (it never overwrites, so nothing is lost):
    interrupted, it says how many sessions landed and how to add the rest."""
    code, err, _client = interrupted_import(redis_server, redis_url, tmp_path, 4000, 200)
    assert code == 130, err
    assert "the import stopped after" in err and "--on-conflict skip" in err
    assert "Traceback" not in err
