"""Resharding 3 -> 4 shards (``shards run``'s bulk pass): what it writes, and how fast
against a COPY floor of exactly the rows that move.

    python bench/bench_shards.py [--sessions 20000] [--blob 2048] [--repeat 5]

On one PostgreSQL server (the embedded bundle the tests use, or
``SEMVEC_BENCH_POSTGRES_URL``): a primary and four databases; ``--sessions`` sessions of
``--blob`` bytes seeded on the first three as the engine places them (HRW over 3). Then:

1. bulk pass: ``run_reshard`` (state file, journal, intents, the batch restore) from the
   3-shard list to the 4-shard list, timed; the new shard's tables exist beforehand (as
   ``indexes ensure`` or the first write makes them), outside the timing;
2. bytes written: the row bytes (``pg_column_size``) the pass added on every database,
   against the row bytes of the moved sessions on their old shards; and the rows
   inserted/updated/deleted per database (``pg_stat_user_tables``): only the new shard
   may change, by exactly the moves;
3. floors, timed right after each bulk pass so that each ratio compares neighbours in
   time: the COPY floor of the goal, the moved rows COPYed from their old shards to the
   new one (binary ``COPY (SELECT ... WHERE session_id = ANY(ids)) TO STDOUT`` on each
   old shard piped, bytes as they come, into binary ``COPY ... FROM STDIN``: exactly
   the rows, no row parsed, none of a pass's own work of finding which rows move and
   recording them); and its write half alone, the binary COPY FROM of the moved rows
   already in memory (no move can skip the read, so this floor is shown, not the
   goal); then the rows read by id and COPYed (a best).

Goals (issue 38 part 3): bytes written <= 1.05x the moved sessions' bytes; the bulk
pass's rate >= 0.5x the COPY floor's: the median of ``--repeat`` pass/floor ratios
(each pass onto a fresh target with a fresh state file). The machine is shared and
noisy: read the figures as orders of magnitude, rerun before drawing conclusions.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_migrate import pg_server  # noqa: E402

COLUMNS = ("session_id", "state_blob", "version", "drift_exempt", "owner_subject",
           "pending_message", "updated_at")
TYPES = ["text", "bytea", "int4", "bool", "text", "text", "timestamp"]


def seed(shards: list[str], n: int, blob: int) -> None:
    import datetime

    import psycopg

    from backends.postgres.placement import shard_index

    now = datetime.datetime(2026, 1, 1)
    per: dict[int, list[tuple]] = {i: [] for i in range(len(shards))}
    rng = random.Random(38)  # incompressible blobs: the bytes stored are the bytes moved
    for i in range(n):
        sid = f"session-{i:07d}"
        per[shard_index(sid, len(shards))].append(
            (sid, rng.randbytes(blob), 1 + i % 7, False,
             "tenant/agent" if i % 3 else None, "confirm?" if i % 11 == 0 else None, now))
    for i, url in enumerate(shards):
        with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
            with cur.copy(f"COPY semvec_session_state ({', '.join(COLUMNS)}) FROM STDIN "
                          "(FORMAT BINARY)") as copy:
                copy.set_types(TYPES)
                for row in per[i]:
                    copy.write_row(row)


def row_bytes(url: str, ids: list[str] | None = None) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if ids is None:
            sql, args = "SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM semvec_session_state t", ()
        else:
            sql = ("SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM semvec_session_state t "
                   "WHERE session_id = ANY(%s)")
            args = (ids,)
        return int(conn.execute(sql, args).fetchone()[0])


def changes(url: str) -> int:
    """Rows inserted, updated or deleted in the engine's two tables so far."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) "
                           "FROM pg_stat_user_tables WHERE relname IN "
                           "('semvec_session_state', 'semvec_memory_events')").fetchone()
        return int(row[0])


