"""Every state-store rule of the contract, on a real redis-server (see tests/support/fixtures)."""

from __future__ import annotations

import uuid

import pytest

from backends.contract import UNSCOPED, BackendAdapter, LoadedState, StateStoreProtocol
from backends.errors import CorruptState, IntegrityError, StateVersionConflict
from backends.redis import RedisBackendAdapter

pytestmark = pytest.mark.redis


@pytest.fixture
def adapter(redis_url):
    with RedisBackendAdapter(redis_url) as adapter:
        yield adapter


@pytest.fixture
def store(adapter):
    return adapter.state_store()


@pytest.fixture
def raw(redis_server):
    with redis_server.client() as client:
        yield client


def sid() -> str:
    return f"s-{uuid.uuid4().hex}"


def test_adapter_satisfies_the_contract(adapter):
    assert isinstance(adapter, BackendAdapter)
    assert isinstance(adapter.state_store(), StateStoreProtocol)
    assert adapter.state_store() is adapter.state_store()
    assert adapter.event_store() is adapter.event_store()
    assert adapter.retrieval_backend() is None
    assert RedisBackendAdapter.name == "redis"
    assert RedisBackendAdapter.is_persistent is True


def test_insert_writes_version_one_and_never_overwrites(store):
    s = sid()
    assert store.save(s, b"first", expected_version=None) == 1
    with pytest.raises(StateVersionConflict):
        store.save(s, b"second", expected_version=None)
    assert store.load(s)[0] == b"first"


def test_update_only_on_exact_match_and_exactly_plus_one(store):
    s = sid()
    store.save(s, b"v1", expected_version=None)
    assert store.save(s, b"v2", expected_version=1) == 2
    for stale in (1, 3, 99):
        with pytest.raises(StateVersionConflict):
            store.save(s, b"lost", expected_version=stale)
    assert store.load_full(s) == LoadedState(b"v2", 2, None, None)


def test_update_of_a_missing_row_conflicts_and_creates_nothing(store):
    s = sid()
    with pytest.raises(StateVersionConflict):
        store.save(s, b"x", expected_version=1)
    assert store.load(s) is None


def test_blob_is_opaque_bytes(store):
    s = sid()
    blob = bytes(range(256)) * 3 + b"\x00\r\n"
    store.save(s, blob, expected_version=None)
    assert store.load(s)[0] == blob
    store.save(s, b"", expected_version=1)
    assert store.load(s)[0] == b""


def test_omitted_owner_clears_the_stored_owner(store):
    s = sid()
    store.save(s, b"a", expected_version=None, owner_subject="acme")
    assert store.load_owner(s) == "acme"
    store.save(s, b"b", expected_version=1)
    assert store.load_owner(s) is None
    assert store.load_full(s).owner_subject is None


def test_owner_rule_on_update(store):
    s = sid()
    store.save(s, b"a", expected_version=None)
    # a named owner may claim an unowned row
    assert store.save(s, b"b", expected_version=1, owner_subject="acme/bot") == 2
    # ... and update its own row
    assert store.save(s, b"c", expected_version=2, owner_subject="acme/bot") == 3
    # another owner is refused as a conflict, nothing changes
    with pytest.raises(StateVersionConflict, match="another owner"):
        store.save(s, b"evil", expected_version=3, owner_subject="other")
    assert store.load_full(s) == LoadedState(b"c", 3, "acme/bot", None)


def test_anonymous_sentinel_is_an_ordinary_owner(store):
    s = sid()
    store.save(s, b"a", expected_version=None, owner_subject="__anonymous__")
    assert store.load(s, owner_subject=None) is None
    assert store.load(s, owner_subject="__anonymous__")[0] == b"a"
    with pytest.raises(StateVersionConflict):
        store.save(s, b"b", expected_version=1, owner_subject="acme")


def test_empty_pending_message_is_stored_as_none(store, raw):
    s = sid()
    store.save(s, b"a", expected_version=None, pending_message="")
    assert store.load_full(s).pending_message is None
    store.save(s, b"b", expected_version=1, pending_message="waiting for tool")
    assert store.load_full(s).pending_message == "waiting for tool"
    store.save(s, b"c", expected_version=2)
    assert store.load_full(s).pending_message is None
    assert raw.hget(f"semvec:state:{s}", "pending") == b""


