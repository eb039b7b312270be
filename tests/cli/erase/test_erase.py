"""`semvecctl erase --user ID --owner OWNER|--unowned` on the suite's real Redis and
PostgreSQL (`postgres`, `pgvector`) and on MongoDB through mongomock (a fake; no real
MongoDB runs here): the engine's erasure (ENGINE-WIRE §9), owner-scoped. Other subjects,
and the same user id under another owner, must stay byte-identical: a raw dump of the
whole store is compared before and after.

The seed (tests/support/maintenance.py): s1 owned by acme, s2 unowned; alice has 3 events
in s1 (acme) and 2 in s2 (unowned), bob 2 in s1 (acme). So alice-of-acme and
alice-unowned are two subjects, and s1 is shared with bob."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from typer.testing import CliRunner

import backends.ops.journal as journal_module
from backends.contract import MemoryItem
from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import BACKENDS, make_target, seed


def run(target, *args: str):
    return CliRunner().invoke(app, [*args, *target.args], env=target.env)


@pytest.fixture(params=BACKENDS)
def target(request):
    return make_target(request, request.param)


def _digest(lines):
    return hashlib.sha256("".join(f"{i}\n" for i in sorted(lines)).encode()).hexdigest()


def _zset_members(url: str, key: str) -> dict:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return dict(client.zrange(key, 0, -1, withscores=True))
    finally:
        client.close()


def _without(dump: dict, *fragments: str, states: tuple = ()) -> dict:
    """The dump without the entries naming a fragment (event ids, a user id) and without
    the state of the sessions in ``states`` (a state row, document or key)."""
    return {k: v for k, v in dump.items() if not any(f in k for f in fragments)
            and not any(_is_state(k, sid) for sid in states)}


#: where a store keeps its erasure ledger (ours): a Redis key family, SQL tables, a collection
LEDGER_NAMES = ("semvec:ctl:ledger:", "semvecctl_erasure_keys:", "semvecctl_erasure_ledger:")


def _ledger_apart(dump: dict, *plain_ids: str) -> tuple[dict, dict]:
    """The dump without the erasure ledger, and the ledger alone, which never holds the
    ids of an erased subject in its keys or values (only keyed hashes)."""
    ledger = {k: v for k, v in dump.items() if k.startswith(LEDGER_NAMES)}
    for plain in plain_ids:
        assert not any(plain in k or plain.encode() in repr(v).encode() for k, v in ledger.items())
    return {k: v for k, v in dump.items() if k not in ledger}, ledger


def _is_state(key: str, sid: str) -> bool:
    return key == f"semvec:state:{sid}" or (key.startswith("semvec_session_state:")
                                            and (key == f"semvec_session_state:{sid}"
                                                 or f'"session_id":"{sid}"' in key))


def test_preview_counts_per_place_names_the_shared_session_and_changes_nothing(target):
    s = seed(target.adapter)
    before = target.dump()
    result = run(target, "erase", "--user", s.alice, "--owner", "acme", "-o", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    places = report["places"]
    assert places["events"]["count"] == 3
    assert places["states"] == {"count": 1, "sessions": [s.s1], "detail": places["states"]["detail"]}
    assert report["shared_sessions"] == {s.s1: [s.bob]}
    assert places["counter"]["count"] == 0  # alice has unowned events: the counter stays
    assert "nothing was removed" in result.stderr and s.s1 in result.stderr
    assert target.dump() == before


def test_apply_erases_one_subject_and_leaves_every_other_byte_identical(target, tmp_path):
    s = seed(target.adapter)
    before = target.dump()
    path = tmp_path / "receipt.json"
    result = run(target, "erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                 "--receipt", str(path))
    assert result.exit_code == 0, result.output
    receipt = json.loads(path.read_text())
    assert json.loads(result.stdout) == receipt
    assert receipt["user_id"] == s.alice and receipt["owner_subject"] == "acme"
    assert receipt["sessions"] == [s.s1] and receipt["states_deleted"] == 1
    assert receipt["events_deleted"] == 3 and receipt["event_ids"] == s.alice_ids[:3]
    assert receipt["shared_sessions"] == [s.s1] and receipt["shared_with"] == {s.s1: [s.bob]}
    assert receipt["state_survivors"] == [] and receipt["materialized_deleted"] == 0
    assert receipt["verification"]["ok"] is True, receipt["verification"]
    assert receipt["erased_at"].endswith("Z")
    assert receipt["digest"]["value"] == _digest(
        [f"event:{e}" for e in s.alice_ids[:3]] + [f"state:{s.s1}"])
    assert not (tmp_path / "receipt.json.journal").exists()
    after, ledger = _ledger_apart(target.dump(), s.alice)  # the erasure ledger is the one addition
    assert ledger
    gone = s.alice_ids[:3]
    if target.name == "redis":  # the user's two index sorted sets are shared with alice-unowned
        for prefix in ("u", "t"):
            key = f"semvec:events:{prefix}:{s.alice}"
            members = _zset_members(target.args[1], key)
            assert sorted(m.decode() for m in members) == sorted(s.alice_ids[3:])
        assert _without(after, f":{s.alice}") == _without(before, f":{s.alice}", *gone,
                                                          states=(s.s1,))
        assert after[f"semvec:events:seq:{s.alice}"] == before[f"semvec:events:seq:{s.alice}"]
    else:
        assert after == _without(before, *gone, states=(s.s1,))
    # the same user id under no owner, and bob, are untouched
    store = target.adapter.event_store()
    assert [e.event_id for e in store.list_events(s.alice, owner_subject=None)] in (
        s.alice_ids[3:], s.alice_ids[3:][::-1])
    assert target.adapter.state_store().load(s.s2) is not None
    assert len(store.list_events(s.bob)) == 2


#: where a store keeps a user's sequence counter (Redis key, Mongo counter document); the
#: SQL layout keeps none
COUNTER_KEYS = ("semvec:events:seq:{user}", "compliance_event_counters:{user}")


def test_erasing_the_last_subject_of_a_user_id_removes_its_indexes_and_keeps_its_counter(
        target, tmp_path):
    """The engine deletes the subject's events one by one and never touches the sequence
    counter (ENGINE-WIRE §9 step 6): with no event of the user id left, its index keys are
    gone but the counter stays, and the user's next event continues the sequence."""
    s = seed(target.adapter)
    assert run(target, "erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
               "--receipt", str(tmp_path / "a.json")).exit_code == 0
    before = target.dump()
    preview = json.loads(run(target, "erase", "--user", s.alice, "--unowned", "-o", "json").stdout)
    assert preview["places"]["counter"]["count"] == 0
    assert "kept" in preview["places"]["counter"]["detail"]
    result = run(target, "erase", "--user", s.alice, "--unowned", "--apply", "--yes",
                 "--receipt", str(tmp_path / "b.json"))
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.stdout)
    assert receipt["unowned"] is True and receipt["sessions"] == [s.s2]
    assert (receipt["events_deleted"], receipt["states_deleted"]) == (2, 1)
    assert receipt["shared_sessions"] == []
    assert receipt["verification"]["ok"] is True
    assert "counter" not in receipt["verification"]["left"]
    after, _ = _ledger_apart(target.dump(), s.alice)
    before, _ = _ledger_apart(before)  # (the ledger also records the second subject)
    counters = {k.format(user=s.alice) for k in COUNTER_KEYS}
    kept = {k: v for k, v in before.items() if k in counters}
    assert bool(kept) == (target.name in ("redis", "mongo")), sorted(before)
    assert after == {**_without(before, f":{s.alice}", *s.alice_ids, states=(s.s2,)), **kept}
    assert [k for k in after if s.alice in k] == sorted(kept)
    # the next event of the user continues the sequence (5 events were handed out)
    from backends.contract import MemoryEvent

    events = target.adapter.event_store()
    nxt = events.append(MemoryEvent(event_id=str(uuid.uuid4()), user_id=s.alice,
                                    content="after the erasure", owner_subject="",
                                    session_id=""))
    if target.name in ("redis", "mongo"):
        assert nxt.sequence == 6
        assert [e.sequence for e in events.list_events(s.alice)] == [6]


