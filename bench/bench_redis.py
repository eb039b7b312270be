"""Redis backend benchmarks against the raw redis-py floor, on a private redis-server.

    python bench/bench_redis.py [--part commit|sessions|instructions|all] [--seconds 3]
                                [--sessions 100000]

commit:   commit_turn throughput (with and without events) vs redis-py's public EVALSHA
          of a trivial script on the same server, through the same client the scripts use
          (the adapter's script client). Goals: >= 0.9x with no events; >= 0.25x with one
          384-dimension event (its JSON text is json.dumps's exact bytes, written by
          orjson: json.dumps alone costs more than a floor call). The redis-py version
          and parser are printed: run it on the lowest and the newest supported.
          A second floor, redis-py's evalsha of the script a turn without events sends
          (save's compare-and-set, cas.lua) with exactly its arguments, isolates what
          the adapter adds: the 'return 1' floor sends no arguments and runs no script,
          and that difference alone (sending a key, a 512-byte blob and five more
          arguments; the script's HMGET, HSET and EXPIRE) is most of the gap to it.
instructions: client instructions per call under valgrind's callgrind (the 'return 1'
          floor, the same-script floor, commit_turn without events): the noise-free
          view of the adapter's own share, since wall-clock ratios on a shared machine
          swing by a third from run to run.
sessions: streaming 100,000 sessions through iter_sessions vs a raw SCAN + pipelined
          HMGET loop. Goal: >= 0.8x, with peak Python memory (tracemalloc) flat between
          10,000 and 100,000 sessions. Also ``ordered=True`` (sessions list's id order):
          its memory grows with the key names only.

Figures on a shared machine are noisy: compare ratios, not absolute rates. On loopback
the floor is almost pure client overhead, so a turn that writes an event (an event hash,
two index entries, a counter, and the checks before them: tens of microseconds of server
time against a few for ``return 1``) cannot reach the floor; over a real network the
round trip dominates and the ratio rises.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402

from backends.contract import MemoryEvent  # noqa: E402
from backends.redis import RedisBackendAdapter  # noqa: E402
from tests.support.dedicated_redis import throwaway_redis  # noqa: E402


def windowed_rates(cases: dict[str, Callable[[], None]], seconds: float,
                   window: float = 0.1) -> dict[str, list[float]]:
    """Calls/s of each case in every round of short windows taken in turn (so a noisy
    neighbour on a shared machine hits the cases of one round alike): ``seconds`` per
    case in all, one rate per round and case."""
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for fn in cases.values():  # warm-up: scripts loaded, connections open
        for _ in range(200):
            fn()
    for _ in range(max(3, round(seconds / window))):
        for name, fn in cases.items():
            calls, started = 0, time.perf_counter()
            while True:
                for _ in range(25):
                    fn()
                calls += 25
                elapsed = time.perf_counter() - started
                if elapsed >= window:
                    break
            rates[name].append(calls / elapsed)
    return rates


def ratio_text(rates: dict[str, list[float]], case: str, floor: str) -> str:
    """``case`` over ``floor``: the median of the per-round ratios (each round's windows
    are next to each other in time: the noise-robust figure), their spread (10th-90th
    percentile), and the best window of each."""
    ratios = sorted(c / f for c, f in zip(rates[case], rates[floor]))
    low, high = ratios[len(ratios) // 10], ratios[-1 - len(ratios) // 10]
    best = max(rates[case]) / max(rates[floor])
    return f"{statistics.median(ratios):5.2f}x (rounds {low:.2f}-{high:.2f}, best windows {best:.2f}x)"


def bench_commit(url: str, seconds: float) -> None:
    from backends.redis.scripts import script, script_client

    adapter = RedisBackendAdapter(url)
    client = script_client(adapter.client)  # the client (and pool) the scripts go through
    trivial_sha = client.script_load("return 1")
    commit_sha = client.script_load(script("cas").source)  # what a no-event turn sends
    blob = b"x" * 512
    ttl = str(adapter.settings.ttl_seconds)
    user = f"bench-{uuid.uuid4().hex}"
    embedding = tuple(i / 384 for i in range(384))
    sessions = {kind: f"b-{kind}-{uuid.uuid4().hex}"
                for kind in ("plain", "event", "embedded", "script")}
    versions = {kind: adapter.commit_turn(sid, blob, expected_version=None)
                for kind, sid in sessions.items()}
    script_key = f"semvec:state:{sessions['script']}"

    def events(embedded: bool) -> Iterator[MemoryEvent]:
        # built ahead of time: the benchmark times commit_turn, not the caller's event
        # construction (uuid4 and a timestamp cost as much as a loopback round trip)
        pool = [MemoryEvent(event_id=uuid.uuid4().hex, user_id=user, content="a turn's event",
                            embedding=embedding if embedded else None, meta={"k": 1},
                            session_id=sessions["embedded" if embedded else "event"])
                for _ in range(80_000 if not embedded else 40_000)]
        return iter(pool)

    plain_events, embedded_events = events(False), events(True)

    def floor() -> None:
        client.evalsha(trivial_sha, 0)

    def script_floor() -> None:
        """redis-py's evalsha of the script commit_turn sends for a turn without events,
        with exactly its key and arguments, on the same client: what a caller writing
        the call by hand pays (the adapter's share is the rest)."""
        version = versions["script"]
        reply = client.evalsha(commit_sha, 1, script_key, str(version),
                               str(version + 1), blob, "", "", ttl)
        if reply[0] != 1:
            raise AssertionError(reply)
        versions["script"] = version + 1

    def turn(kind: str, source: Iterator[MemoryEvent] | None) -> Callable[[], None]:
        def run() -> None:
            batch = [next(source)] if source is not None else None
            versions[kind] = adapter.commit_turn(sessions[kind], blob,
                                                 expected_version=versions[kind], events=batch)
        return run

    rates = windowed_rates({
        "floor": floor,
        "script": script_floor,
        "plain": turn("plain", None),
        "event": turn("event", plain_events),
        "embedded": turn("embedded", embedded_events),
    }, seconds)
    median = {name: statistics.median(values) for name, values in rates.items()}

    def server_usec(fn: Callable[[], None], calls: int = 500) -> float:
        """Server-side time per EVALSHA (nested commands included), from INFO."""
        client.config_resetstat()
        for _ in range(calls):
            fn()
        return float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])

    server = {"floor": server_usec(floor), "plain": server_usec(turn("plain", None)),
              "event": server_usec(turn("event", plain_events))}
    try:
        import hiredis
        parser = f"hiredis {hiredis.__version__}"
    except ImportError:
        parser = "pure-Python parser"
    rounds = len(rates["floor"])
    print(f"commit_turn throughput (redis-py {redis.__version__}, {parser}; single client, "
          f"loopback, {rounds} rounds of 0.1 s windows taken in turn; ratio = median of "
          "the rounds' ratios)")
    print(f"  EVALSHA 'return 1' floor              {median['floor']:9.0f} calls/s")
    print(f"  EVALSHA of the turn's script, args   {median['script']:9.0f} calls/s  "
          f"{ratio_text(rates, 'script', 'floor')}  (no adapter code at all)")
    print(f"  commit_turn, no events                {median['plain']:9.0f} turns/s  "
          f"{ratio_text(rates, 'plain', 'floor')}  goal >= 0.90x")
    print(f"      over the same-script floor                         "
          f"{ratio_text(rates, 'plain', 'script')}")
    print(f"  commit_turn, 1 event                  {median['event']:9.0f} turns/s  "
          f"{ratio_text(rates, 'event', 'floor')}")
    print(f"  commit_turn, 1 event + 384-dim vector {median['embedded']:9.0f} turns/s  "
          f"{ratio_text(rates, 'embedded', 'floor')}  goal >= 0.25x")
    print(f"  server time per call: trivial script {server['floor']:.1f} us, "
          f"commit_turn without events {server['plain']:.1f} us, with 1 event "
          f"{server['event']:.1f} us")

    def cpu_usec(fn: Callable[[], None], calls: int = 3000) -> float:
        """Client plus server CPU per call (user + system, from the process and from INFO):
        a single client on loopback is one sequential chain, so this is its cost without
        the waits that other work on a shared machine adds to wall time."""
        def server_cpu() -> float:
            info = client.info("cpu")
            return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

        best = float("inf")
        for _ in range(3):
            c0, s0 = time.process_time(), server_cpu()
            for _ in range(calls):
                fn()
            c1, s1 = time.process_time(), server_cpu()
            best = min(best, (c1 - c0 + s1 - s0) / calls * 1e6)
        return best

    cpu = {"floor": cpu_usec(floor), "script": cpu_usec(script_floor),
           "plain": cpu_usec(turn("plain", None)),
           "event": cpu_usec(turn("event", plain_events)),
           "embedded": cpu_usec(turn("embedded", embedded_events))}
    print("  CPU per call (client + server), the noise-robust view: floor "
          f"{cpu['floor']:.0f} us; same-script floor {cpu['floor'] / cpu['script']:.2f}x; "
          f"no events {cpu['floor'] / cpu['plain']:.2f}x "
          f"({cpu['script'] / cpu['plain']:.2f}x of the same-script floor); 1 event "
          f"{cpu['floor'] / cpu['event']:.2f}x, 1 event + 384-dim vector "
          f"{cpu['floor'] / cpu['embedded']:.2f}x")
    steps = client_side_usec(embedding, user)
    print(f"  client CPU per 384-dim event: validate {steps['validate']:.1f} us, encode "
          f"{steps['encode']:.1f} us, of which the embedding's JSON text "
          f"{steps['embedding']:.1f} us (json.dumps of the same floats: {steps['json']:.1f} us); "
          f"one floor call is {1e6 / median['floor']:.1f} us")
    adapter.close()


