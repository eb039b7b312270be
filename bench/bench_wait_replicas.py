"""What ``wait_replicas=1`` costs a turn: ``commit_turn`` (one event, as the engine's turns
carry) against a Redis primary with one replica on loopback, with and without the WAIT
that follows every write, p50 and p99 (microseconds).

    python bench/bench_wait_replicas.py [--turns 5000] [--runs 3]

Each run starts a fresh primary and replica (tests/support/dedicated_redis.py), commits
``--turns`` turns on fresh sessions each way (alternating, so a noisy moment hits both),
then stops them. The WAIT rides in the same pipelined round trip as the script; what it
adds is the replica's acknowledgement of the write, one more loopback hop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.conformance.children import turn_event  # noqa: E402
from backends.redis import RedisBackendAdapter  # noqa: E402
from tests.support.dedicated_redis import DedicatedRedis, start_replica  # noqa: E402


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def one_run(turns: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="semvec-bench-wait-") as tmp:
        primary = DedicatedRedis(Path(tmp) / "primary", extra=["--appendonly", "no"])
        primary.start()
        replica = None
        try:
            replica = start_replica(primary, Path(tmp) / "replica")
            adapters = {"without": RedisBackendAdapter(primary.url),
                        "wait_replicas=1": RedisBackendAdapter(
                            primary.url + "?wait_replicas=1&wait_timeout_ms=1000")}
            timings: dict[str, list[float]] = {name: [] for name in adapters}
            for n in range(turns):
                for name, adapter in adapters.items():
                    sid = f"bench-{name}-{n}"
                    event = turn_event("bench-user", sid, None, f"e{n}")
                    started = time.perf_counter()
                    adapter.commit_turn(sid, b"x" * 512, expected_version=None,
                                        events=[event])
                    timings[name].append((time.perf_counter() - started) * 1e6)
            for adapter in adapters.values():
                adapter.close()
            return timings
        finally:
            if replica is not None:
                replica.kill()
            primary.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'commit_turn':18} {'p50 us':>9} {'p99 us':>9}  (median of {args.runs} runs, "
          f"{args.turns} turns each)")
    runs = [one_run(args.turns) for _ in range(args.runs)]
    for name in runs[0]:
        p50 = statistics.median(_percentile(r[name], 0.50) for r in runs)
        p99 = statistics.median(_percentile(r[name], 0.99) for r in runs)
        print(f"{name:18} {p50:9.0f} {p99:9.0f}")


if __name__ == "__main__":
    main()