def test_the_subject_and_receipt_are_required(target, tmp_path):
    s = seed(target.adapter)
    before = target.dump()
    for args in (["--user", s.alice], ["--user", s.alice, "--owner", "acme", "--unowned"],
                 ["--user", s.alice, "--owner", "acme", "--apply", "--yes"]):
        result = run(target, "erase", *args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output
    existing = tmp_path / "r.json"
    existing.write_text("an older receipt")
    refused = run(target, "erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                  "--receipt", str(existing))
    assert refused.exit_code == 2 and "--overwrite" in refused.stderr
    assert existing.read_text() == "an older receipt"
    assert target.dump() == before
    no_yes = run(target, "erase", "--user", s.alice, "--owner", "acme", "--apply",
                 "--receipt", str(tmp_path / "n.json"))
    assert no_yes.exit_code != 0 and "--yes" in no_yes.output
    assert target.dump() == before
    replaced = run(target, "erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                   "--receipt", str(existing), "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert json.loads(existing.read_text())["events_deleted"] == 3


def test_a_resumed_erase_writes_a_receipt_for_the_whole_operation(target, tmp_path, monkeypatch):
    """#23: the second part's receipt used to cover only the second part."""
    s = seed(target.adapter)
    monkeypatch.setattr("backends.ops.erasure.EVENT_BATCH", 1)
    path = tmp_path / "r.json"
    args = ("erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes", "--receipt", str(path))
    real = journal_module.Journal.append

    def stop_after_first_event(self, record):
        real(self, record)
        if record.get("step") == "events":
            raise KeyboardInterrupt
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(journal_module.Journal, "append", stop_after_first_event)
        first = run(target, *args)
    assert first.exit_code != 0
    assert not path.exists() and (tmp_path / "r.json.journal").exists()
    assert len(target.adapter.event_store().list_events(s.alice, owner_subject="acme")) == 2
    second = run(target, *args)
    assert second.exit_code == 0, second.output
    receipt = json.loads(path.read_text())
    assert receipt["runs"] == 2
    assert receipt["events_deleted"] == 3 and sorted(receipt["event_ids"]) == sorted(s.alice_ids[:3])
    assert receipt["sessions"] == [s.s1] and receipt["states_deleted"] == 1
    assert receipt["digest"]["value"] == _digest(
        [f"event:{e}" for e in s.alice_ids[:3]] + [f"state:{s.s1}"])
    assert receipt["verification"]["ok"] is True
    assert not (tmp_path / "r.json.journal").exists()


@pytest.mark.parametrize("name", [pytest.param("pgvector", marks=pytest.mark.postgres), "mongo"])
def test_the_derived_sessions_lose_their_item_rows_and_no_other_session_does(request, name,
                                                                             tmp_path):
    target = make_target(request, name, **({"item_sync": True} if name == "mongo" else {}))
    s = seed(target.adapter)
    other = f"{s.tag}-s3"
    target.adapter.state_store().save(other, b"x", expected_version=None)
    for sid, owner in ((s.s1, "acme"), (s.s2, None), (other, None)):
        target.adapter.sync_items(sid, [MemoryItem(item_id=f"i{n}", text=f"t{n}",
                                                   embedding=(0.5,) * 8) for n in range(3)],
                                  owner_subject=owner)
    preview = run(target, "erase", "--user", s.alice, "--owner", "acme", "-o", "json")
    assert json.loads(preview.stdout)["places"]["item_rows"]["count"] == 3
    result = run(target, "erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                 "--receipt", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.stdout)
    assert receipt["materialized_deleted"] == 3 and receipt["hook_present"] is True
    assert receipt["verification"] == {"ok": True, "left": {
        "events": 0, "dangling_index_entries": 0, "states": 0, "item_rows": 0}}
    assert list(target.adapter.iter_live_items(s.s1)) == []
    assert len(list(target.adapter.iter_live_items(s.s2))) == 3
    assert len(list(target.adapter.iter_live_items(other))) == 3


def test_memory_has_nothing_to_erase():
    result = CliRunner().invoke(app, ["erase", "--user", "u", "--unowned", "--backend", "memory"])
    assert result.exit_code == 3


@pytest.mark.parametrize("name", [pytest.param("redis", marks=pytest.mark.redis),
                                  pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_damaged_event_of_the_subject_is_erased_by_id_and_named(request, name, tmp_path):
    """#23 finding 8: meta '{bad' used to make erase fail with 'unexpected JSONDecodeError'."""
    target = make_target(request, name)
    s = seed(target.adapter)
    bad = s.alice_ids[1]
    if name == "redis":
        import redis

        client = redis.Redis.from_url(target.args[1])
        client.hset(f"semvec:events:e:{bad}", "meta", "{bad")
        client.close()
    else:
        import psycopg

        with psycopg.connect(target.args[1]) as conn:
            conn.execute("UPDATE semvec_memory_events SET meta = '{bad' WHERE event_id = %s", (bad,))
    before = target.dump()
    preview = run(target, "erase", "--user", s.alice, "--owner", "acme", "-o", "json")
    assert preview.exit_code == 0, preview.output
    assert bad in preview.stderr
    result = run(target, "erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                 "--receipt", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.stdout)
    assert [d["event_id"] for d in receipt["damaged_events"]] == [bad]
    assert "meta" in receipt["damaged_events"][0]["problem"]
    assert receipt["events_deleted"] == 3 and receipt["verification"]["ok"] is True
    after, _ = _ledger_apart(target.dump(), s.alice)
    assert not any(bad in k for k in after)
    if name == "postgres":
        assert after == _without(before, *s.alice_ids[:3], states=(s.s1,))


@pytest.mark.redis
def test_a_dangling_index_entry_is_named_and_removed_on_redis(request, tmp_path):
    """An index entry whose event hash is gone (a damaged store) goes with the user."""
    target = make_target(request, "redis")
    s = seed(target.adapter)
    import redis

    client = redis.Redis.from_url(target.args[1])
    ghost = "00000000-0000-4000-8000-000000000000"
    client.zadd(f"semvec:events:t:{s.alice}", {ghost: 1.0})
    preview = run(target, "erase", "--user", s.alice, "--owner", "acme", "-o", "json")
    assert json.loads(preview.stdout)["places"]["dangling_index_entries"]["count"] == 1
    result = run(target, "erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                 "--receipt", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.stdout)
    assert receipt["dangling_index_entries"] == [ghost] and receipt["verification"]["ok"] is True
    assert client.zscore(f"semvec:events:t:{s.alice}", ghost) is None
    assert client.zcard(f"semvec:events:u:{s.alice}") == 2  # alice-unowned stays
    client.close()


def test_a_rerun_after_the_receipt_was_written_but_the_journal_not_removed(target, tmp_path):
    """Killed between the (atomic) receipt and the journal's removal: the rerun says it
    had finished and changes nothing."""
    s = seed(target.adapter)
    path = tmp_path / "r.json"
    args = ("erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes", "--receipt", str(path))
    real = journal_module.Journal.finish
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(journal_module.Journal, "finish", lambda self: None)
        assert run(target, *args).exit_code == 0
    assert (tmp_path / "r.json.journal").exists()
    written = path.read_bytes()
    again = run(target, *args)
    assert again.exit_code == 0, again.output
    assert "had finished" in again.stderr
    assert path.read_bytes() == written and not (tmp_path / "r.json.journal").exists()
    assert real is journal_module.Journal.finish


@pytest.mark.redis
def test_a_signal_during_a_delete_is_taken_after_the_step_its_journal_line_included(
        request, tmp_path):
    """Ctrl-C while the driver waits for a delete's reply: the erasure stops between two
    steps (exit 130), never inside the driver call, so the journal names every event that
    is gone and the rerun's receipt covers the whole."""
    import os
    import signal

    from backends.redis.events import RedisEventStore

    target = make_target(request, "redis")
    s = seed(target.adapter)
    path = tmp_path / "r.json"
    args = ("erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
            "--receipt", str(path))
    real = RedisEventStore.delete_event
    calls = []

    def delete_then_signal(self, event_id):
        gone = real(self, event_id)
        calls.append(event_id)
        if len(calls) == 1:  # one Ctrl-C, while this step is still in flight
            os.kill(os.getpid(), signal.SIGINT)
        return gone

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RedisEventStore, "delete_event", delete_then_signal)
        stopped = run(target, *args)
    assert stopped.exit_code == 130, stopped.output
    assert "run the same command again" in stopped.stderr
    records = [json.loads(line) for line in (tmp_path / "r.json.journal").read_text().splitlines()]
    journalled = [eid for r in records if r.get("step") == "events" for eid in r["deleted"]]
    assert journalled == calls and len(calls) == 3  # one batch: alice-of-acme's three
    again = run(target, *args)
    assert again.exit_code == 0, again.output
    assert sorted(json.loads(path.read_text())["event_ids"]) == sorted(s.alice_ids[:3])