def client_side_usec(embedding: tuple[float, ...], user: str, n: int = 2000) -> dict[str, float]:
    """Process CPU time (less noisy than wall time on a shared machine) of the client-side
    steps of one 384-dimension event: validation, the script arguments, the embedding's
    JSON text alone (ours, and json.dumps, whose bytes it reproduces)."""
    import json
    import timeit

    from backends.contract import validate_turn_events
    from backends.contract.embedding_text import embedding_json
    from backends.redis.event_codec import event_args

    event = MemoryEvent(event_id=uuid.uuid4().hex, user_id=user, content="a turn's event",
                        embedding=embedding, meta={"k": 1})
    checked = validate_turn_events([event])[0]

    def best(fn: Callable[[], object]) -> float:
        return min(timeit.repeat(fn, number=n, repeat=5, timer=time.process_time)) / n * 1e6

    return {"validate": best(lambda: validate_turn_events([event])),
            "encode": best(lambda: event_args(checked)),
            "embedding": best(lambda: embedding_json(embedding)),
            "json": best(lambda: json.dumps(embedding))}


def fill(client: "redis.Redis", count: int, start: int = 0) -> None:
    blob = b"{" + b"x" * 254 + b"}"
    pipe = client.pipeline(transaction=False)
    for i in range(start, count):
        pipe.hset(f"semvec:state:bench-{i:07d}", mapping={
            "blob": blob, "version": "3", "owner": "tenant/agent" if i % 2 else "",
            "drift_exempt": "0", "pending": ""})
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def raw_loop(client: "redis.Redis", batch: int) -> int:
    """The floor: SCAN + pipelined HMGET of the same fields, no decoding at all."""
    seen, cursor = 0, 0
    while True:
        cursor, found = client.scan(cursor, match="semvec:state:*", count=batch)
        if found:
            pipe = client.pipeline(transaction=False)
            for key in found:
                pipe.hmget(key, ("blob", "version", "owner", "pending", "drift_exempt"))
            seen += len(pipe.execute())
        if cursor == 0:
            return seen