@pytest.mark.parametrize("reader", ["load", "load_full", "load_owner", "current_version"])
def test_three_state_owner_filter_on_reads(store, reader):
    owned, unowned = sid(), sid()
    store.save(owned, b"o", expected_version=None, owner_subject="acme")
    store.save(unowned, b"u", expected_version=None)
    read = getattr(store, reader)

    def present(session_id, **kw):
        result = read(session_id, **kw)
        return result is not None

    # omitted: unscoped, both visible (load_owner returns None for the unowned row)
    assert present(owned)
    assert read(owned, owner_subject=UNSCOPED) == read(owned)
    # None: only unowned rows
    assert not present(owned, owner_subject=None)
    # exact owner only
    assert present(owned, owner_subject="acme")
    assert not present(owned, owner_subject="acme/bot")
    assert not present(unowned, owner_subject="acme")
    if reader != "load_owner":
        assert present(unowned)
        assert present(unowned, owner_subject=None)


def test_three_state_owner_filter_on_delete(store):
    owned, unowned = sid(), sid()
    store.save(owned, b"o", expected_version=None, owner_subject="acme")
    store.save(unowned, b"u", expected_version=None)
    assert store.delete(owned, owner_subject=None) is False
    assert store.delete(owned, owner_subject="other") is False
    assert store.delete(unowned, owner_subject="acme") is False
    assert store.load(owned)[0] == b"o" and store.load(unowned)[0] == b"u"
    assert store.delete(owned, owner_subject="acme") is True
    assert store.delete(unowned, owner_subject=None) is True
    assert store.load(owned) is None and store.load(unowned) is None
    s = sid()
    store.save(s, b"x", expected_version=None, owner_subject="acme")
    assert store.delete(s) is True  # unscoped
    assert store.delete(s) is False


def test_deleted_session_can_be_inserted_again(store):
    s = sid()
    store.save(s, b"a", expected_version=None)
    store.save(s, b"b", expected_version=1)
    assert store.delete(s)
    assert store.save(s, b"c", expected_version=None) == 1


def test_bad_filters_and_arguments_are_refused_before_any_write(store):
    s = sid()
    with pytest.raises(ValueError):
        store.load(s, owner_subject="")
    with pytest.raises(ValueError):
        store.delete(s, owner_subject=5)
    with pytest.raises(ValueError):
        store.save(s, b"x", expected_version=0)
    with pytest.raises(ValueError):
        store.save(s, b"x", expected_version=True)
    with pytest.raises(ValueError):
        store.save(s, b"x", expected_version=None, owner_subject="")
    with pytest.raises(TypeError):
        store.save(s, "text", expected_version=None)
    assert store.load(s) is None


def test_hash_layout_matches_the_engine(store, raw):
    s = sid()
    store.save(s, b"blob", expected_version=None, owner_subject="acme/bot", pending_message="p")
    assert raw.hgetall(f"semvec:state:{s}") == {
        b"blob": b"blob",
        b"version": b"1",
        b"owner": b"acme/bot",
        b"drift_exempt": b"0",
        b"pending": b"p",
    }
    store.save(s, b"blob2", expected_version=1)
    assert raw.hgetall(f"semvec:state:{s}")[b"owner"] == b""


def test_drift_exempt_is_never_changed_by_a_save(store, raw):
    s = sid()
    store.save(s, b"a", expected_version=None)
    raw.hset(f"semvec:state:{s}", "drift_exempt", "1")
    store.save(s, b"b", expected_version=1, owner_subject="acme")
    assert raw.hget(f"semvec:state:{s}", "drift_exempt") == b"1"


def test_engine_written_row_is_readable_and_updatable(store, raw):
    s = sid()
    raw.hset(f"semvec:state:{s}", mapping={
        "blob": b"SVB\x01engine", "version": "7", "owner": "", "drift_exempt": "1", "pending": "",
    })
    assert store.load_full(s) == LoadedState(b"SVB\x01engine", 7, None, None)
    assert store.save(s, b"ours", expected_version=7, owner_subject="t") == 8
    assert raw.hget(f"semvec:state:{s}", "drift_exempt") == b"1"


