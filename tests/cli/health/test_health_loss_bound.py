"""``health`` on a Redis primary states what a failover can really lose (from
``min-replicas-*`` and, through Sentinel, the service's settings), and
``--require-bounded-loss SECONDS`` gates on it. Real servers on loopback: a primary, a
replica and three sentinels."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.failover_topologies import DOWN_AFTER_MS, redis_sentinel_trio

pytestmark = pytest.mark.redis


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    with redis_sentinel_trio(tmp_path_factory.mktemp("trio")) as found:
        yield found


def _guard(trio, to_write: int, max_lag: int) -> None:
    with trio.primary.client() as client:
        client.config_set("min-replicas-max-lag", max_lag)
        client.config_set("min-replicas-to-write", to_write)


def test_without_min_replicas_there_is_no_bound_and_the_gate_fails(trio):
    _guard(trio, 0, 10)
    result = invoke("health", "--uri", trio.uri, "-o", "json", "--require-bounded-loss", "5")
    assert result.exit_code == 1, result.output
    details = json.loads(result.stdout)["details"]
    assert details["min_replicas_to_write"] == 0 and details["loss_bound_s"] is None
    assert details["sentinel_down_after_ms"] == DOWN_AFTER_MS
    assert "failover-timeout 10000" in details["loss_bound"]
    assert f"down-after-milliseconds {DOWN_AFTER_MS}" in details["loss_bound"]
    assert details["loss_bound"].startswith("no bound")
    assert "gate bounded-loss failed: no bound" in result.stderr


def test_min_replicas_bound_the_loss_and_the_gate_passes(trio):
    _guard(trio, 1, 5)
    try:
        result = invoke("health", "--uri", trio.uri, "-o", "json",
                        "--require-bounded-loss", "5")
        tighter = invoke("health", "--uri", trio.uri, "--require-bounded-loss", "4")
    finally:
        _guard(trio, 0, 10)
    assert result.exit_code == 0, result.output
    details = json.loads(result.stdout)["details"]
    assert details["loss_bound_s"] == 5
    assert "at most the last 5 s" in details["loss_bound"]
    assert tighter.exit_code == 1 and "up to 5 s, more than 4 s" in tighter.stderr


def test_the_table_and_doctor_say_the_bound(trio):
    _guard(trio, 0, 10)
    table = invoke("health", "--uri", trio.uri)
    doctor = invoke("doctor", "--uri", trio.uri, "-o", "json")
    assert table.exit_code == 0, table.output
    assert "loss_bound" in table.stdout and "no bound" in table.stdout
    assert "deploy.loss-bound" in doctor.stdout, doctor.output


def test_the_adapter_says_when_it_waits_for_replicas(trio):
    result = invoke("health", "--uri", trio.uri + "?wait_replicas=1", "-o", "json")
    assert result.exit_code == 0, result.output
    details = json.loads(result.stdout)["details"]
    assert details["wait_replicas"] == 1 and "the engine's client does not wait" in details["wait"]


@pytest.mark.postgres
@pytest.mark.parametrize("synchronous", [True, False], ids=["sync", "async"])
def test_postgres_is_bounded_by_a_synchronous_standby_alone(synchronous):
    from tests.support.failover_topologies import postgres_with_standby

    with postgres_with_standby(synchronous) as deployment:
        result = invoke("health", "--uri", deployment.uri, "--require-bounded-loss", "0")
    if synchronous:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 1, result.output
        assert "gate bounded-loss failed: no bound: no synchronous standby" in result.stderr
