"""``--watch [SECONDS]``: the value is optional, a pipe gets one line per refresh, a view
that can end ends (indexes validate: queryable or timeout), and Ctrl-C exits 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from semvecctl.watch import optional_values, watch

ROOT = Path(__file__).resolve().parents[3]


def run(*args):
    return CliRunner().invoke(app, list(args))


def test_the_interval_may_be_left_out():
    assert optional_values(["health", "--watch"]) == ["health", "--watch", "2.0"]
    assert optional_values(["health", "--watch", "5"]) == ["health", "--watch", "5"]
    assert optional_values(["stats", "--watch", "--uri", "x"]) == ["stats", "--watch", "2.0", "--uri", "x"]
    assert optional_values(["x", "--", "--watch"]) == ["x", "--", "--watch"]


def test_watch_stops_when_done_or_at_the_timeout(capsys):
    values = iter(range(100))
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    outcome = watch(lambda: next(values), lambda v: f"value {v}", every=1.0,
                    done=lambda v: v == 3, clock=lambda: now[0], sleep=sleep)
    assert (outcome.last, outcome.done, outcome.refreshes) == (3, True, 4)
    assert capsys.readouterr().out.splitlines() == [f"value {i}" for i in range(4)]
    outcome = watch(lambda: next(values), str, every=1.0, timeout=2.5,
                    clock=lambda: now[0], sleep=sleep)
    assert outcome.timed_out and not outcome.done and outcome.refreshes == 4
    assert slept[-1] == 0.5  # the last pause ends at the timeout, not after it


def test_health_watch_prints_a_line_per_probe_until_ctrl_c():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "semvecctl", "health", "--backend", "memory",
                             "--watch", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)
    lines = [proc.stdout.readline() for _ in range(3)]
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert all(" memory healthy " in line for line in lines), lines
    assert "interrupted by SIGINT: stopped" in err and "Traceback" not in err


@pytest.mark.postgres
def test_indexes_validate_watch_waits_until_queryable_or_timeout(pgvector_url):
    result = run("indexes", "validate", "--backend", "postgres", "--uri", pgvector_url,
                 "--watch", "0.1", "--timeout", "0.3", "-o", "json")
    if result.exit_code == 0:  # the fixture's database already has every index
        pytest.skip("nothing drifts on a fresh database here")
    assert result.exit_code == 1, result.stderr
    waiting = [l for l in result.stderr.splitlines() if "index(es) match: waiting for" in l]
    assert len(waiting) >= 2, result.stderr
    assert run("indexes", "ensure", "--backend", "postgres", "--uri", pgvector_url,
               "--apply", "--yes").exit_code == 0
    result = run("indexes", "validate", "--backend", "postgres", "--uri", pgvector_url,
                 "--watch", "0.1", "--timeout", "30")
    assert result.exit_code == 0, result.stderr
    refreshes = [l for l in result.stderr.splitlines() if l[:2] == "20" and "index(es) match" in l]
    assert len(refreshes) == 1 and "waiting" not in refreshes[0]  # done at the first look