def test_ttl_applied_on_each_write_and_zero_leaves_it(redis_url, raw):
    """The engine's rule: a write with TTL 0 leaves an existing expiry in place."""
    s = sid()
    key = f"semvec:state:{s}"
    with RedisBackendAdapter(redis_url, ttl_seconds=100) as with_ttl:
        with_ttl.state_store().save(s, b"a", expected_version=None)
        assert 0 < raw.ttl(key) <= 100
        raw.expire(key, 5)
        with_ttl.state_store().save(s, b"b", expected_version=1)
        assert raw.ttl(key) > 5  # re-applied
    with RedisBackendAdapter(redis_url, ttl_seconds=0) as no_ttl:
        assert no_ttl.state_store().ttl_seconds() == 0
        raw.expire(key, 50)
        no_ttl.state_store().save(s, b"c", expected_version=2)
        assert 0 < raw.ttl(key) <= 50  # untouched, neither removed nor re-applied
        raw.persist(key)
        no_ttl.state_store().save(s, b"d", expected_version=3)
        assert raw.ttl(key) == -1


def test_ttl_from_environment(redis_url, raw, monkeypatch):
    monkeypatch.setenv("SEMVEC_REDIS_SESSION_TTL_S", "250")
    s = sid()
    with RedisBackendAdapter(redis_url) as adapter:
        assert adapter.settings.ttl_seconds == 250
        adapter.state_store().save(s, b"a", expected_version=None)
    assert 200 < raw.ttl(f"semvec:state:{s}") <= 250


def test_wrong_key_type_is_corrupt_state(store, raw):
    s = sid()
    raw.set(f"semvec:state:{s}", "not a hash")
    for call in (lambda: store.load(s), lambda: store.current_version(s),
                 lambda: store.save(s, b"x", expected_version=1),
                 lambda: store.delete(s, owner_subject="acme"),
                 lambda: store.load_full_many([s])):
        with pytest.raises(CorruptState) as damaged:
            call()
        assert damaged.value.session_id == s and damaged.value.field == "key"
        assert isinstance(damaged.value, IntegrityError)
        assert damaged.value.__cause__ is not None  # the driver's reply is kept
    assert raw.get(f"semvec:state:{s}") == b"not a hash"


def test_scripts_survive_a_script_flush(store, raw):
    s = sid()
    store.save(s, b"a", expected_version=None)
    raw.script_flush()
    assert store.save(s, b"b", expected_version=1) == 2  # NOSCRIPT -> load -> retry
    assert store.delete(s)


def test_close_is_idempotent(redis_url):
    adapter = RedisBackendAdapter(redis_url)
    adapter.state_store().save(sid(), b"a", expected_version=None)
    adapter.close()
    adapter.close()


# -- strict reads (#14.1) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "row, field",
    [
        ({"version": "3", "owner": "", "pending": "", "drift_exempt": "0"}, "blob"),
        ({"blob": b"x", "owner": "", "pending": "", "drift_exempt": "0"}, "version"),
        ({"blob": b"x", "version": "1.5", "owner": ""}, "version"),
        ({"blob": b"x", "version": "-4", "owner": ""}, "version"),
        ({"blob": b"x", "version": "0", "owner": ""}, "version"),
        ({"blob": b"x", "version": "", "owner": ""}, "version"),
        ({"blob": b"x", "version": " 2", "owner": ""}, "version"),
        ({"blob": b"x", "version": "seven", "owner": ""}, "version"),
        ({"blob": b"x", "version": "2", "owner": b"\xff\xfe"}, "owner"),
        ({"blob": b"x", "version": "2", "owner": "", "pending": b"\xc3"}, "pending"),
    ],
    ids=["blob-missing", "version-missing", "version-fraction", "version-negative",
         "version-zero", "version-empty", "version-space", "version-word",
         "owner-not-utf8", "pending-not-utf8"],
)
def test_damaged_rows_raise_corrupt_state_naming_session_and_field(store, raw, row, field):
    s = sid()
    raw.hset(f"semvec:state:{s}", mapping=row)
    before = raw.hgetall(f"semvec:state:{s}")
    readers = [store.load, store.load_full, lambda x: store.load_full_many([x])]
    if field != "blob":
        readers += [store.current_version, store.load_owner]
    for read in readers:
        with pytest.raises(CorruptState) as damaged:
            read(s)
        assert damaged.value.session_id == s and damaged.value.field == field
        assert s in str(damaged.value) and field in str(damaged.value)
    if field == "version":  # an update never writes over a damaged version
        with pytest.raises(CorruptState):
            store.save(s, b"over", expected_version=1)
        assert raw.hgetall(f"semvec:state:{s}") == before


