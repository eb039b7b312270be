"""The archive format on its own: what the writer produces and everything the reader
refuses (truncated, reordered, duplicated, tampered, wrong version, wrong format)."""

from __future__ import annotations

import base64
import gzip
import io
import json
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from backends.archive import (
    FORMAT_NAME,
    ArchiveDamaged,
    ArchiveHeader,
    ArchiveReader,
    ArchiveUnsupported,
    ArchiveWriter,
    SessionRecord,
    atomic_output,
    verify_archive,
)
from backends.archive.format import READABLE_VERSIONS, canonical, sha256_hex
from backends.archive.seen import SeenFilter, confirmed_duplicates
from backends.contract import MemoryItem

HEADER = ArchiveHeader(source_backend="memory", source_uri="memory://", created_at="2026-01-01T00:00:00Z",
                       tool_version="0.0.test")


def records(n: int = 4) -> list[SessionRecord]:
    out = []
    for i in range(n):
        items = (MemoryItem(item_id=f"it{i}", text=f"text {i}", embedding=(0.25, -1.5, 3.0),
                            tier="working", tiers=("working",), unit={"k": i}),) if i % 2 else ()
        out.append(SessionRecord(
            session_id=f"s{i}", version=i + 1, owner_subject=None if i == 0 else f"tenant/agent{i}",
            pending_message="confirm?" if i == 2 else None, blob=bytes(range(256)) * (i + 1),
            expires_at=datetime(2030, 1, 1, tzinfo=timezone.utc) if i == 1 else None, items=items,
            drift_exempt=i == 3,
        ))
    return out


def archive_bytes(recs=None, header=HEADER) -> bytes:
    buf = io.BytesIO()
    writer = ArchiveWriter(buf, header)
    for r in recs if recs is not None else records():
        writer.add(r)
    writer.finish()
    return buf.getvalue()


def read_all(data: bytes) -> list[SessionRecord]:
    with ArchiveReader(io.BytesIO(data)) as reader:
        return list(reader.sessions())


def verify(data: bytes):
    return verify_archive(lambda: io.BytesIO(data))


def lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def resign(record: dict) -> bytes:
    """Re-checksum a tampered session record (what a careful forger would do)."""
    body = {k: v for k, v in record.items() if k != "line_sha256"}
    body["line_sha256"] = sha256_hex(canonical(body))
    return canonical(body) + b"\n"


# -- round trip ------------------------------------------------------------------------


def test_round_trip_keeps_every_field_and_blob_byte():
    original = records()
    back = read_all(archive_bytes(original))
    # items come back attached to their session (and its owner)
    expected = [replace(r, items=tuple(replace(i, session_id=r.session_id, owner_subject=r.owner_subject)
                                       for i in r.items)) for r in original]
    assert back == expected


def test_layout_is_header_sessions_trailer_in_canonical_json():
    data = archive_bytes()
    parsed = [json.loads(line) for line in lines(data)]
    assert [p["kind"] for p in parsed] == ["header"] + ["session"] * 4 + ["trailer"]
    header = parsed[0]
    assert header["format"] == FORMAT_NAME and header["format_version"] == 4
    assert header["source_backend"] == "memory" and header["tool"] == "semvecctl"
    assert [p["n"] for p in parsed[1:-1]] == [1, 2, 3, 4]
    assert parsed[-1]["count"] == 4
    for line in lines(data):
        assert line == canonical(json.loads(line)) + b"\n"
    s = parsed[2]
    assert base64.b64decode(s["blob"]) == records()[1].blob
    assert s["blob_sha256"] == sha256_hex(records()[1].blob)


def test_verify_reports_counts():
    summary = verify(archive_bytes())
    assert summary.count == 4 and summary.items == 2 and summary.sessions_with_items == 4
    assert summary.header.source_uri == "memory://"


def test_empty_archive_is_valid():
    assert verify(archive_bytes([])).count == 0


def test_gzip_by_name_and_private_mode(tmp_path):
    target = tmp_path / "a.jsonl.gz"
    with atomic_output(target) as out:
        writer = ArchiveWriter(out, HEADER)
        for r in records():
            writer.add(r)
        writer.finish()
    assert target.read_bytes()[:2] == b"\x1f\x8b"
    assert target.stat().st_mode & 0o777 == 0o600
    assert gzip.decompress(target.read_bytes()) == archive_bytes()
    assert verify_archive(target).count == 4
    assert [p.name for p in tmp_path.iterdir()] == ["a.jsonl.gz"]


def test_atomic_output_removes_temp_and_keeps_previous_file_on_interrupt(tmp_path):
    target = tmp_path / "a.jsonl"
    target.write_bytes(b"previous")
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(target) as out:
            out.write(b"partial")
            raise KeyboardInterrupt
    assert target.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["a.jsonl"]


