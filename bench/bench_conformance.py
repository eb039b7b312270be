"""Wall time of a full conformance run against memory and a private local redis-server
(goal: < 20 s against local Redis; issue 25's bar for a full run is 60 s), plus the
slowest cases. The Redis runs pass the recipe, so the cross-process groups (processes,
20 SIGKILLs, the proxied connection) are included. Bounded: a few runs each.

    python bench/bench_conformance.py [--runs 5] [--redis-url redis://...]

Without --redis-url a throw-away redis-server (from PATH) is started on a free port in a
temporary directory, without persistence, and stopped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.dedicated_redis import throwaway_redis  # noqa: E402


def bench(label: str, factory, name: str, runs: int, recipe=None) -> None:
    from backends.conformance import run_conformance

    walls, slowest = [], {}
    for _ in range(runs):
        started = time.perf_counter()
        report = run_conformance(factory, selected_name=name, recipe=recipe)
        walls.append(time.perf_counter() - started)
        if not report.ok:
            raise SystemExit(f"{label}: {report.summary()}")
        for case in report.cases:
            slowest[case.case_id] = max(slowest.get(case.case_id, 0.0), case.duration)
    top = sorted(slowest.items(), key=lambda kv: -kv[1])[:3]
    print(f"{label:24} level {report.level:7} {len(report.cases)} cases  "
          f"median {statistics.median(walls) * 1000:8.1f} ms  max {max(walls) * 1000:8.1f} ms")
    print("  slowest: " + ", ".join(f"{cid} {d * 1000:.1f} ms" for cid, d in top))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--redis-url")
    args = parser.parse_args()
    from backends.conformance.children import registry_recipe
    from backends.memory import MemoryBackendAdapter
    from backends.redis import RedisBackendAdapter

    bench("memory", MemoryBackendAdapter, "memory", args.runs)
    if args.redis_url:
        bench("redis (given)", lambda: RedisBackendAdapter(args.redis_url), "redis", args.runs,
              registry_recipe("redis", args.redis_url))
    else:
        # AOF on: a Redis without it is not durable, and the run would not be certified
        with throwaway_redis("semvec-bench-conf-", extra=("--appendonly", "yes")) as url:
            bench("redis (local, private)", lambda: RedisBackendAdapter(url), "redis",
                  args.runs, registry_recipe("redis", url))
    print("note: shared 2-core machine; figures are indicative, not stable")


if __name__ == "__main__":
    main()
