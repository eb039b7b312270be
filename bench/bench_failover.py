"""How long the ``failover`` conformance group takes per backend (goal: under 60 s each),
on the loopback topologies the suite's tests start (tests/support/failover_topologies.py):
Redis with a Sentinel, a Redis pair (REPLICAOF NO ONE), PostgreSQL with an asynchronous
and with a synchronous standby.

    python bench/bench_failover.py [--runs 3]

For each topology and run: the seconds to start it, the seconds the group's one case
took (writers, stall, failure, promotion, audit, one more turn each), and its counts.
Figures on a shared 2-core machine are noisy; the case's own share is what the 60 s
goal is about.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.conformance import ConformanceOptions, run_conformance  # noqa: E402
from backends.conformance.children import registry_recipe  # noqa: E402
from tests.support.failover_topologies import (  # noqa: E402
    postgres_with_standby,
    redis_pair,
    redis_with_sentinel,
)

TOPOLOGIES = {
    "redis + sentinel": lambda root: redis_with_sentinel(root),
    "redis pair": lambda root: redis_pair(root),
    "postgres async standby": lambda root: postgres_with_standby(False),
    "postgres sync standby": lambda root: postgres_with_standby(True),
}


def one_run(name: str) -> tuple[float, float, dict]:
    with tempfile.TemporaryDirectory(prefix="semvec-bench-failover-") as tmp:
        started = time.perf_counter()
        with TOPOLOGIES[name](Path(tmp)) as deployment:
            up = time.perf_counter() - started
            recipe = registry_recipe(deployment.backend, deployment.uri)
            options = ConformanceOptions(failover=deployment.topology)
            report = run_conformance(recipe.build, recipe=recipe, only=["failover"],
                                     options=options)
    result = report.case("failover.acknowledged_turns")
    return up, result.duration, {"status": result.status, **result.figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'topology':24} {'start s':>8} {'case s':>8} {'max s':>7}  counts (last run)")
    for name in TOPOLOGIES:
        runs = [one_run(name) for _ in range(args.runs)]
        ups, cases = [r[0] for r in runs], [r[1] for r in runs]
        last = runs[-1][2]
        counts = (f"{last['status']}: {last['acknowledged']} acknowledged, "
                  f"{last['acknowledged_lost']} lost, {last['torn']} torn, "
                  f"promotion {last['promotion_s']}s")
        print(f"{name:24} {statistics.median(ups):8.2f} {statistics.median(cases):8.2f} "
              f"{max(u + c for u, c in zip(ups, cases)):7.2f}  {counts}")
    print("(medians of the runs; max s: the slowest start + case; goal: under 60 s each)")


if __name__ == "__main__":
    main()
