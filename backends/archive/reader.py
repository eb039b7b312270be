"""Reading an archive: every check, in order, before a caller acts on a record.

``ArchiveReader.sessions()`` streams validated records (header first, then per line: the
line checksum, the sequence number, the blob's sha256, field shapes) and checks the
trailer's count and chain digest after the last one. Because the trailer can only be
checked at the end, an importer must not write during that first pass: it calls
:func:`verify_archive` (a full pass, plus duplicate detection) and only then streams the
archive a second time to apply it. Memory stays flat: one line at a time.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from backends.archive.errors import ArchiveDamaged, ArchiveUnsupported
from backends.archive.format import (
    ArchiveHeader,
    SessionRecord,
    canonical,
    check_header,
    check_session,
    check_trailer,
    damaged,
    parse_line,
)
from backends.archive.seen import SeenFilter, confirmed_duplicates

GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class ArchiveSummary:
    """What a verified archive holds."""

    header: ArchiveHeader
    count: int
    items: int
    sessions_with_items: int
    digest: str
    #: the embedding widths the archived items use (empty without embeddings)
    dimensions: frozenset[int] = frozenset()
    #: sessions archived with a remaining time to live
    sessions_with_ttl: int = 0


class ArchiveReader:
    """One pass over an archive. ``source`` is a path or a seekable binary stream
    (compressed or not: gzip is recognised by its magic bytes). A stream is closed with
    the reader only when ``close_source`` is true."""

    def __init__(self, source: str | os.PathLike[str] | IO[bytes], *,
                 close_source: bool = False) -> None:
        self._owned: IO[bytes] | None = None
        if isinstance(source, (str, os.PathLike)):
            self._owned = open(Path(source), "rb")
            raw: IO[bytes] = self._owned
        else:
            raw = source
            if close_source:
                self._owned = source
        raw.seek(0)
        head = raw.read(2)
        raw.seek(0)
        self._stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if head == GZIP_MAGIC else raw
        self._line_no = 0
        self._chain = hashlib.sha256()
        try:
            self.header = self._read_header()
        except BaseException:
            self.close()
            raise

    # -- plumbing ----------------------------------------------------------------------

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> "ArchiveReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next_line(self) -> bytes | None:
        try:
            raw = self._stream.readline()
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise ArchiveDamaged(
                f"archive line {self._line_no + 1}: the compressed stream is damaged or cut "
                f"short ({type(exc).__name__}); nothing was imported from it"
            ) from None
        if not raw:
            return None
        self._line_no += 1
        if not raw.endswith(b"\n"):
            raise damaged(self._line_no, "the last line is incomplete (the archive is truncated)")
        return raw[:-1]

    def _read_header(self) -> ArchiveHeader:
        try:
            raw = self._next_line()
        except ArchiveDamaged:
            raise ArchiveUnsupported("not a semvecctl sessions archive: the file is neither "
                                     "JSON Lines nor valid gzip") from None
        if raw is None:
            raise ArchiveUnsupported("not a semvecctl sessions archive: the file is empty")
        try:
            record: Any = parse_line(raw, 1)
        except ArchiveDamaged:
            raise ArchiveUnsupported(
                "not a semvecctl sessions archive: the first line is not a JSON header"
            ) from None
        header = check_header(record)
        self._chain.update(canonical(record) + b"\n")
        return header

    # -- the stream --------------------------------------------------------------------

    def sessions(self) -> Iterator[SessionRecord]:
        """Validated session records; raises ArchiveDamaged at the first failed check,
        including after the last record when the trailer disagrees or is missing."""
        count = 0
        while True:
            raw = self._next_line()
            if raw is None:
                raise damaged(self._line_no, f"the archive ends after {count} session(s) without "
                                             "its trailer (truncated)")
            record = parse_line(raw, self._line_no)
            kind = record.get("kind")
            if kind == "trailer":
                check_trailer(record, self._line_no, count, self._chain.hexdigest())
                if self._next_line() is not None:
                    raise damaged(self._line_no, "there is data after the trailer")
                return
            if kind != "session":
                raise damaged(self._line_no, f"unexpected record kind {kind!r}")
            session, line = check_session(record, self._line_no, count + 1)
            self._chain.update(line + b"\n")
            count += 1
            yield session

    @property
    def digest(self) -> str:
        return self._chain.hexdigest()


def verify_archive(source_factory: Any) -> ArchiveSummary:
    """Read the whole archive once, checking everything, and refuse duplicate session ids.

    ``source_factory()`` opens the archive afresh (a path works too; the opened stream
    is closed after each pass); a second pass runs
    only when the duplicate filter has suspects to settle.
    """
    if isinstance(source_factory, (str, os.PathLike)):
        path = source_factory
        opener = lambda: open(Path(path), "rb")  # noqa: E731
    else:
        opener = source_factory
    seen = SeenFilter()
    count = items = with_items = with_ttl = 0
    dimensions: set[int] = set()
    with ArchiveReader(opener(), close_source=True) as reader:
        header = reader.header
        for record in reader.sessions():
            count += 1
            seen.add(record.session_id)
            if record.ttl_seconds is not None:
                with_ttl += 1
            if record.items is not None:
                with_items += 1
                items += len(record.items)
                dimensions.update(len(i.embedding) for i in record.items if i.embedding is not None)
        digest = reader.digest
    if seen.suspects:
        with ArchiveReader(opener(), close_source=True) as reader:
            dups = confirmed_duplicates((r.session_id for r in reader.sessions()), seen.suspects)
        if dups:
            example = sorted(dups)[0]
            raise ArchiveDamaged(
                f"session {example!r} appears more than once in the archive "
                f"({len(dups)} duplicated id(s)); nothing was imported from it"
            )
    return ArchiveSummary(header=header, count=count, items=items,
                          sessions_with_items=with_items, digest=digest,
                          dimensions=frozenset(dimensions), sessions_with_ttl=with_ttl)
