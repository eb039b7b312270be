"""`semvecctl indexes ...` and `semvecctl sessions ...` on the Mongo backend.

The adapter runs over ``mongomock`` (a fake: no real MongoDB here), injected with
``--adapter tests.support.fixtures.mongo:cli_adapter`` as CONTRIBUTING.md describes; Atlas search
indexes come from the fake registry in tests/support/fixtures/mongo.py.
"""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from tests.support.fixtures.mongo import (  # noqa: F401
    cli_mongo,
    command_log,
    db_name,
    mongo_client,
    search_registry,
)

from semvecctl.app import app

HOOK = ["--adapter", "tests.support.fixtures.mongo:cli_adapter"]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def index_rows(result):
    return {r["name"]: r for r in json.loads(result.stdout)["indexes"]}


@pytest.fixture
def mongo(cli_mongo, search_registry, command_log):
    cli_mongo["options"] = {"item_sync": True, "session_ttl_s": 3600}
    return cli_mongo


def test_plan_writes_nothing(mongo, search_registry):
    result = run("indexes", "plan", *HOOK, "--dimensions", "16", "-o", "json")
    assert result.exit_code == 0, result.output
    rows = index_rows(result)
    assert rows["semvec_items_vec"]["action"] == "create"
    assert rows["semvec_items_vec"]["definition"]["definition"]["fields"][0]["numDimensions"] == 16
    assert rows["semvec_session_ttl"]["definition"] == {
        "keys": [["updated_at", 1]], "options": {"expireAfterSeconds": 3600}}
    assert not any(r["applied"] for r in rows.values())
    assert [c for c in search_registry.calls if c[0] != "list"] == []
    assert "nothing was written" in result.stderr


def test_ensure_without_apply_only_previews(mongo, search_registry):
    result = run("indexes", "ensure", *HOOK, "--dimensions", "16", "-o", "json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["applied"] is False
    assert "pass --apply" in result.stderr
    assert [c for c in search_registry.calls if c[0] != "list"] == []
    check = run("indexes", "validate", *HOOK, "--dimensions", "16", "-o", "json")
    assert check.exit_code == 1
    assert {r["state"] for r in index_rows(check).values()} == {"missing"}


def test_ensure_then_validate_clean(mongo):
    result = run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["applied"] is True
    assert {r["action"] for r in index_rows(result).values()} == {"create"}
    check = run("indexes", "validate", *HOOK, "--dimensions", "16", "-o", "json")
    assert check.exit_code == 0, check.output
    payload = json.loads(check.stdout)
    assert payload["ok"] is True and payload["backend"] == "mongo"
    assert all(r["state"] == "ok" and r["differences"] == [] for r in payload["indexes"])
    again = run("indexes", "ensure", *HOOK, "--dimensions", "16")
    assert again.exit_code == 0 and "nothing to change" in again.stderr


def test_validate_drift_lists_fields_and_exits_1(mongo, search_registry, mongo_client, db_name):
    assert run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes").exit_code == 0
    coll = mongo_client[db_name]["semvec_memory_items"]
    entry = search_registry.of(coll)["semvec_items_vec"]
    entry["latestDefinition"]["fields"][0]["similarity"] = "euclidean"
    search_registry.set_status(coll, "semvec_items_lex", "BUILDING", False)
    mongo["options"]["session_ttl_s"] = 60
    result = run("indexes", "validate", *HOOK, "--dimensions", "16", "-o", "json")
    assert result.exit_code == 1, result.output
    rows = index_rows(result)
    assert rows["semvec_items_vec"]["state"] == "drift"
    assert rows["semvec_items_vec"]["differences"] == [
        {"field": "fields.embedding.similarity", "expected": "cosine", "actual": "euclidean"}]
    assert rows["semvec_items_lex"]["state"] == "pending"
    assert rows["semvec_session_ttl"]["differences"] == [
        {"field": "expireAfterSeconds", "expected": 60, "actual": 3600}]
    assert rows["ix_evt_user"]["state"] == "ok"
    table = run("indexes", "validate", *HOOK, "--dimensions", "16")
    assert table.exit_code == 1
    assert "want 'cosine', have 'euclidean'" in table.stdout


def test_ensure_reports_mismatch_and_recreate_fixes_it(mongo, search_registry, mongo_client, db_name):
    assert run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes").exit_code == 0
    coll = mongo_client[db_name]["semvec_memory_items"]
    search_registry.of(coll)["semvec_items_vec"]["latestDefinition"]["fields"][0]["numDimensions"] = 8
    result = run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes", "-o", "json")
    assert result.exit_code == 1
    assert index_rows(result)["semvec_items_vec"]["action"] == "mismatch"
    assert "--recreate" in result.stderr
    fixed = run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes", "--recreate", "-o", "json")
    assert fixed.exit_code == 0, fixed.output
    assert index_rows(fixed)["semvec_items_vec"]["action"] == "recreate"
    assert run("indexes", "validate", *HOOK, "--dimensions", "16").exit_code == 0


def test_ensure_ttl_change_uses_collmod(mongo, command_log):
    assert run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes").exit_code == 0
    mongo["options"]["session_ttl_s"] = 120
    result = run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert index_rows(result)["semvec_session_ttl"]["action"] == "update"
    assert {"collMod": "semvec_session_state",
            "index": {"name": "semvec_session_ttl", "expireAfterSeconds": 120}} in command_log.commands


def test_ensure_wait_follows_search_builds(mongo, search_registry, mongo_client, db_name, monkeypatch):
    search_registry.initial_status, search_registry.initial_queryable = "BUILDING", False
    import time as time_module

    def fake_sleep(seconds):
        coll = mongo_client[db_name]["semvec_memory_items"]
        for name in ("semvec_items_vec", "semvec_items_lex"):
            search_registry.set_status(coll, name, "READY", True)

    monkeypatch.setattr(time_module, "sleep", fake_sleep)
    result = run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes", "--wait",
                 "--timeout", "30", "--poll", "0.01", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["search_indexes"] == {"semvec_items_vec": "ready",
                                                            "semvec_items_lex": "ready"}
    assert "BUILDING (not queryable)" in result.stderr


def test_ensure_wait_timeout_exits_1(mongo, search_registry):
    search_registry.initial_status, search_registry.initial_queryable = "BUILDING", False
    result = run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes", "--wait",
                 "--timeout", "0", "--poll", "0.01")
    assert result.exit_code == 1
    assert "not ready after" in result.stderr


