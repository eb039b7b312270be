"""commit_turn on a real redis-server: one Lua script writes state and events or nothing."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime, timezone

import pytest

from backends.contract import MemoryEvent
from backends.errors import InvalidEvent, StateVersionConflict
from backends.redis import RedisBackendAdapter

pytestmark = pytest.mark.redis


@pytest.fixture
def adapter(redis_url):
    with RedisBackendAdapter(redis_url) as adapter:
        yield adapter


@pytest.fixture
def raw(redis_server):
    with redis_server.client() as client:
        yield client


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def eid() -> str:
    return str(uuid.uuid4())


def event(user: str, content: str = "hello", **kw) -> MemoryEvent:
    return MemoryEvent(event_id=eid(), user_id=user, content=content, **kw)


def snapshot(raw, session_id: str, user: str) -> dict:
    """Everything a turn for (session, user) could have touched."""
    return {
        "state": raw.hgetall(f"semvec:state:{session_id}"),
        "seq_index": raw.zrange(f"semvec:events:u:{user}", 0, -1, withscores=True),
        "time_index": raw.zrange(f"semvec:events:t:{user}", 0, -1, withscores=True),
        "counter": raw.get(f"semvec:events:seq:{user}"),
        "event_keys": sorted(raw.scan_iter(match="semvec:events:e:*")),
    }


def test_turn_writes_state_and_events_together(adapter):
    s, user = uid("s"), uid("u")
    events = [event(user, "one", session_id=s), event(user, "two", session_id=s)]
    assert adapter.commit_turn(s, b"v1", expected_version=None, events=events) == 1
    stored = adapter.event_store().list_events(user)
    assert [e.content for e in stored] == ["one", "two"]
    assert [e.sequence for e in stored] == [1, 2]
    assert adapter.state_store().load(s)[0] == b"v1"
    assert adapter.commit_turn(s, b"v2", expected_version=1, events=[event(user, "three")]) == 2
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1, 2, 3]


def test_turn_without_events_is_a_plain_save(adapter):
    s = uid("s")
    assert adapter.commit_turn(s, b"a", expected_version=None) == 1
    assert adapter.commit_turn(s, b"b", expected_version=1, events=[]) == 2
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"c", expected_version=None)


@pytest.mark.parametrize("expected_version", [None, 1, 5])
def test_a_conflict_writes_no_event(adapter, raw, expected_version):
    s, user = uid("s"), uid("u")
    adapter.commit_turn(s, b"v1", expected_version=None, events=[event(user)])
    adapter.commit_turn(s, b"v2", expected_version=1)
    before = snapshot(raw, s, user)
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"lost", expected_version=expected_version,
                            events=[event(user, "lost"), event(user, "lost too")])
    assert snapshot(raw, s, user) == before


def test_a_conflict_on_a_missing_row_writes_nothing(adapter, raw):
    s, user = uid("s"), uid("u")
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"x", expected_version=3, events=[event(user)])
    assert snapshot(raw, s, user) == {"state": {}, "seq_index": [], "time_index": [],
                                      "counter": None, "event_keys": []}


@pytest.mark.parametrize(
    "bad",
    [
        lambda u: MemoryEvent(event_id="", user_id=u, content="x"),
        lambda u: MemoryEvent(event_id=eid(), user_id="", content="x"),
        lambda u: MemoryEvent(event_id=eid(), user_id=u, content="x",
                              created_at=datetime(2026, 1, 1)),
        lambda u: MemoryEvent(event_id=eid(), user_id=u, content="x",
                              embedding=(0.1, float("nan"))),
        lambda u: MemoryEvent(event_id=eid(), user_id=u, content="x", meta={"k": object()}),
        lambda u: MemoryEvent(event_id=eid(), user_id=u, content="x", sequence=4),
        lambda u: {"event_id": "dict", "user_id": u},
    ],
    ids=["empty-id", "empty-user", "naive-time", "nan-embedding", "meta-not-json",
         "preset-sequence", "not-an-event"],
)
def test_a_malformed_event_leaves_state_and_events_untouched(adapter, raw, bad):
    s, user = uid("s"), uid("u")
    adapter.commit_turn(s, b"v1", expected_version=None, events=[event(user)])
    before = snapshot(raw, s, user)
    with pytest.raises(InvalidEvent):
        adapter.commit_turn(s, b"v2", expected_version=1, events=[event(user), bad(user)])
    assert snapshot(raw, s, user) == before
    assert adapter.commit_turn(s, b"v2", expected_version=1, events=[event(user)]) == 2


def test_an_event_id_that_already_exists_is_refused_without_any_write(adapter, raw):
    s, user = uid("s"), uid("u")
    first = event(user)
    adapter.commit_turn(s, b"v1", expected_version=None, events=[first])
    before = snapshot(raw, s, user)
    again = MemoryEvent(event_id=first.event_id, user_id=user, content="replayed")
    with pytest.raises(InvalidEvent, match="already exists"):
        adapter.commit_turn(s, b"v2", expected_version=1, events=[event(user), again])
    assert snapshot(raw, s, user) == before
    assert adapter.event_store().get_event(first.event_id).content == "hello"


def test_duplicate_ids_within_one_turn_are_refused(adapter, raw):
    s, user = uid("s"), uid("u")
    e = event(user)
    with pytest.raises(InvalidEvent):
        adapter.commit_turn(s, b"v1", expected_version=None, events=[e, e])
    assert snapshot(raw, s, user)["state"] == {}


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda raw, u: raw.set(f"semvec:events:t:{u}", "not a zset"),
        lambda raw, u: raw.hset(f"semvec:events:u:{u}", "not", "a zset"),
        lambda raw, u: raw.set(f"semvec:events:seq:{u}", "seven"),
        lambda raw, u: raw.rpush(f"semvec:events:seq:{u}", "1"),
    ],
    ids=["time-index-string", "seq-index-hash", "counter-not-integer", "counter-list"],
)
def test_a_corrupt_event_key_refuses_the_turn_before_any_write(adapter, raw, corrupt):
    from backends.errors import IntegrityError

    s, user, other = uid("s"), uid("u"), uid("u")
    corrupt(raw, other)
    adapter.commit_turn(s, b"v1", expected_version=None, events=[event(user)])
    before = snapshot(raw, s, user)
    turn = [event(user), event(other)]
    with pytest.raises(IntegrityError):
        adapter.commit_turn(s, b"v2", expected_version=1, events=turn)
    assert snapshot(raw, s, user) == before
    assert not any(raw.exists(f"semvec:events:e:{e.event_id}") for e in turn)


def test_a_state_key_of_another_type_refuses_the_turn(adapter, raw):
    from backends.errors import IntegrityError

    s, user = uid("s"), uid("u")
    raw.set(f"semvec:state:{s}", "not a hash")
    with pytest.raises(IntegrityError):
        adapter.commit_turn(s, b"v2", expected_version=1, events=[event(user)])
    with pytest.raises(StateVersionConflict):  # an insert never overwrites any key
        adapter.commit_turn(s, b"v1", expected_version=None, events=[event(user)])
    assert raw.get(f"semvec:state:{s}") == b"not a hash"
    assert raw.get(f"semvec:events:seq:{user}") is None
    assert not list(raw.scan_iter(match="semvec:events:e:*"))


def test_owner_check_on_commit_turn(adapter, raw):
    s, user = uid("s"), uid("u")
    adapter.commit_turn(s, b"v1", expected_version=None, owner_subject="acme",
                        events=[event(user, owner_subject="acme")])
    before = snapshot(raw, s, user)
    with pytest.raises(StateVersionConflict, match="another owner"):
        adapter.commit_turn(s, b"evil", expected_version=1, owner_subject="intruder",
                            events=[event(user, owner_subject="intruder")])
    assert snapshot(raw, s, user) == before
    # the same owner, and an unnamed owner (which clears it), are allowed
    assert adapter.commit_turn(s, b"v2", expected_version=1, owner_subject="acme") == 2
    version = adapter.state_store().current_version(s)
    assert adapter.commit_turn(s, b"v3", expected_version=version) == version + 1
    assert adapter.state_store().load_owner(s) is None
    # an unowned row may be claimed by a named owner
    assert adapter.commit_turn(s, b"v4", expected_version=3, owner_subject="beta") == 4
    assert adapter.state_store().load_full(s).owner_subject == "beta"


def test_pending_and_ttl_through_commit_turn(redis_url, raw):
    s = uid("s")
    key = f"semvec:state:{s}"
    with RedisBackendAdapter(redis_url, ttl_seconds=60) as adapter:
        adapter.commit_turn(s, b"a", expected_version=None, pending_message="ask")
        assert adapter.state_store().load_full(s).pending_message == "ask"
        assert 0 < raw.ttl(key) <= 60
    with RedisBackendAdapter(redis_url) as adapter:
        adapter.commit_turn(s, b"b", expected_version=1, pending_message="")
        assert adapter.state_store().load_full(s).pending_message is None
        # the engine's rule: a write with TTL 0 leaves the existing expiry in place
        assert 0 < raw.ttl(key) <= 60
        assert raw.hget(key, "drift_exempt") == b"0"


def test_sequences_stay_gap_free_after_rejected_turns(adapter):
    s, user = uid("s"), uid("u")
    adapter.commit_turn(s, b"v1", expected_version=None, events=[event(user), event(user)])
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"x", expected_version=7, events=[event(user)])
    with pytest.raises(InvalidEvent):
        adapter.commit_turn(s, b"x", expected_version=1,
                            events=[event(user), MemoryEvent(event_id="", user_id=user, content="")])
    adapter.commit_turn(s, b"v2", expected_version=1, owner_subject="a", events=[event(user)])
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"x", expected_version=2, owner_subject="b", events=[event(user)])
    adapter.commit_turn(s, b"v3", expected_version=2, events=[event(user)])
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1, 2, 3, 4]


def test_sequences_are_per_user_within_one_turn(adapter):
    s, alice, bob = uid("s"), uid("alice"), uid("bob")
    adapter.commit_turn(s, b"v1", expected_version=None,
                        events=[event(alice), event(bob), event(alice)])
    assert [e.sequence for e in adapter.event_store().list_events(alice)] == [1, 2]
    assert [e.sequence for e in adapter.event_store().list_events(bob)] == [1]


def test_no_lost_update_under_concurrent_turns(adapter):
    """8 threads x 200 successful turns (retrying on conflict) against ONE session."""
    s, user = uid("s"), uid("u")
    adapter.commit_turn(s, b"0", expected_version=None)
    threads, turns = 8, 200
    successes = [0] * threads
    conflicts = [0] * threads
    errors: list[BaseException] = []
    store = adapter.state_store()

    def worker(index: int) -> None:
        try:
            for n in range(turns):
                while True:
                    version = store.current_version(s)
                    try:
                        adapter.commit_turn(
                            s, f"{index}:{n}".encode(), expected_version=version,
                            events=[event(user, f"{index}:{n}")],
                        )
                    except StateVersionConflict:
                        conflicts[index] += 1
                        continue
                    successes[index] += 1
                    break
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    started = time.monotonic()
    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(120)
    elapsed = time.monotonic() - started
    print(f"\n{threads} threads x {turns} turns in {elapsed:.1f}s")
    assert not any(t.is_alive() for t in pool), "a writer never finished (livelock?)"
    assert not errors, errors[:3]
    total = sum(successes)
    assert total == threads * turns
    assert store.current_version(s) == 1 + total
    events = adapter.event_store().list_events(user)
    assert len(events) == total
    assert [e.sequence for e in events] == list(range(1, total + 1))
    assert len({e.content for e in events}) == total  # exactly one event per successful turn


def test_scripts_reload_after_a_flush_and_reconnect_after_a_restart(redis_server, redis_url, raw):
    if not redis_server.managed:
        pytest.skip("external server cannot be restarted")
    s, user = uid("s"), uid("u")
    adapter = RedisBackendAdapter(redis_url, timeout=1)
    assert adapter.commit_turn(s, b"v1", expected_version=None, events=[event(user)]) == 1
    raw.script_flush()
    assert adapter.commit_turn(s, b"v2", expected_version=1, events=[event(user)]) == 2
    assert adapter.event_store().append(event(user)).sequence == 3
    # the pooled connection is now stale; the server comes back empty and without scripts
    redis_server.stop()
    redis_server.start()
    assert adapter.commit_turn(s, b"again", expected_version=None, events=[event(user)]) == 1
    assert [e.sequence for e in adapter.event_store().list_events(user)] == [1]
    adapter.close()


# -- the engine's convention, lost-reply retries, owner check (#12, #14) -----------------


class EngineStyleEvent:
    """Duck-typed like the engine's event object (never imported)."""

    def __init__(self, user_id: str, content: str, session_id: str = "") -> None:
        self.event_id = uuid.uuid4()
        self.user_id = user_id
        self.created_at = datetime.now(timezone.utc)
        self.content = content
        self.embedding = [0.5, -0.5]
        self.meta = {"via": "engine"}
        self.source_event_id = None
        self.sequence = 0
        self.owner_subject = ""
        self.session_id = session_id


