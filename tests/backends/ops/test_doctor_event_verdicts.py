"""The same damaged events, planted in each backend's own layout (a real redis-server, the
suite's real PostgreSQL, mongomock for MongoDB), get the same verdict from each backend's
audit: the same fields named, in the same words where the layout has no bearing on them.
One judge (``backends.contract.event_check``) decides for all of them."""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime, timezone

import pytest

from tests.support.fixtures.mongo import db_name, make_adapter, mongo_client  # noqa: F401

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
NAN = math.nan

#: name -> the damage, as the logical fields of the event (None = absent-or-null)
CASES: dict[str, dict] = {
    "sound": {},
    "nan-embedding": {"embedding": [1.0, NAN]},
    "word-in-embedding": {"embedding": ["a", 1.0]},
    "null-embedding": {"embedding": None},
    "meta-not-an-object": {"meta": [1, 2]},
    "no-user": {"user_id": ""},
    "source-not-a-uuid": {"source_event_id": "nope"},
    "id-not-a-uuid": {"event_id": "not-a-uuid"},
    "several": {"embedding": [NAN], "source_event_id": "x", "user_id": ""},
}
#: what every backend must say (fields, in the judge's order)
EXPECTED = {
    "sound": (),
    "nan-embedding": ("embedding",),
    "word-in-embedding": ("embedding",),
    "null-embedding": ("embedding",),
    "meta-not-an-object": ("meta",),
    "no-user": ("user_id",),
    "source-not-a-uuid": ("source_event_id",),
    "id-not-a-uuid": ("event_id",),
    "several": ("user_id", "embedding", "source_event_id"),
}
#: damage whose words depend on the layout (a JSON object in text, a document in MongoDB)
LAYOUT_WORDED = {"meta-not-an-object"}


def logical_events() -> dict[str, dict]:
    events = {}
    for i, (name, damage) in enumerate(CASES.items()):
        event = {"event_id": str(uuid.uuid4()), "user_id": f"user-{i}", "owner_subject": "",
                 "session_id": "s", "created_at": T0, "content": "c",
                 "embedding": [0.5, -0.25], "meta": {"k": 1}, "source_event_id": None,
                 "sequence": 1}
        event.update(damage)
        events[name] = event
    return events


def _json(value) -> str | None:
    return None if value is None else json.dumps(value)  # NaN written as NaN, as a bug would


def verdicts(findings, events: dict[str, dict]) -> dict[str, str]:
    """case -> the problems its unreadable-event finding names ('' when none)."""
    got = {name: "" for name in events}
    prefix = "event the engine cannot read: "
    for f in findings:
        if f.check != "event.unreadable":
            continue
        (name,) = [n for n, e in events.items() if repr(e["event_id"]) in f.where
                   or f.where.endswith(e["event_id"])]
        assert f.what.startswith(prefix)
        got[name] = f.what[len(prefix):]
    return got


def fields_of(problems: str) -> tuple[str, ...]:
    return tuple(p.split(" ", 1)[0] for p in problems.split("; ")) if problems else ()


def redis_verdicts(url: str, events: dict[str, dict]) -> dict[str, str]:
    from backends.redis import RedisBackendAdapter, schema
    from backends.redis.audit import audit

    with RedisBackendAdapter(url) as adapter:
        client = adapter.client
        for e in events.values():
            key = schema.event_key(e["event_id"])
            client.hset(key, mapping={
                "event_id": e["event_id"], "user_id": e["user_id"],
                "owner_subject": "", "session_id": e["session_id"],
                "created_at": e["created_at"].isoformat(), "content": e["content"],
                "embedding": _json(e["embedding"]) or "null", "meta": _json(e["meta"]),
                "source_event_id": e["source_event_id"] or "", "sequence": str(e["sequence"])})
        return verdicts(list(audit(adapter)), events)


def mongo_verdicts(make_adapter, events: dict[str, dict]) -> dict[str, str]:  # noqa: F811
    from backends.mongo.audit import audit

    adapter = make_adapter()
    adapter.database["compliance_events"].insert_many(
        [{"_id": e["event_id"], **e} for e in events.values()])
    return verdicts(list(audit(adapter)), events)


def sql_verdicts(url: str, events: dict[str, dict]) -> dict[str, str]:
    import psycopg

    from backends.postgres import PostgresAdapter
    from backends.postgres.audit import audit

    with PostgresAdapter(url) as adapter:
        adapter.ensure_indexes()
        with psycopg.connect(url, autocommit=True) as conn:
            for e in events.values():
                conn.execute(
                    "INSERT INTO semvec_memory_events (event_id, user_id, owner_subject,"
                    " session_id, created_at, content, embedding, meta, source_event_id)"
                    " VALUES (%s, %s, '', %s, %s, %s, %s, %s, %s)",
                    (e["event_id"], e["user_id"], e["session_id"], e["created_at"].replace(tzinfo=None),
                     e["content"], _json(e["embedding"]) or "null", _json(e["meta"]),
                     e["source_event_id"]))
        return verdicts(list(audit(adapter)), events)


@pytest.mark.redis
@pytest.mark.postgres
def test_every_backend_gives_the_same_damaged_event_the_same_verdict(
        redis_url, pgvector_url, make_adapter):  # noqa: F811
    events = logical_events()
    by_backend = {
        "redis": redis_verdicts(redis_url, events),
        "mongo": mongo_verdicts(make_adapter, events),
        "postgres": sql_verdicts(pgvector_url, events),
    }
    for backend, got in by_backend.items():
        assert {name: fields_of(p) for name, p in got.items()} == EXPECTED, backend
    for name in CASES:
        if name in LAYOUT_WORDED:
            continue
        words = {backend: got[name] for backend, got in by_backend.items()}
        assert len(set(words.values())) == 1, (name, words)
