"""Archive format version 3 (#28 item 3): a user's log travels in bounded parts, so an
``events export`` never holds a log as one line, and version 2 archives (a log in one
line) still verify and import.

Uses the in-test stores of ``tests/support/transfer_doubles.py`` (no server)."""

from __future__ import annotations

import io
import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from backends.archive import ArchiveDamaged, ArchiveHeader, ArchiveReader, ArchiveWriter, UserRecord, verify_archive
from backends.archive.format import USER_PART_EVENTS, canonical, event_to_record, sha256_hex
from backends.contract import MemoryEvent
from backends.transfer import SessionImporter, StagedStream
from semvecctl.app import app
from tests.support import transfer_doubles as doubles

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
HEADER = ArchiveHeader(source_backend="seamed", source_uri="seamed://",
                       created_at="2026-11-01T12:00:00Z", tool_version="0.0.test")


def event(user: str, n: int) -> MemoryEvent:
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=f"said {n}",
                       created_at=T0 + timedelta(seconds=n), embedding=(0.5, n / 8.0),
                       meta={"turn": n}, owner_subject="acme", session_id="")


def numbered(user: str, count: int) -> list[MemoryEvent]:
    return [event(user, n).with_sequence(n) for n in range(1, count + 1)]


def v3_bytes(user: str, events: list[MemoryEvent], counter: int, part_events: int) -> bytes:
    buf = io.BytesIO()
    writer = ArchiveWriter(buf, HEADER)
    writer.add_user_log(user, events, lambda top: max(top, counter), part_events=part_events)
    writer.finish()
    return buf.getvalue()


def v2_bytes(user: str, events: list[MemoryEvent], counter: int) -> bytes:
    """A version 2 archive as the previous semvecctl wrote it: the whole log in one line."""
    chain = hashlib_sha256()
    header = {**HEADER.to_record(), "format_version": 2}
    body = {"kind": "user", "n": 1, "user_id": user, "counter": counter,
            "events": [event_to_record(e) for e in events]}
    body["line_sha256"] = sha256_hex(canonical(body))
    lines = [canonical(header), canonical(body)]
    for line in lines:
        chain.update(line + b"\n")
    trailer = {"kind": "trailer", "count": 0, "users": 1, "digest": chain.hexdigest()}
    return b"".join(line + b"\n" for line in [*lines, canonical(trailer)])


def hashlib_sha256():
    import hashlib

    return hashlib.sha256()


def user_lines(data: bytes) -> list[dict]:
    return [r for r in map(json.loads, data.splitlines()) if r["kind"] == "user"]


def import_into_fresh(data: bytes):
    target = doubles.SeamedAdapter()
    importer = SessionImporter(target, StagedStream(io.BytesIO(data)))
    rows = list(importer.plan())
    result = importer.apply()
    return target, importer, rows, result


def test_a_log_is_written_in_parts_that_import_as_one_log():
    events = numbered("alice", 5)
    data = v3_bytes("alice", events, counter=7, part_events=2)
    parts = user_lines(data)
    assert [(p["part"], p["final"], len(p["events"]), p["counter"]) for p in parts] == [
        (1, False, 2, None), (2, False, 2, None), (3, True, 1, 7)]
    summary = verify_archive(lambda: io.BytesIO(data))
    assert summary.users == 1 and summary.counters == 1 and summary.events == 5

    target, importer, rows, result = import_into_fresh(data)
    # the preview shows one row for the log, not one per part
    assert [(r.kind, r.action, r.events) for r in rows] == [("user", "create", 5)]
    assert importer.totals.create == 1
    assert result.events_restored == 5 and result.counters == {"alice": 7}
    assert [e.event_id for e in target.event_store().list_events("alice")] == \
        [e.event_id for e in events]
    assert importer.verify_target().ok


def test_a_version_2_archive_still_verifies_and_imports():
    events = numbered("bob", 3)
    data = v2_bytes("bob", events, counter=4)
    with ArchiveReader(io.BytesIO(data)) as reader:
        assert reader.header.format_version == 2
        records = list(reader.records())
    assert records == [UserRecord("bob", 4, tuple(records[0].events))]
    target, importer, rows, result = import_into_fresh(data)
    assert [(r.kind, r.events) for r in rows] == [("user", 3)]
    assert result.counters == {"bob": 4} and result.events_restored == 3
    assert importer.verify_target().ok
    # the next event continues after the archived counter
    assert target.event_store().append(event("bob", 9)).sequence == 5