def test_commit_turn_takes_scope_and_engine_event_objects(adapter, raw):
    from backends.contract import OwnerScope

    s, user = uid("s"), uid("u")
    turn = [EngineStyleEvent(user, "one", s), EngineStyleEvent(user, "two", s)]
    assert adapter.commit_turn(s, b"v1", expected_version=None, scope=OwnerScope("acme"),
                               events=turn) == 1
    stored = adapter.event_store().list_events(user)
    assert [(e.event_id, e.sequence, e.embedding) for e in stored] == [
        (str(turn[0].event_id), 1, (0.5, -0.5)), (str(turn[1].event_id), 2, (0.5, -0.5))]
    assert adapter.state_store().load(s, scope=OwnerScope("acme")) == (b"v1", 1)
    before = snapshot(raw, s, user)
    # our commit_turn keeps the owner check the engine's script skips
    with pytest.raises(StateVersionConflict, match="another owner"):
        adapter.commit_turn(s, b"taken over", expected_version=1, scope=OwnerScope("evil"),
                            events=[EngineStyleEvent(user, "evil")])
    assert snapshot(raw, s, user) == before
    with pytest.raises(TypeError):
        adapter.commit_turn(s, b"x", expected_version=1, scope=OwnerScope("acme"),
                            owner_subject="acme")


