"""The ``failover`` group on real replicated deployments started by the test
(tests/support/failover_topologies.py): a Redis primary, a replica and a Sentinel; a
PostgreSQL primary and a streaming standby, asynchronous and synchronous; a Redis pair
without a Sentinel (promoted by REPLICAOF NO ONE). Replication runs
through the suite's fault proxy and is stalled 500 ms before the primary is SIGKILLed.

The group's count of lost acknowledged turns is compared with the test's own audit: the
writers' histories against the promoted server read without the adapter, taken right
after the promotion. Every process a deployment started is gone when its test ends.

``failover.switchover`` and ``failover.isolated_primary`` run on a primary, a replica and
three sentinels (the isolation cut by the proxy the replica and sentinels reach the
primary through), and on a PostgreSQL primary and standby behind a multi-host URI: with
``wait_replicas=1`` five seeded runs of each (and of the stalled case) lose nothing;
without it the loss is counted exactly and the old primary's demotion timed.
"""

from __future__ import annotations

import pytest

from backends.conformance import ConformanceOptions, Status, run_conformance
from backends.conformance.children import AdapterRecipe, registry_recipe
from tests.support.failover_topologies import (
    WAITING,
    alive,
    independent_audit,
    postgres_with_standby,
    redis_pair,
    redis_sentinel_trio,
    redis_with_sentinel,
    trio_deployment,
)

CASE = "failover.acknowledged_turns"


def _run(deployment, tmp_path, recipe=None, seed=7):
    """The group alone on ``deployment``; its result and the independent audit."""
    history = tmp_path / "history"
    history.mkdir()
    seen: dict[str, int] = {}
    promote = deployment.topology.promote

    def promote_then_audit() -> None:
        promote()
        seen.update(independent_audit(history, deployment))

    deployment.topology.promote = promote_then_audit
    recipe = recipe or registry_recipe(deployment.backend, deployment.uri)
    options = ConformanceOptions(failover=deployment.topology, failover_history=str(history),
                                 failover_seed=seed)
    report = run_conformance(recipe.build, recipe=recipe, only=["failover"], options=options)
    return report.case(CASE), seen


def _assert_counts_agree(result, seen) -> None:
    figures = result.figures
    assert figures["torn"] == 0, result.message
    assert figures["acknowledged"] == seen["acknowledged"] > 0, (figures, seen)
    assert figures["acknowledged_lost"] == seen["lost"], (figures, seen)
    assert figures["seed"] == 7 and figures["stall_s"] == 0.5


@pytest.mark.redis
@pytest.mark.parametrize("topology", [redis_with_sentinel, redis_pair],
                         ids=["sentinel", "replicaof-no-one"])
def test_a_redis_promotion_loses_what_the_stall_held_and_counts_it_exactly(tmp_path, topology):
    with topology(tmp_path) as deployment:
        result, seen = _run(deployment, tmp_path)
        pids = deployment.pids
    _assert_counts_agree(result, seen)
    assert seen["lost"] > 0, "500 ms of stalled replication lost no acknowledged turn"
    assert result.status == Status.ADVISORY, result.message
    assert f"{seen['lost']} of {seen['acknowledged']} lost" in result.message
    assert result.figures["synchronous"] is False
    assert not [pid for pid in pids if alive(pid)]


@pytest.mark.redis
def test_a_turn_written_in_two_steps_is_caught_as_torn(tmp_path):
    with redis_with_sentinel(tmp_path) as deployment:
        recipe = AdapterRecipe("tests.support.failover_doubles:TwoStepRedisAdapter",
                               {"uri": deployment.uri}, "uri")
        result, _seen = _run(deployment, tmp_path, recipe)
    assert result.status == Status.FAILED, result.message
    assert result.figures["torn"] > 0 and "torn" in result.message


@pytest.mark.postgres
@pytest.mark.parametrize("synchronous", [False, True], ids=["async", "sync"])
def test_postgres_standby_promotion(tmp_path, synchronous):
    with postgres_with_standby(synchronous) as deployment:
        result, seen = _run(deployment, tmp_path)
        pids = deployment.pids
    _assert_counts_agree(result, seen)
    assert result.figures["synchronous"] is synchronous
    if synchronous:
        assert seen["lost"] == 0 and result.status == Status.PASSED, result.message
    else:
        assert seen["lost"] > 0 and result.status == Status.ADVISORY, result.message
    assert not [pid for pid in pids if alive(pid)]


def test_without_a_topology_the_group_never_runs(tmp_path):
    from backends.memory import MemoryBackendAdapter

    report = run_conformance(MemoryBackendAdapter, only=["failover"])
    result = report.case(CASE)
    assert result.status == Status.NOT_APPLICABLE and "--failover" in result.message


