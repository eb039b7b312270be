"""`events list` and `sessions prune` stream: rate and peak memory against store size.

    python bench/bench_maintenance.py [--events 50000] [--sessions 100000]

On a private Redis: one user's log of --events/10 and --events events (written with
``restore_events``) read with ``backends.ops.eventlog.iter_events``; then --sessions/10 and
--sessions sessions (engine hash layout, idle TTL) judged by ``backends.ops.prune.find_idle``
(preview, every session idle). Each run under tracemalloc prints items/s and the peak of
Python allocations; goal: the peaks within 10% of each other (flat memory). The raw SCAN
of the same session keys is timed beside the prune preview for scale. Figures on a shared
machine are noisy.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402

from backends.contract import MemoryEvent  # noqa: E402
from backends.ops.eventlog import iter_events  # noqa: E402
from backends.ops.prune import PruneResult, find_idle  # noqa: E402
from backends.redis import RedisBackendAdapter  # noqa: E402
from tests.support.dedicated_redis import throwaway_redis  # noqa: E402

TTL = 400_000


def seed_events(adapter: RedisBackendAdapter, start: int, stop: int) -> None:
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    store = adapter.event_store()
    for lo in range(start, stop, 1000):
        store.restore_events([
            MemoryEvent(event_id=str(uuid.uuid4()), user_id="bench-user", content=f"event {i}",
                        created_at=base + timedelta(seconds=i), embedding=[0.1] * 16,
                        session_id=f"s-{i % 100}", sequence=i + 1)
            for i in range(lo, min(stop, lo + 1000))])


def seed_sessions(url: str, start: int, stop: int) -> None:
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for i in range(start, stop):
        key = f"semvec:state:idle-{i:07d}"
        pipe.hset(key, mapping={"blob": b"x" * 256, "version": "1", "owner": "",
                                "drift_exempt": "0", "pending": ""})
        pipe.expire(key, TTL - 2 * 86400)
        if (i - start) % 1000 == 999:
            pipe.execute()
    pipe.execute()
    client.close()


def traced(work) -> tuple[int, float, int]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    started = time.perf_counter()
    count = work()
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return count, elapsed, peak


def raw_scan(url: str) -> float:
    client = redis.Redis.from_url(url)
    started = time.perf_counter()
    n = sum(1 for _ in client.scan_iter(match="semvec:state:*", count=500))
    elapsed = time.perf_counter() - started
    client.close()
    assert n > 0
    return elapsed


def report(what: str, sizes: list[int], peaks: dict[int, int]) -> None:
    small, large = peaks[sizes[0]], peaks[sizes[1]]
    growth = (large - small) / small * 100
    verdict = "OK" if abs(growth) <= 10 else "MISSED"
    print(f"{what}: peak memory {sizes[0]:,} -> {sizes[1]:,}: {growth:+.1f}% (goal within 10%: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--sessions", type=int, default=100_000)
    args = parser.parse_args()
    with throwaway_redis("semvec-bench-maint-") as url, \
            RedisBackendAdapter(url, ttl_seconds=TTL) as adapter:
        sizes, peaks, done = [args.events // 10, args.events], {}, 0
        for n in sizes:
            seed_events(adapter, done, n)
            done = n
            count, elapsed, peak = traced(lambda: sum(1 for _ in iter_events(adapter.event_store(),
                                                                             "bench-user")))
            assert count == n, (count, n)
            peaks[n] = peak
            print(f"events list {n:>9,} events:   {n / elapsed:9,.0f} events/s  "
                  f"{elapsed:6.2f} s  peak {peak / 1e6:6.2f} MB (tracemalloc on)")
        started = time.perf_counter()
        count = sum(1 for _ in iter_events(adapter.event_store(), "bench-user"))
        print(f"events list {count:>9,} events:   {count / (time.perf_counter() - started):9,.0f} "
              "events/s (untraced)")
        report("events list", sizes, peaks)
        sizes, peaks, done = [args.sessions // 10, args.sessions], {}, 0
        for n in sizes:
            seed_sessions(url, done, n)
            done = n
            count, elapsed, peak = traced(lambda: sum(1 for _ in find_idle(
                adapter, timedelta(days=1), PruneResult(), assume_ttl=TTL)))
            assert count == n, (count, n)
            peaks[n] = peak
            scan = raw_scan(url)
            print(f"prune preview {n:>7,} sessions: {n / elapsed:9,.0f} sessions/s  "
                  f"{elapsed:6.2f} s  peak {peak / 1e6:6.2f} MB (tracemalloc on); raw SCAN {scan:.2f} s")
        started = time.perf_counter()
        count = sum(1 for _ in find_idle(adapter, timedelta(days=1), PruneResult(), assume_ttl=TTL))
        elapsed = time.perf_counter() - started
        print(f"prune preview {count:>7,} sessions: {count / elapsed:9,.0f} sessions/s (untraced), "
              f"{elapsed / raw_scan(url):.1f}x the raw SCAN")
        report("prune preview", sizes, peaks)


if __name__ == "__main__":
    main()
