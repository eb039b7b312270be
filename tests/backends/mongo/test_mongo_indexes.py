"""Mongo index manifest, ensure (the only mutating path) and read-only validate.

Regular indexes run in-process on ``mongomock`` (a fake). Atlas search indexes exist
only on Atlas, so they run on the fake search-index registry of tests/support/fixtures/mongo.py,
and their definitions and the commands that create them are asserted for exact shape.
mongomock does not keep index collations (a real server omits the simple collation
too), so collation drift is tested on listIndexes-shaped documents.
"""

from __future__ import annotations

import pytest

from tests.support.fixtures.mongo import (  # noqa: F401
    command_log,
    db_name,
    make_adapter,
    mongo_client,
    search_registry,
)

from backends.contract import FieldDiff, IndexManager

VEC_384 = {
    "fields": [
        {"type": "vector", "path": "embedding", "numDimensions": 384, "similarity": "cosine"},
        {"type": "filter", "path": "session_id"},
        {"type": "filter", "path": "evicted"},
        {"type": "filter", "path": "owner_subject"},
    ]
}
LEX = {
    "mappings": {
        "dynamic": False,
        "fields": {
            "text": {"type": "string"},
            "session_id": {"type": "token"},
            "evicted": {"type": "boolean"},
            "owner_subject": {"type": "token"},
        },
    }
}


def by_name(rows):
    return {r.name: r for r in rows}


def diffs(report):
    return {d.field: (d.expected, d.actual) for d in report.differences}


@pytest.fixture
def adapter(make_adapter, search_registry, command_log):
    return make_adapter(item_sync=True, dimensions=384, session_ttl_s=3600)


# -- the manifest ----------------------------------------------------------------------


def test_plan_lists_everything_with_all_options(adapter):
    assert isinstance(adapter, IndexManager)
    plan = by_name(adapter.index_plan())
    assert set(plan) == {"ix_state_owner", "semvec_session_ttl", "ix_evt_user", "ix_evt_user_seq",
                         "ix_evt_user_time", "ix_items_session", "ix_items_live_recency",
                         "semvec_items_vec", "semvec_items_lex"}
    assert plan["semvec_session_ttl"].definition == {
        "keys": [["updated_at", 1]], "options": {"expireAfterSeconds": 3600}}
    assert plan["semvec_session_ttl"].kind == "ttl"
    assert plan["ix_evt_user_seq"].definition == {
        "keys": [["user_id", 1], ["sequence", 1]],
        "options": {"unique": True, "collation": {"locale": "simple"}}}
    assert plan["ix_items_live_recency"].definition["options"]["partialFilterExpression"] == {
        "evicted": False}
    assert plan["semvec_items_vec"].definition == {"type": "vectorSearch", "definition": VEC_384}
    assert plan["semvec_items_lex"].definition == {"type": "search", "definition": LEX}
    assert {p.target for p in plan.values()} == {
        "semvec_session_state", "compliance_events", "semvec_memory_items"}


def test_plan_follows_configuration(make_adapter):
    bare = by_name(make_adapter().index_plan())
    assert set(bare) == {"ix_state_owner", "ix_evt_user", "ix_evt_user_seq", "ix_evt_user_time"}
    sized = by_name(make_adapter().index_plan(dimensions=8))
    assert sized["semvec_items_vec"].definition["definition"]["fields"][0]["numDimensions"] == 8


def test_dimensions_inferred_from_a_mirrored_item(make_adapter):
    from backends.contract import MemoryItem

    adapter = make_adapter(item_sync=True)
    unsized = by_name(adapter.index_plan())["semvec_items_vec"]
    assert unsized.definition["definition"] is None
    adapter.sync_items("s", [MemoryItem("a", "t", embedding=(0.1,) * 12)])
    sized = by_name(adapter.index_plan())["semvec_items_vec"]
    assert sized.definition["definition"]["fields"][0]["numDimensions"] == 12


# -- ensure ----------------------------------------------------------------------------


