"""``sessions export --with-events`` from PostgreSQL against the same export without
events; then ``sessions copy`` and ``migrate run`` PG -> PG with and without events.

    nice -n 10 python bench/bench_export_events.py [--sessions 100000] [--events 3]
        [--users per-session | --users N] [--repeats 3] [--small 20000]
        [--no-export | --no-cli-export] [--no-transfer]

On one server (the embedded PostgreSQL 18 the tests use, or ``SEMVEC_BENCH_POSTGRES_URL``),
in databases with the engine's tables (its own DDL, tests/support/fixtures/
engine_sql_ddl.py: an index on user_id, none on session_id), writes with COPY
``--sessions`` sessions of 2 KB (incompressible blobs) and ``--events`` events per
session in the engine's layout (UUID ids, session_id, owner, created_at, a JSON
embedding). Each session's events belong to one user: by default a user per session
(``user-{i}``), or with ``--users N`` N users each owning a contiguous block of sessions.

1. export: ``semvecctl sessions export --uri URL -O FILE --overwrite`` with and without
   ``--with-events``, ``--repeats`` times alternating, medians. Goal: with events <= 1.5x
   without. Then the export's work after its listing alone, in-process: ``iter_records``
   (what ``write_archive`` streams) given every summary read beforehand in the primary
   key's order, written by ``ArchiveWriter``, with and without events: the listing's
   own cost (``COLLATE "C"`` keyset pages, see bench_shards_list) is then out of both.
   Given its summaries, ``iter_records`` reads events by user (chunks of users, one
   query each); the CLI's whole-store export reads them in one sorted pass.
2. copy (``--small`` sessions, same layout): ``semvecctl sessions copy --from SRC --to DST
   --apply --yes`` with ``--with-events`` from a source that has the events, and without
   from a source with the same sessions and no events (a copy without events from a
   source that has some is refused, or needs --allow-loss); a fresh target database each.
3. migrate (``--small``): ``semvecctl migrate run --state F --from SRC --to DST --apply
   --yes`` (the bulk pass) from the same two sources.

Every timing is the CLI's wall time (a process start included, about 0.5 s). The machine
is shared (2 cores): run under ``nice`` and read the ratios as noisy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pgseed  # noqa: E402


def user_of(i: int, sessions: int, users: int | None) -> str:
    if users is None:
        return f"user-{i:07d}"
    return f"user-{i * users // sessions:05d}"


def seed(url: str, sessions: int, events: int, users: int | None, with_events: bool) -> None:
    _pgseed.engine_tables(url)
    _pgseed.copy_states(url, (_pgseed.state_row(i, f"session-{i:07d}") for i in range(sessions)))
    if with_events and events:
        _pgseed.copy_events(url, (
            _pgseed.event_row(i, k, f"session-{i:07d}", user_of(i, sessions, users))
            for i in range(sessions) for k in range(events)))
    _pgseed.analyze(url)


def timed(args: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(_pgseed.semvecctl() + args, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=_pgseed.clean_env())
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"semvecctl {' '.join(args[:2])} exit {done.returncode}: "
                           f"{done.stderr.strip()[-1200:]}")
    last = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return took, (last[-1] if last else "")


def listed_in_index_order(url: str) -> list:
    """Every session's summary, read in the primary key's order (no ``COLLATE "C"``) with
    the store's own summary columns and row decoder: a stand-in for a linear listing."""
    import psycopg

    from backends.postgres.state import SqlStateStore

    with psycopg.connect(url) as conn:
        rows = conn.execute(f"SELECT {SqlStateStore._SUMMARY_COLUMNS} FROM semvec_session_state"
                            " ORDER BY session_id").fetchall()
    return [SqlStateStore._summary(row) for row in rows]


def records_only(url: str, summaries: list, with_events: bool, out: str) -> tuple[float, int]:
    """``iter_records`` (what ``write_archive`` streams) given the summaries, written with
    ``ArchiveWriter``: the export's work after its listing."""
    from backends.archive import ArchiveWriter
    from backends.contract import UNSCOPED
    from backends.transfer.export import ExportResult, iter_records, make_header
    from backends.postgres import PostgresAdapter

    with PostgresAdapter(url) as adapter:
        adapter.state_store().current_version("warm-up")
        started = time.perf_counter()
        header = make_header(adapter, "bench", with_items=False, owner_subject=UNSCOPED,
                             match=None, with_events=with_events)
        with open(out, "wb") as stream:
            writer = ArchiveWriter(stream, header)
            for record in iter_records(adapter, ExportResult(), with_events=with_events,
                                       summaries=iter(summaries)):
                writer.add(record)
            writer.finish()
        return time.perf_counter() - started, writer.events