def test_no_atlas_search_is_said_plainly(cli_mongo, command_log):
    cli_mongo["options"] = {"item_sync": True}
    result = run("indexes", "validate", *HOOK, "--dimensions", "16", "-o", "json")
    assert result.exit_code == 1
    rows = index_rows(result)
    assert rows["semvec_items_vec"]["state"] == "unsupported"
    assert "no Atlas Search" in rows["semvec_items_vec"]["detail"]


def test_backend_without_indexes_has_nothing_to_provision():
    for command in ("plan", "ensure", "validate"):
        result = run("indexes", command, "--uri", "memory://")
        assert result.exit_code == 0, result.output
        assert "nothing to provision for backend memory" in result.stderr
    result = run("indexes", "validate", "--uri", "memory://", "-o", "json")
    assert json.loads(result.stdout)["indexes"] == []


@pytest.mark.redis
def test_redis_has_nothing_to_provision(redis_url):
    for command in ("plan", "ensure", "validate"):
        result = run("indexes", command, "--uri", redis_url)
        assert result.exit_code == 0, result.output
        assert "nothing to provision for backend redis" in result.stderr


def test_unreachable_mongo_exits_4():
    result = run("indexes", "validate", "--uri", "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=200")
    assert result.exit_code == 4, result.output


# -- sessions on Mongo, through the enumeration seam -------------------------------