@pytest.mark.parametrize("expected_version", [None, 1])
def test_a_retried_turn_returns_its_version_and_writes_nothing_again(adapter, raw,
                                                                    expected_version):
    s, user = uid("s"), uid("u")
    if expected_version is not None:
        adapter.commit_turn(s, b"v1", expected_version=None)
    turn = [event(user, "a"), event(user, "b")]
    new = adapter.commit_turn(s, b"next", expected_version=expected_version,
                              owner_subject="acme", pending_message="p", events=turn)
    after_first = snapshot(raw, s, user)
    # the reply was lost: the identical call again succeeds with the same version
    assert adapter.commit_turn(s, b"next", expected_version=expected_version,
                               owner_subject="acme", pending_message="p", events=turn) == new
    assert snapshot(raw, s, user) == after_first
    # a different blob, or the same state with other events, is still a conflict
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"other", expected_version=expected_version,
                            owner_subject="acme", pending_message="p", events=turn)
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"next", expected_version=expected_version,
                            owner_subject="acme", pending_message="p",
                            events=[event(user, "fresh")])
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"next", expected_version=expected_version,
                            owner_subject="acme", pending_message="p", events=turn[:1] + [event(user)])
    assert snapshot(raw, s, user) == after_first


@pytest.mark.parametrize(
    "bad",
    [
        lambda u: MemoryEvent(event_id="not-a-uuid", user_id=u, content="x"),
        lambda u: MemoryEvent(event_id=eid(), user_id=u, content="x", source_event_id="src"),
        lambda u: MemoryEvent(event_id=eid(), user_id=u, content="x",
                              embedding=(float("inf"),)),
    ],
    ids=["event-id", "source-id", "inf-embedding"],
)
def test_engine_unreadable_events_are_refused_before_any_write(adapter, raw, bad):
    s, user = uid("s"), uid("u")
    with pytest.raises(InvalidEvent):
        adapter.commit_turn(s, b"v1", expected_version=None, events=[event(user), bad(user)])
    assert snapshot(raw, s, user)["state"] == {}
    assert snapshot(raw, s, user)["counter"] is None