# -- the switchover and the isolated primary (a primary, a replica, three sentinels) -------

def _run_case(deployment, tmp_path, case: str, seed: int):
    """``case`` alone on ``deployment``; its result and the test's own audit: the writers'
    histories against the promoted server read without the adapter, the moment the
    writers have stopped (when the case turns to the promoted server)."""
    history = tmp_path / "history"
    history.mkdir()
    seen: dict[str, int] = {}
    recipe = registry_recipe(deployment.backend, deployment.uri)
    moved = recipe.with_uri

    def audit_then_move(uri: str):
        seen.update(independent_audit(history, deployment))
        return moved(uri)

    object.__setattr__(recipe, "with_uri", audit_then_move)
    options = ConformanceOptions(failover=deployment.topology, failover_history=str(history),
                                 failover_seed=seed)
    result = run_conformance(recipe.build, recipe=recipe, only=["failover"],
                             options=options).case(case)
    return result, seen


SCENARIOS = ["switchover", "isolated_primary"]


@pytest.mark.redis
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_waiting_for_the_replica_loses_no_acknowledged_turn(tmp_path, scenario, seed):
    with redis_sentinel_trio(tmp_path, isolatable=scenario == "isolated_primary") as trio:
        deployment = trio_deployment(trio, scenario, wait=True)
        result, seen = _run_case(deployment, tmp_path, f"failover.{scenario}", seed)
        pids = deployment.pids
    assert result.status == Status.PASSED, result.message
    figures = result.figures
    assert figures["synchronous"] is True and "wait_replicas 1" in figures["synchronous_per"]
    assert figures["acknowledged"] == seen["acknowledged"] > 0, (figures, seen)
    assert figures["acknowledged_lost"] == seen["lost"] == 0, (figures, seen)
    assert figures["torn"] == 0 and figures["seed"] == seed
    assert not [pid for pid in pids if alive(pid)]


@pytest.mark.redis
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_without_waiting_the_loss_is_counted_exactly_and_the_window_measured(
        tmp_path, scenario):
    with redis_sentinel_trio(tmp_path, isolatable=scenario == "isolated_primary") as trio:
        deployment = trio_deployment(trio, scenario, wait=False, measure_demotion=True)
        result, seen = _run_case(deployment, tmp_path, f"failover.{scenario}", 11)
    figures = result.figures
    assert result.status in (Status.PASSED, Status.ADVISORY), result.message
    assert figures["synchronous"] is False
    assert figures["acknowledged"] == seen["acknowledged"] > 0, (figures, seen)
    assert figures["acknowledged_lost"] == seen["lost"], (figures, seen)
    assert figures["torn"] == 0
    assert figures["promotion_to_demotion_s"] is not None, figures  # the old one demoted
    if seen["lost"]:
        assert result.status == Status.ADVISORY
        assert f"{seen['lost']} of {seen['acknowledged']} lost" in result.message
        assert figures["loss_window_s"] is not None
    if scenario == "isolated_primary":
        # the cut primary acknowledged turns until the sentinels' promotion was announced
        assert seen["lost"] > 0, figures


@pytest.mark.redis
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_waiting_for_the_replica_loses_nothing_when_replication_stalls(tmp_path, seed):
    with redis_with_sentinel(tmp_path) as deployment:
        deployment.uri += WAITING
        result, seen = _run(deployment, tmp_path, seed=seed)
    assert result.status == Status.PASSED, result.message
    assert result.figures["synchronous"] is True
    assert result.figures["acknowledged"] == seen["acknowledged"] > 0
    assert result.figures["acknowledged_lost"] == seen["lost"] == 0


@pytest.mark.postgres
@pytest.mark.parametrize("scenario, synchronous", [
    ("switchover", False), ("isolated_primary", True), ("isolated_primary", False)],
    ids=["switchover-async", "isolated-sync", "isolated-async"])
def test_postgres_switchover_and_isolation_on_a_multi_host_uri(tmp_path, scenario, synchronous):
    with postgres_with_standby(synchronous, scenario) as deployment:
        result, seen = _run_case(deployment, tmp_path, f"failover.{scenario}", 5)
        pids = deployment.pids
    figures = result.figures
    assert figures["torn"] == 0, result.message
    assert figures["acknowledged"] == seen["acknowledged"] > 0, (figures, seen)
    assert figures["acknowledged_lost"] == seen["lost"], (figures, seen)
    if scenario == "switchover" or synchronous:
        # a clean stop sends the standby all the WAL; a synchronous commit waits for it
        assert seen["lost"] == 0 and result.status == Status.PASSED, result.message
    else:  # the cut primary still takes the writers' turns: every one after the cut
        assert seen["lost"] > 0 and result.status == Status.ADVISORY, result.message
    assert not [pid for pid in pids if alive(pid)]
