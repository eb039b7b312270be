"""Ours beside its floor, in one run: every command that moves sessions and events,
against the least I/O that moves the same data (bench/_floors.py), for each pair of
stores.

    nice -n 10 python bench/bench_transfer_floors.py [--sessions 20000]
        [--events-per-session 3] [--repeats 3] [--jobs migrate,copy,copy-noev,import]
        [--pairs redis-postgres,postgres-redis,redis-redis,postgres-postgres] [--json OUT]
    python bench/bench_transfer_floors.py --compare small.json large.json

Jobs (ours is the CLI, ``python -m semvecctl``, a process each run, as an operator runs
it; its wall time includes the interpreter's start, about 0.5 s):

- ``migrate``: ``migrate run --apply --yes`` (the bulk pass) with events, four pairs,
  vs the pair's floor;
- ``copy``: ``sessions copy --with-events --apply --yes``, four pairs, vs the same floor;
- ``copy-noev``: ``sessions copy`` Redis -> Redis from a source without events, vs
  ``SCAN`` + pipelined ``DUMP``/``RESTORE`` of the state hashes;
- ``import``: ``sessions import --apply --yes`` of an archive (exported once beforehand,
  with events) into PostgreSQL and into Redis, vs the archive's lines parsed plus the
  write half of the pair's floor (rows from memory; ``_floors.import_floor``).

One private redis-server (``tests/support/dedicated_redis``; source databases 0 (with
events) and 2 (without), target database 1, flushed before each run) and one PostgreSQL
(``_pgseed.embedded_server``: the embedded bundle the tests use, fsync off, or
``SEMVEC_BENCH_POSTGRES_URL``): a source database seeded once, a fresh target database
with the engine's empty tables for every run, made outside the timing. Data: the
engine's layouts, 2 KB incompressible blobs, ``--events-per-session`` events per session,
a user per session (tests/support/round_trips.py seeds both stores alike).

Each job and pair runs ``--repeats`` rounds of ours then the floor, the order swapped
every round, so a busy moment on the shared machine weighs on both; printed: medians,
the ratio of medians and each round's ratio. Ours' peak memory is the CLI process's
max RSS (``wait4``). ``--json`` keeps the figures; ``--compare A B`` prints the
per-session cost (median time / sessions) and peak memory of B against A (run it at 20k
and 200k for the no-growth goal). The machine is shared (2 cores): run under ``nice``,
read ratios as noisy, and say the load (printed at the start and the end).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _floors  # noqa: E402
import _pgseed  # noqa: E402

from tests.support import round_trips as rt  # noqa: E402
from tests.support.dedicated_redis import throwaway_redis  # noqa: E402

PAIRS = {"redis-postgres": ("redis", "postgres"), "postgres-redis": ("postgres", "redis"),
         "redis-redis": ("redis", "redis"), "postgres-postgres": ("postgres", "postgres")}
SHORT = {"redis": "Redis", "postgres": "PG"}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def run_ours(argv: list[str]) -> tuple[float, int]:
    """``semvecctl ARGV`` in a process of its own: wall seconds and max RSS (bytes)."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(_pgseed.semvecctl() + argv, stdout=subprocess.DEVNULL,
                                stderr=err, env=_pgseed.clean_env())
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()  # the bench is stopping: so does the run it started
            proc.wait()
            raise
        took = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"semvecctl {' '.join(argv[:2])} exit {proc.returncode}: "
                               f"{err.read().decode(errors='replace')[-1500:]}")
    return took, usage.ru_maxrss * 1024