def test_ensure_creates_everything_with_exact_commands(adapter, search_registry):
    actions = by_name(adapter.ensure_indexes())
    assert {a.action for a in actions.values()} == {"create"}
    assert all(a.applied for a in actions.values())
    creates = [c[1] for c in search_registry.calls if c[0] == "create"]
    assert creates == [
        {"name": "semvec_items_vec", "type": "vectorSearch", "definition": VEC_384},
        {"name": "semvec_items_lex", "type": "search", "definition": LEX},
    ]
    state = {i["name"]: i for i in adapter.database["semvec_session_state"].list_indexes()}
    assert state["semvec_session_ttl"]["expireAfterSeconds"] == 3600
    assert dict(state["semvec_session_ttl"]["key"]) == {"updated_at": 1}
    events = {i["name"]: i for i in adapter.database["compliance_events"].list_indexes()}
    assert events["ix_evt_user_seq"]["unique"] is True
    assert list(dict(events["ix_evt_user_seq"]["key"]).items()) == [("user_id", 1), ("sequence", 1)]
    items = {i["name"]: i for i in adapter.database["semvec_memory_items"].list_indexes()}
    assert items["ix_items_live_recency"]["partialFilterExpression"] == {"evicted": False}
    # second run: nothing to do
    again = adapter.ensure_indexes()
    assert {a.action for a in again} == {"exists"}
    assert all(r.status == "ok" for r in adapter.validate_indexes()), adapter.validate_indexes()


def test_ensure_preview_writes_nothing(adapter, search_registry, command_log):
    actions = adapter.ensure_indexes(apply=False)
    assert {a.action for a in actions} == {"create"} and not any(a.applied for a in actions)
    assert [c for c in search_registry.calls if c[0] != "list"] == []
    assert list(adapter.database["compliance_events"].list_indexes()) in ([], [
        i for i in adapter.database["compliance_events"].list_indexes() if i["name"] == "_id_"])
    assert not [c for c in command_log.commands if "collMod" in c]


def test_ttl_changes_in_place_with_collmod(make_adapter, search_registry, command_log):
    make_adapter(session_ttl_s=3600).ensure_indexes()
    changed = make_adapter(session_ttl_s=60)
    report = by_name(changed.validate_indexes())["semvec_session_ttl"]
    assert report.status == "drift" and diffs(report) == {"expireAfterSeconds": (60, 3600)}
    assert not [c for c in command_log.commands if "collMod" in c]  # validate is read-only
    preview = by_name(changed.ensure_indexes(apply=False))["semvec_session_ttl"]
    assert preview.action == "update" and not preview.applied
    action = by_name(changed.ensure_indexes())["semvec_session_ttl"]
    assert action.action == "update" and action.applied and "collMod" in action.detail
    assert [c for c in command_log.commands if "collMod" in c] == [
        {"collMod": "semvec_session_state",
         "index": {"name": "semvec_session_ttl", "expireAfterSeconds": 60}}]
    assert by_name(changed.validate_indexes())["semvec_session_ttl"].status == "ok"


def test_mismatch_left_alone_unless_recreate(make_adapter, search_registry):
    adapter = make_adapter()
    adapter.database["compliance_events"].create_index(
        [("user_id", 1), ("sequence", 1)], name="ix_evt_user_seq")  # lost `unique`
    action = by_name(adapter.ensure_indexes())["ix_evt_user_seq"]
    assert action.action == "mismatch" and "unique" in action.detail and not action.applied
    assert by_name(adapter.validate_indexes())["ix_evt_user_seq"].status == "drift"
    action = by_name(adapter.ensure_indexes(recreate=True))["ix_evt_user_seq"]
    assert action.action == "recreate" and action.applied
    assert by_name(adapter.validate_indexes())["ix_evt_user_seq"].status == "ok"


def test_same_keys_under_another_name_is_a_mismatch(make_adapter):
    adapter = make_adapter()
    adapter.database["compliance_events"].create_index([("user_id", 1)], name="legacy_user")
    action = by_name(adapter.ensure_indexes())["ix_evt_user"]
    assert action.action == "mismatch" and "legacy_user" in action.detail


# -- validate: every drift case -------------------------------------------------------