def bulk(primary: str, old: list[str], new: list[str], state_dir: str,
         write_batch: int | None = None) -> tuple[int, float]:
    from backends.migrate.shards import Reshard, open_state, reshard_migration, run_reshard
    from backends.postgres import PostgresAdapter

    with PostgresAdapter(primary, shards=old) as a, PostgresAdapter(primary, shards=new) as b:
        b.ensure_schema()  # the new shard's tables, outside the timing
        for db in {*a.placement.databases(), *b.placement.databases()}:
            with db.connection(), db.connection():  # the pools' connections, opened before
                pass  # the timing (the floor's is open too)
        rs = Reshard(a, b)
        state = open_state(os.path.join(state_dir, f"{uuid.uuid4().hex}.state"), rs)
        try:
            mig = reshard_migration(rs, state, write_batch=write_batch)
            started = time.perf_counter()
            (result,) = run_reshard(mig)
            took = time.perf_counter() - started
        finally:
            state.close()
    assert not result.conflicts, result
    return result.copied, took


def moved_ids(n: int, old: int, new: int) -> list[str]:
    from backends.postgres.placement import shard_index

    return [f"session-{i:07d}" for i in range(n)
            if shard_index(f"session-{i:07d}", old) != shard_index(f"session-{i:07d}", new)]


def read_moved(old: list[str], ids: list[str]) -> list[tuple]:
    import psycopg

    from backends.postgres.placement import shard_index

    rows: list[tuple] = []
    for i, url in enumerate(old):
        mine = [sid for sid in ids if shard_index(sid, len(old)) == i]
        with psycopg.connect(url, autocommit=True) as conn:
            for start in range(0, len(mine), 2500):
                rows.extend(conn.execute(
                    f"SELECT {', '.join(COLUMNS)} FROM semvec_session_state "
                    "WHERE session_id = ANY(%s)", (mine[start:start + 2500],)).fetchall())
    return rows


def copy_floor(url: str, rows: list[tuple]) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        name = f"floor_{uuid.uuid4().hex[:8]}"
        conn.execute(f"CREATE TABLE {name} (session_id VARCHAR(128) PRIMARY KEY, state_blob BYTEA "
                     "NOT NULL, version INTEGER NOT NULL, drift_exempt BOOLEAN NOT NULL, "
                     "owner_subject VARCHAR(128) NULL, pending_message TEXT NULL, updated_at "
                     "TIMESTAMP NOT NULL)")
        started = time.perf_counter()
        with conn.cursor() as cur, cur.copy(f"COPY {name} ({', '.join(COLUMNS)}) FROM STDIN "
                                            "(FORMAT BINARY)") as copy:
            copy.set_types(TYPES)
            for row in rows:
                copy.write_row(row)
        took = time.perf_counter() - started
        conn.execute(f"DROP TABLE {name}")
    return took


