"""Archive format version 2 (#12 item 4) and the one rule for lossy transfers (#15 item 9).

Developed against the in-test stores of ``tests/support/transfer_doubles.py`` (a memory state
store with drift flags and expiry, and event logs with and without each optional seam),
so these tests need no server. The same round trip between the shipped stores is in
``tests/backends/archive/test_v2_backends.py``.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from backends.archive import (
    ArchiveDamaged,
    ArchiveHeader,
    ArchiveReader,
    ArchiveWriter,
    SessionRecord,
    UserRecord,
    verify_archive,
)
from backends.archive.format import canonical, sha256_hex
from backends.contract import MemoryEvent
from backends.memory import MemoryBackendAdapter
from backends.transfer import ArchiveFile, LossyTransfer, SessionImporter, StagedStream, export_to_path
from backends.transfer.errors import ImportConflict
from semvecctl.app import app
from tests.support import transfer_doubles as doubles

runner = CliRunner()
UTC = timezone.utc
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def invoke(*args: str, **kwargs):
    return runner.invoke(app, list(args), **kwargs)


def error_line(result) -> str:
    lines = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def event(user: str, session: str, n: int, owner: str = "acme") -> MemoryEvent:
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=f"said {n} ✓",
                       created_at=T0 + timedelta(minutes=n), embedding=(0.5, -0.25, n / 8),
                       meta={"turn": n}, owner_subject=owner, session_id=session,
                       source_event_id=str(uuid.uuid4()) if n % 2 else None)


def seed(adapter, tag: str) -> dict:
    """Three sessions and two users' logs:

    - ``{tag}-s1`` (owner acme, version 2): alice's sequence 1, bob's 1, alice's 2
    - ``{tag}-s2`` (owner acme): alice's 3; drift exempt
    - ``{tag}-s3`` (unowned): no events, expires (where the store keeps expiry)
    - alice's 4 and 5 belong to no session; her 5 is then deleted, so alice's counter (5)
      is above her highest event (4): only the counter says where the sequence goes on.
    """
    store, log = adapter.state_store(), adapter.event_store()
    alice, bob = f"{tag}-alice", f"{tag}-bob"
    s1, s2, s3 = f"{tag}-s1", f"{tag}-s2", f"{tag}-s3"
    store.save(s1, b"one", expected_version=None, owner_subject="acme")
    log.append(event(alice, s1, 1))
    log.append(event(bob, s1, 2))
    store.save(s1, b"\x00two\xff", expected_version=1, owner_subject="acme", pending_message="ok?")
    log.append(event(alice, s1, 3))
    store.save(s2, b'{"turns": [1]}', expected_version=None, owner_subject="acme")
    log.append(event(alice, s2, 4))
    store.set_drift_exempt(s2, True)
    store.save(s3, b"", expected_version=None)
    log.append(event(alice, "", 5, owner=""))
    gone = log.append(event(alice, "", 6, owner=""))
    assert log.delete(gone.event_id)
    return {"alice": alice, "bob": bob, "s1": s1, "s2": s2, "s3": s3}


def log_of(adapter, user: str) -> list[tuple]:
    return [(e.event_id, e.sequence, e.session_id, e.content, e.owner_subject, tuple(e.embedding),
             dict(e.meta), e.source_event_id, e.created_at)
            for e in adapter.event_store().list_events(user)]


@pytest.fixture
def source():
    adapter = doubles.SeamedAdapter()
    names = seed(adapter, uuid.uuid4().hex[:8])
    EXPIRY_SET_AT[names["s3"]] = time.monotonic()
    adapter.state_store().expire_in(names["s3"], 3600)
    doubles.SEAMED["source"] = adapter
    return adapter, names


#: when a test's expiry was set (monotonic), so a TTL read later is checked against the time
#: that really passed, not against a guess of how fast the machine is
EXPIRY_SET_AT: dict[str, float] = {}


def left_since(session_id: str, ttl_s: float) -> float:
    """The least TTL that may be left of ``ttl_s`` set on ``session_id``: what passed since,
    plus a second for the store's whole-second rounding."""
    return ttl_s - (time.monotonic() - EXPIRY_SET_AT[session_id]) - 1


