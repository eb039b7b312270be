"""`semvecctl erase --user ID [--sessions]` on the suite's real Redis and PostgreSQL
(`postgres`, `pgvector`) and on MongoDB through mongomock (a fake; no real MongoDB runs
here). Other users must stay byte-identical: a raw dump of the whole store is compared
before and after."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryItem
from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import BACKENDS, make_target, seed


def run(target, *args: str):
    return CliRunner().invoke(app, [*args, *target.args], env=target.env)


@pytest.fixture(params=BACKENDS)
def target(request):
    return make_target(request, request.param)


def _belongs_to(key: str, value, user: str, ids: list[str]) -> bool:
    """Whether a raw dump entry is part of ``user``'s data (events, indexes, counter)."""
    return user in key or any(i in key for i in ids) or (isinstance(value, str) and f'"{user}"' in value)


def test_preview_counts_per_place_and_changes_nothing(target):
    s = seed(target.adapter)
    before = target.dump()
    result = run(target, "erase", "--user", s.alice, "-o", "json")
    assert result.exit_code == 0, result.output
    places = json.loads(result.stdout)["places"]
    assert places["events"]["count"] == 5
    if target.name in ("redis", "mongo"):
        assert places["counter"] == {"count": 1, "value": 5}
    if target.name == "redis":  # two sorted sets index each event
        assert places["index_entries"]["count"] == 10
    assert "nothing was removed" in result.stderr
    assert target.dump() == before


def test_apply_erases_the_user_verifies_and_leaves_others_byte_identical(target, tmp_path):
    s = seed(target.adapter)
    before = target.dump()
    receipt_path = tmp_path / "receipt.json"
    result = run(target, "erase", "--user", s.alice, "--apply", "--yes", "--receipt", str(receipt_path))
    assert result.exit_code == 0, result.output
    receipt = json.loads(receipt_path.read_text())
    assert receipt["user_id"] == s.alice and receipt["verification"]["ok"] is True
    assert receipt["removed"]["events"]["count"] == 5
    if target.name == "redis":
        assert receipt["removed"]["index_entries"]["count"] == 10
        assert receipt["verification"]["left"]["index_entries.time_index"] == 0
    assert receipt["erased_at"].endswith("Z")
    import hashlib

    expected = hashlib.sha256("".join(f"{i}\n" for i in sorted(f"event:{e}" for e in s.alice_ids))
                              .encode()).hexdigest()
    assert receipt["digest"]["value"] == expected
    after = target.dump()
    kept = {k: v for k, v in before.items() if not _belongs_to(k, v, s.alice, s.alice_ids)}
    assert after == kept
    assert len(kept) < len(before)
    listed = run(target, "events", "count", "--user", s.alice, "-o", "json")
    assert json.loads(listed.stdout)["events"] == 0
    bob = run(target, "events", "count", "--user", s.bob, "-o", "json")
    assert json.loads(bob.stdout)["events"] == 2


def test_receipt_goes_to_stdout_by_default_and_apply_needs_yes_without_a_tty(target):
    s = seed(target.adapter)
    refused = run(target, "erase", "--user", s.alice, "--apply")
    assert refused.exit_code != 0 and "--yes" in refused.output
    assert target.adapter.event_store().count_for_user(s.alice) == 5
    result = run(target, "erase", "--user", s.alice, "--apply", "--yes")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verification"]["ok"] is True


@pytest.mark.parametrize("name", [pytest.param("pgvector", marks=pytest.mark.postgres), "mongo"])
def test_sessions_removes_the_item_rows_of_the_users_sessions_only(request, name):
    target = make_target(request, name, **({"item_sync": True} if name == "mongo" else {}))
    s = seed(target.adapter)
    other = f"{s.tag}-s3"
    target.adapter.state_store().save(other, b"x", expected_version=None)
    for sid in (s.s1, s.s2, other):
        target.adapter.sync_items(sid, [MemoryItem(item_id=f"i{n}", text=f"t{n}", embedding=(0.5,) * 8)
                                        for n in range(3)])
    preview = run(target, "erase", "--user", s.alice, "--sessions", "-o", "json")
    assert json.loads(preview.stdout)["places"]["item_mirror"]["count"] == 6
    result = run(target, "erase", "--user", s.alice, "--sessions", "--apply", "--yes")
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.stdout)
    assert receipt["removed"]["item_mirror"]["count"] == 6
    left = {"events": 0, "indexed": 0, "item_mirror": 0}
    if name == "mongo":
        left["counter"] = 0
    assert receipt["verification"] == {"ok": True, "left": left}
    assert len(list(target.adapter.iter_live_items(other))) == 3


def test_memory_has_nothing_to_erase():
    result = CliRunner().invoke(app, ["erase", "--user", "u", "--backend", "memory"])
    assert result.exit_code == 3


@pytest.mark.redis
def test_a_dangling_index_entry_counts_and_is_removed_on_redis(request):
    """An index entry whose event hash is gone (a damaged store) is part of the user too."""
    target = make_target(request, "redis")
    s = seed(target.adapter)
    import redis

    client = redis.Redis.from_url(target.args[1])
    client.zadd(f"semvec:events:t:{s.alice}", {"00000000-0000-4000-8000-000000000000": 1.0})
    preview = run(target, "erase", "--user", s.alice, "-o", "json")
    assert json.loads(preview.stdout)["places"]["index_entries"]["count"] == 11
    result = run(target, "erase", "--user", s.alice, "--apply", "--yes")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verification"]["ok"] is True
    assert not client.exists(f"semvec:events:t:{s.alice}", f"semvec:events:u:{s.alice}")
    client.close()
