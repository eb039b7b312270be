"""The SQL state store on a real PostgreSQL, for both SQL backends (``postgres`` and
``pgvector`` share the engine's ``semvec_session_state``): every save/load/delete rule of
the contract, strict reads, idempotent retries and the engine's extra members.

Updated for the engine's layout (issue 13): the table has no ``blob_sha256`` column, so
the old "corrupted blob is detected by its sha256" test became the strict-read tests
(a NULL ``state_blob`` or an impossible ``version`` raise CorruptState)."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from backends.contract import UNSCOPED, LoadedState, StateStoreProtocol
from backends.errors import BackendConfigError, CorruptState, StateVersionConflict

pytestmark = pytest.mark.postgres


@pytest.fixture
def adapter(sql_adapter_factory):
    return sql_adapter_factory()


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
    if hasattr(adapter, "iter_live_items"):
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


@pytest.mark.parametrize("damage,field", [
    ("state_blob = NULL", "state_blob"),
    ("version = NULL", "version"),
    ("version = 0", "version"),
    ("version = -4", "version"),
])
def test_a_damaged_row_raises_corrupt_state_naming_session_and_field(adapter, pgvector_url,
                                                                      damage, field):
    import psycopg

    store = adapter.state_store()
    s = sid()
    store.save(s, b"original", expected_version=None)
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        # ENGINE-WIRE's literal DDL leaves these columns nullable; ours does not
        conn.execute(f"ALTER TABLE semvec_session_state ALTER COLUMN {field} DROP NOT NULL")
        conn.execute(f"UPDATE semvec_session_state SET {damage} WHERE session_id = %s", (s,))
    for read in (store.load, store.load_full):
        with pytest.raises(CorruptState) as info:
            read(s)
        assert info.value.session_id == s and info.value.field == field
        assert s in str(info.value) and field in str(info.value)
    if field == "version":
        with pytest.raises(CorruptState):
            store.current_version(s)
    # a listing reports the damage instead of failing
    listed = {x.session_id: x for x in adapter.iter_sessions()}
    assert field in listed[s].extra["damaged"]
    assert field in adapter.describe_session(s).extra["damaged"]
    # a listing with the rows (a copy's read) is strict, as load_full is
    with pytest.raises(CorruptState) as info:
        list(adapter.iter_session_states())
    assert info.value.session_id == s and info.value.field == field
    # and nothing is saved over it as if it were empty
    with pytest.raises(StateVersionConflict):
        store.save(s, b"fresh", expected_version=None)


def test_a_retried_insert_or_update_whose_result_is_stored_returns_its_version(store):
    """Lost acknowledgement: the write landed, the caller did not hear, and retries."""
    s = sid()
    assert store.save(s, b"a", expected_version=None, owner_subject="acme",
                      pending_message="p") == 1
    assert store.save(s, b"a", expected_version=None, owner_subject="acme",
                      pending_message="p") == 1
    assert store.save(s, b"b", expected_version=1, owner_subject="acme") == 2
    assert store.save(s, b"b", expected_version=1, owner_subject="acme") == 2
    # anything that differs from what is stored is still a conflict
    for blob, owner, pending in ((b"c", "acme", None), (b"b", None, None),
                                 (b"b", "acme", "p"), (b"b", "other", None)):
        with pytest.raises(StateVersionConflict):
            store.save(s, blob, expected_version=1, owner_subject=owner,
                       pending_message=pending)
    with pytest.raises(StateVersionConflict):
        store.save(s, b"a", expected_version=None, owner_subject="acme", pending_message="p")
    assert store.load_full(s) == LoadedState(b"b", 2, "acme", None)


def test_a_version_checked_delete_refuses_a_moved_row(store):
    s = sid()
    store.save(s, b"a", expected_version=None)
    store.save(s, b"b", expected_version=1)
    with pytest.raises(StateVersionConflict, match="nothing was deleted"):
        store.delete(s, expected_version=1)
    assert store.load(s) == (b"b", 2)
    assert store.delete(s, owner_subject="other", expected_version=2) is False
    assert store.delete(s, expected_version=2) is True
    assert store.delete(s, expected_version=2) is False
    with pytest.raises(ValueError):
        store.delete(s, expected_version=0)


def test_drift_exempt_is_kept_by_saves_and_defaults_false(store):
    s = sid()
    assert store.is_drift_exempt(s) is False
    store.set_drift_exempt(s, True)  # a missing row: no-op
    assert store.is_drift_exempt(s) is False
    store.save(s, b"a", expected_version=None)
    assert store.is_drift_exempt(s) is False
    store.set_drift_exempt(s, True)
    store.save(s, b"b", expected_version=1)
    assert store.is_drift_exempt(s) is True
    assert store.describe_session(s).extra["drift_exempt"] is True


def test_the_engine_convention_scope_and_load_tuple(store):
    from backends.contract import OwnerScope

    s, u = sid(), sid()
    scope = OwnerScope("acme", "bot")
    assert store.save(s, b"a", expected_version=None, scope=scope) == 1
    assert store.load(s, scope=scope) == (b"a", 1)
    assert store.load(s, scope=OwnerScope("other")) is None
    assert store.load(s, scope=None) == (b"a", 1)  # scope=None is unscoped on reads
    assert store.load_full(s, scope=scope).owner_subject == "acme/bot"
    assert store.load_owner(s) == "acme/bot" and store.current_version(s) == 1
    store.save(u, b"u", expected_version=None)
    assert store.load(u, scope=None) == (b"u", 1)
    assert store.load(u, owner_subject=None) == (b"u", 1)
    assert store.load(s, owner_subject=None) is None  # but owner_subject=None is unowned only
    with pytest.raises(TypeError):
        store.load(s, scope=scope, owner_subject="acme/bot")
    assert store.delete(s, scope=OwnerScope("other")) is False
    assert store.delete(s, scope=scope) is True


def test_engine_rows_with_an_empty_owner_are_unowned_and_adoptable(store, pgvector_url):
    import psycopg

    s = sid()
    store.save(s, b"a", expected_version=None)
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("UPDATE semvec_session_state SET owner_subject = '' WHERE session_id = %s",
                     (s,))
    assert store.load(s, owner_subject=None) == (b"a", 1)
    assert store.load_full(s).owner_subject is None
    assert store.save(s, b"b", expected_version=1, owner_subject="acme") == 2


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


def test_schema_option_isolates_tables(sql_adapter_factory):
    a = sql_adapter_factory(schema="tenant_a")
    b = sql_adapter_factory(schema="tenant_b")
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


def test_create_tables_off_refuses_writes_with_advice(sql_adapter_factory):
    adapter = sql_adapter_factory(create_tables=False)
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


def test_a_table_of_the_engines_name_with_another_shape_is_a_config_error(adapter, pgvector_url):
    """What an older semvecctl pgvector created: refused clearly, never written into."""
    import psycopg

    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE semvec_session_state (session_id text PRIMARY KEY,"
                     " version bigint NOT NULL, blob bytea NOT NULL, blob_sha256 text NOT NULL)")
        conn.execute("CREATE TABLE compliance_events (event_id text PRIMARY KEY)")
    with pytest.raises(BackendConfigError, match="engine's SQL layout"):
        adapter.state_store().load("s")
    with pytest.raises(BackendConfigError, match="engine's SQL layout"):
        adapter.state_store().save("s", b"x", expected_version=None)
    assert adapter.health_details(2.0)["legacy_tables"] == ["compliance_events"]


def test_versions_beyond_the_engines_integer_column_are_refused_before_any_write(adapter):
    with pytest.raises(ValueError, match="INTEGER"):
        adapter.restore_session(sid(), b"x", version=2**31)
    with pytest.raises(ValueError, match="INTEGER"):
        adapter.state_store().save(sid(), b"x", expected_version=2**31 - 1)
    s = sid()
    adapter.restore_session(s, b"x", version=2**31 - 2)
    assert adapter.state_store().save(s, b"y", expected_version=2**31 - 2) == 2**31 - 1


def test_purge_idle_removes_only_sessions_idle_beyond_the_ttl(store, pgvector_url):
    import psycopg

    old, fresh = sid(), sid()
    store.save(old, b"o", expected_version=None, owner_subject="acme")
    store.save(fresh, b"f", expected_version=None)
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("UPDATE semvec_session_state SET updated_at = updated_at"
                     " - interval '2 hours' WHERE session_id = %s", (old,))
    assert store.purge_idle(0) == 0
    assert store.purge_idle(3600) == 1
    assert store.load(old) is None and store.load(fresh) == (b"f", 1)
