"""Session enumeration and restore on a real redis-server (SCAN + pipelined reads)."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from backends.contract import SessionEnumerator, SessionRestorer
from backends.errors import StateVersionConflict
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


def tag() -> str:
    return uuid.uuid4().hex[:12]


def ids(summaries) -> list[str]:
    return sorted(s.session_id for s in summaries)


def test_adapter_offers_the_seams(adapter):
    assert isinstance(adapter, SessionEnumerator)
    assert isinstance(adapter, SessionRestorer)


def test_lists_every_session_across_batches(adapter):
    t = tag()
    store = adapter.state_store()
    expected = [f"{t}-{i:03d}" for i in range(120)]
    for s in expected:
        store.save(s, s.encode(), expected_version=None)
    assert ids(adapter.iter_sessions(match=f"{t}-*", batch_size=7)) == expected


def test_summary_fields(redis_url, raw):
    t = tag()
    with RedisBackendAdapter(redis_url, ttl_seconds=500) as adapter:
        adapter.state_store().save(f"{t}-a", b"\x00blob", expected_version=None,
                                   owner_subject="acme", pending_message="hold")
        adapter.state_store().save(f"{t}-a", b"\x00blob2", expected_version=1,
                                   owner_subject="acme", pending_message="hold")
    (summary,) = RedisBackendAdapter(redis_url).iter_sessions(match=f"{t}-*")
    assert summary.session_id == f"{t}-a"
    assert summary.version == 2
    assert summary.owner_subject == "acme"
    assert summary.pending_message == "hold"
    assert summary.blob_size == 6
    assert summary.blob_sha256 == hashlib.sha256(b"\x00blob2").hexdigest()
    assert 400 < summary.ttl_seconds <= 500
    assert summary.extra["drift_exempt"] is False


def test_hand_written_engine_hash_is_listed_and_described(adapter, redis_server):
    t = tag()
    session_id = f"{t}-engine"
    redis_server.run_cli("HSET", f"semvec:state:{session_id}", "blob", "SVB1-native-snapshot",
                         "version", "42", "owner", "tenant/agent", "drift_exempt", "1",
                         "pending", "approve the refund?")
    (listed,) = adapter.iter_sessions(match=f"{t}-*")
    described = adapter.describe_session(session_id)
    assert listed == described
    assert described.version == 42
    assert described.owner_subject == "tenant/agent"
    assert described.pending_message == "approve the refund?"
    assert described.blob_size == len(b"SVB1-native-snapshot")
    assert described.blob_sha256 == hashlib.sha256(b"SVB1-native-snapshot").hexdigest()
    assert described.ttl_seconds is None
    assert described.extra["drift_exempt"] is True
    assert adapter.state_store().load(session_id)[0] == b"SVB1-native-snapshot"


def test_owner_filter_is_three_state(adapter):
    t = tag()
    store = adapter.state_store()
    store.save(f"{t}-owned", b"x", expected_version=None, owner_subject="acme")
    store.save(f"{t}-other", b"x", expected_version=None, owner_subject="other")
    store.save(f"{t}-none", b"x", expected_version=None)
    m = f"{t}-*"
    assert ids(adapter.iter_sessions(match=m)) == [f"{t}-none", f"{t}-other", f"{t}-owned"]
    assert ids(adapter.iter_sessions(match=m, owner_subject=None)) == [f"{t}-none"]
    assert ids(adapter.iter_sessions(match=m, owner_subject="acme")) == [f"{t}-owned"]
    assert adapter.describe_session(f"{t}-owned", owner_subject="other") is None
    assert adapter.describe_session(f"{t}-owned", owner_subject=None) is None
    assert adapter.describe_session(f"{t}-none", owner_subject=None) is not None


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("{t}-a?c", ["{t}-abc", "{t}-aéc"]),
        ("{t}-a[b]c", ["{t}-abc"]),
        ("{t}-a[!b]c", ["{t}-aéc"]),
        ("{t}-x*", ["{t}-x*y", "{t}-x?y", "{t}-x[y]", "{t}-x\\y"]),
        ("{t}-x[*]y", ["{t}-x*y"]),
        ("{t}-x\\y", ["{t}-x\\y"]),
        ("{t}-x[[]y]", ["{t}-x[y]"]),
    ],
)
def test_glob_match_follows_fnmatch_even_for_special_characters(adapter, pattern, expected):
    t = tag()
    store = adapter.state_store()
    for s in ["abc", "aéc", "x*y", "x?y", "x[y]", "x\\y"]:
        store.save(f"{t}-{s}", b"x", expected_version=None)
    got = ids(adapter.iter_sessions(match=pattern.format(t=t)))
    assert got == sorted(e.format(t=t) for e in expected)


def test_enumeration_lists_damaged_rows_as_damaged(adapter, raw):
    """#14.1: a row that cannot be read strictly is listed as damaged (which field),
    never skipped silently and never failing the listing; other keys are not sessions."""
    t = tag()
    raw.set(f"semvec:state:{t}-string", "not a session")
    raw.hset(f"semvec:state:{t}-noversion", "blob", "x")
    raw.hset(f"semvec:state:{t}-noblob", mapping={"version": "2", "owner": ""})
    raw.hset(f"semvec:state:{t}-fraction", mapping={"blob": "x", "version": "1.5"})
    adapter.state_store().save(f"{t}-real", b"x", expected_version=None)
    raw.hset(f"semvec:events:e:{t}-real", "event_id", "not a session either")
    listed = {s.session_id: s for s in adapter.iter_sessions(match=f"{t}-*")}
    assert sorted(listed) == sorted(f"{t}-{n}" for n in
                                    ("string", "noversion", "noblob", "fraction", "real"))
    assert "damaged" not in listed[f"{t}-real"].extra
    for name, field in (("string", "key"), ("noversion", "version"), ("noblob", "blob"),
                        ("fraction", "version")):
        summary = listed[f"{t}-{name}"]
        assert f"'{field}'" in summary.extra["damaged"], (name, summary.extra)
        assert adapter.describe_session(f"{t}-{name}").extra["damaged"] == summary.extra["damaged"]
    assert listed[f"{t}-noblob"].version == 2 and listed[f"{t}-fraction"].version == 0


def test_describe_missing_session(adapter):
    assert adapter.describe_session(f"{tag()}-missing") is None


def test_restore_at_a_version_never_overwrites(adapter, raw):
    t = tag()
    s = f"{t}-restored"
    adapter.restore_session(s, b"snap", version=17, owner_subject="acme",
                            pending_message="p", ttl_seconds=900)
    state = adapter.state_store().load_full(s)
    assert (state.blob, state.version, state.owner_subject, state.pending_message) == (
        b"snap", 17, "acme", "p")
    assert raw.hget(f"semvec:state:{s}", "drift_exempt") == b"0"
    assert 800 < raw.ttl(f"semvec:state:{s}") <= 900
    with pytest.raises(StateVersionConflict):
        adapter.restore_session(s, b"other", version=1)
    assert adapter.state_store().load(s)[0] == b"snap"
    assert adapter.state_store().save(s, b"next", expected_version=17, owner_subject="acme") == 18


def test_enumeration_survives_a_script_flush(adapter, raw):
    t = tag()
    adapter.state_store().save(f"{t}-a", b"x", expected_version=None)
    raw.script_flush()
    assert ids(adapter.iter_sessions(match=f"{t}-*")) == [f"{t}-a"]
    raw.script_flush()
    assert adapter.describe_session(f"{t}-a").version == 1


def test_enumeration_on_a_dead_server_is_unreachable():
    from backends.errors import BackendUnreachable
    from tests.support.fixtures.redis_server import closed_port

    adapter = RedisBackendAdapter(f"redis://127.0.0.1:{closed_port()}/0", timeout=0.5, retries=0)
    with pytest.raises(BackendUnreachable):
        list(adapter.iter_sessions())
    with pytest.raises(BackendUnreachable):
        adapter.describe_session("x")


def test_summaries_are_plain_dataclasses(adapter):
    from dataclasses import asdict

    t = tag()
    adapter.state_store().save(f"{t}-a", b"x", expected_version=None)
    (summary,) = adapter.iter_sessions(match=f"{t}-*")
    assert asdict(summary)["extra"] == {"drift_exempt": False}  # deep-copyable, JSON-able


def test_scope_and_owner_subject_parity_on_the_session_seams(adapter):
    """#12: iter_sessions, describe_session and load_full_many take scope= as well;
    scope=None is unscoped, unlike owner_subject=None (unowned rows only)."""
    from backends.contract import OwnerScope

    t = tag()
    store = adapter.state_store()
    store.save(f"{t}-a", b"a", expected_version=None, owner_subject="acme/bot")
    store.save(f"{t}-b", b"b", expected_version=None, owner_subject="acme")
    store.save(f"{t}-c", b"c", expected_version=None)
    listing = lambda **kw: ids(adapter.iter_sessions(match=f"{t}-*", **kw))  # noqa: E731
    assert listing(scope=OwnerScope("acme", "bot")) == listing(owner_subject="acme/bot") \
        == [f"{t}-a"]
    assert listing(scope=OwnerScope("acme")) == listing(owner_subject="acme") == [f"{t}-b"]
    assert listing(scope=None) == listing() == [f"{t}-a", f"{t}-b", f"{t}-c"]
    assert listing(owner_subject=None) == [f"{t}-c"]
    for s in (f"{t}-a", f"{t}-b", f"{t}-c"):
        assert adapter.describe_session(s, scope=OwnerScope("acme")) == \
            adapter.describe_session(s, owner_subject="acme")
        assert adapter.describe_session(s, scope=None) == adapter.describe_session(s)
    assert adapter.describe_session(f"{t}-b", owner_subject=None) is None
    every = [f"{t}-a", f"{t}-b", f"{t}-c"]
    assert store.load_full_many(every, scope=OwnerScope("acme")) == \
        store.load_full_many(every, owner_subject="acme")
    assert store.load_full_many(every, scope=None) == store.load_full_many(every)
    assert [r is not None for r in store.load_full_many(every, owner_subject=None)] == \
        [False, False, True]