def pipe_floor(old: list[str], url: str, ids: list[str]) -> float:
    """The moved rows streamed shard to shard: a binary ``COPY (SELECT ...) TO STDOUT``
    on each old shard piped, bytes as they come, into a binary ``COPY FROM STDIN`` on the
    new shard (no row parsed: the least a move of exactly these rows costs)."""
    import psycopg
    from psycopg import sql

    from backends.postgres.placement import shard_index

    with psycopg.connect(url, autocommit=True) as dst:
        name = f"floor_{uuid.uuid4().hex[:8]}"
        dst.execute(f"CREATE TABLE {name} (LIKE semvec_session_state INCLUDING ALL)")
        started = time.perf_counter()
        for i, source in enumerate(old):
            mine = [sid for sid in ids if shard_index(sid, len(old)) == i]
            query = sql.SQL("COPY (SELECT {} FROM semvec_session_state WHERE session_id = ANY({})) "
                            "TO STDOUT (FORMAT BINARY)").format(
                sql.SQL(", ").join(map(sql.Identifier, COLUMNS)), sql.Literal(mine))
            with psycopg.connect(source, autocommit=True) as src, src.cursor() as out_cur, \
                    out_cur.copy(query) as out, dst.cursor() as in_cur, \
                    in_cur.copy(f"COPY {name} ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)") as into:
                for data in out:
                    into.write(data)
        took = time.perf_counter() - started
        dst.execute(f"DROP TABLE {name}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--blob", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    fresh, cleanup = pg_server()
    state_dir = tempfile.mkdtemp(prefix="semvec-shards-state-")
    try:
        from backends.postgres import PostgresAdapter

        primary = fresh()
        old = [fresh() for _ in range(3)]
        with PostgresAdapter(primary, shards=old) as adapter:
            adapter.ensure_schema()
        seed(old, args.sessions, args.blob)
        ids = moved_ids(args.sessions, 3, 4)
        moved_bytes = sum(row_bytes(url, [s for s in ids]) for url in old)
        written = None
        rows = read_moved(old, ids)
        runs = []  # (pass, write floor, move floor): each pass timed beside floors of its
        for attempt in range(args.repeat):  # own, so a busy moment weighs on every side
            new = [*old, fresh()]
            before = {url: changes(url) for url in [primary, *new]}
            copied, took = bulk(primary, old, new, state_dir)
            assert copied == len(ids), (copied, len(ids))
            if attempt == 0:
                time.sleep(1.5)  # statistics are flushed at the end of each transaction,
                # and read by other backends within a second or so
                delta = {url: changes(url) - before[url] for url in before}
                written = (row_bytes(new[3]), delta, new[3])
            runs.append((took, copy_floor(new[3], rows), pipe_floor(old, new[3], ids)))
        assert written is not None
        to_write = sorted(w / took for took, w, _ in runs)
        to_move = sorted(m / took for took, _, m in runs)
        best = min(t for t, _, _ in runs)
        floor, piped = min(w for _, w, _ in runs), min(m for _, _, m in runs)
        reads = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            copy_floor(written[2], read_moved(old, ids))
            reads.append(time.perf_counter() - started)
        floor_with_reads = min(reads)
        bytes_written, delta, new_shard = written
        others = {url: n for url, n in delta.items() if url != new_shard}
        print(f"deployment     {args.sessions} sessions x {args.blob} B on 3 shards -> 4: "
              f"{len(ids)} move ({len(ids) / args.sessions:.1%})")
        print(f"bytes written  {bytes_written:,} B of rows on the new shard; the moved rows are "
              f"{moved_bytes:,} B on their old shards: {bytes_written / moved_bytes:.3f}x "
              "(goal <= 1.05x)")
        print(f"rows changed   new shard {delta[new_shard]} (moves {len(ids)}); primary and old "
              f"shards {sum(others.values())} (goal 0)")
        print(f"bulk pass      {copied} sessions in {best:.2f}s: {copied / best:,.0f}/s "
              f"(best of {args.repeat})")
        print(f"COPY floor     {piped:.2f}s (best): the moved rows COPYed from where they are to "
              "where they go, binary COPY TO on each old shard piped into binary COPY FROM on "
              "the new one, no row parsed")
        print(f"ratio          {statistics.median(to_move):.2f}x of the COPY floor, median of "
              f"{args.repeat} pass/floor pairs ({', '.join(f'{r:.2f}' for r in to_move)}; "
              "goal >= 0.5x)")
        print(f"write half     {floor:.2f}s (best): the binary COPY FROM alone, of the moved rows "
              f"already in memory (no read): the pass is {statistics.median(to_write):.2f}x of it "
              f"(median; {', '.join(f'{r:.2f}' for r in to_write)})")
        print(f"read+COPY      {floor_with_reads:.2f}s (the moved rows read by id from their "
              f"old shards, then COPY): the pass is {floor_with_reads / best:.2f}x of it")
        print("note           a shared, noisy machine: rerun before comparing figures")
    finally:
        cleanup()


if __name__ == "__main__":
    main()
