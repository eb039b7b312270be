"""Sealed archives (format v5, backends.archive.shred) without a store: a sealed archive
reads back record for record with its keyring, is checked (and counted as sealed) without
it, loses exactly the records whose keys were destroyed, refuses a part that does not
decrypt under its key; an archive written without a keyring is still format 4; the
keyring keeps its files private and a destroyed key stays destroyed."""

from __future__ import annotations

import io
import json
import os
import stat
from datetime import datetime, timezone

import pytest

from backends.archive import ArchiveDamaged, ArchiveHeader, ArchiveReader, ArchiveWriter, SessionRecord
from backends.archive.reader import verify_archive
from backends.archive.shred import Keyring, Sealer
from backends.contract import MemoryEvent

SECRET = b"\x07" * 32
HEADER = ArchiveHeader("memory", "memory://", "2026-12-01T00:00:00Z", "0", with_events=True)
T = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _event(n: int, user: str, session: str, owner: str = "acme") -> MemoryEvent:
    return MemoryEvent(event_id=f"00000000-0000-4000-8000-{n:012d}", user_id=user,
                       content=f"{user} said {n}", created_at=T, embedding=[0.5, 0.25],
                       owner_subject=owner, session_id=session, sequence=n)


RECORDS = [
    SessionRecord("shared", 3, "acme", None, b"blob-shared",
                  events=(_event(1, "alice", "shared"), _event(2, "bob", "shared"))),
    SessionRecord("bobs", 1, "acme", "pending", b"blob-bob", events=(_event(3, "bob", "bobs"),)),
    SessionRecord("bare", 2, None, None, b"blob-bare"),
]


def _write(ring: Keyring, sealed: bool = True) -> bytes:
    stream = io.BytesIO()
    sealer = Sealer(ring, "kid", SECRET) if sealed else None
    header = HEADER if not sealed else ArchiveHeader(
        **{**HEADER.__dict__, "shred": {"key_id": "kid"}})
    writer = ArchiveWriter(stream, header, sealer=sealer)
    for record in RECORDS:
        writer.add(record)
    writer.finish()
    ring.flush()
    return stream.getvalue()


def _read(data: bytes, ring: Keyring | None) -> tuple[list[SessionRecord], ArchiveReader]:
    with ArchiveReader(io.BytesIO(data), keyring=ring) as reader:
        return list(reader.sessions()), reader


def test_a_sealed_archive_reads_back_whole_and_holds_no_plaintext(tmp_path):
    with Keyring(tmp_path / "keys", create=True) as ring:
        data = _write(ring)
        records, _ = _read(data, ring)
    assert json.loads(data.splitlines()[0])["format_version"] == 5
    assert records == RECORDS
    for plain in (b"alice", b"bob said", b"blob-shared", b"shared", b"pending"):
        assert plain not in data
    assert stat.S_IMODE(os.stat(tmp_path / "keys").st_mode) == 0o700
    files = [f for f in os.listdir(tmp_path / "keys") if f.startswith("keys-")]
    assert files and all(stat.S_IMODE(os.stat(tmp_path / "keys" / f).st_mode) == 0o600
                         for f in files)


def test_without_the_keyring_it_is_checked_and_counted_not_opened(tmp_path):
    with Keyring(tmp_path / "keys", create=True) as ring:
        data = _write(ring)
    records, reader = _read(data, None)
    assert records == [] and reader.sealed == 3
    summary = verify_archive(lambda: io.BytesIO(data))
    assert (summary.count, summary.sealed, summary.shredded_sessions) == (3, 3, 0)
    damaged = data.replace(b'"data":"', b'"data":"A', 1)
    with pytest.raises(ArchiveDamaged, match="checksum"):
        verify_archive(lambda: io.BytesIO(damaged))


def test_destroyed_keys_withhold_exactly_their_records(tmp_path):
    keys = tmp_path / "keys"
    with Keyring(keys, create=True) as ring:
        data = _write(ring)
        sealer = Sealer(ring, "kid", SECRET)
        assert ring.destroy([sealer.subject("alice", "acme"), sealer.session("shared")]) == 2
    with Keyring(keys) as ring:  # a new process: the destruction was written
        records, reader = _read(data, ring)
        summary = verify_archive(lambda: io.BytesIO(data), keyring=ring)
    assert (reader.shredded_sessions, reader.shredded_events) == (1, 1)
    shredded = [r for r in records if r.shredded]
    assert [e.user_id for r in shredded for e in r.events] == ["bob"]
    assert shredded[0].blob == b"" and "shared" not in shredded[0].session_id
    assert [r for r in records if not r.shredded] == RECORDS[1:]
    assert (summary.shredded_subjects, summary.shredded_session_keys) == (1, 1)


def test_a_part_that_does_not_decrypt_under_its_key_is_damage(tmp_path):
    with Keyring(tmp_path / "a", create=True) as ring:
        data = _write(ring)
    with Keyring(tmp_path / "b", create=True) as other:
        _write(other)  # the same names, other keys
        with pytest.raises(ArchiveDamaged, match="does not decrypt"):
            _read(data, other)


def test_without_a_keyring_the_archive_is_still_format_4(tmp_path):
    with Keyring(tmp_path / "keys", create=True) as ring:
        data = _write(ring, sealed=False)
    assert json.loads(data.splitlines()[0])["format_version"] == 4
    assert _read(data, None)[0] == RECORDS