@pytest.fixture
def target():
    adapter = doubles.SeamedAdapter()
    doubles.SEAMED["target"] = adapter
    return adapter


# -- the round trip --------------------------------------------------------------------------


def test_with_events_carries_drift_expiry_and_each_sessions_events(source, target, tmp_path):
    src, names = source
    path = tmp_path / "a.jsonl.gz"
    exported = export_to_path(src, path, source_uri="seamed://", with_events=True)
    assert exported.count == 3 and exported.events == 4 and exported.users == 0
    records = {r.session_id: r for r in ArchiveReader(path).sessions()}
    assert [e.sequence for e in records[names["s1"]].events] == [1, 2, 1]  # alice 1, 2; bob 1
    assert records[names["s2"]].drift_exempt and not records[names["s1"]].drift_exempt
    assert records[names["s3"]].events == ()
    assert left_since(names["s3"], 3600) <= records[names["s3"]].ttl_left() <= 3600

    importer = SessionImporter(target, ArchiveFile(path))
    result = importer.apply()
    assert (result.created, result.events_restored, result.expired) == (3, 4, 0)
    report = importer.verify_target()
    assert report.ok and report.events_matched == 4, report.examples
    store = target.state_store()
    assert store.is_drift_exempt(names["s2"]) and not store.is_drift_exempt(names["s1"])
    assert left_since(names["s3"], 3600) <= target.describe_session(names["s3"]).ttl_seconds <= 3600
    assert store.load_full(names["s1"]) == src.state_store().load_full(names["s1"])
    # the events travelled with their numbers, and the counters were raised past them
    src_alice = [e for e in log_of(src, names["alice"]) if e[2]]
    assert log_of(target, names["alice"]) == src_alice
    assert log_of(target, names["bob"]) == log_of(src, names["bob"])
    assert target.event_store().append(event(names["bob"], "", 9)).sequence == 2


def test_whole_user_export_continues_the_sequence_instead_of_restarting_it(source, target, tmp_path):
    src, names = source
    path = tmp_path / "alice.jsonl"
    exported = export_to_path(src, path, source_uri="seamed://", users=[names["alice"]])
    # alice's sessions only; her whole log (incl. events of no session) in one user record
    assert exported.count == 2 and exported.users == 1 and exported.events == 4
    with ArchiveReader(path) as reader:
        recs = list(reader.records())
    assert [type(r).__name__ for r in recs] == ["SessionRecord", "SessionRecord", "UserRecord"]
    assert all(r.events is None for r in recs[:2])
    assert recs[2].counter == 5 and [e.sequence for e in recs[2].events] == [1, 2, 3, 4]
    assert json.loads(path.read_text().splitlines()[0])["filters"] == {"users": [names["alice"]]}

    importer = SessionImporter(target, ArchiveFile(path))
    result = importer.apply()
    assert result.counters == {names["alice"]: 5} and result.events_restored == 4
    assert importer.verify_target().ok
    assert log_of(target, names["alice"]) == log_of(src, names["alice"])
    # the next event is 6, as on the source: not 1 (restarted) and not 5 (reused)
    assert target.event_store().append(event(names["alice"], "", 7)).sequence == 6
    assert src.event_store().append(event(names["alice"], "", 7)).sequence == 6
    assert target.event_store().list_events(names["bob"]) == []


def test_with_events_and_user_carry_each_event_once(source, target, tmp_path):
    src, names = source
    path = tmp_path / "a.jsonl"
    exported = export_to_path(src, path, source_uri="seamed://", with_events=True,
                              users=[names["alice"]])
    assert exported.events == 5  # bob's one in s1, alice's four in her log
    s1 = next(r for r in ArchiveReader(path).sessions() if r.session_id == names["s1"])
    assert {e.user_id for e in s1.events} == {names["bob"]}
    importer = SessionImporter(target, ArchiveFile(path))
    importer.apply()
    assert importer.verify_target().ok


