"""``semvecctl migrate`` PostgreSQL -> PostgreSQL (the bulk pass) against pgcopydb, on the
same engine tables: 100,000 sessions of 2 KB and 3 events per session.

    nice -n 10 python bench/bench_migrate_pgcopydb.py [--sessions 100000] [--repeats 2]
        [--events-per-session 3] [--pgcopydb PATH] [--pg-bin /usr/lib/postgresql/15/bin]
        [--admin URL]

pgcopydb is not a dependency: fetch Debian's package into a scratch folder and unpack it
there (never install it)::

    mkdir -p /tmp/pgcopydb-scratch && cd /tmp/pgcopydb-scratch
    apt-get download pgcopydb && dpkg -x pgcopydb_*.deb root   # -> root/usr/bin/pgcopydb

It runs ``pg_dump``/``pg_restore`` of the server's major version (15 here: Debian's 0.10
supports PostgreSQL 10 to 15), so this benchmark runs against the machine's own
PostgreSQL 15 cluster (``--admin``, default the local socket, user postgres, trust auth:
``pg_ctlcluster --skip-systemctl-redirect 15 main start`` if it is down), not the embedded
PostgreSQL 18 of the other benchmarks. It creates databases of its own (``h_bench_*``)
and drops them at the end.

Seeds a source database with the engine's tables (its own DDL: tests/support/fixtures/
engine_sql_ddl.py; the metadata tables stay empty), ``--sessions`` sessions of 2 KB
(incompressible blobs) by binary COPY and ``--events-per-session`` events per session in
the engine's layout, a user per session (0: the event table stays empty, as this
benchmark was before issue 51), then ``--repeats`` times, alternating
which goes first, each onto a fresh target database:

1. pgcopydb: ``pgcopydb clone --source SRC --target DST --dir D --table-jobs 2
   --index-jobs 2 --no-owner --no-acl`` onto an empty database (schema, data, primary
   key built after the COPY, constraints, vacuum analyze): wall time;
2. semvecctl: ``semvecctl migrate run --state F --from SRC --to DST --apply --yes`` onto
   a database holding the engine's empty tables (as ``bench/bench_migrate.py`` gives its
   target the schema outside the timing): the bulk pass, which reads every row, records
   each blob's sha256 in the state file with an intent before and a mark after each
   batch restore (binary COPY) - the content tracking a resumable, verifiable
   migration keeps; wall time, and the pass's own seconds as it reports them;
3. ``semvecctl migrate verify --state F --from SRC --to DST``: the full content
   comparison (every blob's digest, version, owner, pending message and drift flag on
   both sides; each side hashes its own blobs, the target a batch of ids per query; and
   every user's events and counter) that ``cutover`` also runs; it must answer
   "identical" for every session. Reported apart and added to the bulk pass.

Goal: with the content verification on, at least 0.5x pgcopydb's speed (pgcopydb time /
(bulk pass + verify) >= 0.5); the bulk pass alone is printed too. ``--no-verify`` leaves
the verification out (then only the bulk-only ratio is printed).
Also printed, to explain the figure: the source's listing alone (``iter_sessions``, the
version scan the bulk pass starts with) in-process, and the same page queries sent in the
primary key's order instead of ``COLLATE "C"`` (bench_shards_list.raw_pages). The machine is shared (2 cores):
run under ``nice`` and read the ratios as noisy; the cluster is durable (fsync on), as a
real one is.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pgseed  # noqa: E402

DEFAULT_ADMIN = "postgresql://postgres@/postgres?host=/var/run/postgresql"
DEFAULT_PGCOPYDB = "/tmp/pgcopydb-scratch/root/usr/bin/pgcopydb"


def find_pgcopydb(given: str | None) -> str:
    for candidate in (given, os.environ.get("PGCOPYDB"), DEFAULT_PGCOPYDB, shutil.which("pgcopydb")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("pgcopydb not found: see the docstring (apt-get download pgcopydb; dpkg -x), "
             "or pass --pgcopydb PATH")


def sock_url(admin: str, name: str) -> str:
    """``admin`` pointing at database ``name`` (the socket host stays in the query)."""
    head, _, query = admin.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


class LocalServer(_pgseed.Server):
    def url(self, name: str) -> str:
        return sock_url(self.admin, name)


def rows_in(url: str, table: str = "semvec_session_state") -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def run_pgcopydb(binary: str, pg_bin: str, source: str, target: str, log: Path) -> float:
    workdir = tempfile.mkdtemp(prefix="h-bench-pgcopydb-")
    env = dict(os.environ, PATH=f"{pg_bin}:{os.environ.get('PATH', '')}")
    argv = [binary, "clone", "--source", source, "--target", target, "--dir", workdir,
            "--table-jobs", "2", "--index-jobs", "2", "--no-owner", "--no-acl"]
    try:
        started = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env)
        took = time.perf_counter() - started
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    log.write_text(done.stdout)
    if done.returncode != 0:
        raise RuntimeError(f"pgcopydb clone exit {done.returncode}: {done.stdout[-1500:]}")
    return took


def pgcopydb_summary(log: Path) -> str:
    """The step durations pgcopydb prints at the end (its own summary table)."""
    lines = log.read_text().splitlines()
    keep = [ln for ln in lines if re.search(r"(Dump Schema|Prepare Schema|COPY, INDEX|"
                                            r"COPY \(cumulative\)|CREATE INDEX \(cumulative\)|"
                                            r"Finalize Schema|Total Wall Clock Duration)", ln)]
    return "\n".join("    " + ln.strip() for ln in keep)


def run_cli(args: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(_pgseed.semvecctl() + args, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=_pgseed.clean_env())
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"semvecctl {' '.join(args[:2])} exit {done.returncode}: "
                           f"{done.stdout[-1500:]}")
    return took, done.stdout


def listing_alone(url: str) -> float:
    from backends.postgres import PostgresAdapter

    started = time.perf_counter()
    with PostgresAdapter(url) as adapter:
        count = sum(1 for _ in adapter.iter_sessions())
    took = time.perf_counter() - started
    assert count > 0
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pgcopydb", default=None)
    parser.add_argument("--pg-bin", default="/usr/lib/postgresql/15/bin")
    parser.add_argument("--admin", default=os.environ.get("SEMVEC_BENCH_PG15_URL", DEFAULT_ADMIN))
    parser.add_argument("--events-per-session", type=int, default=3,
                        help="events per session, a user each (0: sessions only)")
    parser.add_argument("--no-verify", action="store_true")
    parser.add_argument("--no-listing", action="store_true")
    args = parser.parse_args()
    binary = find_pgcopydb(args.pgcopydb)
    if not (Path(args.pg_bin) / "pg_dump").exists():
        sys.exit(f"no pg_dump in {args.pg_bin}")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True)
    print(next((ln.strip() for ln in (version.stdout + version.stderr).splitlines()
                if ln.startswith("pgcopydb version")), "pgcopydb: version unknown"),
          f"({binary}, pg_dump from {args.pg_bin})")
    t0 = time.perf_counter()
    server = LocalServer(args.admin)
    scratch = Path(tempfile.mkdtemp(prefix="h-bench-migrate-"))
    try:
        import psycopg

        with psycopg.connect(args.admin) as conn:
            print("server:", conn.execute("SELECT version()").fetchone()[0].split(" on ")[0],
                  "| fsync", conn.execute("SHOW fsync").fetchone()[0],
                  "| synchronous_commit", conn.execute("SHOW synchronous_commit").fetchone()[0])
        source = server.create("h_bench_src")
        _pgseed.engine_tables(source)
        _pgseed.copy_states(source, (_pgseed.state_row(i, f"session-{i:07d}")
                                     for i in range(args.sessions)))
        events = args.sessions * args.events_per_session
        if events:
            _pgseed.copy_events(source, (
                _pgseed.event_row(i, k, f"session-{i:07d}", f"user-{i:07d}")
                for i in range(args.sessions) for k in range(args.events_per_session)))
        _pgseed.analyze(source)
        print(f"seeded {args.sessions:,} sessions x {_pgseed.BLOB_SIZE} B and {events:,} events "
              f"({args.events_per_session} a session, a user each) in "
              f"{time.perf_counter() - t0:.1f} s")

        copydb, bulk, bulk_self, verify = [], [], [], []
        said = ""
        for r in range(args.repeats):
            def one_pgcopydb() -> None:
                target = server.create("h_bench_pgc")
                log = scratch / f"pgcopydb-{r}.log"
                copydb.append(run_pgcopydb(binary, args.pg_bin, source, target, log))
                assert rows_in(target) == args.sessions
                assert rows_in(target, "semvec_memory_events") == events
                print(f"  pgcopydb run {r + 1}: {copydb[-1]:.1f} s; its summary:\n"
                      f"{pgcopydb_summary(log)}")
                server.drop(target)

            def one_migrate() -> None:
                nonlocal said
                target = server.create("h_bench_mig")
                _pgseed.engine_tables(target)
                state = str(scratch / f"m{r}.state")
                took, text = run_cli(["migrate", "run", "--state", state, "--from", source,
                                      "--to", target, "--apply", "--yes"])
                bulk.append(took)
                line = [ln for ln in text.splitlines() if "bulk pass" in ln]
                said = line[-1].strip() if line else text.strip()[-200:]
                found = re.search(r"in ([0-9.]+)s", said)
                bulk_self.append(float(found.group(1)) if found else float("nan"))
                assert rows_in(target) == args.sessions
                assert rows_in(target, "semvec_memory_events") == events
                if not args.no_verify:
                    took, text = run_cli(["migrate", "verify", "--state", state, "--from",
                                          source, "--to", target])
                    if f"identical: {args.sessions} session(s)" not in text:
                        raise RuntimeError(f"migrate verify did not compare every session: "
                                           f"{text[-500:]}")
                    verify.append(took)
                print(f"  migrate run {r + 1}: bulk {bulk[-1]:.1f} s"
                      + (f", verify {verify[-1]:.1f} s" if verify else ""))
                server.drop(target)

            for step in ((one_pgcopydb, one_migrate) if r % 2 == 0 else (one_migrate, one_pgcopydb)):
                step()
        listing = None if args.no_listing else listing_alone(source)
        if listing is not None:
            from bench_shards_list import raw_pages

            index_order = raw_pages(source, collate_c=False)

        m = _pgseed.median
        print(f"\n{args.sessions:,} sessions x {_pgseed.BLOB_SIZE} B, {events:,} events, "
              "PostgreSQL 15 -> 15 (wall time):")
        print(f"  pgcopydb clone                 {_pgseed.fmt(copydb)}")
        print(f"  semvecctl migrate run (bulk)   {_pgseed.fmt(bulk)}  [{said}]")
        if verify:
            print(f"  semvecctl migrate verify       {_pgseed.fmt(verify)}")
        if listing is not None:
            print(f"  of which the source listing alone (iter_sessions, in-process): {listing:.1f} s;"
                  f" the same pages in the primary key's order (no COLLATE \"C\"), psycopg:"
                  f" {index_order:.1f} s")
        print(f"  ratio pgcopydb / migrate bulk            {m(copydb) / m(bulk):.3g}x")
        if verify:
            print(f"  ratio pgcopydb / (migrate bulk + verify) "
                  f"{m(copydb) / (m(bulk) + m(verify)):.3g}x (goal >= 0.5x)")
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s (shared machine: noisy)")


if __name__ == "__main__":
    main()
