"""Peak memory of the CLI's outputs, each run as its own process on a private Redis:

    python bench/bench_flat_memory.py [--sessions 200000] [--events 50000]

1. ``sessions list -o json`` against ``-o jsonl`` over --sessions sessions (the jsonl run
   streams one line per session: the floor a streamed JSON document should reach);
   ``--sort size`` with and without ``--limit`` shows what sorting costs (the
   measurement's sensitivity too: without a limit every summary is held);
2. ``events export --user U --out FILE`` of one user with --events events against
   ``events list --user U -o jsonl`` (the log read page by page and printed as it
   comes: the streaming floor of reading that log).

Peak memory is the child's maximum resident set size (``wait4``'s ``ru_maxrss``), so
the figures include the interpreter and its imports (the ``--limit 1`` run prints that
base). Goal: each pair within 1.2x. Figures on a shared machine are noisy; RSS varies by
a few MB between runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from backends.contract import MemoryEvent  # noqa: E402
from backends.redis import RedisBackendAdapter  # noqa: E402
from tests.support.dedicated_redis import throwaway_redis  # noqa: E402

USER = "bench-user"


def seed_sessions(url: str, count: int) -> None:
    """``count`` sessions in the engine's hash layout, 1,000 HSETs per pipeline."""
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for i in range(count):
        pipe.hset(f"semvec:state:session-{i:07d}", mapping={
            "blob": i.to_bytes(8, "big") * 32, "version": str(1 + i % 7),
            "owner": "tenant/agent" if i % 3 else "", "drift_exempt": "0",
            "pending": "confirm?" if i % 11 == 0 else "",
        })
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    client.close()


def seed_events(url: str, count: int) -> None:
    """One user's log of ``count`` numbered events (64-dim embeddings, 200-character
    content), restored 1,000 per call."""
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with RedisBackendAdapter(url) as adapter:
        store = adapter.event_store()
        for start in range(0, count, 1000):
            batch = [MemoryEvent(event_id=str(uuid.uuid4()), user_id=USER,
                                 content=f"turn {n} " + "x" * 192,
                                 created_at=t0 + timedelta(seconds=n),
                                 embedding=tuple((n % 97) / 97.0 for _ in range(64)),
                                 meta={"turn": n}, owner_subject="acme",
                                 session_id=f"session-{n % 50:07d}").with_sequence(n + 1)
                     for n in range(start, min(start + 1000, count))]
            store.restore_events(batch)


def peak_rss_mb(args: list[str]) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of ``semvecctl args`` with stdout discarded."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SEMVEC_SESSION_BACKEND": ""}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "semvecctl", *args], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    errors = proc.stderr.read().decode("utf-8", "replace")
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"semvecctl {' '.join(args)} failed ({proc.returncode}): {errors[-500:]}")
    return usage.ru_maxrss / 1024, elapsed  # ru_maxrss is in KB on Linux


def report(name: str, figure: tuple[float, float]) -> float:
    print(f"  {name:<44} {figure[0]:8.1f} MB  {figure[1]:6.1f} s")
    return figure[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200_000)
    parser.add_argument("--events", type=int, default=50_000)
    options = parser.parse_args()
    with throwaway_redis("semvec-bench-flat-") as url:
        started = time.perf_counter()
        seed_sessions(url, options.sessions)
        seed_events(url, options.events)
        print(f"seeded {options.sessions:,} sessions and {options.events:,} events of one user "
              f"in {time.perf_counter() - started:.1f}s")
        uri = ["--uri", url]
        print(f"sessions list over {options.sessions:,} sessions:")
        report("base (--limit 1 -o json)", peak_rss_mb(["sessions", "list", *uri, "--limit", "1",
                                                        "-o", "json"]))
        jsonl = report("-o jsonl", peak_rss_mb(["sessions", "list", *uri, "-o", "jsonl"]))
        as_json = report("-o json", peak_rss_mb(["sessions", "list", *uri, "-o", "json"]))
        print(f"  json / jsonl = {as_json / jsonl:.2f}x (goal <= 1.2x)")
        # what sorting costs: a heap of --limit rows, or every summary without a limit
        report("--sort size --limit 20 -o jsonl", peak_rss_mb(
            ["sessions", "list", *uri, "--sort", "size", "--limit", "20", "-o", "jsonl"]))
        report("--sort size -o jsonl (every summary held)", peak_rss_mb(
            ["sessions", "list", *uri, "--sort", "size", "-o", "jsonl"]))
        print(f"events of one user ({options.events:,} events):")
        floor = report("events list -o jsonl (streaming floor)",
                       peak_rss_mb(["events", "list", "--user", USER, *uri, "-o", "jsonl"]))
        with tempfile.TemporaryDirectory() as tmp:
            exported = report("events export --out FILE",
                              peak_rss_mb(["events", "export", "--user", USER, *uri,
                                           "--out", str(Path(tmp) / "log.jsonl")]))
        print(f"  export / floor = {exported / floor:.2f}x (goal <= 1.2x)")


if __name__ == "__main__":
    main()
