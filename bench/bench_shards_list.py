"""Listing a sharded PostgreSQL deployment against the sum of its shards listed alone.

    nice -n 10 python bench/bench_shards_list.py [--sessions 30000] [--shards 3] [--repeats 5]
    nice -n 10 python bench/bench_shards_list.py --no-cli     # the use case only

On one server (the embedded PostgreSQL 18 the tests use, or ``SEMVEC_BENCH_POSTGRES_URL``)
makes a deployment of ``--shards`` + 1 databases (the primary, which holds no session, and
the shards), each with the engine's tables (its own DDL: tests/support/fixtures/
engine_sql_ddl.py), and writes ``--sessions`` sessions of 2 KB (incompressible blobs)
with COPY, each on the shard the engine routes it to (HRW over blake2b). Then, ``--repeats``
times, alternating which goes first:

1. use case: ``sessions_in_id_order`` (what ``sessions list`` calls: ``iter_sessions``,
   500 rows per query) on ``PostgresAdapter(primary, shards="s0,s1,s2")``, consumed to
   the end, adapter opened and closed inside the timing; against the same call on each
   shard's database opened as an unsharded store, the three times summed;
2. CLI: ``semvecctl sessions list --uri PRIMARY --shards S0,S1,S2 -o jsonl > /dev/null``
   against the sum of ``semvecctl sessions list --uri Si -o jsonl > /dev/null``. The sum
   pays three interpreter start-ups where the sharded run pays one, so the start-up (the
   same command on the empty primary) is measured and an adjusted ratio is printed too:
   sharded / (sum - 2 x start-up).

Goal: sharded <= 1.2x the sum (medians). Also printed: the cost of the two things only
the sharded listing does per row (the placement check, three blake2b digests, and the
heap merge of the three streams), measured alone in Python, and the page query alone
(psycopg) as the store sends it (keyset on ``session_id COLLATE "C"``) and in the primary
key's order, which shows what the collation costs. The machine is shared
(2 cores): run under ``nice`` and read the ratios as noisy.
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pgseed  # noqa: E402


def list_usecase(primary: str, shards: list[str] | None) -> tuple[int, float]:
    from backends.ops.inventory import sessions_in_id_order
    from backends.postgres import PostgresAdapter

    started = time.perf_counter()
    options = {"shards": ",".join(shards)} if shards else {}
    with PostgresAdapter(primary, **options) as adapter:
        count = sum(1 for _ in sessions_in_id_order(adapter))
    return count, time.perf_counter() - started


def list_cli(primary: str, shards: list[str] | None) -> float:
    args = ["sessions", "list", "--uri", primary, "-o", "jsonl"]
    if shards:
        args += ["--shards", ",".join(shards)]
    return _pgseed.run_cli(args)


def seed(server: _pgseed.Server, sessions: int, count: int) -> tuple[str, list[str], list[int]]:
    from backends.postgres.placement import shard_index

    primary = server.create("shlist_primary")
    shards = [server.create(f"shlist_s{i}") for i in range(count)]
    for url in (primary, *shards):
        _pgseed.engine_tables(url)
    placed: list[list[int]] = [[] for _ in shards]
    for i in range(sessions):
        placed[shard_index(f"session-{i:07d}", count)].append(i)
    for url, indexes in zip(shards, placed):
        _pgseed.copy_states(url, (_pgseed.state_row(i, f"session-{i:07d}") for i in indexes))
    for url in (primary, *shards):
        _pgseed.analyze(url)
    return primary, shards, [len(p) for p in placed]


def per_row_costs(sessions: int, count: int) -> tuple[float, float]:
    """The sharded listing's own per-row work, alone: the placement check of every row
    (``Placement.places``: one HRW decision) and the k-way heap merge."""
    from backends.postgres.placement import shard_index

    ids = [f"session-{i:07d}" for i in range(sessions)]
    started = time.perf_counter()
    groups: list[list[str]] = [[] for _ in range(count)]
    for sid in ids:
        groups[shard_index(sid, count)].append(sid)
    placement = time.perf_counter() - started
    started = time.perf_counter()
    for _ in heapq.merge(*(iter(g) for g in groups), key=lambda s: s):
        pass
    merge = time.perf_counter() - started
    return placement, merge


def raw_pages(url: str, collate_c: bool, batch: int = 500) -> float:
    """The listing's page query alone (psycopg, one connection, rows fetched and dropped):
    as ``SqlStateStore._iter_placed`` sends it (keyset and ORDER BY ``COLLATE "C"``), or
    in the primary key's own order (the index the engine's table has)."""
    import psycopg

    from backends.postgres.state import SqlStateStore

    collate = ' COLLATE "C"' if collate_c else ""
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        after = None
        while True:
            where = f"session_id{collate} > %s" if after is not None else "TRUE"
            rows = conn.execute(
                f"SELECT {SqlStateStore._SUMMARY_COLUMNS} FROM semvec_session_state WHERE {where}"
                f" ORDER BY session_id{collate} LIMIT %s",
                ([after, batch] if after is not None else [batch])).fetchall()
            if len(rows) < batch:
                break
            after = rows[-1][0]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30_000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-cli", action="store_true", help="time the use case only")
    args = parser.parse_args()
    t0 = time.perf_counter()
    with _pgseed.embedded_server("semvec-pg-shlist-") as server:
        primary, shards, sizes = seed(server, args.sessions, args.shards)
        print(f"seeded {args.sessions:,} sessions x {_pgseed.BLOB_SIZE} B over {args.shards} "
              f"shards ({', '.join(f'{n:,}' for n in sizes)}) in {time.perf_counter() - t0:.1f} s")
        # warm-up: caches, and the row counts agree
        n, _ = list_usecase(primary, shards)
        singles = [list_usecase(url, None)[0] for url in shards]
        assert n == sum(singles) == args.sessions, (n, singles)

        sharded, summed = [], []
        for r in range(args.repeats):
            def one_sharded() -> None:
                sharded.append(list_usecase(primary, shards)[1])

            def one_sum() -> None:
                summed.append(sum(list_usecase(url, None)[1] for url in shards))

            for step in ((one_sharded, one_sum) if r % 2 == 0 else (one_sum, one_sharded)):
                step()
        print(f"\nuse case (sessions_in_id_order -> iter_sessions, batch 500), {args.sessions:,} rows:")
        print(f"  sharded, one adapter over {args.shards} shards   {_pgseed.fmt(sharded)}")
        print(f"  sum of {args.shards} unsharded listings          {_pgseed.fmt(summed)}")
        print(f"  ratio sharded / sum                    {_pgseed.median(sharded) / _pgseed.median(summed):.2f}x"
              " (goal <= 1.2x)")
        placement, merge = per_row_costs(args.sessions, args.shards)
        print(f"  sharded-only Python work alone: placement check {placement:.2f} s, "
              f"heap merge {merge:.2f} s")

        raw_c = [sum(raw_pages(url, True) for url in shards) for _ in range(3)]
        raw_ix = [sum(raw_pages(url, False) for url in shards) for _ in range(3)]
        print(f"  the page query alone, all {args.shards} shards, psycopg: as sent (COLLATE \"C\") "
              f"{_pgseed.median(raw_c):.2f} s, in the primary key's order {_pgseed.median(raw_ix):.2f} s "
              f"({_pgseed.median(raw_c) / _pgseed.median(raw_ix):.1f}x: the COLLATE \"C\" keyset "
              "cannot use the index)")

        if not args.no_cli:
            list_cli(primary, shards)  # warm-up (imports in the page cache)
            cli_sharded, cli_sum, startup = [], [], []
            for r in range(args.repeats):
                steps = [lambda: cli_sharded.append(list_cli(primary, shards)),
                         lambda: cli_sum.append(sum(list_cli(url, None) for url in shards)),
                         lambda: startup.append(list_cli(primary, None))]
                for step in (steps if r % 2 == 0 else steps[::-1]):
                    step()
            adjusted = _pgseed.median(cli_sum) - (args.shards - 1) * _pgseed.median(startup)
            print(f"\nCLI: semvecctl sessions list -o jsonl > /dev/null, {args.sessions:,} rows:")
            print(f"  --uri PRIMARY --shards S0,..,S{args.shards - 1}        {_pgseed.fmt(cli_sharded)}")
            print(f"  sum of {args.shards} x --uri Si                {_pgseed.fmt(cli_sum)}")
            print(f"  start-up (empty primary, no --shards) {_pgseed.fmt(startup)}")
            print(f"  ratio sharded / sum                    {_pgseed.median(cli_sharded) / _pgseed.median(cli_sum):.2f}x"
                  " (goal <= 1.2x)")
            print(f"  ratio sharded / (sum - {args.shards - 1} x start-up)     "
                  f"{_pgseed.median(cli_sharded) / adjusted:.2f}x")
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s (shared machine: noisy)")


if __name__ == "__main__":
    main()
