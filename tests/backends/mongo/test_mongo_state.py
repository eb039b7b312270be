"""Mongo state store, configuration and error categories.

Runs in-process against ``mongomock`` (a fake: no real MongoDB can run here); the real
server path is covered by tests/backends/mongo/test_mongo_integration.py when SEMVEC_TEST_MONGODB_URI
is set.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fixtures.mongo import db_name, make_adapter, mongo_client  # noqa: F401

from backends.contract import UNSCOPED, LoadedState, SessionEnumerator, SessionRestorer, HealthDetails
from backends.errors import (
    BackendAuthError,
    BackendConfigError,
    BackendError,
    BackendTransient,
    BackendUnreachable,
    IntegrityError,
    StateVersionConflict,
)


def sid() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def adapter(make_adapter):
    return make_adapter()


@pytest.fixture
def store(adapter):
    return adapter.state_store()


# -- construction and configuration -----------------------------------------------------


def test_identity_and_same_store_every_call(adapter):
    assert adapter.name == "mongo"
    assert adapter.is_persistent is True
    assert adapter.state_store() is adapter.state_store()
    assert adapter.event_store() is adapter.event_store()
    for seam in (SessionEnumerator, SessionRestorer, HealthDetails):
        assert isinstance(adapter, seam)


def test_importing_the_package_does_not_import_the_driver():
    import subprocess

    code = ("import sys, backends.mongo as m; assert m.MongoBackendAdapter.is_persistent is True; "
            "assert 'pymongo' not in sys.modules, 'pymongo imported'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_no_uri_and_no_env_is_a_clear_config_error(monkeypatch):
    from backends.mongo import MongoBackendAdapter

    monkeypatch.delenv("MONGODB_URI", raising=False)
    with pytest.raises(BackendConfigError, match="MONGODB_URI"):
        MongoBackendAdapter()


def test_env_settings_and_bounded_timeouts(monkeypatch):
    from backends.mongo import MongoBackendAdapter

    monkeypatch.setenv("MONGODB_URI", "mongodb://user:hunter2@db.invalid:27017/")
    monkeypatch.setenv("SEMVEC_MONGO_DB", "semvec_custom")
    monkeypatch.setenv("SEMVEC_MONGO_SESSION_TTL_S", "3600")
    monkeypatch.setenv("SEMVEC_MONGO_ITEM_SYNC", "yes")
    adapter = MongoBackendAdapter()  # lazily connecting: no I/O here
    try:
        assert adapter.settings.database == "semvec_custom"
        assert adapter.settings.session_ttl_s == 3600
        assert adapter.settings.item_sync is True
        opts = adapter.client.options
        assert opts.server_selection_timeout == 5.0
        assert opts.pool_options.connect_timeout == 5.0
        assert "hunter2" not in repr(adapter)
    finally:
        adapter.close()
        adapter.close()  # idempotent


def test_default_database_is_semvec(monkeypatch, mongo_client):
    from backends.mongo import MongoBackendAdapter

    monkeypatch.delenv("SEMVEC_MONGO_DB", raising=False)
    assert MongoBackendAdapter(client=mongo_client).settings.database == "semvec"


@pytest.mark.parametrize("uri", ["redis://localhost:6379", "http://x"])
def test_non_mongo_uri_refused(uri):
    from backends.mongo import MongoBackendAdapter

    with pytest.raises(BackendConfigError):
        MongoBackendAdapter(uri)


def test_bad_env_flag_refused(monkeypatch, mongo_client):
    from backends.mongo import MongoBackendAdapter

    monkeypatch.setenv("SEMVEC_MONGO_ITEM_SYNC", "maybe")
    with pytest.raises(BackendConfigError, match="SEMVEC_MONGO_ITEM_SYNC"):
        MongoBackendAdapter(client=mongo_client)


def test_unreachable_server_is_categorised_and_health_is_false():
    from backends.mongo import MongoBackendAdapter

    adapter = MongoBackendAdapter("mongodb://127.0.0.1:9/", server_selection_timeout_ms=200,
                                  health_timeout_s=0.5)
    try:
        assert adapter.check_health() is False
        with pytest.raises(BackendUnreachable) as info:
            adapter.state_store().load("x")
        assert info.value.__cause__ is not None
        assert "127.0.0.1" not in str(info.value)
        details = adapter.health_details(0.5)
        assert details["reachable"] is False and details["error"] == "BackendUnreachable"
    finally:
        adapter.close()


def test_injected_client_is_not_closed(make_adapter, mongo_client):
    adapter = make_adapter()
    adapter.close()
    mongo_client.admin.command("ping")  # still usable


# -- the save/load rules (the memory backend's semantics) -----------------------------


def test_insert_then_cas_versions(store):
    s = sid()
    assert store.save(s, b"one", expected_version=None) == 1
    assert store.save(s, b"two", expected_version=1) == 2
    assert store.load_full(s) == LoadedState(b"two", 2, None, None)


def test_insert_never_overwrites(store):
    s = sid()
    store.save(s, b"one", expected_version=None)
    with pytest.raises(StateVersionConflict, match="already exists"):
        store.save(s, b"other", expected_version=None)
    assert store.load(s)[0] == b"one"


@pytest.mark.parametrize("expected", [1, 3])
def test_cas_needs_exact_version(store, expected):
    s = sid()
    store.save(s, b"one", expected_version=None)
    store.save(s, b"two", expected_version=1)
    if expected == 1:
        with pytest.raises(StateVersionConflict, match="version 2"):
            store.save(s, b"x", expected_version=expected)
    else:
        with pytest.raises(StateVersionConflict):
            store.save(s, b"x", expected_version=expected)
    assert store.current_version(s) == 2


def test_cas_on_missing_row_is_conflict(store):
    with pytest.raises(StateVersionConflict, match="does not exist"):
        store.save(sid(), b"x", expected_version=1)


def test_row_written_whole_omitted_owner_clears(store):
    s = sid()
    store.save(s, b"a", expected_version=None, owner_subject="t1", pending_message="hi")
    store.save(s, b"b", expected_version=1)
    loaded = store.load_full(s)
    assert loaded.owner_subject is None and loaded.pending_message is None


def test_empty_pending_stored_as_none(store):
    s = sid()
    store.save(s, b"a", expected_version=None, pending_message="")
    assert store.load_full(s).pending_message is None
    doc = store.collection.find_one({"_id": s})
    assert doc["pending_message"] is None


def test_owner_rule_on_update(store):
    s = sid()
    store.save(s, b"a", expected_version=None)  # unowned
    assert store.save(s, b"b", expected_version=1, owner_subject="t1") == 2  # claims it
    assert store.save(s, b"c", expected_version=2, owner_subject="t1") == 3
    with pytest.raises(StateVersionConflict, match="another owner"):
        store.save(s, b"d", expected_version=3, owner_subject="t2")
    assert store.load(s)[0] == b"c"


def test_three_state_owner_filter(store):
    owned, unowned, anon = sid(), sid(), sid()
    store.save(owned, b"o", expected_version=None, owner_subject="t1")
    store.save(unowned, b"u", expected_version=None)
    store.save(anon, b"a", expected_version=None, owner_subject="__anonymous__")
    assert store.load(owned)[0] == b"o"
    assert store.load(owned, owner_subject=UNSCOPED)[0] == b"o"
    assert store.load(owned, owner_subject=None) is None
    assert store.load(owned, owner_subject="t2") is None
    assert store.load(unowned, owner_subject=None)[0] == b"u"
    assert store.load(unowned, owner_subject="t1") is None
    assert store.load(anon, owner_subject=None) is None
    assert store.load(anon, owner_subject="__anonymous__")[0] == b"a"
    assert store.load_owner(owned) == "t1"
    assert store.current_version(owned, owner_subject="t2") is None
    with pytest.raises(ValueError):
        store.load(owned, owner_subject="")


def test_delete_respects_owner_filter(store):
    s = sid()
    store.save(s, b"a", expected_version=None, owner_subject="t1")
    assert store.delete(s, owner_subject="t2") is False
    assert store.delete(s, owner_subject=None) is False
    assert store.delete(s, owner_subject="t1") is True
    assert store.delete(s) is False


def test_document_layout_matches_the_engine(store):
    s = sid()
    store.save(s, b"payload", expected_version=None, owner_subject="t/agent", pending_message="p")
    doc = store.collection.find_one({"_id": s})
    assert set(doc) == {"_id", "version", "blob", "blob_sha256", "owner_subject",
                        "pending_message", "updated_at"}
    assert doc["blob_sha256"] == hashlib.sha256(b"payload").hexdigest()
    assert store.collection.name == "semvec_session_state"


def test_load_verifies_sha256(store):
    s = sid()
    store.save(s, b"payload", expected_version=None)
    store.collection.update_one({"_id": s}, {"$set": {"blob": b"tampered"}})
    with pytest.raises(IntegrityError):
        store.load(s)
    # reads that do not touch the blob still work, so an operator can inspect and delete
    assert store.current_version(s) == 1
    assert store.delete(s) is True


def test_input_validation(store):
    with pytest.raises(ValueError):
        store.save("", b"x", expected_version=None)
    with pytest.raises(TypeError):
        store.save(sid(), "text", expected_version=None)
    with pytest.raises(ValueError):
        store.save(sid(), b"x", expected_version=0)
    with pytest.raises(ValueError):
        store.save(sid(), b"x", expected_version=True)


# -- enumeration and restore ------------------------------------------------------------


def test_iter_sessions_streams_summaries(adapter, store):
    prefix = uuid.uuid4().hex[:6]
    for i in range(5):
        store.save(f"{prefix}-{i}", b"x" * (i + 1), expected_version=None,
                   owner_subject="t1" if i % 2 else None)
    summaries = list(adapter.iter_sessions(match=f"{prefix}-*", batch_size=2))
    assert [s.session_id for s in summaries] == [f"{prefix}-{i}" for i in range(5)]
    assert [s.blob_size for s in summaries] == [1, 2, 3, 4, 5]
    assert summaries[2].blob_sha256 == hashlib.sha256(b"xxx").hexdigest()
    assert [s.session_id for s in adapter.iter_sessions(owner_subject="t1")] == \
        [f"{prefix}-1", f"{prefix}-3"]
    assert len(list(adapter.iter_sessions(owner_subject=None, match=f"{prefix}-?"))) == 3
    assert adapter.describe_session(f"{prefix}-1", owner_subject="t2") is None
    assert adapter.describe_session(f"{prefix}-1").version == 1


def test_glob_is_anchored_and_escaped():
    import re

    from backends.mongo.state import glob_to_regex

    rx = re.compile(glob_to_regex("a.b*[xy]?"))
    assert rx.match("a.bzzzx1") and not rx.match("aXbzzzx1") and not rx.match("za.bx1")


def test_enumeration_uses_binary_size_pipeline(store, monkeypatch):
    """On a real server blob sizes come from $binarySize, so no blob is transferred."""
    seen = []

    class Recorder:
        def __init__(self, inner):
            self._inner = inner

        def aggregate(self, pipeline, **kwargs):
            seen.append(pipeline)
            return iter([{"_id": "a", "version": 1, "blob_sha256": "h", "blob_size": 7,
                          "owner_subject": None, "pending_message": None}])

    monkeypatch.setattr(store, "_collection", Recorder(store.collection))
    summaries = list(store.iter_sessions(owner_subject="t1"))
    assert summaries[0].blob_size == 7
    assert seen == [[
        {"$match": {"owner_subject": "t1"}},
        {"$sort": {"_id": 1}},
        {"$addFields": {"blob_size": {"$cond": [
            {"$eq": [{"$type": "$blob"}, "binData"]}, {"$binarySize": "$blob"}, None]}}},
        {"$project": {"blob": 0}},
    ]]


def test_ttl_remaining_reported(make_adapter):
    adapter = make_adapter(session_ttl_s=600)
    s = sid()
    adapter.state_store().save(s, b"x", expected_version=None)
    ttl = adapter.describe_session(s).ttl_seconds
    assert 590 <= ttl <= 600


def test_restore_keeps_version_and_never_overwrites(adapter):
    s = sid()
    adapter.restore_session(s, b"blob", version=7, owner_subject="t1", pending_message="p")
    assert adapter.state_store().load_full(s) == LoadedState(b"blob", 7, "t1", "p")
    with pytest.raises(StateVersionConflict):
        adapter.restore_session(s, b"other", version=1)
    assert adapter.state_store().save(s, b"next", expected_version=7, owner_subject="t1") == 8


# -- error categories --------------------------------------------------------------------


def _raising_collection(exc):
    class Raising:
        name = "semvec_session_state"

        def __getattr__(self, _):
            def fail(*a, **k):
                raise exc
            return fail

    return Raising()


@pytest.mark.parametrize(
    "make_exc, category",
    [
        (lambda pe: pe.OperationFailure("auth failed on host secret-host", code=18), BackendAuthError),
        (lambda pe: pe.OperationFailure("not authorized on semvec", code=13), BackendAuthError),
        (lambda pe: pe.ServerSelectionTimeoutError("secret-host:27017 timed out"), BackendUnreachable),
        (lambda pe: pe.AutoReconnect("connection reset secret-host"), BackendTransient),
        (lambda pe: pe.NotPrimaryError("secret-host stepped down"), BackendTransient),
        (lambda pe: pe.OperationFailure("WriteConflict secret-host", code=112), BackendTransient),
        (lambda pe: pe.OperationFailure("retry secret-host", code=424243,
                                        details={"errorLabels": ["RetryableWriteError"]}),
         BackendTransient),
        (lambda pe: pe.ConnectionFailure("secret-host refused"), BackendUnreachable),
        (lambda pe: pe.ConfigurationError("bad option near secret-host"), BackendConfigError),
        (lambda pe: pe.InvalidURI("mongodb://secret-host:x"), BackendConfigError),
        (lambda pe: pe.OperationFailure("bad value", code=2), BackendConfigError),
        (lambda pe: pe.OperationFailure("weird", code=424242), BackendError),
    ],
)
def test_driver_errors_map_to_categories(store, monkeypatch, caplog, make_exc, category):
    from pymongo import errors as pe

    original = make_exc(pe)
    monkeypatch.setattr(store, "_collection", _raising_collection(original))
    caplog.set_level(logging.DEBUG, logger="backends.mongo")
    with pytest.raises(category) as info:
        store.load_full("session-that-must-not-be-logged")
    assert info.value.__cause__ is original
    assert "secret-host" not in str(info.value)
    text = caplog.text
    assert "session-that-must-not-be-logged" not in text and "secret-host" not in text
    assert "op=state.load" in text


def test_duplicate_key_on_insert_is_a_conflict(store, monkeypatch):
    """A lost insert race (the driver's duplicate key) is a conflict, not an error, when
    the document found is not this very write."""
    from pymongo import errors as pe

    s = sid()
    real = store.collection
    real.insert_one({"_id": s, "version": 1, "blob": b"theirs",
                     "blob_sha256": hashlib.sha256(b"theirs").hexdigest()})

    class DupOnInsert:
        name = real.name

        def insert_one(self, *a, **k):
            raise pe.DuplicateKeyError("E11000 dup", code=11000)

        def __getattr__(self, attr):
            return getattr(real, attr)

    monkeypatch.setattr(store, "_collection", DupOnInsert())
    with pytest.raises(StateVersionConflict):
        store.save(s, b"x", expected_version=None)


def test_timeouts_in_the_uri_win_over_defaults():
    from backends.mongo import MongoBackendAdapter

    adapter = MongoBackendAdapter("mongodb://db.invalid/?serverSelectionTimeoutMS=1234")
    try:
        assert adapter.client.options.server_selection_timeout == 1.234
        assert adapter.client.options.pool_options.connect_timeout == 5.0
    finally:
        adapter.close()
    explicit = MongoBackendAdapter("mongodb://db.invalid/?serverSelectionTimeoutMS=1234",
                                   server_selection_timeout_ms=300)
    try:
        assert explicit.client.options.server_selection_timeout == 0.3
    finally:
        explicit.close()


@settings(max_examples=400, deadline=None)
@given(pattern=st.text(alphabet="ab[]!-*?^\\\n.", max_size=8),
       candidate=st.text(alphabet="ab[]!-^\\\n.", max_size=6))
def test_glob_to_regex_agrees_with_fnmatch(pattern, candidate):
    """Session --match on Mongo must select exactly what the memory backend's fnmatch does
    (pure function: no database involved)."""
    import fnmatch

    from backends.mongo.state import glob_to_regex

    assert bool(re.match(glob_to_regex(pattern), candidate)) == fnmatch.fnmatchcase(candidate, pattern)