def resigned(record: dict, **changes) -> bytes:
    body = {k: v for k, v in {**record, **changes}.items() if k != "line_sha256"}
    body["line_sha256"] = sha256_hex(canonical(body))
    return canonical(body)


def rechained(lines: list[bytes], users: int) -> bytes:
    """Header and records as given, with a trailer whose digest matches them."""
    chain = hashlib_sha256()
    for line in lines:
        chain.update(line + b"\n")
    trailer = {"kind": "trailer", "count": 0, "users": users, "digest": chain.hexdigest()}
    return b"".join(line + b"\n" for line in [*lines, canonical(trailer)])


def refusal(data: bytes) -> str:
    with pytest.raises(ArchiveDamaged) as info:
        verify_archive(lambda: io.BytesIO(data))
    return str(info.value)


@pytest.mark.parametrize("damage, message", [
    ("drop_final", "without its final part"),
    ("swap_parts", "out of order"),
    ("counter_early", "invalid counter"),
    ("low_counter", "counter 2 is below the highest sequence 4"),
])
def test_parts_are_checked(damage, message):
    data = v3_bytes("carol", numbered("carol", 4), counter=4, part_events=2)
    header, *records = data.splitlines()[:-1]
    parts = [json.loads(r) for r in records]
    if damage == "drop_final":
        lines = [header, records[0]]
    elif damage == "swap_parts":
        lines = [header, resigned(parts[1], n=1), resigned(parts[0], n=2)]
    elif damage == "counter_early":
        lines = [header, resigned(parts[0], counter=9), records[1]]
    else:  # the (here empty) final part's counter must cover the earlier parts' sequences
        assert parts[2]["final"] and parts[2]["events"] == []
        lines = [header, records[0], records[1], resigned(parts[2], counter=2)]
    assert message in refusal(rechained(lines, users=1))


def test_events_export_streams_the_log_in_parts_and_imports_back(tmp_path):
    """Through the CLI: a log longer than a part is written as several bounded lines."""
    source = doubles.SeamedAdapter()
    count = USER_PART_EVENTS * 2 + 7
    for n in range(1, count + 1):
        source.event_store().append(event("dora", n))
    doubles.SEAMED["source"] = source
    path = tmp_path / "dora.jsonl"
    result = CliRunner().invoke(app, ["events", "export", "--user", "dora", "--adapter",
                                      "tests.support.transfer_doubles:seamed_source",
                                      "--out", str(path)])
    assert result.exit_code == 0, result.output
    assert f"exported {count} event(s)" in result.stderr
    parts = user_lines(path.read_bytes())
    assert [len(p["events"]) for p in parts] == [USER_PART_EVENTS, USER_PART_EVENTS, 7]
    assert [p["final"] for p in parts] == [False, False, True] and parts[-1]["counter"] == count
    target, importer, _, imported = import_into_fresh(path.read_bytes())
    assert imported.events_restored == count and imported.counters == {"dora": count}
    assert importer.verify_target().ok


def test_the_trailers_claim_is_a_progress_total_only_where_it_is_exact(tmp_path):
    from backends.archive import SessionRecord
    from backends.archive.reader import claimed_records

    buf = io.BytesIO()
    writer = ArchiveWriter(buf, HEADER)
    for i in range(3):
        writer.add(SessionRecord(f"s{i}", 1, None, None, b"x"))
    writer.finish()
    assert claimed_records(io.BytesIO(buf.getvalue())) == 3
    # user logs (a log may take several records), gzip, and garbage: no claim
    assert claimed_records(io.BytesIO(v3_bytes("u", numbered("u", 3), 3, 2))) is None
    import gzip

    assert claimed_records(io.BytesIO(gzip.compress(buf.getvalue()))) is None
    for junk in (b"", b"not json\n", b"[" * 5000 + b"\n", b'{"kind": "trailer", "count": -1}\n'):
        assert claimed_records(io.BytesIO(junk)) is None