@pytest.mark.parametrize("name, coll, keys, options, expected", [
    ("ix_evt_user_time", "compliance_events", [("created_at", 1), ("user_id", 1)], {},
     {"keys": ([["user_id", 1], ["created_at", 1]], [["created_at", 1], ["user_id", 1]])}),
    ("ix_evt_user_seq", "compliance_events", [("user_id", 1), ("sequence", 1)], {},
     {"unique": (True, False)}),
    ("ix_evt_user", "compliance_events", [("user_id", 1)], {"unique": True},
     {"unique": (False, True)}),
    ("ix_evt_user", "compliance_events", [("user_id", 1)], {"sparse": True},
     {"sparse": (None, True)}),
    ("ix_items_live_recency", "semvec_memory_items", [("session_id", 1), ("updated_at", -1)], {},
     {"partialFilterExpression": ({"evicted": False}, None)}),
    ("ix_items_live_recency", "semvec_memory_items", [("session_id", 1), ("updated_at", -1)],
     {"partialFilterExpression": {"evicted": True}},
     {"partialFilterExpression": ({"evicted": False}, {"evicted": True})}),
    ("semvec_session_ttl", "semvec_session_state", [("updated_at", 1)], {"expireAfterSeconds": 10},
     {"expireAfterSeconds": (3600, 10)}),
    ("semvec_session_ttl", "semvec_session_state", [("updated_at", 1)], {},
     {"expireAfterSeconds": (3600, None)}),
])
def test_validate_reports_regular_drift(adapter, name, coll, keys, options, expected):
    adapter.database[coll].create_index(keys, name=name, **options)
    report = by_name(adapter.validate_indexes())[name]
    assert report.status == "drift"
    assert diffs(report) == expected


def test_validate_reports_missing_and_is_read_only(adapter, search_registry, command_log):
    before = {c: list(adapter.database[c].list_indexes()) for c in
              ("semvec_session_state", "compliance_events", "semvec_memory_items")}
    reports = adapter.validate_indexes()
    assert {r.status for r in reports} == {"missing"}
    assert len(reports) == 9
    after = {c: list(adapter.database[c].list_indexes()) for c in before}
    assert before == after
    assert [c for c in search_registry.calls if c[0] != "list"] == []
    assert not [c for c in command_log.commands if "collMod" in c]


def test_extra_owned_index_is_informational(make_adapter):
    adapter = make_adapter()  # no TTL configured
    adapter.database["semvec_session_state"].create_index(
        [("updated_at", 1)], name="semvec_session_ttl", expireAfterSeconds=5)
    report = by_name(adapter.validate_indexes())["semvec_session_ttl"]
    assert report.status == "extra" and report.ok and "TTL" in report.detail


@pytest.mark.parametrize("actual_collation, expected_diff", [
    (None, None),
    ({"locale": "simple"}, None),
    ({"locale": "en", "strength": 2, "caseLevel": False}, ({"locale": "simple"},
                                                           {"locale": "en", "strength": 2,
                                                            "caseLevel": False})),
])
def test_collation_drift(actual_collation, expected_diff):
    from backends.mongo.compare import compare_regular
    from backends.mongo.manifest import build_manifest

    seq = next(e for e in build_manifest(session_ttl_s=None, include_items=False, dimensions=None)
               if e.name == "ix_evt_user_seq")
    doc = {"v": 2, "key": {"user_id": 1, "sequence": 1}, "name": "ix_evt_user_seq", "unique": True}
    if actual_collation:
        doc["collation"] = actual_collation
    got = {d.field: (d.expected, d.actual) for d in compare_regular(seq, doc)}
    assert got == ({} if expected_diff is None else {"collation": expected_diff})


def test_key_directions_compare_numerically():
    from backends.mongo.compare import compare_regular
    from backends.mongo.manifest import build_manifest

    live = next(e for e in build_manifest(session_ttl_s=None, include_items=True, dimensions=4)
                if e.name == "ix_items_live_recency")
    doc = {"v": 2, "key": {"session_id": 1.0, "updated_at": -1.0}, "name": live.name,
           "partialFilterExpression": {"evicted": False}, "collation": {"locale": "simple"}}
    assert compare_regular(live, doc) == []


# -- search indexes --------------------------------------------------------------------


def _install(adapter, registry, name, type_, definition, status="READY", queryable=True):
    coll = adapter.database["semvec_memory_items"]
    registry.of(coll)[name] = {"id": "x", "name": name, "type": type_, "status": status,
                               "queryable": queryable, "latestDefinition": definition}


def _vec(**changes):
    import copy

    d = copy.deepcopy(VEC_384)
    d["fields"][0].update(changes)
    return d