def test_importing_twice_with_skip_changes_nothing(source, target, tmp_path):
    src, names = source
    path = tmp_path / "a.jsonl"
    export_to_path(src, path, source_uri="seamed://", with_events=True, users=[names["alice"]])
    SessionImporter(target, ArchiveFile(path)).apply()
    before = (log_of(target, names["alice"]), log_of(target, names["bob"]),
              target.event_store().read_counter(names["alice"]))
    again = SessionImporter(target, ArchiveFile(path), on_conflict="skip")
    result = again.apply()
    assert (result.created, result.skipped, result.events_restored, result.events_skipped) == (0, 2, 0, 5)
    assert again.verify_target().ok
    assert (log_of(target, names["alice"]), log_of(target, names["bob"]),
            target.event_store().read_counter(names["alice"])) == before


# -- expiry: the time remaining at import ---------------------------------------------------------


HEADER = ArchiveHeader(source_backend="seamed", source_uri="seamed://",
                       created_at="2026-11-01T12:00:00Z", tool_version="0.0.test")


def archive_of(*records, header=HEADER) -> bytes:
    buf = io.BytesIO()
    writer = ArchiveWriter(buf, header)
    for r in records:
        writer.add(r)
    writer.finish()
    return buf.getvalue()


def staged(data: bytes) -> StagedStream:
    return StagedStream(io.BytesIO(data))


def test_import_applies_the_time_remaining_and_skips_what_has_expired(target):
    now = datetime.now(UTC)
    EXPIRY_SET_AT["soon"] = time.monotonic()
    data = archive_of(
        # exported with an hour to go, imported when 50 s are left: 50 s, not an hour
        SessionRecord("soon", 1, None, None, b"a", expires_at=now + timedelta(seconds=50)),
        SessionRecord("gone", 1, None, None, b"b", expires_at=now - timedelta(seconds=1)),
        SessionRecord("forever", 1, None, None, b"c"),
    )
    importer = SessionImporter(target, staged(data))
    rows = {r.session_id: r for r in importer.plan()}
    assert rows["gone"].action == "expired" and importer.totals.expired == 1
    assert rows["soon"].action == "create" and "expires in" in rows["soon"].detail
    result = importer.apply()
    assert (result.created, result.expired) == (2, 1)
    assert left_since("soon", 50) <= target.describe_session("soon").ttl_seconds <= 50
    assert target.describe_session("forever").ttl_seconds is None
    assert target.state_store().load("gone") is None
    report = importer.verify_target()
    assert report.ok and report.matched == 2 and report.skipped == 1


def test_an_expired_session_is_no_loss_for_a_target_without_expiry():
    """Only an expiry still ahead can be lost: an expired session is not imported at all."""
    now = datetime.now(UTC)
    data = archive_of(SessionRecord("gone", 1, None, None, b"b", expires_at=now - timedelta(seconds=1)),
                      SessionRecord("kept", 1, None, None, b"c"))
    memory = MemoryBackendAdapter()
    importer = SessionImporter(memory, staged(data))
    assert importer.check_losses() == []
    assert (importer.apply().created, importer.result.expired) == (1, 1)
    ahead = archive_of(SessionRecord("soon", 1, None, None, b"a", expires_at=now + timedelta(hours=1)))
    with pytest.raises(LossyTransfer, match=r"1 session expiry time\(s\)"):
        SessionImporter(MemoryBackendAdapter(), staged(ahead)).check_losses()


