"""``sessions export --with-events`` of a PostgreSQL store large enough for its events
pass to run in a process of its own (``EVENTS_PASS_APART`` sessions and more), through
the real CLI: the archive's sessions and events are those of the same export made in one
process, and a SIGINT mid-export exits 130 leaving no archive, no partial file and no
child process. On the suite's real PostgreSQL, in the engine's own tables (COPY-seeded)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from backends.transfer import export
from tests.support.fixtures.engine_sql_ddl import ENGINE_MODEL_DDL

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[3]
BASE = datetime(2026, 1, 1, 12, 0, 0)


def _seed(url: str, sessions: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in ENGINE_MODEL_DDL:
            conn.execute(statement)
        with conn.cursor() as cur:
            with cur.copy("COPY semvec_session_state (session_id, state_blob, version,"
                          " drift_exempt, owner_subject, pending_message, updated_at)"
                          " FROM STDIN") as copy:
                for i in range(sessions):
                    copy.write_row((f"s-{i:06d}", b"blob %d" % i, 1, False, None, None,
                                    BASE + timedelta(seconds=i)))
            with cur.copy("COPY semvec_memory_events (event_id, user_id, owner_subject,"
                          " session_id, created_at, content, embedding, meta,"
                          " source_event_id) FROM STDIN") as copy:
                for i in range(sessions):
                    for k in range(i % 4):
                        copy.write_row((str(uuid.UUID(int=(i << 8) | k | (1 << 127))),
                                        f"user-{i % 97}", "", f"s-{i:06d}",
                                        BASE + timedelta(seconds=i, milliseconds=k),
                                        f"turn {k}", "[0.5, -1.25]", '{"k": %d}' % k, None))


def _cli(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SEMVEC_SESSION_BACKEND": "", "NO_COLOR": "1"}
    return subprocess.Popen([sys.executable, "-m", "semvecctl", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()[1:-1]  # the header and trailer carry the time


def _pass_children(pid: int) -> list[str]:
    found = subprocess.run(["pgrep", "-P", str(pid), "-f", "backends.postgres.event_pass"],
                           capture_output=True, text=True)
    return found.stdout.split()


def test_the_cli_export_is_the_one_made_in_one_process(pgvector_url, tmp_path, monkeypatch):
    sessions = export.EVENTS_PASS_APART
    _seed(pgvector_url, sessions)
    archive = tmp_path / "apart.jsonl"
    done = _cli("sessions", "export", "--uri", pgvector_url, "--with-events", "-O", str(archive))
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    from backends.postgres import PostgresAdapter
    from backends.transfer.export import write_archive

    monkeypatch.setattr(export, "EVENTS_PASS_APART", 10**9)
    together = io.BytesIO()
    with PostgresAdapter(pgvector_url) as adapter:
        result = write_archive(adapter, together, source_uri="test", with_events=True)
    assert result.events == sum(i % 4 for i in range(sessions))
    assert _lines(archive) == together.getvalue().splitlines()[1:-1]


def test_sigint_mid_export_leaves_no_archive_and_no_child(pgvector_url, tmp_path):
    _seed(pgvector_url, 4 * export.EVENTS_PASS_APART)
    archive = tmp_path / "out.jsonl"
    proc = _cli("sessions", "export", "--uri", pgvector_url, "--with-events", "-O", str(archive))
    try:
        deadline = time.monotonic() + 120
        while not (children := _pass_children(proc.pid)) and proc.poll() is None:
            assert time.monotonic() < deadline, "the events pass never started"
            time.sleep(0.02)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert not archive.exists()
    assert [p.name for p in tmp_path.iterdir()] == []
    assert "Traceback" not in err
    assert children and not [pid for pid in children if Path(f"/proc/{pid}").exists()]
