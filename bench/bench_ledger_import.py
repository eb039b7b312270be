"""What the erasure ledger costs an import: 100,000 sessions into a private Redis, with
and without a ledger of 1,000 erased subjects.

    nice -n 10 python bench/bench_ledger_import.py [--sessions 100000] [--erased 1000]
        [--users 10000] [--repeats 3]

Writes an archive of ``--sessions`` sessions of 512 bytes, each with one event (its user
one of ``--users``, owner ``acme``, numbered per user), then imports it
(``SessionImporter.apply``: verify, the conflict pass, the writes) into a flushed Redis,
``--repeats`` times alternating: without a ledger, and with ``--erased`` subjects in the
target's ledger. The erased subjects are users of the archive, erased BEFORE their
events were made, so every check runs in full and both runs write the same: the figure
is the check's own cost (the ledger loaded once, one HMAC per (owner, user) pair, a dict
lookup per event and per session). Goal: the ratio of the medians <= 1.10. The machine is
shared (2 cores): read it as noisy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402

from backends.archive import ArchiveHeader, ArchiveWriter, SessionRecord  # noqa: E402
from backends.contract import MemoryEvent  # noqa: E402
from backends.redis import RedisBackendAdapter  # noqa: E402
from backends.transfer.importer import SessionImporter  # noqa: E402
from backends.transfer.sources import ArchiveFile  # noqa: E402
from backends.transfer.withhold import record_erasure  # noqa: E402
from tests.support.dedicated_redis import throwaway_redis  # noqa: E402

EVENTS_AT = datetime(2026, 6, 1, tzinfo=timezone.utc)


def write_archive(path: Path, sessions: int, users: int) -> None:
    header = ArchiveHeader(source_backend="redis", source_uri="redis://bench",
                           created_at=ArchiveHeader.now(), tool_version="bench",
                           with_events=True)
    sequence: dict[str, int] = {}
    with open(path, "wb") as stream:
        writer = ArchiveWriter(stream, header)
        for i in range(sessions):
            user = f"u-{i % users}"
            sequence[user] = sequence.get(user, 0) + 1
            sid = f"session-{i:07d}"
            event = MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=f"turn {i}",
                                created_at=EVENTS_AT + timedelta(seconds=i), embedding=[0.5] * 4,
                                owner_subject="acme", session_id=sid, sequence=sequence[user])
            writer.add(SessionRecord(sid, 1, "acme", None, i.to_bytes(8, "big") * 64,
                                     events=(event,)))
        writer.finish()


def run_import(url: str, archive: Path, erased: int) -> float:
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()
    with RedisBackendAdapter(url) as adapter:
        for n in range(erased):  # erased before their events: everything still flows
            record_erasure(adapter, f"u-{n}", "acme", erased_at=EVENTS_AT - timedelta(days=1),
                           receipt=None)
        importer = SessionImporter(adapter, ArchiveFile(archive))
        started = time.perf_counter()
        result = importer.apply()
        elapsed = time.perf_counter() - started
    assert not result.withheld_sessions and not result.withheld_events
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--erased", type=int, default=1000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, throwaway_redis() as url:
        archive = Path(tmp) / "bench.jsonl"
        write_archive(archive, args.sessions, args.users)
        plain, ledger = [], []
        for _ in range(args.repeats):
            plain.append(run_import(url, archive, 0))
            ledger.append(run_import(url, archive, args.erased))
            print(f"without {plain[-1]:.2f}s  with {args.erased} erased {ledger[-1]:.2f}s",
                  flush=True)
    a, b = statistics.median(plain), statistics.median(ledger)
    print(f"{args.sessions} sessions, {args.users} users, {args.erased} erased subjects: "
          f"without a ledger {a:.2f}s, with {b:.2f}s, ratio {b / a:.3f} "
          f"({args.sessions / a:,.0f} vs {args.sessions / b:,.0f} sessions/s)")


if __name__ == "__main__":
    main()
