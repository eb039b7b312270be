"""Reading an archive: every check, in order, before a caller acts on a record.

``ArchiveReader.records()`` streams validated records, sessions then whole-user logs
(header first, then per line: the line checksum, the sequence number, the blob's sha256,
field shapes, each event as strictly as a store checks it) and checks the trailer's
counts and chain digest after the last one; ``sessions()`` is the same stream without
the user logs. Version 1 archives read into the same records. Because the trailer can only be
checked at the end, an importer must not write during that first pass: it calls
:func:`verify_archive` (a full pass, plus duplicate detection) and only then streams the
archive a second time to apply it. Memory stays flat: one line at a time.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Sequence

from backends.archive.encryption import DecryptionFailed, open_archive
from backends.archive.errors import ArchiveDamaged, ArchiveUnsupported
from backends.archive.format import (
    ArchiveHeader,
    ArchiveRecord,
    SessionRecord,
    UserRecord,
    canonical,
    check_header,
    check_sealed,
    check_session,
    check_trailer,
    check_user,
    damaged,
    parse_line,
    utc_now,
)
from backends.archive.seen import SeenFilter, confirmed_duplicates

GZIP_MAGIC = b"\x1f\x8b"


def _peek(raw: IO[bytes], size: int) -> bytes:
    """The first ``size`` bytes of a stream, left unread (rewound, or peeked when the
    stream cannot seek)."""
    if raw.seekable():
        raw.seek(0)
        head = raw.read(size)
        raw.seek(0)
        return head
    if not isinstance(raw, io.BufferedReader):
        raise TypeError("an archive stream that cannot seek must be an io.BufferedReader")
    return raw.peek(size)[:size]


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
    #: sessions archived with an expiry time
    sessions_with_ttl: int = 0
    #: of those, sessions whose expiry was still ahead when the archive was verified
    #: (the others are not imported at all)
    sessions_expiring: int = 0
    #: sessions archived with drift_exempt set
    drift_exempt: int = 0
    #: events carried, in sessions and in user logs
    events: int = 0
    #: of those, events carrying a sequence number (> 0)
    sequenced_events: int = 0
    #: sessions that carry their events (``export --with-events``)
    sessions_with_events: int = 0
    #: whole-user logs (``export --user``)
    users: int = 0
    #: of those, logs carrying the user's counter
    counters: int = 0
    #: sessions archived with the source's last write time (``updated_at``)
    sessions_with_write_time: int = 0
    #: records (lines between header and trailer: sessions and user log parts), what a
    #: later pass over the archive reads
    records: int = 0
    #: v5 sealed sessions read without a keyring (checked, not opened)
    sealed: int = 0
    #: with a keyring: sessions whose state key was destroyed, events whose subject's
    #: key was, and the distinct destroyed keys of subjects and of sessions
    shredded_sessions: int = 0
    shredded_events: int = 0
    shredded_subjects: int = 0
    shredded_session_keys: int = 0


class ArchiveReader:
    """One pass over an archive. ``source`` is a path or a seekable binary stream
    (compressed or not: gzip is recognised by its magic bytes; a stream that cannot seek
    must be an ``io.BufferedReader``, e.g. a decrypted one). A path to an age-encrypted
    archive is decrypted with ``identities``. A stream is closed with the reader only
    when ``close_source`` is true."""

    def __init__(self, source: str | os.PathLike[str] | IO[bytes], *,
                 close_source: bool = False, identities: Sequence[Any] | None = None,
                 keyring: Any = None) -> None:
        self._owned: IO[bytes] | None = None
        #: the shred keyring that opens sealed sessions (v5), or None: they are then
        #: checked and counted (``sealed``) but not yielded
        self._keyring = keyring
        self.sealed = self.shredded_sessions = self.shredded_events = 0
        #: names of the destroyed keys met (subjects' ``s.…``, sessions' ``x.…``)
        self.shredded_keys: set[str] = set()
        if isinstance(source, (str, os.PathLike)):
            self._owned = open_archive(Path(source), identities)
            raw: IO[bytes] = self._owned
        else:
            raw = source
            if close_source:
                self._owned = source
        head = _peek(raw, 2)
        self._stream: IO[bytes] = (gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
                                   if head == GZIP_MAGIC else raw)
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
                f"short ({type(exc).__name__}); the archive is rejected whole"
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
        except DecryptionFailed:
            raise
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

    def records(self) -> Iterator[ArchiveRecord]:
        """Validated records (sessions, then user logs); raises ArchiveDamaged at the first
        failed check, including after the last record when the trailer disagrees or is
        missing."""
        count = lines = users = 0
        version = self.header.format_version
        open_log: tuple[str, int, int] | None = None  # v3: (user, last part, top sequence)
        while True:
            raw = self._next_line()
            if raw is None:
                raise damaged(self._line_no, f"the archive ends after {count + lines} record(s) "
                                             "without its trailer (truncated)")
            record = parse_line(raw, self._line_no)
            kind = record.get("kind")
            if open_log is not None and (kind != "user" or record.get("user_id") != open_log[0]):
                raise damaged(self._line_no, f"the log of user {open_log[0]!r} ends after part "
                                             f"{open_log[1]} without its final part")
            if kind == "trailer":
                check_trailer(record, self._line_no, count, self._chain.hexdigest(), users, version)
                if self._next_line() is not None:
                    raise damaged(self._line_no, "there is data after the trailer")
                return
            parsed: ArchiveRecord
            if kind == "session" and not lines and self.header.shred:
                count += 1
                opened = self._open_sealed(record, count)
                self._chain.update(canonical(record) + b"\n")
                if opened is not None:
                    yield opened
                continue
            if kind == "session" and not lines:
                parsed, line = check_session(record, self._line_no, count + lines + 1, self.header)
                count += 1
            elif kind == "user" and version >= 2:
                parsed, line = check_user(record, self._line_no, count + lines + 1, version,
                                          open_log[2] if open_log else 0)
                if parsed.part != (open_log[1] + 1 if open_log else 1):
                    raise damaged(self._line_no, f"part {parsed.part} of the log of user "
                                                 f"{parsed.user_id!r} is out of order")
                lines += 1
                users += parsed.final
                top = max([open_log[2] if open_log else 0, *(e.sequence for e in parsed.events)])
                open_log = None if parsed.final else (parsed.user_id, parsed.part, top)
            elif kind == "session":
                raise damaged(self._line_no, "a session record after the user logs")
            else:
                raise damaged(self._line_no, f"unexpected record kind {kind!r}")
            self._chain.update(line + b"\n")
            yield parsed

    def _open_sealed(self, record: dict[str, Any], n: int) -> SessionRecord | None:
        """A sealed session opened with the keyring: the record; its events of a subject
        whose key is gone left out (counted); a state whose key is gone gives a
        ``shredded`` record carrying only the events still readable. None without a
        keyring (checked and counted as sealed)."""
        import json

        from backends.archive.format import event_from_record, opened_state
        from backends.archive.shred import open_part

        parts = check_sealed(record, self._line_no, n)
        if self._keyring is None:
            self.sealed += 1
            return None
        state = open_part(self._keyring, parts[0], n, 0, self._line_no)
        events: list[Any] = []
        for index, part in enumerate(parts[1:], 1):
            plain = open_part(self._keyring, part, n, index, self._line_no)
            if plain is None:
                self.shredded_events += part["events"]
                self.shredded_keys.add(part["key"])
            else:
                events.extend(json.loads(plain))
        if state is None:
            self.shredded_sessions += 1
            self.shredded_keys.add(parts[0]["key"])
            return SessionRecord(f"(shredded: archive line {self._line_no})", 1, None, None, b"",
                                 events=tuple(event_from_record(e, self._line_no) for e in events),
                                 shredded=True)
        body = opened_state(state)
        if "events" in body:
            body["events"] = events
        return check_session(body, self._line_no, n, self.header, opened=True)[0]

    def sessions(self) -> Iterator[SessionRecord]:
        """The session records only (the whole stream is still read and checked)."""
        for record in self.records():
            if isinstance(record, SessionRecord):
                yield record

    @property
    def digest(self) -> str:
        return self._chain.hexdigest()


def claimed_records(stream: IO[bytes]) -> int | None:
    """How many records the trailer of an uncompressed archive says it holds, read from
    the end of ``stream`` without checking anything: a progress total before the
    verifying pass, never a fact. None for gzip, a trailer that cannot be read, or one
    with user logs (a v3 log may take several records, so its count is not exact)."""
    import json

    try:
        stream.seek(0)
        if stream.read(2) == GZIP_MAGIC:
            return None
        size = stream.seek(0, os.SEEK_END)
        stream.seek(max(0, size - 4096))
        last = stream.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        trailer = json.loads(last)
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        try:
            stream.seek(0)
        except (OSError, ValueError):
            pass
    if not isinstance(trailer, dict) or trailer.get("kind") != "trailer" or trailer.get("users"):
        return None
    count = trailer.get("count")
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None


def _event_keys(events: Any) -> Iterator[str]:
    """Keys that must be unique across an archive: each event id, and each (user,
    sequence) pair with a sequence (two events cannot hold one number of one log)."""
    for event in events:
        yield "e\x00" + event.event_id
        if event.sequence:
            yield f"s\x00{event.user_id}\x00{event.sequence}"


def _record_keys(record: ArchiveRecord) -> Iterator[str]:
    if isinstance(record, SessionRecord):
        yield "session\x00" + record.session_id
        yield from _event_keys(record.events or ())
    else:
        if record.part == 1:  # a log's later parts are the same log
            yield "user\x00" + record.user_id
        yield from _event_keys(record.events)


def _duplicate_message(key: str, count: int) -> str:
    kind, _, rest = key.partition("\x00")
    what = {"session": f"session {rest!r}", "user": f"the log of user {rest!r}",
            "e": f"event {rest!r}"}.get(kind)
    if what is None:
        user, _, seq = rest.partition("\x00")
        what = f"sequence {seq} of user {user!r}"
    return (f"{what} appears more than once in the archive ({count} duplicated key(s)); "
            "the archive is rejected whole")


def verify_archive(source_factory: Any,
                   tick: Callable[[int], None] | None = None, *,
                   keyring: Any = None) -> ArchiveSummary:
    """Read the whole archive once, checking everything, and refuse duplicate session ids,
    user logs, event ids and (user, sequence) pairs.

    ``source_factory()`` opens the archive afresh (a path works too; the opened stream
    is closed after each pass); a second pass runs
    only when the duplicate filter has suspects to settle. ``tick(1)`` is called per
    record of the first pass (progress).
    """
    if isinstance(source_factory, (str, os.PathLike)):
        path = source_factory
        opener = lambda: open(Path(path), "rb")  # noqa: E731
    else:
        opener = source_factory
    seen = SeenFilter()
    count = items = with_items = with_ttl = drift = events = sequenced = with_events = 0
    users = counters = expiring = written_at = records = 0
    dimensions: set[int] = set()
    now = utc_now()
    with ArchiveReader(opener(), close_source=True, keyring=keyring) as reader:
        header = reader.header
        for record in reader.records():
            records += 1
            if tick is not None:
                tick(1)
            for key in _record_keys(record):
                seen.add(key)
            if isinstance(record, UserRecord):
                users += record.final
                counters += record.final and record.counter is not None
                events += len(record.events)
                sequenced += sum(1 for e in record.events if e.sequence)
                continue
            count += 1
            if record.expires_at is not None:
                with_ttl += 1
                expiring += record.expires_at > now
            drift += record.drift_exempt
            written_at += record.updated_at is not None
            if record.items is not None:
                with_items += 1
                items += len(record.items)
                dimensions.update(len(i.embedding) for i in record.items if i.embedding is not None)
            if record.events is not None:
                with_events += 1
                events += len(record.events)
                sequenced += sum(1 for e in record.events if e.sequence)
        digest = reader.digest
        shredded = (reader.sealed, reader.shredded_sessions, reader.shredded_events,
                    sum(k.startswith("s.") for k in reader.shredded_keys),
                    sum(k.startswith("x.") for k in reader.shredded_keys))
        count += reader.sealed
    if seen.suspects:
        with ArchiveReader(opener(), close_source=True, keyring=keyring) as reader:
            keys = (key for record in reader.records() for key in _record_keys(record))
            dups = confirmed_duplicates(keys, seen.suspects)
        if dups:
            raise ArchiveDamaged(_duplicate_message(sorted(dups)[0], len(dups)))
    return ArchiveSummary(header=header, count=count, items=items,
                          sessions_with_items=with_items, digest=digest,
                          dimensions=frozenset(dimensions), sessions_with_ttl=with_ttl,
                          drift_exempt=drift, events=events, sequenced_events=sequenced,
                          sessions_with_events=with_events, users=users, counters=counters,
                          sessions_expiring=expiring, sessions_with_write_time=written_at,
                          records=records + shredded[0], sealed=shredded[0],
                          shredded_sessions=shredded[1], shredded_events=shredded[2],
                          shredded_subjects=shredded[3], shredded_session_keys=shredded[4])