def export_bench(server: _pgseed.Server, args, workdir: str) -> None:
    url = server.create("exev")
    t = time.perf_counter()
    seed(url, args.sessions, args.events, args.users, True)
    print(f"seeded {args.sessions:,} sessions x {_pgseed.BLOB_SIZE} B and "
          f"{args.sessions * args.events:,} events ({args.user_label}) in "
          f"{time.perf_counter() - t:.1f} s")
    out = os.path.join(workdir, "export.jsonl")
    base = ["sessions", "export", "--uri", url, "-O", out, "--overwrite"]
    plain, events, said = [], [], {}
    if not args.no_cli_export:
        timed(base)  # warm-up
    for r in range(0 if args.no_cli_export else args.repeats):
        runs = [(plain, base, "without"), (events, base + ["--with-events"], "with")]
        for bucket, argv, key in (runs if r % 2 == 0 else runs[::-1]):
            took, last = timed(argv)
            bucket.append(took)
            said[key] = last
    summaries = listed_in_index_order(url)
    alone_plain, alone_events = [], []
    for r in range(args.repeats):
        runs = [(alone_plain, False), (alone_events, True)]
        for bucket, flag in (runs if r % 2 == 0 else runs[::-1]):
            took, written = records_only(url, summaries, flag, out)
            assert written == (args.sessions * args.events if flag else 0), written
            bucket.append(took)
    print(f"\nexport, {args.sessions:,} sessions:")
    if plain:
        print("  CLI wall time:")
        print(f"  without events     {_pgseed.fmt(plain)}   [{said['without']}]")
        print(f"  --with-events      {_pgseed.fmt(events)}   [{said['with']}]")
        print(f"  ratio with / without  {_pgseed.median(events) / _pgseed.median(plain):.2f}x "
              f"(goal <= 1.5x)")
    print("  after the listing (iter_records + ArchiveWriter in-process, summaries read "
          "beforehand in index order):")
    print(f"    without events   {_pgseed.fmt(alone_plain)}")
    print(f"    with events      {_pgseed.fmt(alone_events)}")
    print(f"    ratio            {_pgseed.median(alone_events) / _pgseed.median(alone_plain):.2f}x; "
          f"the CLI's listing and start-up are the rest of its time")
    server.drop(url)


def transfer_bench(server: _pgseed.Server, args, workdir: str) -> None:
    n = args.small
    with_ev, without_ev = server.create("src_ev"), server.create("src_noev")
    t = time.perf_counter()
    seed(with_ev, n, args.events, args.users, True)
    seed(without_ev, n, args.events, args.users, False)
    print(f"\nseeded two sources of {n:,} sessions (one with {n * args.events:,} events, one "
          f"without) in {time.perf_counter() - t:.1f} s")
    results: dict[str, list[tuple[float, str]]] = {}
    for r in range(args.transfer_repeats):
        for label, source, extra in (("copy with events", with_ev, ["--with-events"]),
                                     ("copy without events", without_ev, []),
                                     ("migrate with events", with_ev, None),
                                     ("migrate without events", without_ev, None)):
            target = server.create("dst")
            _pgseed.engine_tables(target)
            if extra is not None:
                argv = ["sessions", "copy", "--from", source, "--to", target, "--apply",
                        "--yes", *extra]
            else:
                state = os.path.join(workdir, f"m{r}-{len(results)}.state")
                argv = ["migrate", "run", "--state", state, "--from", source, "--to", target,
                        "--apply", "--yes"]
            results.setdefault(label, []).append(timed(argv))
            server.drop(target)
    print(f"copy and migrate PG -> PG, {n:,} sessions (CLI wall time):")
    for label, runs in results.items():
        print(f"  {label:<24} {_pgseed.fmt([t for t, _ in runs])}   [{runs[-1][1]}]")
    for verb in ("copy", "migrate"):
        w = _pgseed.median([t for t, _ in results[f"{verb} with events"]])
        wo = _pgseed.median([t for t, _ in results[f"{verb} without events"]])
        print(f"  {verb}: with / without events  {w / wo:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=3, help="events per session")
    parser.add_argument("--users", default="per-session",
                        help="'per-session' (a user each) or N users owning blocks of sessions")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", type=int, default=20_000, help="sessions for copy and migrate")
    parser.add_argument("--transfer-repeats", type=int, default=1)
    parser.add_argument("--no-export", action="store_true")
    parser.add_argument("--no-cli-export", action="store_true",
                        help="skip the CLI exports (only the in-process part of step 1)")
    parser.add_argument("--no-transfer", action="store_true")
    args = parser.parse_args()
    args.users = None if args.users == "per-session" else int(args.users)
    args.user_label = ("a user per session" if args.users is None
                       else f"{args.users} users, a block of sessions each")
    t0 = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="semvec-bench-exev-")
    try:
        with _pgseed.embedded_server("semvec-pg-exev-") as server:
            if not args.no_export:
                export_bench(server, args, workdir)
            if not args.no_transfer and args.small:
                transfer_bench(server, args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s (shared machine: noisy)")


if __name__ == "__main__":
    main()
