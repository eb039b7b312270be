"""pgvector state store on a real PostgreSQL: every save/load/delete rule of the contract."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from backends.contract import UNSCOPED, LoadedState, StateStoreProtocol
from backends.errors import BackendConfigError, IntegrityError, StateVersionConflict

pytestmark = pytest.mark.postgres


@pytest.fixture
def adapter(pgvector_adapter_factory):
    return pgvector_adapter_factory()


@pytest.fixture
def store(adapter):
    return adapter.state_store()


def sid() -> str:
    return f"s-{uuid.uuid4().hex}"


def test_state_store_is_the_same_instance_and_satisfies_the_protocol(adapter):
    assert adapter.state_store() is adapter.state_store()
    assert isinstance(adapter.state_store(), StateStoreProtocol)


def test_reads_on_an_unprovisioned_database_find_nothing_and_create_nothing(adapter, pgvector_url):
    import psycopg

    store = adapter.state_store()
    assert store.load("nope") is None
    assert store.load_full("nope") is None
    assert store.current_version("nope") is None
    assert store.delete("nope") is False
    assert list(adapter.iter_sessions()) == []
    assert adapter.event_store().list_events("u") == []
    assert list(adapter.iter_live_items("nope")) == []
    with psycopg.connect(pgvector_url) as conn:
        assert conn.execute("SELECT to_regclass('public.semvec_session_state')").fetchone() == (None,)


def test_insert_starts_at_one_and_never_overwrites(store):
    s = sid()
    assert store.save(s, b"one", expected_version=None) == 1
    with pytest.raises(StateVersionConflict):
        store.save(s, b"two", expected_version=None)
    assert store.load(s)[0] == b"one"


def test_update_needs_the_exact_version_and_advances_by_one(store):
    s = sid()
    store.save(s, b"v1", expected_version=None)
    assert store.save(s, b"v2", expected_version=1) == 2
    with pytest.raises(StateVersionConflict):
        store.save(s, b"stale", expected_version=1)
    with pytest.raises(StateVersionConflict):
        store.save(s, b"future", expected_version=5)
    assert store.load_full(s) == LoadedState(b"v2", 2, None, None)


def test_update_of_a_missing_session_is_a_conflict(store):
    with pytest.raises(StateVersionConflict):
        store.save(sid(), b"x", expected_version=1)


def test_row_is_written_whole_an_omitted_owner_clears_it(store):
    s = sid()
    store.save(s, b"a", expected_version=None, owner_subject="acme", pending_message="hi")
    assert store.load_full(s) == LoadedState(b"a", 1, "acme", "hi")
    store.save(s, b"b", expected_version=1)
    assert store.load_full(s) == LoadedState(b"b", 2, None, None)


def test_empty_pending_message_is_stored_as_none(store):
    s = sid()
    store.save(s, b"a", expected_version=None, pending_message="")
    assert store.load_full(s).pending_message is None


def test_owner_rule_on_update(store):
    s = sid()
    store.save(s, b"a", expected_version=None, owner_subject="acme/bot")
    # another owner is refused as a conflict, and nothing changes
    with pytest.raises(StateVersionConflict, match="another owner"):
        store.save(s, b"evil", expected_version=1, owner_subject="other")
    assert store.load_full(s) == LoadedState(b"a", 1, "acme/bot", None)
    # the same owner may update
    assert store.save(s, b"b", expected_version=1, owner_subject="acme/bot") == 2
    # an unowned row may be claimed
    u = sid()
    store.save(u, b"a", expected_version=None)
    assert store.save(u, b"b", expected_version=1, owner_subject="acme") == 2
    assert store.load_owner(u) == "acme"


def test_three_state_owner_filter_on_reads_and_deletes(store):
    owned, unowned, anon = sid(), sid(), sid()
    store.save(owned, b"o", expected_version=None, owner_subject="acme")
    store.save(unowned, b"u", expected_version=None)
    store.save(anon, b"n", expected_version=None, owner_subject="__anonymous__")
    # omitted = unscoped
    assert store.load(owned)[0] == b"o" and store.load(unowned)[0] == b"u"
    assert store.load(owned, owner_subject=UNSCOPED)[0] == b"o"
    # None = only unowned rows
    assert store.load(owned, owner_subject=None) is None
    assert store.load(unowned, owner_subject=None)[0] == b"u"
    assert store.load(anon, owner_subject=None) is None  # the sentinel is an ordinary owner
    # a string = only that exact owner
    assert store.load(owned, owner_subject="acme")[0] == b"o"
    assert store.load(owned, owner_subject="acme/bot") is None
    assert store.load(unowned, owner_subject="acme") is None
    assert store.load(anon, owner_subject="__anonymous__")[0] == b"n"
    assert store.current_version(owned, owner_subject="other") is None
    assert store.load_owner(owned, owner_subject="acme") == "acme"
    assert store.load_full(owned, owner_subject=None) is None
    # deletes obey the same filter
    assert store.delete(owned, owner_subject="other") is False
    assert store.delete(owned, owner_subject=None) is False
    assert store.delete(owned, owner_subject="acme") is True
    assert store.delete(owned) is False
    assert store.delete(unowned) is True


@pytest.mark.parametrize("bad", [0, "", 5.0])
def test_malformed_owner_filters_are_rejected(store, bad):
    with pytest.raises(ValueError):
        store.load("x", owner_subject=bad)


def test_binary_blobs_round_trip_byte_for_byte(store):
    s = sid()
    blob = bytes(range(256)) * 64 + b"\x00"
    store.save(s, blob, expected_version=None)
    assert store.load(s)[0] == blob


def test_a_corrupted_blob_is_detected_by_its_sha256(store, pgvector_url):
    import psycopg

    s = sid()
    store.save(s, b"original", expected_version=None)
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("UPDATE semvec_session_state SET blob = 'tampered' WHERE session_id = %s", (s,))
    with pytest.raises(IntegrityError):
        store.load(s)


def test_restore_creates_at_the_given_version_and_never_overwrites(adapter):
    s = sid()
    adapter.restore_session(s, b"imported", version=7, owner_subject="acme", pending_message="p")
    assert adapter.state_store().load_full(s) == LoadedState(b"imported", 7, "acme", "p")
    with pytest.raises(StateVersionConflict):
        adapter.restore_session(s, b"again", version=1)
    assert adapter.state_store().save(s, b"next", expected_version=7, owner_subject="acme") == 8


def test_enumeration_reads_no_blobs_and_filters(adapter):
    store = adapter.state_store()
    prefix = f"enum-{uuid.uuid4().hex[:8]}"
    blobs = {}
    for i in range(7):
        blob = f"blob-{i}".encode() * (i + 1)
        owner = "acme" if i % 2 else None
        store.save(f"{prefix}-{i}", blob, expected_version=None, owner_subject=owner)
        blobs[f"{prefix}-{i}"] = blob
    store.save("unrelated", b"x", expected_version=None)
    listed = list(adapter.iter_sessions(match=f"{prefix}-*", batch_size=2))
    assert [s.session_id for s in listed] == sorted(blobs)
    for summary in listed:
        assert summary.blob_size == len(blobs[summary.session_id])
        assert summary.blob_sha256 == hashlib.sha256(blobs[summary.session_id]).hexdigest()
        assert summary.version == 1 and summary.updated_at is not None
    assert {s.session_id for s in adapter.iter_sessions(owner_subject="acme")} == {
        f"{prefix}-{i}" for i in (1, 3, 5)
    }
    assert "unrelated" in {s.session_id for s in adapter.iter_sessions(owner_subject=None)}
    described = adapter.describe_session(f"{prefix}-3", owner_subject="acme")
    assert described is not None and described.owner_subject == "acme"
    assert adapter.describe_session(f"{prefix}-3", owner_subject=None) is None


def test_schema_option_isolates_tables(pgvector_adapter_factory):
    a = pgvector_adapter_factory(schema="tenant_a")
    b = pgvector_adapter_factory(schema="tenant_b")
    a.state_store().save("same", b"a", expected_version=None)
    assert b.state_store().load("same") is None
    b.state_store().save("same", b"b", expected_version=None)
    assert a.state_store().load("same")[0] == b"a"


def test_schema_from_the_uri_query(pgvector_url):
    from backends.pgvector import PgVectorAdapter

    adapter = PgVectorAdapter(pgvector_url + "?schema=from_uri", dimensions=8)
    try:
        assert adapter.config.schema == "from_uri"
        adapter.state_store().save("x", b"1", expected_version=None)
        assert adapter.describe_session("x").version == 1
    finally:
        adapter.close()


def test_create_tables_off_refuses_writes_with_advice(pgvector_adapter_factory):
    adapter = pgvector_adapter_factory(create_tables=False)
    with pytest.raises(BackendConfigError, match="indexes ensure"):
        adapter.state_store().save("x", b"1", expected_version=None)
    adapter.ensure_schema()
    assert adapter.state_store().save("x", b"1", expected_version=None) == 1


def test_tables_dropped_behind_the_adapters_back_are_recreated_on_write(adapter, pgvector_url):
    import psycopg

    store = adapter.state_store()
    store.save("a", b"1", expected_version=None)
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("DROP TABLE semvec_session_state")
    assert store.load("a") is None
    assert store.save("a", b"2", expected_version=None) == 1
