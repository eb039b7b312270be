"""An export of a large PostgreSQL store runs its events pass in a process of its own
(``python -m backends.postgres.event_pass_worker``): the archive it writes is byte for byte the
one the export writes in one process, over one database and over shards; a damaged
event stops it with the same error (its type and words); a caller that stops reading
leaves no child and no connection behind; and the archive's plain way of writing a line
gives the same bytes for events encoded elsewhere. On the suite's real PostgreSQL (the
threshold from which the pass goes apart is lowered for these small stores)."""

from __future__ import annotations

import io
import os
import random
import subprocess
import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from backends.archive.canonical import EncodedEvents, events_json
from backends.archive.format import _plain_line
from backends.contract import UNSCOPED, MemoryEvent
from backends.errors import CorruptEvent
from backends.transfer import export
from backends.transfer.export import ExportResult, iter_records, write_archive

pytestmark = pytest.mark.postgres

_USERS = ["alice", "Bob", "bob", "Émile", "zoë"]


def _seed(adapter, rng: random.Random, sessions: int) -> None:
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(sessions):
        sid = f"{rng.choice('sSé_')}-{i:03d}"
        events = [MemoryEvent(
            event_id=str(uuid.uuid4()), user_id=rng.choice(_USERS), content=f"turn of {sid}",
            created_at=base + timedelta(seconds=rng.randrange(3)),
            embedding=[rng.random() for _ in range(rng.choice([1, 4, 20]))],
            meta={"sid": sid, "n": rng.random()},
            owner_subject=rng.choice(["acme", "", "other"]), session_id=sid)
            for _ in range(rng.randrange(5))]
        adapter.commit_turn(sid, sid.encode(), expected_version=None, owner_subject="acme",
                            events=events)


def _session_lines(adapter, monkeypatch, apart: bool, **options) -> list[bytes]:
    monkeypatch.setattr(export, "EVENTS_PASS_APART", 0 if apart else 10**9)
    out = io.BytesIO()
    result = write_archive(adapter, out, source_uri="test", with_events=True, **options)
    assert result.events > 0
    return out.getvalue().splitlines()[1:-1]  # the header and trailer carry the time


def _children() -> int:
    """This process's children running the events pass (zombies included)."""
    found = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "backends.postgres.event_pass"],
                           capture_output=True, text=True)
    return len(found.stdout.split())


def test_the_archive_is_the_same_when_the_pass_runs_apart(postgres_adapter_factory,
                                                          monkeypatch):
    adapter = postgres_adapter_factory()
    _seed(adapter, random.Random(1), sessions=200)
    for owner in (UNSCOPED, "acme"):
        apart = _session_lines(adapter, monkeypatch, True, owner_subject=owner)
        together = _session_lines(adapter, monkeypatch, False, owner_subject=owner)
        assert apart == together and len(apart) == 200


def test_over_shards_the_archive_is_the_same_when_the_pass_runs_apart(sharded_sql, monkeypatch):
    from backends.registry import Registry

    adapter = Registry().load_adapter("postgres", uri=sharded_sql.primary,
                                      shards=sharded_sql.shard_list)
    try:
        _seed(adapter, random.Random(2), sessions=60)
        adapter.event_store().append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="zoë",
                                                 content="outside a turn", session_id="s-001"))
        assert (_session_lines(adapter, monkeypatch, True)
                == _session_lines(adapter, monkeypatch, False))
    finally:
        adapter.close()


def test_a_damaged_event_stops_the_export_with_the_same_error(postgres_adapter_factory,
                                                              pgvector_url, monkeypatch):
    adapter = postgres_adapter_factory()
    _seed(adapter, random.Random(3), sessions=50)
    broken = str(uuid.uuid4())
    adapter.event_store().append(MemoryEvent(event_id=broken, user_id="broken",
                                             content="x", session_id="s-010", embedding=[1.0]))
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("UPDATE semvec_memory_events SET embedding = '[NaN' WHERE user_id = 'broken'")
    monkeypatch.setattr(export, "EVENTS_PASS_APART", 0)
    with pytest.raises(CorruptEvent) as apart:
        write_archive(adapter, io.BytesIO(), source_uri="test", with_events=True)
    monkeypatch.setattr(export, "EVENTS_PASS_APART", 10**9)
    with pytest.raises(CorruptEvent) as together:
        write_archive(adapter, io.BytesIO(), source_uri="test", with_events=True)
    assert str(apart.value) == str(together.value) and apart.value.event_id == broken
    assert _children() == 0


def test_a_caller_that_stops_reading_leaves_no_child_and_no_connection(postgres_adapter_factory,
                                                                      pgvector_url, monkeypatch):
    adapter = postgres_adapter_factory()
    _seed(adapter, random.Random(4), sessions=300)
    monkeypatch.setattr(export, "EVENTS_PASS_APART", 0)
    records = iter_records(adapter, ExportResult(), with_events=True, encoded_events=True)
    first = next(records)
    assert isinstance(first.events, EncodedEvents) or first.events == ()
    records.close()
    assert _children() == 0
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                            " current_database() AND pid <> pg_backend_pid() AND query LIKE"
                            " '%semvecctl_stream%'").fetchone()[0] == 0


def test_the_plain_way_of_writing_a_line_gives_the_same_bytes_for_encoded_events():
    events = [MemoryEvent(event_id=f"e{i}", user_id="u", content=f"c{i}", session_id="s",
                          embedding=[0.1 * i, 1e-7, 3.0], meta={"z": i, "a": [1, 2]})
              for i in range(3)]
    body = {"kind": "session", "n": 1, "session_id": "s", "events": None}
    encoded = EncodedEvents(events_json(events), len(events))
    assert _plain_line(dict(body), encoded) == _plain_line(dict(body), events)
    assert len(encoded) == 3


def noisy_events_json(events):
    """``events_json`` that also prints, as a careless imported module might: in the
    events pass's child that text must not reach the channel its frames travel on."""
    print("[a stray line on stdout]", flush=True)
    return events_json(events)


def test_a_stray_print_in_the_child_does_not_corrupt_its_frames(postgres_adapter_factory):
    adapter = postgres_adapter_factory()
    _seed(adapter, random.Random(5), sessions=40)
    store = adapter.event_store()
    noisy = list(store.encoded_events_by_session(noisy_events_json))
    assert noisy and noisy == list(store.encoded_events_by_session(events_json))
    assert _children() == 0
