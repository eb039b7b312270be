"""`semvecctl doctor` over a large Redis store against a raw SCAN of the same keys, on a
private redis-server (AOF on, so the store is sound and the audit finds nothing).

    python bench/bench_doctor.py [--sessions 1000000] [--events 1000000] [--per-user 10]

Seeds N sessions (bench_redis.fill: pipelined HSETs) and M events in the engine's layout
(an event hash, both index entries and the counter per user, pipelined), then times:

  raw    SCAN MATCH semvec:* COUNT batch, counting keys (no reads at all: the floor);
  doctor the whole audit (state strict reads and TTLs, every event's fields and index
         membership, every index entry's event, duplicates, gaps, counters).

and, for context, a pipelined redis-py read of every key once (the fields doctor looks
at, each index whole, each counter) that judges nothing.

Goal: doctor at most 2x the raw scan, and flat memory: tracemalloc peak of the audit at
a tenth of the store against the full store. Figures on a shared machine are noisy:
compare the ratio, not the rates.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis  # noqa: E402

from bench_redis import fill, peak_kib, timed_pair  # noqa: E402
from backends.redis.audit import RedisAudit  # noqa: E402
from backends.redis import RedisBackendAdapter  # noqa: E402
from tests.support.dedicated_redis import throwaway_redis  # noqa: E402


def seed_events(client: "redis.Redis", start: int, stop: int, per_user: int) -> None:
    """Events ``start..stop`` in the engine's layout: user ``i // per_user``, sequence
    ``i % per_user + 1``, both index entries, and the counter at the user's last event."""
    embedding = json.dumps([0.125] * 8)
    pipe = client.pipeline(transaction=False)
    for i in range(start, stop):
        user, seq = f"user-{i // per_user:07d}", i % per_user + 1
        event_id = str(uuid.UUID(int=i + 1, version=4))
        pipe.hset(f"semvec:events:e:{event_id}", mapping={
            "event_id": event_id, "user_id": user, "owner_subject": "", "session_id": "",
            "created_at": "2026-01-01T00:00:00+00:00", "content": "c", "embedding": embedding,
            "meta": "{}", "source_event_id": "", "sequence": str(seq)})
        pipe.zadd(f"semvec:events:u:{user}", {event_id: seq})
        pipe.zadd(f"semvec:events:t:{user}", {event_id: 1767225600.0 + seq})
        if seq == per_user or i == stop - 1:
            pipe.set(f"semvec:events:seq:{user}", seq)
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def raw_scan(client: "redis.Redis", batch: int) -> int:
    seen, cursor = 0, 0
    while True:
        cursor, found = client.scan(cursor, match="semvec:*", count=batch)
        seen += len(found)
        if cursor == 0:
            return seen


def raw_read(client: "redis.Redis", batch: int) -> int:
    """A second reference: SCAN and read every key once with pipelined redis-py calls
    (the fields doctor looks at, each index whole, each counter), judging nothing."""
    seen, cursor = 0, 0
    event_fields = ("event_id", "user_id", "created_at", "sequence", "source_event_id",
                    "embedding", "meta")
    while True:
        cursor, found = client.scan(cursor, match="semvec:*", count=batch)
        pipe = client.pipeline(transaction=False)
        for key in found:
            if key.startswith(b"semvec:state:"):
                pipe.hmget(key, ("version", "owner", "pending"))
                pipe.hexists(key, "blob")
            elif key.startswith(b"semvec:events:e:"):
                pipe.hmget(key, event_fields)
            elif key.startswith((b"semvec:events:u:", b"semvec:events:t:")):
                pipe.zrange(key, 0, -1, withscores=True)
            else:
                pipe.get(key)
        pipe.execute()
        seen += len(found)
        if cursor == 0:
            return seen


def doctor(adapter: RedisBackendAdapter, batch: int) -> int:
    audit = RedisAudit(adapter, batch=batch)
    findings = list(audit.run())
    assert not findings, findings[:3]
    return audit.scanned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--per-user", type=int, default=10)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with throwaway_redis("semvec-bench-doctor-", extra=("--appendonly", "yes")) as url:
        client = redis.Redis.from_url(url)
        adapter = RedisBackendAdapter(url)
        small_s, small_e = max(args.sessions // 10, 1), max(args.events // 10, 1)
        started = time.perf_counter()
        fill(client, small_s)
        seed_events(client, 0, small_e, args.per_user)
        mem_small = peak_kib(lambda: doctor(adapter, args.batch))
        keys_small = client.dbsize()
        fill(client, args.sessions, start=small_s)
        seed_events(client, small_e, args.events, args.per_user)
        seeded = time.perf_counter() - started
        keys = client.dbsize()
        mem_large = peak_kib(lambda: doctor(adapter, args.batch))
        (raw_s, raw_n), (doc_s, doc_n) = timed_pair(lambda: raw_scan(client, args.batch),
                                                    lambda: doctor(adapter, args.batch),
                                                    repeats=args.repeats)
        assert raw_n == doc_n == keys, (raw_n, doc_n, keys)
        started = time.perf_counter()
        read_n = raw_read(client, args.batch)
        read_s = time.perf_counter() - started
        print(f"doctor over {args.sessions:,} sessions and {args.events:,} events "
              f"({keys:,} keys, {args.per_user} events per user; seeded in {seeded:.0f}s; "
              f"batch {args.batch}, best of {args.repeats}, alternated)")
        print(f"  raw SCAN semvec:*   {raw_n / raw_s:10.0f} keys/s ({raw_s:.2f}s)")
        print(f"  doctor (full audit) {doc_n / doc_s:10.0f} keys/s ({doc_s:.2f}s)  "
              f"{doc_s / raw_s:5.2f}x the raw scan   goal <= 2.00x")
        print(f"  SCAN + pipelined reads of every key (no checks) {read_n / read_s:10.0f} keys/s "
              f"({read_s:.2f}s)  doctor is {read_s / doc_s:4.2f}x faster")
        print(f"  peak Python memory, doctor: {mem_small:8.0f} KiB at {keys_small:,} keys  "
              f"{mem_large:8.0f} KiB at {keys:,} keys  ({mem_large / mem_small:.2f}x)")
        adapter.close()
        client.close()


if __name__ == "__main__":
    main()
