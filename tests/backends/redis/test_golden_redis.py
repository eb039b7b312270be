"""Golden fixtures pin the exact Redis layout of a session and of events (ENGINE-WIRE §3).

Both directions on a real redis-server: what our store writes is compared key by key
(HGETALL, ZRANGE, GET, TTL) with tests/golden/redis_*.json, and the golden keys planted
by hand — as the engine would have written them — read back through our store. A change
of layout therefore fails here before it makes a deployment's data unreadable to the
engine (or the engine's to us).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.contract import LoadedState, MemoryEvent
from backends.redis import RedisBackendAdapter

pytestmark = pytest.mark.redis

GOLDEN = Path(__file__).resolve().parents[2] / "support" / "golden"
SESSION = json.loads((GOLDEN / "redis_session.json").read_text(encoding="utf-8"))
EVENTS = json.loads((GOLDEN / "redis_event.json").read_text(encoding="utf-8"))


def _session_fields(spec: dict) -> dict[bytes, bytes]:
    fields = {k.encode(): v.encode("utf-8") for k, v in spec.items()
              if k not in ("blob_hex", "_comment")}
    fields[b"blob"] = bytes.fromhex(spec["blob_hex"])
    return fields


def _event_keys() -> list[str]:
    return [*EVENTS["hashes"], *EVENTS["zsets"], *EVENTS["strings"]]


@pytest.fixture
def adapter(redis_url):
    with RedisBackendAdapter(redis_url) as adapter:
        yield adapter


@pytest.fixture
def raw(redis_server):
    """A raw client; the golden keys (fixed names) are removed before and after."""
    with redis_server.client() as client:
        names = [SESSION["key"], *_event_keys()]
        client.delete(*names)
        yield client
        client.delete(*names)


def test_our_session_write_matches_the_golden_hash(adapter, raw):
    write = SESSION["write"]
    store = adapter.state_store()
    assert store.save(SESSION["session_id"], bytes.fromhex(write["blob_hex"]),
                      expected_version=None, owner_subject=write["owner_subject"],
                      pending_message=write["pending_message"]) == 1
    assert raw.type(SESSION["key"]) == SESSION["type"].encode()
    assert raw.hgetall(SESSION["key"]) == _session_fields(SESSION["fields"])
    assert raw.ttl(SESSION["key"]) == SESSION["ttl"]
    store.save(SESSION["session_id"], b"second", expected_version=1)
    assert raw.hgetall(SESSION["key"]) == _session_fields(SESSION["after_update"])


def test_a_golden_session_planted_by_hand_reads_back(adapter, raw):
    fields = SESSION["fields"]
    raw.hset(SESSION["key"], mapping=_session_fields(fields))
    store = adapter.state_store()
    expected = LoadedState(bytes.fromhex(fields["blob_hex"]), int(fields["version"]),
                           fields["owner"], fields["pending"])
    assert store.load_full(SESSION["session_id"]) == expected
    assert store.load(SESSION["session_id"], owner_subject="acme/bot") == (expected.blob, 1)
    assert store.is_drift_exempt(SESSION["session_id"]) is False


def test_our_event_writes_match_the_golden_keys(adapter, raw):
    events = adapter.event_store()
    for record in EVENTS["write"]:
        events.append(MemoryEvent.from_dict(record))
    for key, fields in EVENTS["hashes"].items():
        assert raw.hgetall(key) == {k.encode(): v.encode("utf-8") for k, v in fields.items()}
    for key, members in EVENTS["zsets"].items():
        assert raw.zrange(key, 0, -1, withscores=True) == [
            (member.encode(), score) for member, score in members]
    for key, value in EVENTS["strings"].items():
        assert raw.get(key) == value.encode()


def test_golden_events_planted_by_hand_read_back(adapter, raw):
    for key, fields in EVENTS["hashes"].items():
        raw.hset(key, mapping=fields)
    for key, members in EVENTS["zsets"].items():
        raw.zadd(key, dict(members))
    for key, value in EVENTS["strings"].items():
        raw.set(key, value)
    events = adapter.event_store()
    listed = events.list_events(EVENTS["user_id"])
    expected = [MemoryEvent.from_dict({**record, "sequence": i + 1})
                for i, record in enumerate(EVENTS["write"])]
    assert listed == expected
    assert [e.to_dict() for e in listed] == EVENTS["write"]  # the engine's keys, no sequence
    assert [e.sequence for e in listed] == [1, 2]
    assert events.count_for_user(EVENTS["user_id"]) == 2
    assert events.get_event(expected[1].event_id, owner_subject=None) == expected[1]
    assert events.append(MemoryEvent.from_dict(
        {**EVENTS["write"][1], "event_id": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"})).sequence == 3
    raw.delete("semvec:events:e:9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")
