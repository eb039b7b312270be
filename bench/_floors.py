"""The floors a transfer is measured against: the least I/O that moves the same sessions
and events, in the engine's layouts (ENGINE-WIRE §3 and §5), between two stores.

Not a benchmark itself (bench/bench_transfer_floors.py runs them beside ours). Each floor
takes a source and a target URL (the target holds the engine's empty tables, or an empty
Redis database), moves everything, and returns ``(sessions, events)`` moved:

- ``pg_to_pg``: ``COPY (SELECT …) TO STDOUT (FORMAT BINARY)`` piped, bytes as they come,
  into ``COPY … FROM STDIN (FORMAT BINARY)``, for ``semvec_session_state`` and
  ``semvec_memory_events``;
- ``redis_to_redis``: ``SCAN`` + pipelined ``DUMP`` / ``RESTORE``, 1,000 keys a round
  trip, for the state hashes and the events family (event hashes, both zsets, counters);
- ``redis_to_pg``: ``SCAN`` + pipelined ``HMGET`` (1,000 keys a round trip) + ``COPY``
  into both tables;
- ``pg_to_redis``: ``COPY … TO STDOUT`` of both tables + pipelined writes of the engine's
  Redis layout (a state hash; per event its hash, both zsets; per user its counter),
  1,000 sessions a round trip, sequence numbers by the user's order of creation;
- ``write_pg`` / ``write_redis``: the write half alone, rows from memory (an import's
  floor: its archive is local, so the read is the file, counted by ``read_archive``).

Every floor is deliberately naive about safety (no conflict check, no verification):
it is the I/O, which is what the ratio is about.
"""

from __future__ import annotations

import json
import sys
from datetime import timezone
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import round_trips as rt  # noqa: E402

STATE_COLS = ", ".join(rt.STATE_COLUMNS)
EVENT_COLS = ", ".join(rt.EVENT_COLUMNS)
BATCH = 1000
_EVENT_FIELDS = ("event_id", "user_id", "owner_subject", "session_id", "created_at",
                 "content", "embedding", "meta", "source_event_id", "sequence")


def _scan(client, match: str, count: int = BATCH):
    cursor = 0
    while True:
        cursor, keys = client.scan(cursor, match=match, count=count)
        if keys:
            yield keys
        if cursor == 0:
            return


def _redis(url: str):
    import redis

    return redis.Redis.from_url(url)


# -- PostgreSQL -> PostgreSQL ---------------------------------------------------------------