@pytest.mark.parametrize("definition, expected", [
    (_vec(numDimensions=768), {"fields.embedding.numDimensions": (384, 768)}),
    (_vec(similarity="dotProduct"), {"fields.embedding.similarity": ("cosine", "dotProduct")}),
    ({"fields": VEC_384["fields"][:3]}, {"filter.owner_subject": ("filter", None)}),
    ({"fields": VEC_384["fields"] + [{"type": "filter", "path": "tier"}]},
     {"fields.tier": (None, {"type": "filter", "path": "tier"})}),
    (_vec(quantization="scalar"), {"fields.embedding.quantization": (None, "scalar")}),
])
def test_vector_index_drift(adapter, search_registry, definition, expected):
    _install(adapter, search_registry, "semvec_items_vec", "vectorSearch", definition)
    _install(adapter, search_registry, "semvec_items_lex", "search", LEX)
    reports = by_name(adapter.validate_indexes())
    assert reports["semvec_items_lex"].status == "ok"
    assert reports["semvec_items_vec"].status == "drift"
    assert diffs(reports["semvec_items_vec"]) == expected


def test_lexical_index_drift(adapter, search_registry):
    import copy

    bad = copy.deepcopy(LEX)
    bad["mappings"]["dynamic"] = True
    bad["mappings"]["fields"]["session_id"] = {"type": "string"}
    del bad["mappings"]["fields"]["owner_subject"]
    bad["analyzer"] = "lucene.english"
    _install(adapter, search_registry, "semvec_items_lex", "search", bad)
    report = by_name(adapter.validate_indexes())["semvec_items_lex"]
    assert diffs(report) == {
        "mappings.dynamic": (False, True),
        "mappings.fields.session_id.type": ("token", "string"),
        "mappings.fields.owner_subject.type": ("token", None),
        "analyzer": (None, "lucene.english"),
    }


def test_wrong_search_type_is_drift(adapter, search_registry):
    _install(adapter, search_registry, "semvec_items_vec", "search", LEX)
    assert diffs(by_name(adapter.validate_indexes())["semvec_items_vec"]) == {
        "type": ("vectorSearch", "search")}
    action = by_name(adapter.ensure_indexes(recreate=True))["semvec_items_vec"]
    assert action.action == "recreate" and "dropped and recreated" in action.detail
    assert ("drop", "semvec_items_vec") in search_registry.calls


def test_search_drift_updated_in_place_only_with_recreate(adapter, search_registry):
    _install(adapter, search_registry, "semvec_items_vec", "vectorSearch", _vec(numDimensions=768))
    action = by_name(adapter.ensure_indexes())["semvec_items_vec"]
    assert action.action == "mismatch" and "numDimensions" in action.detail
    assert not [c for c in search_registry.calls if c[0] in ("update", "drop")]
    action = by_name(adapter.ensure_indexes(recreate=True))["semvec_items_vec"]
    assert action.action == "recreate" and action.applied
    assert ("update", "semvec_items_vec", VEC_384) in search_registry.calls


@pytest.mark.parametrize("status, queryable, verdict", [
    ("BUILDING", False, "pending"),
    ("PENDING", False, "pending"),
    ("READY", False, "pending"),
    ("FAILED", False, "drift"),
    ("READY", True, "ok"),
])
def test_search_readiness(adapter, search_registry, status, queryable, verdict):
    _install(adapter, search_registry, "semvec_items_vec", "vectorSearch", VEC_384, status, queryable)
    report = by_name(adapter.validate_indexes())["semvec_items_vec"]
    assert report.status == verdict
    if verdict == "pending":
        assert diffs(report) == {"queryable": (True, False)}


def test_no_atlas_search_is_reported_not_obscure(adapter, search_registry):
    from pymongo.errors import OperationFailure

    search_registry.error = OperationFailure(
        "Using Atlas Search Database Commands and the $listSearchIndexes aggregation stage "
        "requires additional configuration.", code=31082)
    actions = by_name(adapter.ensure_indexes())
    assert actions["semvec_items_vec"].action == "unsupported"
    assert actions["semvec_items_vec"].detail == "unsupported: this deployment has no Atlas Search"
    assert actions["ix_evt_user"].action == "create"  # the rest still provisions
    reports = by_name(adapter.validate_indexes())
    assert reports["semvec_items_lex"].status == "unsupported"
    assert adapter.health_details(1.0)["search_indexes_supported"] is False


