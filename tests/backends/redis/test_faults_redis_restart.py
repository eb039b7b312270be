"""Kill -9 and restart a Redis server in the middle of a load test.

A DEDICATED redis-server (never the suite's shared one) on a fixed port, with
``appendonly yes`` and ``appendfsync always`` in its own temporary directory, so every
write Redis acknowledged is on disk before the reply and survives the kill. The run must
surface BackendUnreachable while the server is gone, resume once it is back, and the
audit must find every acknowledged turn and no half turn; writes whose reply was lost
are counted as unknown and resolved from the store, never as acknowledged.
"""

from __future__ import annotations

import threading
import time

import pytest

from backends.errors import BackendUnreachable
from backends.ops.loadtest import ACKED, UNKNOWN, LoadPlan, run_load
from tests.support.dedicated_redis import DedicatedRedis
from tests.support.bounds import bounded_by

HEALTH_TIMEOUT_S = 0.5
#: check_health's own deadline plus the probe thread's grace and scheduling slack (wide:
#: the unbounded alternative, a stopped or killed server, never answers at all)
HEALTH_BOUND_S = bounded_by(HEALTH_TIMEOUT_S)
#: how long a test waits for the server's change (kill, restart, SIGCONT) to show
SETTLE_LIMIT_S = 60


@pytest.fixture
def durable_redis(tmp_path):
    server = DedicatedRedis(tmp_path / "redis",
                            extra=["--appendonly", "yes", "--appendfsync", "always"])
    server.start()
    yield server
    server.kill()


def timed_health(adapter) -> tuple[bool, float]:
    started = time.monotonic()
    healthy = adapter.check_health(HEALTH_TIMEOUT_S)
    return healthy, time.monotonic() - started


def wait_for_health(adapter, wanted: bool, limit_s: float) -> tuple[float, list[float]]:
    """Seconds until check_health answers ``wanted``, and every call's duration."""
    started = time.monotonic()
    durations: list[float] = []
    while time.monotonic() - started < limit_s:
        healthy, took = timed_health(adapter)
        durations.append(took)
        if healthy is wanted:
            return time.monotonic() - started, durations
        time.sleep(0.01)
    raise AssertionError(f"check_health never answered {wanted} within {limit_s}s")


def test_kill_and_restart_mid_load_loses_no_acknowledged_turn(durable_redis):
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(durable_redis.url, timeout=1.0)
    attempts: list = []
    outcome: dict = {}
    plan = LoadPlan(writers=4, duration_s=4.0, sessions=2, events_per_turn=2,
                    backoff_s=0.05, verify_timeout_s=20)
    loader = threading.Thread(
        target=lambda: outcome.setdefault("report", run_load(adapter, plan,
                                                             attempts_out=attempts)))
    try:
        assert timed_health(adapter)[0] is True
        loader.start()
        time.sleep(1.0)

        durable_redis.kill()
        killed_at = time.monotonic()
        down_after, down_calls = wait_for_health(adapter, False, SETTLE_LIMIT_S)
        with pytest.raises(BackendUnreachable) as refused:
            adapter.state_store().load("anything")
        message = str(refused.value)
        assert f"127.0.0.1:{durable_redis.port}" in message and "unreachable" in message
        time.sleep(0.5)
        # still down: every probe answers False within its timeout
        healthy, took = timed_health(adapter)
        assert healthy is False and took <= HEALTH_BOUND_S

        durable_redis.start()
        restarted_at = time.monotonic()
        up_after, up_calls = wait_for_health(adapter, True, SETTLE_LIMIT_S)
        loader.join(timeout=60)
        assert not loader.is_alive()
    finally:
        adapter.close()
    report = outcome["report"]
    print(f"\nhealth: False {down_after * 1000:.0f} ms after the kill, True "
          f"{up_after * 1000:.0f} ms after the restart; slowest probe "
          f"{max(down_calls + up_calls) * 1000:.0f} ms; {report.commits} commits, "
          f"{report.conflicts} conflicts, {report.unknown} unknown, errors {report.errors}")

    assert max(down_calls + up_calls) <= HEALTH_BOUND_S
    assert down_after <= HEALTH_BOUND_S
    # the client side saw the outage as "unreachable", not as anything else
    assert report.errors.get("unreachable", 0) > 0
    assert set(report.errors) <= {"unreachable"}, report.errors
    assert report.fatal is None
    # writes resumed after the restart
    assert any(a.outcome == ACKED and a.settled_at > restarted_at for a in attempts)
    assert any(a.outcome == ACKED and a.settled_at < killed_at for a in attempts)
    # nothing acknowledged was lost, no half turn, every unknown write resolved
    assert report.verification.ok, report.verification.problems
    assert report.verification.acknowledged_verified == report.commits
    unknown = sum(1 for a in attempts if a.outcome == UNKNOWN)
    assert unknown == report.unknown
    assert report.verification.unknown_landed + report.verification.unknown_not_landed == unknown
    assert report.cleanup_problems == []
    with durable_redis.client() as client:
        assert list(client.scan_iter(match=f"*{report.prefix}*")) == []