def pg_to_pg(source: str, target: str, *, events: bool = True) -> tuple[int, int]:
    import psycopg

    moved = []
    with psycopg.connect(source, autocommit=True) as src, \
            psycopg.connect(target, autocommit=True) as dst:
        tables = [("semvec_session_state", STATE_COLS)]
        if events:
            tables.append(("semvec_memory_events", EVENT_COLS))
        for table, cols in tables:
            with src.cursor() as out_cur, out_cur.copy(
                    f"COPY (SELECT {cols} FROM {table}) TO STDOUT (FORMAT BINARY)") as out, \
                    dst.cursor() as in_cur, in_cur.copy(
                    f"COPY {table} ({cols}) FROM STDIN (FORMAT BINARY)") as into:
                for data in out:
                    into.write(data)
        for table, _ in tables:  # the check of what moved (milliseconds)
            moved.append(dst.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    return moved[0], (moved[1] if events else 0)


# -- Redis -> Redis -------------------------------------------------------------------------


def redis_to_redis(source: str, target: str, *, events: bool = True) -> tuple[int, int]:
    src, dst = _redis(source), _redis(target)
    counts = {"state": 0, "events": 0}
    families = [("semvec:state:*", "state")]
    if events:
        families.append(("semvec:events:*", "events"))
    try:
        for match, family in families:
            for keys in _scan(src, match):
                read = src.pipeline(transaction=False)
                for key in keys:
                    read.dump(key)
                write = dst.pipeline(transaction=False)
                for key, payload in zip(keys, read.execute()):
                    if payload is not None:
                        write.restore(key, 0, payload)
                        if family == "state" or key.startswith(b"semvec:events:e:"):
                            counts[family] += 1
                write.execute()
    finally:
        src.close()
        dst.close()
    return counts["state"], counts["events"]


# -- Redis -> PostgreSQL --------------------------------------------------------------------


def redis_to_pg(source: str, target: str, *, events: bool = True) -> tuple[int, int]:
    import psycopg

    src = _redis(source)
    sessions = moved_events = 0
    try:
        with psycopg.connect(target, autocommit=True) as conn, conn.cursor() as cur:
            with cur.copy(f"COPY semvec_session_state ({STATE_COLS}) FROM STDIN") as copy:
                for keys in _scan(src, "semvec:state:*"):
                    pipe = src.pipeline(transaction=False)
                    for key in keys:
                        pipe.hmget(key, "blob", "version", "drift_exempt", "owner", "pending")
                    for key, (blob, version, drift, owner, pending) in zip(keys, pipe.execute()):
                        copy.write_row((key[13:].decode(), blob, int(version), drift == b"1",
                                        owner.decode() or None, pending.decode() or None,
                                        rt.BASE_TIME))
                        sessions += 1
            if events:
                with cur.copy(f"COPY semvec_memory_events ({EVENT_COLS}) FROM STDIN") as copy:
                    for keys in _scan(src, "semvec:events:e:*"):
                        pipe = src.pipeline(transaction=False)
                        for key in keys:
                            pipe.hmget(key, *_EVENT_FIELDS[:9])
                        for row in pipe.execute():
                            row = [v.decode() for v in row]
                            row[8] = row[8] or None
                            copy.write_row(row)
                            moved_events += 1
    finally:
        src.close()
    return sessions, moved_events


# -- PostgreSQL -> Redis --------------------------------------------------------------------


def _state_rows(conn) -> Iterable[tuple]:
    with conn.cursor() as cur, cur.copy(
            f"COPY (SELECT {STATE_COLS} FROM semvec_session_state) TO STDOUT (FORMAT BINARY)") as copy:
        copy.set_types(list(rt.STATE_TYPES))
        yield from copy.rows()


def _event_rows(conn) -> Iterable[tuple]:
    types = ["text", "text", "text", "text", "timestamp", "text", "text", "text", "text"]
    with conn.cursor() as cur, cur.copy(
            f"COPY (SELECT {EVENT_COLS} FROM semvec_memory_events ORDER BY user_id, created_at, "
            "event_id) TO STDOUT (FORMAT BINARY)") as copy:
        copy.set_types(types)
        yield from copy.rows()


def _write_state(pipe, row: tuple) -> None:
    sid, blob, version, drift, owner, pending, _ = row
    pipe.hset(f"semvec:state:{sid}", mapping={
        "blob": blob, "version": str(version), "owner": owner or "",
        "drift_exempt": "1" if drift else "0", "pending": pending or ""})


def _write_events(pipe, rows: Iterable[tuple]) -> int:
    """Pipelined writes of events sorted by user and creation: sequence numbers by that
    order, one counter per user."""
    count, user, sequence = 0, None, 0
    for eid, uid, owner, sid, created, content, emb, meta, source_eid in rows:
        if uid != user:
            if user is not None:
                pipe.set(f"semvec:events:seq:{user}", sequence)
            user, sequence = uid, 0
        sequence += 1
        created = created.replace(tzinfo=timezone.utc)
        pipe.hset(f"semvec:events:e:{eid}", mapping={
            "event_id": eid, "user_id": uid, "owner_subject": owner, "session_id": sid,
            "created_at": created.isoformat(), "content": content, "embedding": emb,
            "meta": meta, "source_event_id": source_eid or "", "sequence": str(sequence)})
        pipe.zadd(f"semvec:events:u:{uid}", {eid: sequence})
        pipe.zadd(f"semvec:events:t:{uid}", {eid: created.timestamp()})
        count += 1
        if count % (BATCH * 3) == 0:
            pipe.execute()
    if user is not None:
        pipe.set(f"semvec:events:seq:{user}", sequence)
    pipe.execute()
    return count


def pg_to_redis(source: str, target: str, *, events: bool = True) -> tuple[int, int]:
    import psycopg

    dst = _redis(target)
    sessions = moved_events = 0
    try:
        with psycopg.connect(source, autocommit=True) as conn:
            pipe = dst.pipeline(transaction=False)
            for row in _state_rows(conn):
                _write_state(pipe, row)
                sessions += 1
                if sessions % BATCH == 0:
                    pipe.execute()
            pipe.execute()
            if events:
                moved_events = _write_events(dst.pipeline(transaction=False), _event_rows(conn))
    finally:
        dst.close()
    return sessions, moved_events


FLOORS = {("redis", "postgres"): redis_to_pg, ("postgres", "redis"): pg_to_redis,
          ("redis", "redis"): redis_to_redis, ("postgres", "postgres"): pg_to_pg}


# -- the write half alone (an import's floor) ------------------------------------------------


def read_archive(path: str) -> int:
    """Each line of a JSON Lines archive parsed (no checksum, no decoding of fields)."""
    lines = 0
    with open(path, "rb") as stream:
        for line in stream:
            json.loads(line)
            lines += 1
    return lines


def write_pg(target: str, sessions: int, events: int) -> tuple[int, int]:
    """The seeded rows, from memory, by binary COPY of the state and text COPY of the
    events into the engine's tables."""
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY semvec_session_state ({STATE_COLS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(rt.STATE_TYPES))
            for i in range(sessions):
                copy.write_row(rt.state_row(i))
        if events:
            with cur.copy(f"COPY semvec_memory_events ({EVENT_COLS}) FROM STDIN") as copy:
                for i in range(sessions):
                    for k in range(events):
                        copy.write_row(rt.event_row(i, k))
    return sessions, sessions * events


def write_redis(target: str, sessions: int, events: int) -> tuple[int, int]:
    """The seeded sessions and events, from memory, pipelined in the engine's layout."""
    dst = _redis(target)
    try:
        rt.seed_redis(dst, sessions, events)
    finally:
        dst.close()
    return sessions, sessions * events


def import_floor(kind: str, target: str, archive: str, sessions: int, events: int) -> tuple[int, int]:
    read_archive(archive)
    return (write_pg if kind == "postgres" else write_redis)(target, sessions, events)