def test_plain_mongomock_has_no_search_api(make_adapter):
    adapter = make_adapter(item_sync=True, dimensions=4)
    report = by_name(adapter.validate_indexes())["semvec_items_vec"]
    assert report.status == "unsupported" and "no Atlas Search" in report.detail


def test_unsized_vector_index_is_skipped_with_advice(make_adapter, search_registry):
    adapter = make_adapter(item_sync=True)
    action = by_name(adapter.ensure_indexes())["semvec_items_vec"]
    assert action.action == "skip" and "--dimensions" in action.detail


def test_wait_for_search_indexes_reports_progress(adapter, search_registry):
    search_registry.initial_status, search_registry.initial_queryable = "BUILDING", False
    adapter.ensure_indexes()
    coll = adapter.database["semvec_memory_items"]
    seen = []
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        if now[0] >= 10:
            search_registry.set_status(coll, "semvec_items_vec", "READY", True)
        if now[0] >= 20:
            search_registry.set_status(coll, "semvec_items_lex", "READY", True)

    result = adapter.wait_for_search_indexes(timeout=100, poll=5, progress_cb=seen.append,
                                             sleep=sleep, clock=lambda: now[0])
    assert result.ready is True
    assert seen[0] == {"semvec_items_vec": "BUILDING (not queryable)",
                       "semvec_items_lex": "BUILDING (not queryable)"}
    assert seen[-1] == {"semvec_items_vec": "ready", "semvec_items_lex": "ready"}
    assert len(seen) == 5


def test_wait_times_out(adapter, search_registry):
    search_registry.initial_status, search_registry.initial_queryable = "BUILDING", False
    adapter.ensure_indexes()
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    result = adapter.wait_for_search_indexes(timeout=12, poll=5, sleep=sleep, clock=lambda: now[0])
    assert result.ready is False and set(result.states.values()) == {"BUILDING (not queryable)"}


def test_field_diff_is_the_contract_type(adapter, search_registry):
    _install(adapter, search_registry, "semvec_items_vec", "vectorSearch", _vec(numDimensions=3))
    report = by_name(adapter.validate_indexes())["semvec_items_vec"]
    assert report.differences == (FieldDiff("fields.embedding.numDimensions", 384, 3),)


def test_search_index_creation_makes_sure_the_collection_exists(make_adapter, search_registry):
    adapter = make_adapter(dimensions=4)
    assert "semvec_memory_items" not in adapter.database.list_collection_names()
    adapter._indexes._ensure_collection("semvec_memory_items")
    assert "semvec_memory_items" in adapter.database.list_collection_names()
    adapter._indexes._ensure_collection("semvec_memory_items")  # idempotent


@pytest.mark.parametrize("code, message, expected", [
    (31082, "Using Atlas Search Database Commands and the $listSearchIndexes aggregation "
            "stage requires additional configuration.", True),
    (40324, "Unrecognized pipeline stage name: '$vectorSearch'", True),
    (6047401, "$vectorSearch stage is only allowed on MongoDB Atlas", True),
    (None, "Search index commands are only supported with Atlas.", True),
    (6, "PlanExecutor error during aggregation :: caused by :: Error connecting to mongot", False),
    (13, "not authorized on semvec to execute command", False),
])
def test_no_atlas_search_detection(code, message, expected):
    from pymongo.errors import OperationFailure

    from backends.mongo.errors import is_no_atlas_search

    exc = OperationFailure(message, code=code if code is not None else 0)
    assert is_no_atlas_search(exc) is expected


def test_each_listing_is_read_once_per_call(adapter, search_registry, monkeypatch):
    """validate and ensure judge every entry of a collection against one listing, and a
    wait poll lists each collection's search indexes once (not once per index)."""
    import mongomock

    listed = []
    original = mongomock.collection.Collection.list_indexes

    def list_indexes(self, *args, **kwargs):
        listed.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(mongomock.collection.Collection, "list_indexes", list_indexes)
    for run in (adapter.validate_indexes, lambda: adapter.ensure_indexes(apply=False)):
        listed.clear()
        search_registry.calls.clear()
        run()
        assert sorted(listed) == sorted(set(listed)), listed
        assert len([c for c in search_registry.calls if c[0] == "list"]) == 1
    search_registry.calls.clear()
    adapter.wait_for_search_indexes(timeout=0, poll=1, sleep=lambda s: None)
    assert len([c for c in search_registry.calls if c[0] == "list"]) == 1