def test_health_stays_bounded_while_the_server_hangs(durable_redis):
    """SIGSTOP: the kernel still accepts connections but nothing answers. check_health
    must say False within its timeout rather than hang; SIGCONT brings True back."""
    import os
    import signal

    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(durable_redis.url, timeout=0.5)
    pid = durable_redis.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        healthy, took = timed_health(adapter)
        assert healthy is False
        assert HEALTH_TIMEOUT_S * 0.8 <= took <= HEALTH_BOUND_S
        with pytest.raises(BackendUnreachable):
            adapter.state_store().load("anything")
        # health_details: the same timeout bounds its probe (connect and socket reads)
        started = time.monotonic()
        details = adapter.health_details(HEALTH_TIMEOUT_S)
        assert time.monotonic() - started <= HEALTH_BOUND_S
        assert details["reachable"] is False and details["category"] == "unreachable"
    finally:
        os.kill(pid, signal.SIGCONT)
    up_after, _ = wait_for_health(adapter, True, SETTLE_LIMIT_S)
    print(f"\nhung server: check_health False after {took * 1000:.0f} ms "
          f"(timeout {HEALTH_TIMEOUT_S * 1000:.0f} ms); True {up_after * 1000:.0f} ms after SIGCONT")
    adapter.close()


def test_replies_lost_to_a_frozen_server_are_unknown_and_resolved(durable_redis):
    """SIGSTOP mid-load for longer than the socket timeout: commands already sent time
    out on the client (BackendUnreachable, outcome UNKNOWN) but the server runs them when
    it resumes. The audit must count those as landed — never as lost, never as
    acknowledged — and still find every acknowledged turn and no half turn."""
    import os
    import signal

    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(durable_redis.url, timeout=0.3)
    attempts: list = []
    outcome: dict = {}
    # every writer is caught in some call by the freeze; with ten of them the odds that
    # none was inside a commit (all in the version read) are about 1 in 1000
    plan = LoadPlan(writers=10, duration_s=2.5, sessions=3, events_per_turn=2,
                    backoff_s=0.05, verify_timeout_s=20)
    loader = threading.Thread(
        target=lambda: outcome.setdefault("report", run_load(adapter, plan,
                                                             attempts_out=attempts)))
    pid = durable_redis.pid
    loader.start()
    time.sleep(0.7)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(0.8)
    finally:
        os.kill(pid, signal.SIGCONT)
    loader.join(timeout=60)
    adapter.close()
    report = outcome["report"]
    v = report.verification
    print(f"\nfrozen server: {report.commits} acknowledged, {report.unknown} unknown "
          f"({v.unknown_landed} landed, {v.unknown_not_landed} did not), errors {report.errors}")
    assert report.errors.get("unreachable", 0) > 0
    assert v.ok, v.problems
    assert v.acknowledged_verified == report.commits
    assert report.unknown == v.unknown_landed + v.unknown_not_landed
    assert report.unknown > 0  # the freeze caught writes in flight