def test_cli_says_how_many_sessions_had_expired(target, tmp_path):
    now = datetime.now(UTC)
    path = tmp_path / "a.jsonl"
    path.write_bytes(archive_of(
        SessionRecord("gone", 1, None, None, b"b", expires_at=now - timedelta(seconds=5)),
        SessionRecord("kept", 1, None, None, b"c")))
    result = invoke("sessions", "import", str(path), "--adapter", "tests.support.transfer_doubles:seamed_target",
                    "--apply", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["created"] == 1 and doc["expired"] == 1
    assert "1 session(s) had expired since the export and were not imported" in result.stderr


# -- version 1 archives still import -----------------------------------------------------------

#: written by semvecctl 0.1.0 (format version 1) before this change, byte for byte
V1_ARCHIVE = (
    b'{"created_at":"2026-11-30T12:00:00Z","filters":{},"format":"semvecctl-sessions","format_version":1,"kind":"header","source_backend":"redis","source_uri":"redis://localhost:6379/0","tool":"semvecctl","tool_version":"0.1.0","with_items":true}\n'
    b'{"blob":"AAFzdGF0Zf8=","blob_sha256":"2c80dccfcd142a92e1bf1f731c854f7f9cee7fba334357995cad61464f8061b6","kind":"session","line_sha256":"9b234b996b4d394cbaa52566385b2768d4e4a1dc2a2c796470c2974652a61139","n":1,"owner_subject":"acme","pending_message":"confirm?","session_id":"v1-plain","ttl_seconds":null,"version":3}\n'
    b'{"blob":"eyJ0dXJucyI6WzFdfQ==","blob_sha256":"bfed7dd9857e2e016ad5708a773e17ac7899585b7905f676827b349e24add5a0","kind":"session","line_sha256":"efd848f424d49dff8ba5adba3ac0822d6b4f451a94a1c68eff575e955bf8f557","n":2,"owner_subject":null,"pending_message":null,"session_id":"v1-expired","ttl_seconds":600,"version":1}\n'
    b'{"blob":"eyJ0dXJucyI6WzJdfQ==","blob_sha256":"c4d51d39b0b3184c6f8df6e036b89324894b5c029c0b47f17b8278ed18c97105","kind":"session","line_sha256":"f113f95c879709eab56ced7ecbd8e3638411c87bf5bdc57c1cf596d9474e07ba","n":3,"owner_subject":null,"pending_message":null,"session_id":"v1-ttl-long","ttl_seconds":400000000,"version":2}\n'
    b'{"blob":"U1ZCAg==","blob_sha256":"61e336ebda820865ab804da677ab13c4fc00c0d3f660d03d37bdd0aa82378fa5","items":[{"created_at":null,"embedding":[0.5,-0.25],"item_id":"i1","text":"fact","tier":"working","tiers":["working"],"unit":{"k":1},"updated_at":null}],"kind":"session","line_sha256":"35e7f7cbe0b99e8a24948fc355e84861b06c92bdf34c90fcb742b44e7e22fdc6","n":4,"owner_subject":"acme/agent","pending_message":null,"session_id":"v1-items","ttl_seconds":null,"version":2}\n'
    b'{"count":4,"digest":"857adad9d6ef45a2d6884ca2c010b30044bca24b8a39716a5208c651ecf31b6b","kind":"trailer"}\n'
)


def test_v1_fixture_reads_into_v2_records():
    summary = verify_archive(lambda: io.BytesIO(V1_ARCHIVE))
    assert summary.header.format_version == 1 and summary.count == 4 and summary.events == 0
    recs = {r.session_id: r for r in ArchiveReader(io.BytesIO(V1_ARCHIVE)).sessions()}
    # v1 stored the seconds left at export; they count from the export's start
    assert recs["v1-expired"].expires_at == datetime(2026, 11, 30, 12, 10, tzinfo=UTC)
    assert recs["v1-ttl-long"].expires_at == datetime(2026, 11, 30, 12, tzinfo=UTC) + timedelta(seconds=400000000)
    assert recs["v1-plain"].expires_at is None and not recs["v1-plain"].drift_exempt
    assert recs["v1-plain"].events is None and len(recs["v1-items"].items) == 1


def test_v1_archive_still_imports(target, tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_bytes(V1_ARCHIVE)
    with pytest.raises(LossyTransfer, match=r"1 item\(s\) \(backend 'seamed' has no item mirror\)"):
        SessionImporter(target, ArchiveFile(path)).apply()
    assert list(target.iter_sessions()) == []
    importer = SessionImporter(target, ArchiveFile(path), allow_loss=True)
    result = importer.apply()
    assert (result.created, result.expired, result.items_not_imported) == (3, 1, 1)
    assert importer.verify_target().ok
    plain = target.state_store().load_full("v1-plain")
    assert (plain.blob, plain.version, plain.owner_subject, plain.pending_message) == (
        b"\x00\x01state\xff", 3, "acme", "confirm?")
    assert target.describe_session("v1-ttl-long").ttl_seconds > 300_000_000
    assert target.state_store().load("v1-expired") is None


def test_v1_archive_through_the_cli(target, tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_bytes(V1_ARCHIVE)
    args = ("sessions", "import", str(path), "--adapter", "tests.support.transfer_doubles:seamed_target", "--apply", "--yes")
    refused = invoke(*args)
    assert refused.exit_code == 1 and "1 item(s)" in error_line(refused)
    result = invoke(*args, "--allow-loss")
    assert result.exit_code == 0, result.output
    assert "(format version 1)" in result.stderr and "wrote 3 session(s)" in result.stderr


# -- event conflicts ---------------------------------------------------------------------------


def test_an_event_the_target_holds_is_a_conflict_before_any_write(source, target, tmp_path):
    src, names = source
    path = tmp_path / "a.jsonl"
    export_to_path(src, path, source_uri="seamed://", with_events=True)
    bob_event = src.event_store().list_events(names["bob"])[0]
    target.event_store().restore_events([bob_event])  # the same event id is already there
    importer = SessionImporter(target, ArchiveFile(path))
    rows = {r.session_id: r for r in importer.plan()}
    assert rows[names["s1"]].action == "conflict" and bob_event.event_id in rows[names["s1"]].detail
    with pytest.raises(ImportConflict, match="nothing was written"):
        importer.apply()
    assert list(target.iter_sessions()) == []
    skipped = SessionImporter(target, ArchiveFile(path), on_conflict="skip").apply()
    assert (skipped.created, skipped.events_restored, skipped.events_skipped) == (3, 3, 1)


def test_a_sequence_taken_by_another_event_is_a_conflict(source, target, tmp_path):
    src, names = source
    path = tmp_path / "a.jsonl"
    export_to_path(src, path, source_uri="seamed://", users=[names["alice"]])
    target.event_store().append(event(names["alice"], "", 99))  # holds alice's sequence 1
    importer = SessionImporter(target, ArchiveFile(path))
    rows = [r for r in importer.plan() if r.kind == "user"]
    assert rows[0].action == "conflict" and "sequence 1 of user" in rows[0].detail
    with pytest.raises(ImportConflict):
        importer.apply()
    assert list(target.iter_sessions()) == []


# -- damaged v2 archives -------------------------------------------------------------------------


def v2_archive(src, names, **options) -> bytes:
    buf = io.BytesIO()
    from backends.transfer import export_to_stream

    export_to_stream(src, buf, source_uri="seamed://", **options)
    return buf.getvalue()


def resigned(line: bytes, change) -> bytes:
    record = json.loads(line)
    change(record)
    body = {k: v for k, v in record.items() if k != "line_sha256"}
    body["line_sha256"] = sha256_hex(canonical(body))
    return canonical(body) + b"\n"


def refusal(data: bytes) -> str:
    with pytest.raises(ArchiveDamaged) as info:
        verify_archive(lambda: io.BytesIO(data))
    assert "\n" not in str(info.value)
    return str(info.value)


def _set_event(field, value):
    def change(record):
        record["events"][0][field] = value
    return change


@pytest.mark.parametrize("change,message", [
    (_set_event("event_id", "not-a-uuid"), "is malformed"),
    (_set_event("embedding", None), "created_at/embedding is malformed"),
    (_set_event("embedding", [1.0, "x"]), "is malformed"),
    (_set_event("sequence", -1), "sequence is not a non-negative integer"),
    (_set_event("owner_subject", None), "owner_subject is not a string"),
    (_set_event("session_id", "another-session"), "carries an event of another session"),
    (lambda r: r["events"][0].update(extra=1), "exactly the engine's event fields"),
    (lambda r: r.update(drift_exempt="yes"), "drift_exempt must be true or false"),
    (lambda r: r.update(expires_at="soon"), "expires_at is not an ISO timestamp"),
    (lambda r: r.update(ttl_seconds=5), "unknown fields ['ttl_seconds']"),
], ids=["event-id", "null-embedding", "text-in-embedding", "negative-sequence", "null-owner",
        "foreign-session", "extra-field", "drift", "expiry", "v1-field-in-v2"])
def test_a_malformed_session_line_is_refused_even_when_resigned(source, change, message):
    src, names = source
    lines = v2_archive(src, names, with_events=True, match=names["s1"]).splitlines(keepends=True)
    assert message in refusal(b"".join([lines[0], resigned(lines[1], change), *lines[2:]]))


def test_user_log_checks(source):
    src, names = source
    lines = v2_archive(src, names, users=[names["alice"]]).splitlines(keepends=True)
    assert json.loads(lines[3])["kind"] == "user"
    low = resigned(lines[3], lambda r: r.update(counter=2))
    assert "counter 2 is below the highest sequence 4" in refusal(b"".join([*lines[:3], low, lines[4]]))
    other = resigned(lines[3], lambda r: r["events"][0].update(user_id="mallory"))
    assert "carries an event of another user" in refusal(b"".join([*lines[:3], other, lines[4]]))
    # a session line after the user log (renumbered and re-signed, so only the order is wrong)
    moved = b"".join([lines[0], lines[1], resigned(lines[3], lambda r: r.update(n=2)),
                      resigned(lines[2], lambda r: r.update(n=3)), lines[4]])
    assert "a session record after the user logs" in refusal(moved)
    trailer = json.loads(lines[4])
    trailer["users"] = 0
    assert "counts 0 user log(s)" in refusal(b"".join([*lines[:4], canonical(trailer) + b"\n"]))


def test_the_same_event_twice_in_an_archive_is_refused():
    ev = event("u", "s1", 1)
    data = archive_of(
        SessionRecord("s1", 1, None, None, b"a", events=(ev.with_sequence(1),)),
        UserRecord("u", 1, (ev.with_sequence(1),)))
    assert f"event {ev.event_id!r} appears more than once" in refusal(data)
    two = archive_of(UserRecord("u", 2, (event("u", "", 1).with_sequence(2),
                                         event("u", "", 2).with_sequence(2))))
    assert "sequence 2 of user 'u' appears more than once" in refusal(two)


def test_a_writer_refuses_a_session_after_a_user_log():
    writer = ArchiveWriter(io.BytesIO(), HEADER)
    writer.add(UserRecord("u", 0, ()))
    with pytest.raises(ValueError, match="before the user logs"):
        writer.add(SessionRecord("s", 1, None, None, b""))


# -- #15.9: one rule for lossy transfers, in export, import and copy -------------------------------


@pytest.fixture
def events_archive(source, tmp_path):
    src, names = source
    path = tmp_path / "events.jsonl"
    export_to_path(src, path, source_uri="seamed://", with_events=True, users=[names["alice"]])
    return path


def _target(adapter):
    doubles.SEAMED["target"] = adapter
    return adapter


LOSSY_TARGETS = {
    "no-event-store": (lambda: MemoryBackendAdapter(), "5 event(s) (backend 'memory' has no event store)"),
    "no-restorer": (lambda: doubles.SeamedAdapter(doubles.AppendOnlyLog()),
                    "5 event(s) (backend 'seamed' cannot restore events with their sequence numbers)"),
    "no-sequences": (lambda: doubles.SeamedAdapter(doubles.SequencelessLog()),
                     "5 event sequence number(s) (backend 'seamed' keeps no per-user sequences)"),
    "numberless-append": (lambda: doubles.SeamedAdapter(doubles.NumberlessLog()),
                          "5 event sequence number(s) (backend 'seamed' keeps no per-user sequences)"),
    "no-drift": (lambda: doubles.SeamedAdapter(drift=False),
                 "1 drift-exempt flag(s) (backend 'seamed' cannot store drift flags)"),
}


@pytest.mark.parametrize("kind", sorted(LOSSY_TARGETS))
def test_import_refuses_what_the_target_cannot_keep_unless_accepted(events_archive, kind):
    make, named = LOSSY_TARGETS[kind]
    target = _target(make())
    if kind == "no-event-store":
        doubles.MEMORY["current"] = target
        where = ("--adapter", "tests.support.transfer_doubles:memory_shared")
    else:
        where = ("--adapter", "tests.support.transfer_doubles:seamed_target")
    for apply in ((), ("--apply", "--yes")):  # the preview says it too, with the same exit code
        refused = invoke("sessions", "import", str(events_archive), *where, *apply)
        assert refused.exit_code == 1, refused.output
        assert named in error_line(refused) and "--allow-loss" in error_line(refused)
        assert list(target.iter_sessions()) == []
    with pytest.raises(LossyTransfer) as info:
        SessionImporter(target, ArchiveFile(events_archive)).apply()
    assert named in str(info.value)
    accepted = invoke("sessions", "import", str(events_archive), *where, "--apply", "--yes", "--allow-loss")
    assert accepted.exit_code == 0, accepted.output
    assert f"accepted loss: {named} not transferred" in accepted.stderr
    assert len(list(target.iter_sessions())) == 2


def test_events_without_numbers_are_appended_and_numbered_by_the_target(source, target, tmp_path):
    """A store without sequences (pgvector) restores by appending; an archive from it
    carries sequence 0, and a target that numbers events gives them fresh numbers."""
    src, names = source
    numberless = doubles.SeamedAdapter(doubles.NumberlessLog())
    path = tmp_path / "a.jsonl"
    export_to_path(src, path, source_uri="seamed://", users=[names["alice"]])
    SessionImporter(numberless, ArchiveFile(path), allow_loss=True).apply()
    assert [e.sequence for e in numberless.event_store().list_events(names["alice"])] == [0] * 4
    again = tmp_path / "b.jsonl"
    exported = export_to_path(numberless, again, source_uri="seamed://", users=[names["alice"]])
    assert exported.warnings == []  # no counter to lose where there are no numbers
    user_log = [r for r in ArchiveReader(again).records() if isinstance(r, UserRecord)][0]
    assert user_log.counter is None and {e.sequence for e in user_log.events} == {0}
    importer = SessionImporter(target, ArchiveFile(again))
    importer.apply()
    assert importer.verify_target().ok
    assert [e.sequence for e in target.event_store().list_events(names["alice"])] == [1, 2, 3, 4]
    assert target.event_store().append(event(names["alice"], "", 8)).sequence == 5


def test_writing_into_memory_warns_that_the_data_dies_with_the_process(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(archive_of(SessionRecord("s", 1, None, None, b"x")))
    doubles.MEMORY["current"] = MemoryBackendAdapter()
    result = invoke("sessions", "import", str(path), "--adapter", "tests.support.transfer_doubles:memory_shared",
                    "--apply", "--yes")
    assert result.exit_code == 0, result.output
    assert "backend 'memory' is not persistent" in result.stderr and "gone when it exits" in result.stderr


EXPORT_LOSSES = {
    "no-event-store": (lambda: MemoryBackendAdapter(), ("--with-events",),
                       "the events (backend 'memory' has no event store)"),
    "no-session-subjects": (lambda: doubles.SeamedAdapter(doubles.SubjectlessLog()), ("--with-events",),
                            "the events (backend 'seamed' cannot find a session's events (its event store has no "
                            "session_subjects)"),
    "no-items": (lambda: doubles.SeamedAdapter(), ("--with-items",),
                 "the items (backend 'seamed' has no item mirror to read them from)"),
    "no-counter": (lambda: doubles.SeamedAdapter(doubles.AppendOnlyLog()), ("--user", "u1"),
                   "1 sequence counter(s) (backend 'seamed' cannot report them"),
}


@pytest.mark.parametrize("kind", sorted(EXPORT_LOSSES))
def test_export_refuses_what_the_source_cannot_provide_unless_accepted(tmp_path, kind):
    make, flags, named = EXPORT_LOSSES[kind]
    adapter = make()
    adapter.state_store().save("s", b"x", expected_version=None)
    if adapter.event_store() is not None:
        adapter.event_store().append(event("u1", "s", 1))
    doubles.SEAMED["source"] = adapter
    path = tmp_path / "a.jsonl"
    src = ("--adapter", "tests.support.transfer_doubles:seamed_source")
    refused = invoke("sessions", "export", *src, *flags, "--out", str(path))
    assert refused.exit_code == 1, refused.output
    assert named in error_line(refused) and "--allow-loss" in error_line(refused)
    assert list(tmp_path.iterdir()) == []
    accepted = invoke("sessions", "export", *src, *flags, "--allow-loss", "--out", str(path))
    assert accepted.exit_code == 0, accepted.output
    assert "accepted loss: " + named in accepted.stderr
    assert verify_archive(path).count == 1


def test_copy_follows_the_same_rule(source):
    src, names = source
    doubles.MEMORY["current"] = memory = MemoryBackendAdapter()
    args = ("sessions", "copy", "--from-adapter", "tests.support.transfer_doubles:seamed_source",
            "--to-adapter", "tests.support.transfer_doubles:memory_shared", "--with-events", "--apply", "--yes")
    refused = invoke(*args)
    assert refused.exit_code == 1
    assert "4 event(s) (backend 'memory' has no event store)" in error_line(refused)
    assert "1 drift-exempt flag(s)" in error_line(refused) and "1 session expiry time(s)" in error_line(refused)
    assert list(memory.iter_sessions()) == []
    accepted = invoke(*args, "--allow-loss")
    assert accepted.exit_code == 0, accepted.output
    assert accepted.stderr.count("accepted loss: ") == 3 and "not persistent" in accepted.stderr
    assert len(list(memory.iter_sessions())) == 3


def test_copy_between_stores_that_keep_everything_needs_no_flag(source, target):
    src, names = source
    result = invoke("sessions", "copy", "--from-adapter", "tests.support.transfer_doubles:seamed_source",
                    "--to-adapter", "tests.support.transfer_doubles:seamed_target", "--with-events",
                    "--user", names["alice"], "--apply", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["created"] == 2 and doc["events_restored"] == 5 and doc["counters"][names["alice"]] == 5
    assert doc["verified"]["events_matched"] == 5 and doc["source_count"] == 2
    assert "accepted loss" not in result.stderr
    assert log_of(target, names["alice"]) == log_of(src, names["alice"])


def test_user_export_needs_an_event_store(tmp_path):
    doubles.MEMORY["current"] = MemoryBackendAdapter()
    result = invoke("sessions", "export", "--adapter", "tests.support.transfer_doubles:memory_shared",
                    "--user", "u1", "--out", str(tmp_path / "a.jsonl"))
    assert result.exit_code == 3 and "no event store" in error_line(result)


def test_cli_export_with_events_then_import_round_trip(source, target, tmp_path):
    src, names = source
    path = tmp_path / "a.jsonl.gz"
    exported = invoke("sessions", "export", "--adapter", "tests.support.transfer_doubles:seamed_source",
                      "--with-events", "--user", names["alice"], "--out", str(path))
    assert exported.exit_code == 0, exported.output
    assert "exported 2 session(s), 5 event(s) and 1 user log(s)" in exported.stderr
    preview = invoke("sessions", "import", str(path), "--adapter", "tests.support.transfer_doubles:seamed_target",
                     "-o", "jsonl")
    assert preview.exit_code == 0, preview.output
    rows = [json.loads(l) for l in preview.stdout.splitlines()]
    assert [r["action"] for r in rows] == ["create"] * 3 and rows[-1]["session_id"] == ""
    assert "counter 5" in rows[-1]["detail"]
    applied = invoke("sessions", "import", str(path), "--adapter", "tests.support.transfer_doubles:seamed_target",
                     "--apply", "--yes")
    assert applied.exit_code == 0, applied.output
    assert "5 event(s) restored" in applied.stderr
    assert target.event_store().read_counter(names["alice"]) == 5