class Bed:
    """The servers, the seeded sources and fresh targets."""

    def __init__(self, redis_url: str, pg: _pgseed.Server, sessions: int, events: int,
                 workdir: Path) -> None:
        import redis

        self.redis_base, self.pg, self.sessions, self.events = redis_url, pg, sessions, events
        self.workdir = workdir
        self.redis_source = self._db(0)
        self.redis_plain = self._db(2)
        self.redis_target = self._db(1)
        started = time.perf_counter()
        with redis.Redis.from_url(self.redis_source) as client:
            client.flushdb()
            rt.seed_redis(client, sessions, events)
        with redis.Redis.from_url(self.redis_plain) as client:
            client.flushdb()
            rt.seed_redis(client, sessions, 0)
        self.pg_source = pg.create("trsrc")
        rt.seed_postgres(self.pg_source, sessions, events)
        print(f"seeded {sessions:,} sessions x {rt.BLOB_SIZE} B with {events} events each "
              f"({sessions * events:,} events, a user per session) in Redis and PostgreSQL "
              f"in {time.perf_counter() - started:.1f} s", flush=True)
        self._archive: str | None = None

    def _db(self, n: int) -> str:
        return self.redis_base.rsplit("/", 1)[0] + f"/{n}"

    def source(self, kind: str, with_events: bool = True) -> str:
        if kind == "redis":
            return self.redis_source if with_events else self.redis_plain
        return self.pg_source

    def target(self, kind: str) -> str:
        if kind == "redis":
            import redis

            with redis.Redis.from_url(self.redis_target) as client:
                client.flushdb()
            return self.redis_target
        url = self.pg.create("trdst")
        rt.engine_tables(url)
        return url

    def release(self, kind: str, url: str) -> None:
        if kind == "postgres":
            self.pg.drop(url)

    def archive(self) -> str:
        """An archive of the PostgreSQL source with its events, exported once by ours."""
        if self._archive is None:
            path = str(self.workdir / "source.jsonl")
            run_ours(["sessions", "export", "--uri", self.pg_source, "--with-events", "-O", path,
                      "--overwrite"])
            self._archive = path
        return self._archive


def job_plan(bed: Bed, jobs: list[str], pairs: list[str]):
    """(job, pair label, target kind, ours argv maker, floor callable maker, expected)."""
    n, k = bed.sessions, bed.events
    for job in jobs:
        if job in ("migrate", "copy"):
            for label in pairs:
                a, b = PAIRS[label]

                def ours(target, a=a, b=b, job=job):
                    # PostgreSQL keeps no sequence column: Redis -> PG drops the numbers
                    loss = ["--allow-loss"] if (a, b) == ("redis", "postgres") else []
                    if job == "migrate":
                        state = str(bed.workdir / f"{uuid.uuid4().hex}.state")
                        return ["migrate", "run", "--state", state, "--from", bed.source(a),
                                "--to", target, "--apply", "--yes", *loss]
                    return ["sessions", "copy", "--from", bed.source(a), "--to", target,
                            "--with-events", "--apply", "--yes", *loss]

                def floor(target, a=a, b=b):
                    return _floors.FLOORS[(a, b)](bed.source(a), target, events=True)

                yield job, label, b, ours, floor, (n, n * k)
        elif job == "copy-noev":
            def ours(target):
                return ["sessions", "copy", "--from", bed.source("redis", False), "--to", target,
                        "--apply", "--yes"]

            def floor(target):
                return _floors.redis_to_redis(bed.source("redis", False), target, events=False)

            yield job, "redis-redis", "redis", ours, floor, (n, 0)
        elif job == "import":
            for kind in ("postgres", "redis"):
                def ours(target):
                    return ["sessions", "import", bed.archive(), "--uri", target, "--apply", "--yes"]

                def floor(target, kind=kind):
                    return _floors.import_floor(kind, target, bed.archive(), n, k)

                yield job, f"archive-{kind}", kind, ours, floor, (n, n * k)
        else:
            raise SystemExit(f"unknown job {job!r}")


