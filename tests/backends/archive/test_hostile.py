"""Property-based: the export archive reader on arbitrary bytes and mutated archives.

Whatever the bytes, reading either yields only records that passed every check, or is
refused with ArchiveDamaged / ArchiveUnsupported: never another exception. An import of
a refused archive writes nothing into the target.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import uuid
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.archive import (
    ArchiveDamaged,
    ArchiveHeader,
    ArchiveUnsupported,
    ArchiveWriter,
    SessionRecord,
    UserRecord,
    verify_archive,
)
from backends.contract import MemoryEvent, MemoryItem

EXAMPLES = int(os.environ.get("SEMVEC_HYPOTHESIS_EXAMPLES", "120"))
FAST = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HEADER = ArchiveHeader(source_backend="memory", source_uri="memory://",
                       created_at="2026-01-01T00:00:00Z", tool_version="0.0.test")


def _event(n: int, session: str) -> MemoryEvent:
    return MemoryEvent(event_id=str(uuid.UUID(int=n + 1)), user_id="u\u00e9", content=f"c{n}\n",
                       created_at=datetime(2026, 1, 1, tzinfo=timezone.utc), embedding=(0.5, -2.0),
                       meta={"k": [n]}, session_id=session, sequence=n + 1,
                       source_event_id=str(uuid.UUID(int=99)) if n else None)


def valid_archive(compress: bool = False) -> bytes:
    """Three sessions (one with items, one with events, an expiry and a drift flag) and a
    user log: every kind of line the v2 reader parses."""
    stream = io.BytesIO()
    writer = ArchiveWriter(stream, HEADER)
    for i in range(3):
        sid = f"s{i}\u2603[*]"
        items = (MemoryItem(item_id=f"it{i}", text="t\u00e9xt\n*?", embedding=(0.5, -1.0),
                            tier="working", tiers=("working",)),) if i == 1 else None
        writer.add(SessionRecord(session_id=sid, version=i + 1,
                                 owner_subject="tenant/agent" if i else None,
                                 pending_message="ok?" if i == 2 else None,
                                 blob=bytes(range(i * 40)), items=items,
                                 expires_at=datetime(2030, 1, 1, tzinfo=timezone.utc) if i == 2 else None,
                                 drift_exempt=i == 0,
                                 events=(_event(0, sid),) if i == 2 else None))
    writer.add(UserRecord("u\u00e9", 3, (_event(1, ""), _event(2, "s1\u2603[*]"))))
    writer.finish()
    data = stream.getvalue()
    return gzip.compress(data) if compress else data


VALID = valid_archive()
VALID_GZ = valid_archive(compress=True)


def read_all(data: bytes) -> int:
    """Verify then stream, as the importer does; returns the number of sessions."""
    summary = verify_archive(lambda: io.BytesIO(data))
    return summary.count


def outcome(data: bytes) -> str:
    try:
        read_all(data)
    except (ArchiveDamaged, ArchiveUnsupported) as exc:
        message = str(exc)
        assert message and "\n" not in message, message
        return "refused"
    return "accepted"


@FAST
@given(st.binary(max_size=600))
def test_arbitrary_bytes_are_refused_cleanly(data):
    assert outcome(data) in ("refused", "accepted")


@st.composite
def mutations(draw, base: bytes):
    data = bytearray(base)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["flip", "delete", "insert", "truncate", "dup_line",
                                     "swap_lines"]))
        if not data:
            break
        at = draw(st.integers(min_value=0, max_value=len(data) - 1))
        if kind == "flip":
            data[at] ^= draw(st.integers(min_value=1, max_value=255))
        elif kind == "delete":
            del data[at:at + draw(st.integers(min_value=1, max_value=20))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=20))
        elif kind == "truncate":
            del data[at:]
        else:
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            j = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            if kind == "dup_line":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
    return bytes(data)


@FAST
@given(mutations(VALID))
def test_mutated_archives_are_refused_or_unchanged(data):
    if outcome(data) == "accepted":
        # only a mutation that changed nothing meaningful may pass (e.g. swapping a
        # line with itself): then it must read exactly like the original
        assert read_all(data) == read_all(VALID)


@FAST
@given(mutations(VALID_GZ))
def test_mutated_gzip_archives_are_refused_or_unchanged(data):
    if outcome(data) == "accepted":
        assert read_all(data) == read_all(VALID_GZ)


def test_the_valid_archive_is_accepted():
    assert read_all(VALID) == 3 and read_all(VALID_GZ) == 3


def _resigned(line: bytes, change) -> bytes:
    from backends.archive.format import canonical, sha256_hex

    record = json.loads(line)
    change(record)
    body = {k: v for k, v in record.items() if k != "line_sha256"}
    body["line_sha256"] = sha256_hex(canonical(body))
    return canonical(body) + b"\n"


HUGE = 10**400  # valid JSON, too large for a float or any store's integer


@pytest.mark.parametrize("line,change", [
    (2, lambda r: r["items"][0].update(embedding=[HUGE])),
    (3, lambda r: r["events"][0].update(embedding=[HUGE])),
    (3, lambda r: r["events"][0].update(sequence=HUGE)),
    (4, lambda r: r.update(counter=HUGE)),
    (1, lambda r: r.update(version=HUGE)),
], ids=["item-embedding", "event-embedding", "sequence", "counter", "version"])
def test_numbers_no_float_or_store_can_hold_are_refused_as_damage(line, change):
    lines = VALID.splitlines(keepends=True)
    lines[line] = _resigned(lines[line], change)
    assert outcome(b"".join(lines)) == "refused"


@settings(max_examples=max(EXAMPLES // 4, 10), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutations(VALID))
def test_import_of_a_refused_archive_writes_nothing(tmp_path_factory, data):
    from backends.memory import MemoryBackendAdapter
    from backends.transfer.importer import SessionImporter
    from backends.transfer.sources import ArchiveFile

    path = tmp_path_factory.mktemp("arch") / "a.jsonl"
    path.write_bytes(data)
    target = MemoryBackendAdapter()
    # memory keeps no items: the loss is accepted, what is tested is the damage check
    importer = SessionImporter(target, ArchiveFile(path), allow_loss=True)
    try:
        importer.apply()
    except (ArchiveDamaged, ArchiveUnsupported):
        assert list(target.iter_sessions()) == []
        return
    assert len(list(target.iter_sessions())) == 3  # (events: memory keeps none, loss accepted)
