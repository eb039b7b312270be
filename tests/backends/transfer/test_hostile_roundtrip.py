"""Hostile identifiers and texts round-trip through every backend, or are refused clearly.

Session ids, owners, pending messages, event contents and metas with unicode, newlines,
glob characters (``* ? [ ] \\``), Lua and SQL specials, very long values and empty
strings. Real Redis and PostgreSQL+pgvector; memory; MongoDB through ``mongomock`` (a
fake, in-process, no real server here). A value a store cannot hold (e.g. NUL in
PostgreSQL text) must be refused with ValueError/InvalidEvent and a message, before any
write — never a driver exception, never a truncated value.
"""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.contract import MemoryEvent
from backends.errors import InvalidEvent
from tests.support.adapters import make_adapter

EXAMPLES = int(os.environ.get("SEMVEC_HYPOTHESIS_EXAMPLES", "25"))

NASTY = [
    "\u2603 snow \U0001F600", "line\nbreak\r\n", "tab\there", "glob*?[a-z]\\", "[", "]", "\\",
    "lua ' \" ]] [[ %s %d .. -- ", "redis:{hash}:tag", "sql'; DROP TABLE x; --", " ",
    "semvec:state:nested", "x" * 5000, "\u0000nul", "e\u0301 combining", "\ufeffbom",
    "rtl \u202e txt", "/slash/../", "%00%2F",
]

TEXTS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)


# -- adapters ---------------------------------------------------------------------------


@pytest.fixture(params=["memory", "redis", "pgvector", "mongomock"])
def adapter(request):
    made = make_adapter(request, request.param, mongo_database="semvec_hostile")
    yield made
    made.close()


def refused_clearly(exc: BaseException) -> bool:
    return isinstance(exc, (ValueError, TypeError)) and bool(str(exc))


def save_and_compare(adapter, session_id: str, owner: str | None, pending: str | None,
                     blob: bytes) -> str:
    """'ok' when it round-trips, 'refused' when refused clearly before any write."""
    store = adapter.state_store()
    try:
        version = store.save(session_id, blob, expected_version=None, owner_subject=owner,
                             pending_message=pending)
    except Exception as exc:  # noqa: BLE001 - classified below
        assert refused_clearly(exc), f"{type(exc).__name__}: {exc}"
        assert store.load(session_id) is None if session_id else True
        return "refused"
    try:
        assert version == 1
        loaded = store.load_full(session_id, owner_subject=owner)
        assert loaded is not None, "saved but not found under its own owner"
        assert loaded.blob == blob and loaded.version == 1
        assert loaded.owner_subject == owner
        assert loaded.pending_message == (pending or None)
        if owner is not None:
            assert store.load(session_id, owner_subject=owner + "x") is None
            assert store.load(session_id, owner_subject=None) is None
        describe = getattr(adapter, "describe_session", None)
        if describe is not None:
            summary = describe(session_id)
            assert summary is not None and summary.session_id == session_id
            assert summary.blob_size == len(blob)
        assert store.save(session_id, blob + b"2", expected_version=1, owner_subject=owner,
                          pending_message=pending) == 2
        assert store.load(session_id)[0] == blob + b"2"
    finally:
        assert store.delete(session_id) is True
    assert store.load(session_id) is None
    return "ok"


def test_nasty_values_round_trip_or_are_refused(adapter):
    outcomes = {}
    for i, value in enumerate(NASTY):
        sid = f"{uuid.uuid4().hex[:6]}-{value}"
        outcomes[value[:20]] = (
            save_and_compare(adapter, sid, None, None, b"\x00\xff" + value.encode("utf-8", "replace")),
            save_and_compare(adapter, f"o{i}-{uuid.uuid4().hex[:6]}", value, value, b"b"),
        )
    # every backend keeps what it can hold; PostgreSQL text cannot hold NUL, and the
    # engine's SQL layout (pgvector, postgres) holds ids and owners of 128 characters
    too_long = {v[:20] for v in NASTY if len(v) > 128} \
        if adapter.name in ("pgvector", "postgres") else set()
    for value, (as_id, as_owner) in outcomes.items():
        fits = value not in too_long
        if "\u0000" not in value and value.strip() and fits:
            assert as_id == "ok", (adapter.name, value)
        if "\u0000" not in value and fits:
            assert as_owner == "ok", (adapter.name, value)