def measure(bed: Bed, plan, repeats: int) -> list[dict]:
    results = []
    for job, label, kind, ours, floor, expected in plan:
        times: dict[str, list[float]] = {"ours": [], "floor": []}
        rss: list[int] = []
        for r in range(repeats):
            order = ("ours", "floor") if r % 2 == 0 else ("floor", "ours")
            for side in order:
                target = bed.target(kind)
                try:
                    if side == "ours":
                        took, peak = run_ours(ours(target))
                        rss.append(peak)
                    else:
                        started = time.perf_counter()
                        moved = floor(target)
                        took = time.perf_counter() - started
                        if tuple(moved) != expected:
                            raise RuntimeError(f"floor {job} {label} moved {moved}, "
                                               f"expected {expected}")
                    times[side].append(took)
                finally:
                    bed.release(kind, target)
            print(f"  {job:<9} {label:<18} round {r + 1}: ours {times['ours'][-1]:7.2f} s, "
                  f"floor {times['floor'][-1]:6.2f} s", flush=True)
        ours_m, floor_m = statistics.median(times["ours"]), statistics.median(times["floor"])
        results.append({"job": job, "pair": label, "sessions": bed.sessions,
                        "events": bed.events, "ours": times["ours"], "floor": times["floor"],
                        "ratio": ours_m / floor_m,
                        "rounds": [o / f for o, f in zip(times["ours"], times["floor"])],
                        "peak_rss": max(rss)})
    return results


def table(results: list[dict]) -> None:
    print("\n| job | pair | ours (median s) | floor (median s) | ours / floor | rounds | ours peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        rounds = ", ".join(f"{x:.1f}" for x in r["rounds"])
        print(f"| {r['job']} | {r['pair']} | {statistics.median(r['ours']):.2f} | "
              f"{statistics.median(r['floor']):.2f} | {r['ratio']:.1f}x | {rounds} | "
              f"{r['peak_rss'] / 2**20:.0f} MiB |")


def compare(small_path: str, large_path: str) -> None:
    small = {(r["job"], r["pair"]): r for r in json.loads(Path(small_path).read_text())}
    large = {(r["job"], r["pair"]): r for r in json.loads(Path(large_path).read_text())}
    print("| job | pair | per-session cost small -> large (ms) | growth | peak RSS small -> large | growth |")
    print("|---|---|---|---|---|---|")
    for key in small.keys() & large.keys():
        a, b = small[key], large[key]
        ca = statistics.median(a["ours"]) / a["sessions"] * 1000
        cb = statistics.median(b["ours"]) / b["sessions"] * 1000
        print(f"| {key[0]} | {key[1]} | {ca:.3f} ({a['sessions']:,}) -> {cb:.3f} "
              f"({b['sessions']:,}) | {cb / ca:.2f}x (goal <= 1.2x) | "
              f"{a['peak_rss'] / 2**20:.0f} -> {b['peak_rss'] / 2**20:.0f} MiB | "
              f"{b['peak_rss'] / a['peak_rss']:.2f}x (goal <= 1.1x) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--events-per-session", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", default="migrate,copy,copy-noev,import")
    parser.add_argument("--pairs", default=",".join(PAIRS))
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--compare", nargs=2, metavar=("SMALL", "LARGE"))
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
        return
    pairs = [p for p in args.pairs.split(",") if p]
    for p in pairs:
        if p not in PAIRS:
            raise SystemExit(f"unknown pair {p!r}: {', '.join(PAIRS)}")
    # a run started in the background ignores SIGINT: let SIGTERM stop it cleanly (its
    # servers stopped, its scratch removed)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.perf_counter()
    print(f"start: {load()}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="semvec-bench-floors-"))
    try:
        with throwaway_redis() as redis_url, _pgseed.embedded_server("semvec-pg-floors-") as pg:
            bed = Bed(redis_url, pg, args.sessions, args.events_per_session, workdir)
            plan = job_plan(bed, [j for j in args.jobs.split(",") if j], pairs)
            results = measure(bed, plan, args.repeats)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{args.sessions:,} sessions x {args.events_per_session} events, medians of "
          f"{args.repeats} interleaved rounds (CLI wall time vs floor):")
    table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"\nend: {load()}; total wall time {time.perf_counter() - t0:.0f} s "
          "(shared machine: noisy)")


if __name__ == "__main__":
    main()
