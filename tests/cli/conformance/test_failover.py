"""``semvecctl conformance run --failover FILE`` as an operator runs it: the file names how
to fail the primary (here a SIGKILL of the test's own redis-server) and the store is a
Sentinel URI, so the sentinels promote and the same URI follows. Real primary, replica
and sentinel on loopback (tests/support/failover_topologies.py), all stopped at the end.
"""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.failover_topologies import (WAITING, alive, redis_sentinel_trio,
                                               redis_with_sentinel)


def invoke(*args: str):
    return CliRunner().invoke(app, ["conformance", "run", *args])


@pytest.mark.redis
def test_the_failover_file_fails_the_primary_and_the_report_counts_what_the_writers_were_told(
        tmp_path):
    history = tmp_path / "history"
    with redis_with_sentinel(tmp_path) as deployment:
        primary = deployment.pids[0]
        kill = [sys.executable, "-c", f"import os, signal; os.kill({primary}, signal.SIGKILL)"]
        (tmp_path / "failover.yaml").write_text(yaml.safe_dump({"fail": kill}))
        result = invoke("--uri", deployment.uri, "--only", "failover", "--failover",
                        str(tmp_path / "failover.yaml"), "--failover-history", str(history),
                        "--failover-seed", "3", "-o", "json")
        assert not alive(primary)
    assert result.exit_code == 0, result.output
    case = json.loads(result.stdout)["groups"][-1]["cases"][0]
    figures = case["figures"]
    acks = sum(1 for path in history.glob("*.history")
               for line in path.read_text().splitlines() if line.startswith("ack "))
    assert figures["acknowledged"] == acks > 0
    assert figures["torn"] == 0 and figures["seed"] == 3 and figures["stall_s"] is None
    assert case["status"] in ("passed", "advisory"), case["message"]


@pytest.mark.parametrize("content, fragment", [
    ({"replica": "redis://127.0.0.1:1/0"}, "'fail' is required"),
    ({"fail": ["true"], "promote": 3}, "'promote' must be a command"),
    ({"fail": ["true"], "replica": "somewhere"}, "'replica' must be a URI"),
    ({"fail": ["true"], "colour": "red"}, "unknown key(s) colour"),
    ({"fail": ["true"]}, "'replica' is required"),
    ({"fail": ["true"], "switchover": True}, "one scenario per file"),
    ({"isolate": 3}, "'isolate' must be a command"),
])
def test_a_bad_failover_file_is_a_usage_error_naming_the_key(tmp_path, content, fragment):
    path = tmp_path / "failover.yaml"
    path.write_text(yaml.safe_dump(content))
    result = invoke("--uri", "redis://127.0.0.1:1/0", "--failover", str(path))
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_missing_failover_file_is_a_usage_error(tmp_path):
    result = invoke("--uri", "redis://127.0.0.1:1/0", "--failover", str(tmp_path / "none.yaml"))
    assert result.exit_code == 2 and "cannot read" in result.stderr, result.output


@pytest.mark.redis
def test_switchover_true_runs_the_switchover_case_through_the_sentinels(tmp_path):
    with redis_sentinel_trio(tmp_path) as trio:
        (tmp_path / "failover.yaml").write_text(yaml.safe_dump({"switchover": True}))
        result = invoke("--uri", trio.uri + WAITING, "--only", "failover", "--failover",
                        str(tmp_path / "failover.yaml"), "--failover-seed", "2", "-o", "json")
        promoted = trio.replica_promoted()
    assert result.exit_code == 0, result.output
    cases = {c["case"]: c for c in json.loads(result.stdout)["groups"][-1]["cases"]}
    case = cases["switchover"]
    assert case["status"] == "passed", case["message"]
    assert case["figures"]["acknowledged"] > 0 and case["figures"]["acknowledged_lost"] == 0
    assert cases["acknowledged_turns"]["status"] == "not-applicable"
    assert promoted