def test_a_damaged_row_of_another_owner_stays_hidden(store, raw):
    s = sid()
    raw.hset(f"semvec:state:{s}", mapping={"blob": b"x", "version": "x1", "owner": "acme"})
    assert store.load(s, owner_subject="beta") is None
    with pytest.raises(CorruptState):
        store.load(s, owner_subject="acme")


# -- idempotent retries after a lost acknowledgement (#14.2) ---------------------------


def test_a_retried_insert_returns_one_and_a_different_blob_still_conflicts(store, raw):
    s = sid()
    assert store.save(s, b"first", expected_version=None, owner_subject="acme",
                      pending_message="p") == 1
    # the reply was "lost": the caller sends the identical call again
    assert store.save(s, b"first", expected_version=None, owner_subject="acme",
                      pending_message="p") == 1
    assert store.load_full(s) == LoadedState(b"first", 1, "acme", "p")
    for different in (dict(blob=b"other", owner_subject="acme", pending_message="p"),
                      dict(blob=b"first", owner_subject="beta", pending_message="p"),
                      dict(blob=b"first", owner_subject=None, pending_message="p"),
                      dict(blob=b"first", owner_subject="acme", pending_message=None)):
        blob = different.pop("blob")
        with pytest.raises(StateVersionConflict):
            store.save(s, blob, expected_version=None, **different)
    # once the row has moved on, the old insert is a conflict again
    store.save(s, b"second", expected_version=1, owner_subject="acme")
    with pytest.raises(StateVersionConflict):
        store.save(s, b"first", expected_version=None, owner_subject="acme",
                   pending_message="p")


def test_a_retried_cas_returns_the_new_version_and_a_different_blob_still_conflicts(store):
    s = sid()
    store.save(s, b"v1", expected_version=None)
    assert store.save(s, b"v2", expected_version=1, owner_subject="acme") == 2
    assert store.save(s, b"v2", expected_version=1, owner_subject="acme") == 2  # retry
    assert store.load_full(s) == LoadedState(b"v2", 2, "acme", None)
    with pytest.raises(StateVersionConflict, match="version 2"):
        store.save(s, b"v2 but different", expected_version=1, owner_subject="acme")
    with pytest.raises(StateVersionConflict):
        store.save(s, b"v2", expected_version=1, owner_subject="acme",
                   pending_message="changed")
    store.save(s, b"v3", expected_version=2, owner_subject="acme")
    with pytest.raises(StateVersionConflict):  # two versions on: no longer a retry
        store.save(s, b"v2", expected_version=1, owner_subject="acme")
    assert store.current_version(s) == 3


def test_a_retried_restore_succeeds_and_a_different_one_conflicts(store):
    s = sid()
    store.restore_session(s, b"r", version=5, owner_subject="acme")
    store.restore_session(s, b"r", version=5, owner_subject="acme")
    with pytest.raises(StateVersionConflict):
        store.restore_session(s, b"r", version=6, owner_subject="acme")
    assert store.load_full(s) == LoadedState(b"r", 5, "acme", None)


# -- version-checked delete (#14.3) -----------------------------------------------------


def test_delete_with_expected_version(store, raw):
    s = sid()
    store.save(s, b"a", expected_version=None, owner_subject="acme")
    store.save(s, b"b", expected_version=1, owner_subject="acme")
    before = raw.hgetall(f"semvec:state:{s}")
    with pytest.raises(StateVersionConflict, match="nothing was deleted"):
        store.delete(s, expected_version=1)
    assert raw.hgetall(f"semvec:state:{s}") == before
    # the owner filter first: a row that is not yours is not there (no version leaks)
    assert store.delete(s, owner_subject="beta", expected_version=1) is False
    assert store.delete(s, owner_subject=None, expected_version=2) is False
    for bad in (0, -1, True, "2"):
        with pytest.raises(ValueError):
            store.delete(s, expected_version=bad)
    assert raw.hgetall(f"semvec:state:{s}") == before
    assert store.delete(s, owner_subject="acme", expected_version=2) is True
    assert store.load(s) is None
    assert store.delete(s, expected_version=2) is False  # gone: nothing to delete