def ours(adapter: RedisBackendAdapter, batch: int, ordered: bool = False) -> int:
    return sum(1 for _ in adapter.iter_sessions(batch_size=batch, ordered=ordered))


def timed_pair(a: Callable[[], int], b: Callable[[], int], repeats: int = 5):
    """Best time of each, run alternately so a noisy neighbour hits both alike."""
    best = [float("inf"), float("inf")]
    counts = [0, 0]
    for _ in range(repeats):
        for i, fn in enumerate((a, b)):
            started = time.perf_counter()
            counts[i] = fn()
            best[i] = min(best[i], time.perf_counter() - started)
    return (best[0], counts[0]), (best[1], counts[1])


def peak_kib(fn: Callable[[], int]) -> float:
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1024


def bench_sessions(url: str, total: int, batch: int) -> None:
    adapter = RedisBackendAdapter(url)
    client = redis.Redis.from_url(url)
    client.flushdb()
    small = max(total // 10, 1)
    fill(client, small)
    mem_small = peak_kib(lambda: ours(adapter, batch))
    ord_small = peak_kib(lambda: ours(adapter, batch, ordered=True))
    fill(client, total, start=small)
    mem_large = peak_kib(lambda: ours(adapter, batch))
    ord_large = peak_kib(lambda: ours(adapter, batch, ordered=True))
    (scan_s, _), (ord_s, ord_n) = timed_pair(lambda: ours(adapter, batch),
                                             lambda: ours(adapter, batch, ordered=True), repeats=3)
    (raw_s, raw_n), (our_s, our_n) = timed_pair(lambda: raw_loop(client, batch),
                                                lambda: ours(adapter, batch))
    print(f"session enumeration over {total:,} sessions (batch {batch}, best of 5, alternated)")
    print(f"  raw SCAN + pipelined HMGET      {raw_n / raw_s:9.0f} sessions/s ({raw_s:.2f}s)")
    print(f"  iter_sessions (+TTL, sha256)    {our_n / our_s:9.0f} sessions/s ({our_s:.2f}s)"
          f"  {raw_s / our_s:5.2f}x   goal >= 0.80x")
    print(f"  peak Python memory, iter_sessions: {mem_small:8.0f} KiB at {small:,}  "
          f"{mem_large:8.0f} KiB at {total:,}  ({mem_large / mem_small:.2f}x)")
    print(f"  ordered=True (sessions list, id order): {ord_n / ord_s:9.0f} sessions/s "
          f"({scan_s / ord_s:.2f}x of SCAN order); peak {ord_small:8.0f} KiB at {small:,}  "
          f"{ord_large:8.0f} KiB at {total:,} (the names only)")
    assert our_n == raw_n == total, (our_n, raw_n, total)
    client.flushdb()
    client.close()
    adapter.close()


def instruction_case(url: str, case: str, calls: int) -> None:
    """One case ``calls`` times after a warm-up (run under callgrind by
    :func:`bench_instructions`): floor, script (the same-script floor) or plain."""
    from backends.redis.scripts import script, script_client

    adapter = RedisBackendAdapter(url)
    client = script_client(adapter.client)
    trivial_sha = client.script_load("return 1")
    commit_sha = client.script_load(script("cas").source)  # what a no-event turn sends
    blob, ttl = b"x" * 512, str(adapter.settings.ttl_seconds)
    session = f"b-{case}-{uuid.uuid4().hex}"
    key = f"semvec:state:{session}"
    version = adapter.commit_turn(session, blob, expected_version=None)
    for _ in range(200):
        client.evalsha(trivial_sha, 0)
    if case == "floor":
        for _ in range(calls):
            client.evalsha(trivial_sha, 0)
    elif case == "script":
        for _ in range(calls):
            reply = client.evalsha(commit_sha, 1, key, str(version), str(version + 1),
                                   blob, "", "", ttl)
            if reply[0] != 1:
                raise AssertionError(reply)
            version += 1
    else:
        for _ in range(calls):
            version = adapter.commit_turn(session, blob, expected_version=version)
    adapter.close()


def bench_instructions(url: str) -> None:
    """Client instructions per call (valgrind's callgrind, the difference between 4,500
    and 500 calls): unlike time on a shared machine, the same on every run, so it shows
    what the adapter adds to redis-py's own evalsha of the same script exactly."""
    import re
    import shutil
    import subprocess

    if shutil.which("valgrind") is None:
        print("client instructions per call: valgrind is not installed, skipped")
        return

    import os

    def collected(case: str, calls: int) -> int:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             __file__, "--case", case, "--calls", str(calls), "--url", url],
            capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": "0"})  # the same dict layouts every run
        return int(re.search(r"Collected : (\d+)", done.stderr).group(1))

    per_call = {case: (collected(case, 4500) - collected(case, 500)) / 4000
                for case in ("floor", "script", "plain")}
    print(f"client instructions per call (callgrind, redis-py {redis.__version__}): "
          f"EVALSHA 'return 1' {per_call['floor']:,.0f}; same script, same args "
          f"{per_call['script']:,.0f}; commit_turn without events {per_call['plain']:,.0f} "
          f"(+{per_call['plain'] - per_call['script']:,.0f}, "
          f"{per_call['script'] / per_call['plain']:.3f}x of the same-script floor)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("commit", "sessions", "instructions", "all"),
                        default="all")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    # internal: one case of --part instructions, run under callgrind
    parser.add_argument("--case", choices=("floor", "script", "plain"), help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        instruction_case(args.url, args.case, args.calls)
        return
    with throwaway_redis("semvec-bench-redis-") as url:
        if args.part in ("commit", "all"):
            bench_commit(url, args.seconds)
        if args.part == "instructions":
            bench_instructions(url)
        if args.part in ("sessions", "all"):
            bench_sessions(url, args.sessions, args.batch)


if __name__ == "__main__":
    main()
