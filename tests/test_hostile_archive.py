"""Property-based: the export archive reader on arbitrary bytes and mutated archives.

Whatever the bytes, reading either yields only records that passed every check, or is
refused with ArchiveDamaged / ArchiveUnsupported: never another exception. An import of
a refused archive writes nothing into the target.
"""

from __future__ import annotations

import gzip
import io
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.archive import (
    ArchiveDamaged,
    ArchiveHeader,
    ArchiveUnsupported,
    ArchiveWriter,
    SessionRecord,
    verify_archive,
)
from backends.contract import MemoryItem

EXAMPLES = int(os.environ.get("SEMVEC_HYPOTHESIS_EXAMPLES", "120"))
FAST = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HEADER = ArchiveHeader(source_backend="memory", source_uri="memory://",
                       created_at="2026-01-01T00:00:00Z", tool_version="0.0.test")


def valid_archive(compress: bool = False) -> bytes:
    stream = io.BytesIO()
    writer = ArchiveWriter(stream, HEADER)
    for i in range(3):
        items = (MemoryItem(item_id=f"it{i}", text="t\u00e9xt\n*?", embedding=(0.5, -1.0),
                            tier="working", tiers=("working",)),) if i == 1 else None
        writer.add(SessionRecord(session_id=f"s{i}\u2603[*]", version=i + 1,
                                 owner_subject="tenant/agent" if i else None,
                                 pending_message="ok?" if i == 2 else None,
                                 blob=bytes(range(i * 40)), items=items))
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


@settings(max_examples=max(EXAMPLES // 4, 10), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutations(VALID))
def test_import_of_a_refused_archive_writes_nothing(tmp_path_factory, data):
    from backends.memory import MemoryBackendAdapter
    from backends.migrate.importer import SessionImporter
    from backends.migrate.sources import ArchiveFile

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
    assert len(list(target.iter_sessions())) == 3