def test_sessions_list_inspect_delete(cli_mongo, mongo_client, db_name):
    from tests.support.fixtures.mongo import cli_adapter

    adapter = cli_adapter()
    store = adapter.state_store()
    prefix = uuid.uuid4().hex[:6]
    store.save(f"{prefix}-a", b"alpha", expected_version=None, owner_subject="t1")
    store.save(f"{prefix}-b", b"beta!", expected_version=None)
    store.save(f"{prefix}-a", b"alpha2", expected_version=1, owner_subject="t1",
               pending_message="waiting")

    listed = run("sessions", "list", *HOOK, "-o", "json")
    assert listed.exit_code == 0, listed.output
    rows = {r["session_id"]: r for r in json.loads(listed.stdout)}
    assert rows[f"{prefix}-a"]["version"] == 2 and rows[f"{prefix}-a"]["blob_size"] == 6
    assert rows[f"{prefix}-b"]["owner_subject"] is None
    owned = run("sessions", "list", *HOOK, "--owner", "t1", "-o", "jsonl")
    assert [json.loads(line)["session_id"] for line in owned.stdout.splitlines()] == [f"{prefix}-a"]
    unowned = run("sessions", "list", *HOOK, "--unowned", "--match", f"{prefix}-*", "-o", "json")
    assert [r["session_id"] for r in json.loads(unowned.stdout)] == [f"{prefix}-b"]

    inspected = run("sessions", "inspect", f"{prefix}-a", *HOOK, "-o", "json")
    assert inspected.exit_code == 0, inspected.output
    report = json.loads(inspected.stdout)
    assert report["version"] == 2 and report["pending_message"] == "waiting"
    assert report["blob_size"] == 6 and report["backend"] == "mongo"

    refused = run("sessions", "delete", f"{prefix}-a", *HOOK, "--apply")
    assert refused.exit_code == 2  # no TTY and no --yes
    wrong_owner = run("sessions", "delete", f"{prefix}-a", *HOOK, "--owner", "t2", "--apply", "--yes")
    assert wrong_owner.exit_code == 1
    deleted = run("sessions", "delete", f"{prefix}-a", *HOOK, "--owner", "t1", "--apply", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert store.load(f"{prefix}-a") is None
    adapter.close()


# -- required (the engine's) vs recommended (ours) indexes -------------------------------


def _stock_engine_indexes(mongo_client, db_name, search_registry, *, dimensions=16):
    """Exactly what a stock engine deployment creates (ENGINE-WIRE §4): the idle-TTL
    index, the three event indexes (no collation option), the two item search indexes;
    none of semvecctl's own recommendations."""
    from backends.mongo.manifest import lexical_index_definition, vector_index_definition
    from pymongo.operations import SearchIndexModel

    db = mongo_client[db_name]
    db["semvec_session_state"].create_index([("updated_at", 1)], name="semvec_session_ttl",
                                            expireAfterSeconds=3600)
    events = db["compliance_events"]
    events.create_index([("user_id", 1)], name="ix_evt_user")
    events.create_index([("user_id", 1), ("sequence", 1)], name="ix_evt_user_seq", unique=True)
    events.create_index([("user_id", 1), ("created_at", 1)], name="ix_evt_user_time")
    items = db["semvec_memory_items"]
    items.create_search_index(SearchIndexModel(definition=vector_index_definition(dimensions),
                                               name="semvec_items_vec", type="vectorSearch"))
    items.create_search_index(SearchIndexModel(definition=lexical_index_definition(),
                                               name="semvec_items_lex", type="search"))


def test_stock_engine_deployment_validates_with_warnings(mongo, search_registry, mongo_client,
                                                         db_name):
    _stock_engine_indexes(mongo_client, db_name, search_registry)
    result = run("indexes", "validate", *HOOK, "--dimensions", "16", "-o", "json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ok"] is True and payload["strict"] is False
    rows = index_rows(result)
    recommended = {n for n, r in rows.items() if not r["required"]}
    assert recommended == {"ix_state_owner", "ix_items_session", "ix_items_live_recency"}
    assert all(rows[n]["state"] == "missing" for n in recommended)
    assert all(r["state"] == "ok" for r in rows.values() if r["required"])
    for name in recommended:
        assert f"recommended index {name}" in result.stderr
    table = run("indexes", "validate", *HOOK, "--dimensions", "16")
    assert table.exit_code == 0 and "recommended" in table.stdout
    strict = run("indexes", "validate", *HOOK, "--dimensions", "16", "--strict")
    assert strict.exit_code == 1
    assert "ix_state_owner missing" in strict.stderr


def test_missing_required_index_fails_even_without_strict(mongo, search_registry, mongo_client,
                                                          db_name):
    _stock_engine_indexes(mongo_client, db_name, search_registry)
    mongo_client[db_name]["compliance_events"].drop_index("ix_evt_user_seq")
    result = run("indexes", "validate", *HOOK, "--dimensions", "16", "-o", "json")
    assert result.exit_code == 1
    row = index_rows(result)["ix_evt_user_seq"]
    assert row["required"] is True and row["state"] == "missing"
    assert "ix_evt_user_seq missing" in result.stderr


def test_recommended_drift_is_a_warning_unless_strict(mongo, mongo_client, db_name):
    assert run("indexes", "ensure", *HOOK, "--dimensions", "16", "--apply", "--yes").exit_code == 0
    coll = mongo_client[db_name]["semvec_session_state"]
    coll.drop_index("ix_state_owner")
    coll.create_index([("owner_subject", 1), ("_id", 1)], name="ix_state_owner", unique=True)
    assert run("indexes", "validate", *HOOK, "--dimensions", "16").exit_code == 0
    assert run("indexes", "validate", *HOOK, "--dimensions", "16", "--strict").exit_code == 1


def test_engine_deployment_without_ttl_or_item_sync(cli_mongo, mongo_client, db_name):
    """No TTL configured and no item mirror: only the event indexes are required."""
    events = mongo_client[db_name]["compliance_events"]
    events.create_index([("user_id", 1)], name="ix_evt_user")
    events.create_index([("user_id", 1), ("sequence", 1)], name="ix_evt_user_seq", unique=True)
    events.create_index([("user_id", 1), ("created_at", 1)], name="ix_evt_user_time")
    result = run("indexes", "validate", *HOOK, "-o", "json")
    assert result.exit_code == 0, result.output
    assert {n for n, r in index_rows(result).items() if r["required"]} == {
        "ix_evt_user", "ix_evt_user_seq", "ix_evt_user_time"}
