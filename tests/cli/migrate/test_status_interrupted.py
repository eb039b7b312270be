"""``migrate status`` after interruptions (SIGINT and SIGKILL, each at three points of the
bulk pass, each run resumed by the next): copied + remaining = total every time, copied
never goes down, and an interrupted ``migrate run`` prints its counts. Real Redis source
(listed slowly, so the pass can be caught in the middle) and real PostgreSQL target."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semvecctl.app import app

ROOT = Path(__file__).resolve().parents[3]
N = 12_500  # five of the bulk pass's steps (backends.migrate.passes.STEP)
pytestmark = pytest.mark.postgres


def _status(state: str) -> dict:
    result = CliRunner().invoke(app, ["migrate", "status", "--state", state, "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _seed(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        pipe = client.pipeline(transaction=False)
        for i in range(N):
            pipe.hset(f"semvec:state:int-{i:05d}", mapping={
                "blob": b"x" * 64 + b"%d" % i, "version": 1, "owner": "", "drift_exempt": 0,
                "pending": ""})
        pipe.execute()
    finally:
        client.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_status_after_interruptions_at_three_points(redis_url, pgvector_url, tmp_path, signum):
    _seed(redis_url)
    state = str(tmp_path / "m.state")
    command = [sys.executable, "-m", "semvecctl", "migrate", "run", "--from", redis_url,
               "--from-adapter", "tests.support.interrupt_doubles:slow_source",
               "--to", pgvector_url, "--state", state, "--allow-loss", "--apply", "--yes"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "SEMVEC_SESSION_BACKEND": ""}
    highest = 0
    for point in (N // 10, N // 2, (N * 3) // 4):
        proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if os.path.exists(state) and _status(state)["sessions_copied"] >= point:
                    break
                time.sleep(0.02)
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        status = _status(state)
        assert status["sessions_total"] == N, status
        assert status["sessions_copied"] + status["sessions_remaining"] == N, status
        assert status["sessions_copied"] >= max(highest, point), (status, highest)
        highest = status["sessions_copied"]
        if signum == signal.SIGINT:  # the run says what it had done
            assert proc.returncode == 130, err
            said = [ln for ln in err.splitlines() if "the run stopped after copying" in ln]
            assert said, err
            copied = int(said[0].split("after copying ")[1].split(" of ")[0])
            assert copied <= status["sessions_copied"] and f" of {N} session(s)" in said[0], said
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    final = _status(state)
    assert (final["sessions_copied"], final["sessions_remaining"], final["sessions_total"]) == (N, 0, N)
    assert final["cutover_possible"] is True