# -- refusals ----------------------------------------------------------------------------


def refused(data: bytes, kind=ArchiveDamaged) -> str:
    with pytest.raises(kind) as info:
        verify(data)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("cut", [1, 40, 200, -80, -1])
def test_truncated_archive_is_refused(cut):
    data = archive_bytes()
    header_len = len(lines(data)[0])
    end = header_len + cut if cut > 0 else len(data) + cut
    message = refused(data[:end])
    assert "truncated" in message or "incomplete" in message


def test_archive_cut_at_a_line_boundary_lacks_its_trailer():
    data = b"".join(lines(archive_bytes())[:-2])
    assert "without its trailer" in refused(data)


def test_truncated_gzip_is_refused():
    data = gzip.compress(archive_bytes())
    message = refused(data[: len(data) - 30])
    assert "truncated" in message or "cut short" in message


def test_reordered_lines_are_refused():
    ls = lines(archive_bytes())
    ls[1], ls[2] = ls[2], ls[1]
    message = refused(b"".join(ls))
    assert "record 2 found where record 1 was expected" in message


def test_removed_line_is_refused():
    ls = lines(archive_bytes())
    del ls[2]
    assert "reordered, removed or duplicated" in refused(b"".join(ls))


def test_one_byte_of_one_blob_tampered_is_refused():
    ls = lines(archive_bytes())
    record = json.loads(ls[3])
    blob = bytearray(base64.b64decode(record["blob"]))
    blob[100] ^= 0x01
    record["blob"] = base64.b64encode(bytes(blob)).decode()
    ls[3] = canonical(record) + b"\n"
    assert "checksum does not match" in refused(b"".join(ls))
    ls[3] = resign(record)  # even with the line checksum recomputed, the blob sha catches it
    assert "blob does not match its sha256" in refused(b"".join(ls))


def test_rewritten_session_with_every_checksum_recomputed_fails_the_trailer_digest():
    ls = lines(archive_bytes())
    record = json.loads(ls[1])
    record["owner_subject"] = "intruder"
    ls[1] = resign(record)
    assert "trailer digest does not match" in refused(b"".join(ls))


def test_trailer_count_mismatch_is_refused():
    ls = lines(archive_bytes())
    trailer = json.loads(ls[-1])
    trailer["count"] = 3
    ls[-1] = canonical(trailer) + b"\n"
    assert "trailer counts 3" in refused(b"".join(ls))


def test_data_after_trailer_is_refused():
    data = archive_bytes()
    assert "after the trailer" in refused(data + lines(data)[1])


def test_duplicate_session_id_is_refused_even_when_every_checksum_agrees():
    recs = records()
    data = archive_bytes(recs + [recs[1]])
    read_all(data)  # each line on its own is fine
    assert "appears more than once" in refused(data)


def test_wrong_format_version_says_what_to_upgrade():
    ls = lines(archive_bytes())
    header = json.loads(ls[0])
    newer = max(READABLE_VERSIONS) + 1  # a version written by a newer semvecctl
    header["format_version"] = newer
    ls[0] = canonical(header) + b"\n"
    message = refused(b"".join(ls), ArchiveUnsupported)
    assert f"version {newer} is not supported" in message and "upgrade semvecctl" in message


def test_wrong_format_name_is_refused():
    ls = lines(archive_bytes())
    header = json.loads(ls[0])
    header["format"] = "someone-elses-dump"
    ls[0] = canonical(header) + b"\n"
    assert "unsupported archive format 'someone-elses-dump'" in refused(b"".join(ls), ArchiveUnsupported)


@pytest.mark.parametrize("data", [b"", b"hello world\n", b'{"kind": "session"}\n', b"\x1f\x8bnot gzip"])
def test_not_an_archive_is_unsupported(data):
    assert "not a semvecctl sessions archive" in refused(data, ArchiveUnsupported)


def test_unknown_field_in_a_session_is_refused_not_ignored():
    ls = lines(archive_bytes())
    record = json.loads(ls[1])
    record["surprise"] = 1
    assert "unknown fields" in refused(b"".join([*ls[:1], resign(record), *ls[2:]]))


# -- the duplicate filter ---------------------------------------------------------------


def test_seen_filter_flags_repeats_and_confirms_exactly():
    seen = SeenFilter()
    ids = [f"session-{i}" for i in range(20000)]
    assert not any(seen.add(i) for i in ids)
    assert seen.suspects == set()
    assert seen.add("session-7")
    assert confirmed_duplicates(ids + ["session-7"], seen.suspects) == {"session-7"}
    assert confirmed_duplicates(ids, {"session-7", "never-seen"}) == set()
