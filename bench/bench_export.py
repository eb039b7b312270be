"""Export throughput and peak memory: 100,000 sessions of 2 KB from a private Redis.

    python bench/bench_export.py [--sessions 100000] [--small 10000] [--gzip]
    python bench/bench_export.py --with-events 500   # sessions with 10 events each

Seeds the engine's hash layout (``semvec:state:{id}``: blob, version, owner,
drift_exempt, pending) with pipelined HSETs, then runs ``export_to_path`` at --small
and at --sessions sessions under tracemalloc, printing sessions/s and the peak of
Python allocations. Goal: the two peaks within 10% of each other (memory flat in the
number of sessions). tracemalloc slows Python down, so one more untraced run gives
the rate. Figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402

from backends.transfer import export_to_path  # noqa: E402
from backends.redis import RedisBackendAdapter  # noqa: E402
from tests.support.dedicated_redis import throwaway_redis  # noqa: E402

BLOB_SIZE = 2048


def seed(url: str, start: int, stop: int) -> None:
    """Sessions start..stop-1 in the engine layout, 1,000 HSETs per pipeline."""
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for i in range(start, stop):
        blob = (i.to_bytes(8, "big") * (BLOB_SIZE // 8))
        pipe.hset(f"semvec:state:session-{i:07d}", mapping={
            "blob": blob, "version": str(1 + i % 7), "owner": "tenant/agent" if i % 3 else "",
            "drift_exempt": "0", "pending": "confirm?" if i % 11 == 0 else "",
        })
        if (i - start) % 1000 == 999:
            pipe.execute()
    pipe.execute()
    client.close()


def run_export(url: str, out: Path, traced: bool) -> tuple[int, float, int]:
    with RedisBackendAdapter(url) as adapter:
        if traced:
            tracemalloc.start()
            tracemalloc.reset_peak()
        started = time.perf_counter()
        result = export_to_path(adapter, out, source_uri="redis://bench")
        elapsed = time.perf_counter() - started
        peak = 0
        if traced:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
    os.unlink(out)
    return result.count, elapsed, peak


def with_events(sessions: int) -> None:
    """``export --with-events``: every session carries 10 events of 20 users. Redis keeps
    no per-session event index, so the export maps sessions to users in one SCAN."""
    import uuid

    from backends.contract import MemoryEvent

    with throwaway_redis("semvec-bench-export-ev-") as url, RedisBackendAdapter(url) as adapter:
        for i in range(sessions):
            events = [MemoryEvent(event_id=str(uuid.uuid4()), user_id=f"user-{(i + k) % 20}",
                                  content=f"event {k}", session_id=f"s-{i:05d}",
                                  embedding=(0.1, 0.2, 0.3)) for k in range(10)]
            adapter.commit_turn(f"s-{i:05d}", b"x" * 256, expected_version=None, events=events)
        out = Path(tempfile.mkdtemp(prefix="semvec-bench-out-")) / "a.jsonl"
        started = time.perf_counter()
        result = export_to_path(adapter, out, source_uri="redis://bench", with_events=True)
        elapsed = time.perf_counter() - started
        shutil.rmtree(out.parent, ignore_errors=True)
        print(f"export --with-events {result.count:,} sessions, {sessions * 10:,} events: "
              f"{elapsed:6.2f} s ({result.count / elapsed:,.0f} sessions/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--gzip", action="store_true", help="write .jsonl.gz instead of .jsonl")
    parser.add_argument("--with-events", type=int, metavar="SESSIONS",
                        help="time export --with-events over this many sessions instead")
    args = parser.parse_args()
    if args.with_events:
        with_events(args.with_events)
        return
    suffix = ".jsonl.gz" if args.gzip else ".jsonl"
    workdir = Path(tempfile.mkdtemp(prefix="semvec-bench-out-"))
    try:
        with throwaway_redis("semvec-bench-export-") as url:
            t0 = time.perf_counter()
            seed(url, 0, args.small)
            peaks = {}
            for n in (args.small, args.sessions):
                if n != args.small:
                    seed(url, args.small, n)
                count, elapsed, peak = run_export(url, workdir / f"a{suffix}", traced=True)
                assert count == n, (count, n)
                peaks[n] = peak
                print(f"export {n:>7,} sessions x {BLOB_SIZE} B (tracemalloc on):  "
                      f"{n / elapsed:8,.0f} sessions/s  {elapsed:6.1f} s  peak {peak / 1e6:6.2f} MB")
            count, elapsed, _ = run_export(url, workdir / f"a{suffix}", traced=False)
            print(f"export {count:>7,} sessions x {BLOB_SIZE} B (untraced):        "
                  f"{count / elapsed:8,.0f} sessions/s  {elapsed:6.1f} s")
            small, large = peaks[args.small], peaks[args.sessions]
            growth = (large - small) / small * 100
            verdict = "OK" if abs(growth) <= 10 else "MISSED"
            print(f"peak memory {args.small:,} -> {args.sessions:,} sessions: {growth:+.1f}% "
                  f"(goal within 10%: {verdict}); total bench time {time.perf_counter() - t0:.0f} s")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
