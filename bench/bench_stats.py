"""``semvecctl stats`` over Redis sessions against a raw SCAN + pipelined read of the same
fields, and its peak Python memory at two sizes, on a private redis-server.

    python bench/bench_stats.py [--sessions 100000] [--large 1000000] [--batch 500]

time:   backends.ops.stats.collect (one pass: owners, blob-size, TTL and idle histograms
        with --assume-ttl, largest sessions) vs two floors that decode nothing and keep
        nothing: (a) SCAN + pipelined HMGET of the fields iter_sessions reads + PTTL per
        key, (b) SCAN + pipelined HSTRLEN blob, HGET owner and PTTL (the least any tool
        could read for these figures). Goal: within 2x of (a).
memory: tracemalloc's peak during collect at ``--sessions`` and ``--large`` sessions.
        Goal: within 10% (flat: a bounded number of histogram buckets, heaps of ``top``
        entries, one batch of keys at a time).

Figures on a shared machine are noisy: compare ratios, not absolute rates (best of N,
alternated, so a noisy neighbour hits both sides alike).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402

from backends.ops.stats import collect  # noqa: E402
from backends.redis import RedisBackendAdapter  # noqa: E402
from tests.support.dedicated_redis import throwaway_redis  # noqa: E402

FIELDS = ("blob", "version", "owner", "pending", "drift_exempt")
TTL = 7 * 86400


def fill(client: "redis.Redis", count: int, start: int = 0) -> None:
    """Sessions with known spreads: blobs 64 B..4 KiB (log-uniform), 50 owners, TTL left
    between 1 and 7 days under a 7-day idle TTL, one in ten without expiry."""
    rng = random.Random(start)
    pipe = client.pipeline(transaction=False)
    for i in range(start, count):
        key = f"semvec:state:bench-{i:08d}"
        size = int(64 * 2 ** rng.uniform(0, 6))
        pipe.hset(key, mapping={"blob": b"x" * size, "version": "3",
                                "owner": f"tenant-{i % 50}" if i % 7 else "",
                                "drift_exempt": "0", "pending": ""})
        if i % 10:
            pipe.expire(key, rng.randint(86400, TTL))  # none expires during the run
        if i % 2000 == 1999:
            pipe.execute()
    pipe.execute()


def floor_fields(client: "redis.Redis", batch: int) -> int:
    """(a): what iter_sessions reads, no decoding, nothing kept."""
    seen, cursor = 0, 0
    while True:
        cursor, found = client.scan(cursor, match="semvec:state:*", count=batch)
        if found:
            pipe = client.pipeline(transaction=False)
            for key in found:
                pipe.hmget(key, FIELDS)
                pipe.pttl(key)
            seen += len(pipe.execute()) // 2
        if cursor == 0:
            return seen


def floor_minimal(client: "redis.Redis", batch: int) -> int:
    """(b): the least these figures need: a blob's length, its owner, its TTL."""
    seen, cursor = 0, 0
    while True:
        cursor, found = client.scan(cursor, match="semvec:state:*", count=batch)
        if found:
            pipe = client.pipeline(transaction=False)
            for key in found:
                pipe.hstrlen(key, "blob")
                pipe.hget(key, "owner")
                pipe.pttl(key)
            seen += len(pipe.execute()) // 3
        if cursor == 0:
            return seen


def stats_pass(adapter: RedisBackendAdapter, batch: int) -> int:
    return collect(adapter, batch_size=batch, assume_ttl=TTL, with_events=False).sessions


def best_times(cases: dict[str, Callable[[], int]], repeats: int) -> dict[str, tuple[float, int]]:
    best = {name: (float("inf"), 0) for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            started = time.perf_counter()
            count = fn()
            elapsed = time.perf_counter() - started
            if elapsed < best[name][0]:
                best[name] = (elapsed, count)
    return best


def peak_kib(fn: Callable[[], int]) -> float:
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with throwaway_redis("semvec-bench-stats-", extra=("--appendonly", "no", "--save", "")) as url:
        client = redis.Redis.from_url(url)
        adapter = RedisBackendAdapter(url)
        try:
            for size in (args.sessions, args.large):
                fill(client, size, start=int(client.dbsize()))
                cases = {"floor (a) HMGET+PTTL": lambda: floor_fields(client, args.batch),
                         "floor (b) HSTRLEN+HGET+PTTL": lambda: floor_minimal(client, args.batch),
                         "stats (collect)": lambda: stats_pass(adapter, args.batch)}
                best = best_times(cases, args.repeats)
                peak = peak_kib(lambda: stats_pass(adapter, args.batch))
                print(f"{size:,} sessions (batch {args.batch}, best of {args.repeats}, alternated)")
                for name, (seconds, count) in best.items():
                    assert count >= size, (name, count, size)  # SCAN may repeat, never skip
                    print(f"  {name:30s} {count / seconds:9.0f} sessions/s ({seconds:.2f}s)")
                ours = best["stats (collect)"][0]
                print(f"  stats / floor (a): {ours / best['floor (a) HMGET+PTTL'][0]:.2f}x the time "
                      f"(goal <= 2x); / floor (b): {ours / best['floor (b) HSTRLEN+HGET+PTTL'][0]:.2f}x")
                print(f"  peak Python memory during stats: {peak:,.0f} KiB")
                sys.stdout.flush()
        finally:
            adapter.close()
            client.close()


if __name__ == "__main__":
    main()
