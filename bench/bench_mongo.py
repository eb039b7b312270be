"""Client-side costs of the Mongo backend that do not depend on the server.

What it measures (all in this process):
- item-mirror sync planning: the diff of N items against the stored view, for a first
  sync, an idempotent re-sync and a re-sync with 10% of items changed;
- client-side reciprocal-rank fusion of three recorded sub-pipeline results;
- building the retrieval sub-pipelines.

Storage here is mongomock (a fake), so the sync and read figures include the fake's
own overhead and say nothing about a real server's latency; they bound what our code
adds. Run: python bench/bench_mongo.py [N]
"""

from __future__ import annotations

import random
import statistics
import sys
import time
import uuid


def timed(fn, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    import mongomock

    sys.path.insert(0, ".")
    import tests.support.fixtures.mongo  # noqa: F401 - mongomock bulk-write shim
    from backends.contract import MemoryItem, RetrievalContext
    from backends.mongo import MongoBackendAdapter
    from backends.mongo.retrieval import fuse_client_side, sub_pipelines

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    dims = 384
    rng = random.Random(7)
    items = [MemoryItem(f"i{i}", f"memory item number {i}",
                        embedding=tuple(rng.random() for _ in range(dims))) for i in range(n)]
    adapter = MongoBackendAdapter(client=mongomock.MongoClient(), database="bench", item_sync=True)
    mirror = adapter.item_mirror()
    session = f"s-{uuid.uuid4().hex[:6]}"

    started = time.perf_counter()
    first = adapter.sync_items(session, items)
    first_s = time.perf_counter() - started
    plan_unchanged = timed(lambda: mirror.plan_sync(session, items))
    changed = [MemoryItem(i.item_id, i.text + " (edited)", embedding=i.embedding) if k % 10 == 0 else i
               for k, i in enumerate(items)]
    plan_changed = timed(lambda: mirror.plan_sync(session, changed))
    print(f"item mirror, {n} items x {dims} dims (mongomock):")
    print(f"  first sync (plan + bulk insert): {first_s * 1000:8.1f} ms  {first}")
    print(f"  re-sync plan, nothing changed:   {plan_unchanged * 1000:8.1f} ms")
    print(f"  re-sync plan, 10% changed:       {plan_changed * 1000:8.1f} ms")

    ids = [f"{session}:i{i}" for i in range(n)]
    lists = {name: rng.sample(ids, min(200, n)) for name in ("semantic", "lexical", "recency")}
    reps = 200
    fuse = timed(lambda: [fuse_client_side(lists, 200) for _ in range(reps)]) / reps
    print(f"client-side RRF of 3 x 200 ids:    {fuse * 1e6:8.1f} us per query")
    ctx = RetrievalContext(session_id=session, query_embedding=items[0].embedding,
                           query_text="memory", use_bm25=True, top_k=10)
    build = timed(lambda: [sub_pipelines(ctx, 40) for _ in range(reps)]) / reps
    print(f"building the 3 sub-pipelines:      {build * 1e6:8.1f} us per query")
    read = timed(lambda: mirror.fetch_live(session, lists["semantic"]))
    print(f"consistent read of 200 ids:        {read * 1000:8.1f} ms (mongomock)")
    print("figures are medians of 5 runs on a shared machine: expect noise of tens of percent")
    adapter.close()


if __name__ == "__main__":
    main()
