"""Golden shapes of the Mongo layout (ENGINE-WIRE §4), both directions.

Writing: a session, two events and a counter written through our adapter must be
EXACTLY the documents in tests/golden/mongo_*.json (every key, every type). Reading:
those documents, planted as the engine writes them, must read back through our stores.
Runs in-process against ``mongomock`` (a FAKE); the turn runs on the replica-set
stand-in from tests/support/fixtures/mongo.py, since mongomock has no transactions.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.support.fixtures.mongo import TransactionalFakeClient, db_name, make_adapter, mongo_client  # noqa: F401

from backends.contract import LoadedState, MemoryEvent, OwnerScope

GOLDEN = Path(__file__).resolve().parents[2] / "support" / "golden"
ANY_DATE = {"$date": "*"}


def golden(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{name}.json").read_text())


def to_golden(value: Any) -> Any:
    """A stored document in the golden files' notation (BSON binary and dates tagged)."""
    if isinstance(value, (bytes, bytearray)):
        return {"$binary": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        text = value.astimezone(timezone.utc).isoformat(timespec="milliseconds")
        return {"$date": text.replace("+00:00", "Z")}
    if isinstance(value, dict):
        return {k: to_golden(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_golden(v) for v in value]
    return value


def from_golden(value: Any) -> Any:
    """The inverse: golden notation -> what pymongo would hand the engine to store."""
    if isinstance(value, dict) and set(value) == {"$binary"}:
        return base64.b64decode(value["$binary"])
    if isinstance(value, dict) and set(value) == {"$date"}:
        text = value["$date"]
        if text == "*":
            return datetime.now(timezone.utc).replace(microsecond=0)
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    if isinstance(value, dict):
        return {k: from_golden(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_golden(v) for v in value]
    return value


def assert_shape(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    got = to_golden(actual)
    for key, want in expected.items():
        if want == ANY_DATE:
            assert isinstance(actual.get(key), datetime), key
            got[key] = ANY_DATE
    assert got == expected


def golden_events() -> list[MemoryEvent]:
    return [MemoryEvent.from_dict({**doc, "created_at": doc["created_at"]["$date"].replace(
        "Z", "+00:00"), "sequence": 0}) for doc in golden("mongo_event")["documents"]]


@pytest.fixture
def txn_adapter(db_name):
    from backends.mongo import MongoBackendAdapter

    client = TransactionalFakeClient()
    adapter = MongoBackendAdapter(client=client, database=db_name)
    yield adapter
    adapter.close()
    client.close()


def test_our_writes_have_the_engine_shapes(txn_adapter):
    adapter = txn_adapter
    owned, unowned = golden_events()
    session = golden("mongo_session")["document"]
    blob = base64.b64decode(session["blob"]["$binary"])
    scope = OwnerScope("tenant-g", "agent-g")
    assert adapter.commit_turn("golden-session", b"first", expected_version=None, scope=scope,
                               events=[owned]) == 1
    assert adapter.event_store().append(unowned).sequence == 2
    assert adapter.commit_turn("golden-session", blob, expected_version=1, scope=scope,
                               pending_message="waiting for the user") == 2
    db = adapter.database
    assert_shape(db["semvec_session_state"].find_one({"_id": "golden-session"}), session)
    stored = sorted(db["compliance_events"].find({"user_id": "golden-user"}),
                    key=lambda d: d["sequence"])
    expected = golden("mongo_event")["documents"]
    assert len(stored) == len(expected)
    for doc, want in zip(stored, expected):
        assert_shape(doc, want)
    assert_shape(db["compliance_event_counters"].find_one({"_id": "golden-user"}),
                 golden("mongo_counter")["document"])


def test_engine_written_documents_read_back(make_adapter):
    adapter = make_adapter()
    db = adapter.database
    for name in ("mongo_session", "mongo_counter"):
        spec = golden(name)
        db[spec["collection"]].insert_one(from_golden(spec["document"]))
    spec = golden("mongo_event")
    db[spec["collection"]].insert_many(from_golden(spec["documents"]))

    session = golden("mongo_session")["document"]
    state = adapter.state_store()
    blob = base64.b64decode(session["blob"]["$binary"])
    assert state.load_full("golden-session") == LoadedState(
        blob, 2, "tenant-g/agent-g", "waiting for the user")
    assert state.load("golden-session", scope=OwnerScope("tenant-g", "agent-g")) == (blob, 2)
    assert state.load("golden-session", scope=OwnerScope("tenant-g")) is None
    assert state.save("golden-session", b"next", expected_version=2,
                      scope=OwnerScope("tenant-g", "agent-g")) == 3

    events = adapter.event_store()
    listed = events.list_events("golden-user")
    assert [{**e.to_dict(), "sequence": e.sequence} for e in listed] == [
        {**doc, "created_at": from_golden(doc["created_at"]).isoformat()}
        for doc in (dict((k, v) for k, v in d.items() if k != "_id")
                    for d in golden("mongo_event")["documents"])]
    assert [e.sequence for e in events.list_events("golden-user", owner_subject=None)] == [2]
    assert events.get(uuid.UUID(listed[0].event_id)) == listed[0]
    assert events.session_subjects("golden-session") == ["golden-user"]
    assert events.read_counter("golden-user") == 2
    nxt = events.append(MemoryEvent(str(uuid.uuid4()), "golden-user", "after the engine"))
    assert nxt.sequence == 3  # continues the engine's counter, no collision
    assert db["compliance_event_counters"].find_one({"_id": "golden-user"}) == {
        "_id": "golden-user", "value": 3}