def test_empty_session_id_and_owner_are_refused(adapter):
    store = adapter.state_store()
    with pytest.raises(ValueError):
        store.save("", b"x", expected_version=None)
    with pytest.raises(ValueError):
        store.save(f"s-{uuid.uuid4().hex}", b"x", expected_version=None, owner_subject="")


def test_enumeration_with_glob_characters_in_ids(adapter):
    describe = getattr(adapter, "iter_sessions", None)
    if describe is None:
        pytest.skip("no enumeration seam")
    store = adapter.state_store()
    tag = uuid.uuid4().hex[:6]
    ids = [f"{tag}-[a]", f"{tag}-*", f"{tag}-?", f"{tag}-\\", f"{tag}-a"]
    for sid in ids:
        store.save(sid, b"x", expected_version=None)
    try:
        everything = {s.session_id for s in adapter.iter_sessions(match=f"{tag}-*")}
        assert everything == set(ids)
        # fnmatch semantics: '[a]' is a set matching 'a'; '[[]' matches a literal '['
        assert {s.session_id for s in adapter.iter_sessions(match=f"{tag}-[[]a]")} == {f"{tag}-[a]"}
        assert {s.session_id for s in adapter.iter_sessions(match=f"{tag}-[*]")} == {f"{tag}-*"}
    finally:
        for sid in ids:
            store.delete(sid)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(session=TEXTS, owner=st.one_of(st.none(), TEXTS), pending=st.one_of(st.none(), TEXTS),
       blob=st.binary(max_size=200))
def test_random_values_round_trip_or_are_refused(adapter, session, owner, pending, blob):
    sid = f"h{uuid.uuid4().hex[:6]}{session}"
    outcome = save_and_compare(adapter, sid, owner if owner else None, pending, blob)
    if "\x00" not in sid + (owner or "") + (pending or ""):
        assert outcome == "ok"


def event_store_of(adapter):
    try:
        events = adapter.event_store()
    except Exception:  # noqa: BLE001
        events = None
    if events is None:
        pytest.skip(f"{adapter.name} keeps no events")
    if adapter.name == "mongo":
        pytest.skip("commit_turn with events needs a replica set; mongomock is standalone")
    return events


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(content=TEXTS, key=TEXTS, value=TEXTS, user=TEXTS)
def test_event_texts_round_trip_or_are_refused(adapter, content, key, value, user):
    events = event_store_of(adapter)
    sid = f"ev-{uuid.uuid4().hex}"
    uid = f"u{uuid.uuid4().hex[:6]}{user}"
    event = MemoryEvent(event_id=str(uuid.uuid4()), user_id=uid, content=content,
                        meta={key: value, "nested": [value, {"k": key}]}, session_id=sid)
    try:
        adapter.commit_turn(sid, b"blob", expected_version=None, events=[event])
    except Exception as exc:  # noqa: BLE001
        assert isinstance(exc, (InvalidEvent, ValueError)) and str(exc), repr(exc)
        assert "\x00" in content + key + value + user, repr(exc)
        # refused before any write: neither the state nor the event exists
        assert adapter.state_store().load(sid) is None
        assert events.list_events(uid) == []
        return
    try:
        stored = events.list_events(uid)
        assert len(stored) == 1
        got = stored[0]
        assert (got.content, dict(got.meta), got.user_id, got.session_id) == (
            content, {key: value, "nested": [value, {"k": key}]}, uid, sid)
        assert events.get_event(event.event_id).content == content
    finally:
        adapter.state_store().delete(sid)
        purge = getattr(events, "purge_user", None)
        if purge:
            purge(uid)
