"""Export: enumerate a backend's sessions and stream them into an archive.

Memory does not grow with the number of sessions: one summary, one blob (and that
session's items) at a time, a running digest, and a fixed-size duplicate filter. A
session enumerated twice (Redis SCAN may report a key twice while the server resizes
its table) is written once: the filter makes it a suspect, and the finished archive is
rewritten without the later copy when a second pass confirms it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator

from backends.archive import ArchiveHeader, ArchiveReader, ArchiveWriter, SessionRecord, atomic_output
from backends.archive.seen import SeenFilter, confirmed_duplicates
from backends.contract import UNSCOPED, LiveItemSource, OwnerFilter, SessionEnumerator
from backends.errors import UnsupportedOperation
from backends.migrate.batch_reads import READ_CHUNK, batch_loader, chunks

Progress = Callable[[Iterable[Any]], Iterable[Any]]


@dataclass
class ExportResult:
    count: int = 0
    items: int = 0
    digest: str = ""
    #: enumerated, but deleted (or re-owned out of scope) before its blob was read
    vanished: int = 0
    #: sessions the enumeration reported twice, written once
    duplicates_dropped: int = 0
    suspects: set[str] = field(default_factory=set, repr=False)


def check_exportable(adapter: Any, *, with_items: bool) -> None:
    name = getattr(adapter, "name", "?")
    if not isinstance(adapter, SessionEnumerator):
        raise UnsupportedOperation(f"backend {name!r} cannot enumerate sessions, so it cannot be exported")
    if with_items and not isinstance(adapter, LiveItemSource):
        raise UnsupportedOperation(
            f"backend {name!r} has no item mirror to read items from; export without --with-items"
        )


def make_header(adapter: Any, source_uri: str, *, with_items: bool, owner_subject: OwnerFilter,
                match: str | None) -> ArchiveHeader:
    from backends import __version__

    filters: dict[str, Any] = {}
    if owner_subject is not UNSCOPED:
        filters["owner_subject"] = owner_subject  # None = unowned only
    if match is not None:
        filters["match"] = match
    return ArchiveHeader(source_backend=str(getattr(adapter, "name", "?")), source_uri=source_uri,
                         created_at=ArchiveHeader.now(), tool_version=__version__,
                         with_items=with_items, filters=filters)


def iter_records(adapter: Any, result: ExportResult, *, owner_subject: OwnerFilter = UNSCOPED,
                 match: str | None = None, with_items: bool = False,
                 batch_size: int = 500) -> Iterator[SessionRecord]:
    """Full records for every enumerated session, in enumeration order, read a chunk of
    64 at a time (see :mod:`backends.migrate.batch_reads`): memory is bounded by the chunk."""
    load_many = batch_loader(adapter)
    summaries = adapter.iter_sessions(owner_subject=owner_subject, match=match,
                                      batch_size=batch_size)
    for chunk in chunks(summaries, READ_CHUNK):
        states = load_many([s.session_id for s in chunk], owner_subject)
        for summary, state in zip(chunk, states):
            if state is None:  # deleted (or re-owned out of scope) since it was enumerated
                result.vanished += 1
                continue
            items = None
            if with_items:
                items = tuple(adapter.iter_live_items(summary.session_id, owner_subject=owner_subject))
            yield SessionRecord(
                session_id=summary.session_id, version=state.version,
                owner_subject=state.owner_subject, pending_message=state.pending_message,
                blob=bytes(state.blob), ttl_seconds=summary.ttl_seconds, items=items,
            )


def write_archive(adapter: Any, stream: IO[bytes], *, source_uri: str,
                  owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                  with_items: bool = False, batch_size: int = 500,
                  progress: Progress | None = None) -> ExportResult:
    """One pass: enumerate and write. Duplicates are only *suspected* here (see module)."""
    check_exportable(adapter, with_items=with_items)
    result = ExportResult()
    header = make_header(adapter, source_uri, with_items=with_items, owner_subject=owner_subject,
                         match=match)
    writer = ArchiveWriter(stream, header)
    seen = SeenFilter()
    records: Iterable[SessionRecord] = iter_records(
        adapter, result, owner_subject=owner_subject, match=match, with_items=with_items,
        batch_size=batch_size)
    if progress is not None:
        records = progress(records)
    for record in records:
        seen.add(record.session_id)
        writer.add(record)
    result.digest = writer.finish()
    result.count, result.items, result.suspects = writer.count, writer.items, seen.suspects
    return result


def rewrite_without_duplicates(source: IO[bytes], dest: IO[bytes], duplicates: set[str],
                               result: ExportResult) -> None:
    """Copy an archive keeping only the first record of each duplicated session id."""
    written: set[str] = set()
    with ArchiveReader(source) as reader:
        writer = ArchiveWriter(dest, reader.header)
        for record in reader.sessions():
            if record.session_id in duplicates:
                if record.session_id in written:
                    result.duplicates_dropped += 1
                    continue
                written.add(record.session_id)
            writer.add(record)
        result.digest = writer.finish()
        result.count, result.items = writer.count, writer.items


def _duplicates_in(source: IO[bytes], suspects: set[str]) -> set[str]:
    with ArchiveReader(source) as reader:
        return confirmed_duplicates((r.session_id for r in reader.sessions()), suspects)


def export_to_path(adapter: Any, path: str | os.PathLike[str], **options: Any) -> ExportResult:
    """Export into ``path`` atomically (0600, temp + fsync + rename; gzip for ``.gz``).

    On any failure or interruption the target name is left as it was (absent, or the
    previous file) and the temp file is removed.
    """
    with atomic_output(path) as out:
        result = write_archive(adapter, out, **options)
    if result.suspects:
        with open(path, "rb") as current:
            dups = _duplicates_in(current, result.suspects)
            if dups:
                current.seek(0)
                with atomic_output(path) as out:
                    rewrite_without_duplicates(current, out, dups, result)
    return result


@contextlib.contextmanager
def staged_export(adapter: Any, **options: Any) -> Iterator[tuple[IO[bytes], ExportResult]]:
    """Export into an anonymous private temp file (deleted on close), duplicates settled;
    yields the file rewound to its start. Used for stdout and for ``copy``."""
    with contextlib.ExitStack() as stack:
        staged = stack.enter_context(tempfile.TemporaryFile())
        result = write_archive(adapter, staged, **options)
        if result.suspects:
            dups = _duplicates_in(staged, result.suspects)
            if dups:
                final = stack.enter_context(tempfile.TemporaryFile())
                rewrite_without_duplicates(staged, final, dups, result)
                staged = final
        staged.seek(0)
        yield staged, result


def export_to_stream(adapter: Any, stream: IO[bytes], **options: Any) -> ExportResult:
    """Export onto a non-seekable stream (stdout): staged first, so duplicates can be
    settled and an export that fails half-way sends nothing."""
    with staged_export(adapter, **options) as (staged, result):
        shutil.copyfileobj(staged, stream, 1 << 20)
        stream.flush()
    return result