# -- drift_exempt and the TTL, as the engine calls them ---------------------------------


def test_drift_exempt_members(store, raw):
    s = sid()
    assert store.is_drift_exempt(s) is False
    store.set_drift_exempt(s, True)  # a missing session stays missing
    assert not raw.exists(f"semvec:state:{s}")
    store.save(s, b"a", expected_version=None)
    assert store.is_drift_exempt(s) is False
    raw.expire(f"semvec:state:{s}", 500)
    store.set_drift_exempt(s, True)
    assert store.is_drift_exempt(s) is True
    assert store.current_version(s) == 1 and 0 < raw.ttl(f"semvec:state:{s}") <= 500
    store.save(s, b"b", expected_version=1, owner_subject="acme")
    assert store.is_drift_exempt(s) is True  # a save never changes it
    store.set_drift_exempt(s, False)
    assert raw.hget(f"semvec:state:{s}", "drift_exempt") == b"0"


# -- both owner conventions on every store method (#12) ---------------------------------

READS = ["load", "load_full", "load_owner", "current_version"]


@pytest.mark.parametrize("reader", READS)
def test_scope_and_owner_subject_give_identical_reads(store, reader):
    from backends.contract import OwnerScope

    owned, unowned, agent = sid(), sid(), sid()
    store.save(owned, b"o", expected_version=None, owner_subject="acme")
    store.save(unowned, b"u", expected_version=None)
    store.save(agent, b"a", expected_version=None, owner_subject="acme/bot")
    read = getattr(store, reader)
    for s in (owned, unowned, agent):
        assert read(s, scope=OwnerScope("acme")) == read(s, owner_subject="acme")
        assert read(s, scope=OwnerScope("acme", "bot")) == read(s, owner_subject="acme/bot")
        # scope=None is the engine's "unscoped": the same as omitting the owner ...
        assert read(s, scope=None) == read(s)
    # ... and NOT our owner_subject=None ("unowned rows only")
    assert read(owned, scope=None) is not None
    assert read(owned, owner_subject=None) is None
    with pytest.raises(TypeError):
        read(owned, owner_subject="acme", scope=OwnerScope("acme"))


def test_scope_and_owner_subject_give_identical_writes_and_deletes(store):
    from backends.contract import OwnerScope

    a, b = sid(), sid()
    assert store.save(a, b"x", expected_version=None, scope=OwnerScope("acme", "bot")) == 1
    assert store.save(b, b"x", expected_version=None, owner_subject="acme/bot") == 1
    assert store.load_full(a) == store.load_full(b) == LoadedState(b"x", 1, "acme/bot", None)
    for s in (a, b):  # another owner's scoped update is refused either way
        with pytest.raises(StateVersionConflict):
            store.save(s, b"y", expected_version=1, scope=OwnerScope("beta"))
        with pytest.raises(StateVersionConflict):
            store.save(s, b"y", expected_version=1, owner_subject="beta")
    # scope=None on a write is "no owner": the row is written whole, the owner cleared
    assert store.save(a, b"y", expected_version=1, scope=None) == 2
    assert store.save(b, b"y", expected_version=1) == 2
    assert store.load_owner(a) is None and store.load_owner(b) is None
    store.save(a, b"z", expected_version=2, owner_subject="acme")
    store.save(b, b"z", expected_version=2, owner_subject="acme")
    assert store.delete(a, scope=OwnerScope("beta")) is False
    assert store.delete(b, owner_subject="beta") is False
    assert store.delete(a, scope=OwnerScope("acme"), expected_version=3) is True
    assert store.delete(b, owner_subject="acme", expected_version=3) is True
    # delete(scope=None) is unscoped; delete(owner_subject=None) only unowned rows
    c = sid()
    store.save(c, b"x", expected_version=None, owner_subject="acme")
    assert store.delete(c, owner_subject=None) is False
    assert store.delete(c, scope=None) is True


def test_declares_what_the_conformance_suite_checks(adapter):
    assert adapter.state_store().idempotent_retries is True
    assert adapter.event_store().assigns_sequences is True