def test_a_damaged_stored_version_refuses_the_turn(adapter, raw):
    from backends.errors import CorruptState

    s, user = uid("s"), uid("u")
    raw.hset(f"semvec:state:{s}", mapping={"blob": b"x", "version": "2.0", "owner": ""})
    with pytest.raises(CorruptState) as damaged:
        adapter.commit_turn(s, b"y", expected_version=2, events=[event(user)])
    assert damaged.value.field == "version"
    assert raw.hget(f"semvec:state:{s}", "blob") == b"x"
    assert raw.get(f"semvec:events:seq:{user}") is None


def test_fault_seam_cut_connection_leaves_the_whole_turn_or_nothing(adapter, raw):
    from backends.contract import FAULT_POINTS, FaultSeam
    from backends.errors import BackendUnreachable

    assert isinstance(adapter, FaultSeam)
    assert adapter.fault_points <= FAULT_POINTS
    assert "turn.after_state" not in adapter.fault_points  # one script: no such point
    with pytest.raises(ValueError):
        with adapter.inject_fault("turn.after_state"):
            pass
    s, user = uid("s"), uid("u")
    adapter.commit_turn(s, b"v1", expected_version=None, events=[event(user)])
    turn = [event(user, "a"), event(user, "b")]
    with adapter.inject_fault("turn.cut_connection"):
        with pytest.raises(BackendUnreachable):
            adapter.commit_turn(s, b"v2", expected_version=1, events=turn)
    # the server ran the script whole or not at all; either way no half turn
    for _ in range(50):
        state = adapter.state_store().load_full(s)
        stored = adapter.event_store().list_events(user)
        landed = state.version == 2
        if landed:
            break
        time.sleep(0.01)
    if landed:
        assert state.blob == b"v2" and [e.content for e in stored] == ["hello", "a", "b"]
        # and the caller's retry of the same turn is answered, not refused
        assert adapter.commit_turn(s, b"v2", expected_version=1, events=turn) == 2
    else:
        assert state.blob == b"v1" and [e.content for e in stored] == ["hello"]
    # armed for one turn only; the pool reconnects by itself
    version = adapter.state_store().current_version(s)
    assert adapter.commit_turn(s, b"v3", expected_version=version) == version + 1


