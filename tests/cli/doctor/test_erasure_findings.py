"""doctor and the erasure ledger, on the suite's real Redis and PostgreSQL and on MongoDB
through mongomock (the suite's double; no real MongoDB runs here).

- ``erasure.restored-data`` is found for an erased subject's event written back around
  the ledger whether or not an index names it (Redis keeps its indexes apart: the event
  hash alone, its index entries removed, is found), and ``doctor --fix --apply`` never
  indexes it again: it stays unindexed and flagged (exit 1), while the repairs of other
  data still run;
- ``erasure.outside-ledger`` (info) notes a user whose log was emptied by deletes by id
  (what the engine's erasure does: it keeps the counter) and whom no ledger entry names;
  recording the engine's certificate clears it. PostgreSQL keeps no counter, so there an
  emptied log cannot be told from one that never was: no note.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest

from tests.cli.erasures.test_ledger_files import _keypair, engine_certificate
from tests.cli.sessions.test_erasure_ledger import _archived_events, _main, invoke
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import seed


def _findings(main, *extra):
    result = invoke("doctor", *main.target_args(), "-o", "json", *extra)
    return result, json.loads(result.stdout)["findings"] if result.stdout.startswith("{") else []


def _erased_with_backup(request, kind, tmp_path):
    target, main = _main(request, kind)
    s = seed(main.adapter)
    backup = tmp_path / "before.jsonl"
    assert invoke("sessions", "export", *main.target_args(), "--with-events",
                  "--out", str(backup)).exit_code == 0
    erased = invoke("erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                    "--receipt", str(tmp_path / "r.json"), *main.target_args())
    assert erased.exit_code == 0, erased.output
    return main, s, backup


@pytest.mark.redis
def test_a_restored_event_without_its_index_entries_is_found_and_never_reindexed(
        request, tmp_path, redis_url):
    import redis

    main, s, backup = _erased_with_backup(request, "redis", tmp_path)
    old = next(e for e in _archived_events(backup) if e.event_id == s.alice_ids[0])
    main.adapter.event_store().append(dataclasses.replace(old, sequence=0))  # around the ledger
    client = redis.Redis.from_url(redis_url)
    request.addfinalizer(client.close)
    for index in ("u", "t"):  # its index entries gone: only the event hash is left
        assert client.zrem(f"semvec:events:{index}:{s.alice}", old.event_id) == 1
    # and an ordinary unindexed event of another user, which --fix --apply does index
    other = next(e for e in _archived_events(backup) if e.event_id == s.bob_ids[0])
    client.zrem(f"semvec:events:u:{s.bob}", other.event_id)

    result, findings = _findings(main)
    assert result.exit_code == 1, result.output
    restored = [f for f in findings if f["check"] == "erasure.restored-data"]
    assert [f["where"] for f in restored] == [f"event {old.event_id}"]
    unindexed = {f["where"]: f for f in findings if f["check"] == "event.unindexed"}
    mine = next(f for w, f in unindexed.items() if old.event_id in w)
    assert mine["safe_repair"] is False and "erased subject" in mine["repair"]
    assert next(f for w, f in unindexed.items() if other.event_id in w)["safe_repair"] is True
    assert s.alice not in json.dumps(restored)

    fixed = invoke("doctor", *main.target_args(), "--fix", "--apply", "--yes", "-o", "json")
    assert fixed.exit_code == 1, fixed.output  # the erased subject's event stays an error
    assert client.zscore(f"semvec:events:u:{s.alice}", old.event_id) is None
    assert client.zscore(f"semvec:events:t:{s.alice}", old.event_id) is None
    assert client.exists(f"semvec:events:e:{old.event_id}") == 1  # flagged, not removed
    assert client.zscore(f"semvec:events:u:{s.bob}", other.event_id) is not None  # repaired
    again, findings = _findings(main)
    assert [f["where"] for f in findings if f["check"] == "erasure.restored-data"] == [
        f"event {old.event_id}"]


@pytest.mark.parametrize("kind", [pytest.param("redis", marks=pytest.mark.redis),
                                  pytest.param("postgres", marks=pytest.mark.postgres),
                                  "mongo"])
def test_a_restored_event_with_its_index_entry_is_found_too(kind, request, tmp_path):
    main, s, backup = _erased_with_backup(request, kind, tmp_path)
    old = next(e for e in _archived_events(backup) if e.event_id == s.alice_ids[1])
    main.adapter.event_store().append(dataclasses.replace(old, sequence=0))
    result, findings = _findings(main)
    assert result.exit_code == 1, result.output
    assert f"event {old.event_id}" in [f["where"] for f in findings
                                       if f["check"] == "erasure.restored-data"]


@pytest.mark.parametrize("kind", [pytest.param("redis", marks=pytest.mark.redis),
                                  pytest.param("postgres", marks=pytest.mark.postgres),
                                  "mongo"])
def test_a_log_emptied_outside_the_ledger_is_noted_where_it_can_be_told(kind, request, tmp_path):
    target, main = _main(request, kind)
    s = seed(main.adapter)
    for event_id in s.bob_ids:  # as the engine's forget does: by id, the counter kept
        assert main.adapter.event_store().delete_event(event_id)
    result, findings = _findings(main)
    notes = [f for f in findings if f["check"] == "erasure.outside-ledger"]
    if kind == "postgres":  # no counter: an emptied log is a log that never was
        assert notes == []
        return
    assert [(f["severity"], f["where"]) for f in notes] == [("info", f"user {s.bob}")]
    assert "erasures record --certificate" in notes[0]["repair"]
    key, _private, _public = _keypair(tmp_path)
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(engine_certificate(key, s.bob, datetime.now(timezone.utc), 2)))
    recorded = invoke("erasures", "record", "--certificate", str(cert), "--owner", "acme",
                      *main.target_args())
    assert recorded.exit_code == 0, recorded.output
    result, findings = _findings(main)
    assert [f for f in findings if f["check"] == "erasure.outside-ledger"] == []


@pytest.mark.parametrize("kind", [pytest.param("redis", marks=pytest.mark.redis),
                                  pytest.param("postgres", marks=pytest.mark.postgres),
                                  "mongo"])
def test_a_state_restored_without_its_events_is_found_by_its_session_hash(kind, request,
                                                                          tmp_path):
    """A prune archive (states, no events) restored around the ledger: the erased
    session's id is in the entry as a keyed hash. An error where the store keeps a write
    time not after the erasure; a warning on Redis, which keeps none."""
    main, s, backup = _erased_with_backup(request, kind, tmp_path)
    state = main.adapter.state_store()
    assert state.load_full(s.s1) is None
    old = datetime.now(timezone.utc) - timedelta(days=1)
    options = {} if kind == "redis" else {"updated_at": old}
    state.restore_session(s.s1, b"blob-one", version=1, owner_subject="acme", **options)
    result, findings = _findings(main)
    found = [(f["severity"], f["where"]) for f in findings if f["check"] == "erasure.restored-data"]
    expected = "warning" if kind == "redis" else "error"
    assert found == [(expected, f"session {s.s1}")], result.output
    if kind != "redis":  # (the suite's Redis is not durable: doctor exits 1 there anyway)
        assert result.exit_code == 1
    # a session of that id written after the erasure (and its margin) is a new one
    if kind != "redis":
        state.delete(s.s1)
        later = datetime.now(timezone.utc) + timedelta(minutes=1)
        state.restore_session(s.s1, b"new", version=1, owner_subject="acme", updated_at=later)
        result, findings = _findings(main)
        assert [f for f in findings if f["check"] == "erasure.restored-data"] == []