# -- the hot path (a turn without events): its inline argument check and NOSCRIPT -------


class OwnerText(str):
    """A str subclass: outside the inline check's common case, still a valid owner."""


@pytest.mark.parametrize("blob", [b"plain bytes", bytearray(b"a bytearray"),
                                  memoryview(b"a memoryview")])
def test_a_turn_without_events_stores_any_bytes_like_blob_exactly(adapter, raw, blob):
    s = uid("s")
    assert adapter.commit_turn(s, blob, expected_version=None,
                               owner_subject=OwnerText("acme")) == 1
    assert adapter.commit_turn(s, blob, expected_version=1, owner_subject="acme") == 2
    assert raw.hmget(f"semvec:state:{s}", "blob", "version", "owner") == [
        bytes(blob), b"2", b"acme"]


@pytest.mark.parametrize("args, error", [
    (("", b"x", None, None), ValueError),
    ((7, b"x", None, None), ValueError),
    (("s", "text, not bytes", None, None), TypeError),
    (("s", b"x", True, None), ValueError),
    (("s", b"x", 0, None), ValueError),
    (("s", b"x", 1.0, None), ValueError),
    (("s", b"x", None, ""), ValueError),
    (("s", b"x", None, 3), ValueError),
])
def test_a_turn_without_events_refuses_malformed_arguments_before_any_io(args, error):
    session_id, blob, expected_version, owner = args
    # a port nothing listens on: a refusal that reached the network would be unreachable
    with RedisBackendAdapter("redis://127.0.0.1:9/0", timeout=0.2) as adapter:
        with pytest.raises(error):
            adapter.commit_turn(session_id, blob, expected_version=expected_version,
                                owner_subject=owner)


def test_a_turn_without_events_reloads_the_script_after_a_flush(adapter, raw):
    s = uid("s")
    assert adapter.commit_turn(s, b"v1", expected_version=None) == 1
    raw.script_flush()
    assert adapter.commit_turn(s, b"v2", expected_version=1) == 2
    raw.script_flush()
    with pytest.raises(StateVersionConflict):
        adapter.commit_turn(s, b"stale", expected_version=1)
    assert raw.hmget(f"semvec:state:{s}", "blob", "version") == [b"v2", b"2"]


def test_scope_none_leaves_the_owner_as_given(adapter, raw):
    s = uid("s")
    assert adapter.commit_turn(s, b"v1", expected_version=None, scope=None) == 1
    assert raw.hget(f"semvec:state:{s}", "owner") == b""


@pytest.mark.parametrize("both", [dict(owner_subject=None, scope="acme"),
                                  dict(owner_subject="acme", scope=None),
                                  dict(owner_subject=None, scope=None)])
def test_commit_turn_refuses_both_spellings_even_when_one_is_none(adapter, raw, both):
    """As every other store method (takes_scope): naming both is an error whatever the
    values, because owner_subject=None (unowned) and scope=None (no owner) differ."""
    s = uid("s")
    with pytest.raises(TypeError, match="not both"):
        adapter.commit_turn(s, b"v1", expected_version=None, **both)
    assert not raw.exists(f"semvec:state:{s}")
