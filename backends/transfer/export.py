"""Export: enumerate a backend's sessions and stream them into an archive.

Memory does not grow with the number of sessions: one summary, one blob (and that
session's items) at a time, a running digest, and a fixed-size duplicate filter. A
session enumerated twice (Redis SCAN may report a key twice while the server resizes
its table) is written once: the filter makes it a suspect, and the finished archive is
rewritten without the later copy when a second pass confirms it.

Archive v2 content read here: each session's ``drift_exempt`` (the enumeration's
``extra["drift_exempt"]`` when it reports one, else the store's ``is_drift_exempt``),
its absolute expiry (read time + the TTL enumeration reports), with ``with_events`` its
compliance events (the users from ``session_subjects(session_id)``, each user's events
filtered to the session; one ``session_subjects`` call per session, which on Redis scans
every event hash, so prefer ``users`` on a large store; an export of a whole SQL store
instead reads them in the store's one pass in session order, ``events_by_session``), and
with ``users`` a whole-user log per user (every event,
then the counter, read in that order so the counter is never below an exported
sequence). What the source cannot provide is settled by :mod:`backends.transfer.loss`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from operator import attrgetter
from collections.abc import Generator
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

from backends.archive import (
    ArchiveHeader,
    ArchiveReader,
    ArchiveWriter,
    SessionRecord,
    atomic_output,
)
from backends.archive.canonical import EncodedEvents
from backends.archive.encryption import decrypted_if_age, encrypted_to, new_identity
from backends.archive.format import log_order, utc_now
from backends.archive.seen import SeenFilter, confirmed_duplicates
from backends.contract import (Capability, OwnerFilter, UNSCOPED, as_utc, offers, event_defaults, state_defaults)
from backends.errors import CorruptState, IntegrityError, OperationRefused, UnsupportedOperation
from backends.transfer.batch_reads import READ_CHUNK, batch_loader, chunks, iter_user_log
from backends.transfer.readahead import read_ahead
from backends.transfer.sources import Unclosable
from backends.transfer.loss import (
    counter_reader,
    export_losses,
    keeps_sequences,
    session_event_source,
    settle,
    state_store_member,
)

Progress = Callable[[Iterable[Any]], Iterable[Any]]


@dataclass
class ExportResult:
    count: int = 0
    items: int = 0
    events: int = 0
    users: int = 0
    digest: str = ""
    #: accepted losses, one line each (see backends.transfer.loss)
    warnings: list[str] = field(default_factory=list)
    #: enumerated, but deleted (or re-owned out of scope) before its blob was read
    vanished: int = 0
    #: sessions the enumeration reported twice, written once
    duplicates_dropped: int = 0
    suspects: set[str] = field(default_factory=set, repr=False)
    #: a copy's accepted loss of the source's events (see backends.transfer.copy)
    left_behind: list[str] = field(default_factory=list)
    #: (session id, why) of each damaged session left out (``skip_damaged``)
    damaged: list[tuple[str, str]] = field(default_factory=list)
    #: sessions written with an owner (personal data: worth encrypting)
    owned: int = 0


def check_exportable(adapter: Any, *, with_items: bool, with_events: bool = False,
                     users: Sequence[str] = (), allow_loss: bool = False,
                     updated_since: datetime | None = None) -> list[str]:
    """Refuse an export that cannot run (no enumeration; ``users`` without an event store;
    ``updated_since`` on a store that keeps no write time) or that would lose what it was
    asked to carry (the loss rule); returns the warnings for accepted losses."""
    name = getattr(adapter, "name", "?")
    if not offers(adapter, Capability.SESSIONS):
        raise UnsupportedOperation(f"backend {name!r} cannot enumerate sessions, so it cannot be exported")
    if updated_since is not None and not state_defaults(adapter.state_store()).records_write_time:
        raise UnsupportedOperation(f"backend {name!r} keeps no time of a session's last write, "
                                   "so --since cannot select the recently written sessions; "
                                   "nothing was exported (drop --since to export them all)")
    if users and adapter.event_store() is None:
        raise UnsupportedOperation(f"backend {name!r} has no event store, so there is no user log "
                                   "to export; drop --user")
    return settle(export_losses(adapter, with_items=with_items, with_events=with_events,
                                users=users), allow_loss=allow_loss)


def make_header(adapter: Any, source_uri: str, *, with_items: bool, owner_subject: OwnerFilter,
                match: str | None, with_events: bool = False,
                users: Sequence[str] = (), updated_since: datetime | None = None) -> ArchiveHeader:
    from backends import __version__

    filters: dict[str, Any] = {}
    if owner_subject is not UNSCOPED:
        filters["owner_subject"] = owner_subject  # None = unowned only
    if match is not None:
        filters["match"] = match
    if users:
        filters["users"] = list(users)
    if updated_since is not None:
        filters["updated_since"] = as_utc(updated_since).isoformat()
    from backends.transfer.withhold import ledger_record

    return ArchiveHeader(source_backend=str(getattr(adapter, "name", "?")), source_uri=source_uri,
                         created_at=ArchiveHeader.now(), tool_version=__version__,
                         with_items=with_items, filters=filters,
                         # a whole-user log carries events too: the header says so
                         with_events=bool(with_events or users),
                         # a store restored from the archive keeps its erasures
                         ledger=ledger_record(adapter))


def drift_reader(adapter: Any) -> Callable[[Any], bool]:
    is_exempt = state_store_member(adapter, Capability.DRIFT_STATUS)

    def read(summary: Any) -> bool:
        reported = (summary.extra or {}).get("drift_exempt")
        if isinstance(reported, bool):
            return reported
        return bool(is_exempt(summary.session_id)) if is_exempt is not None else False

    return read


#: events of users' logs kept while exporting with events (bounds the export's memory)
LOG_CACHE_EVENTS = 100_000
#: what ``events_of_users`` lists each user's events by (newest first): for its events
#: (sequence 0, aware UTC times, str ids, one user per list) ascending is ``log_order``
_BY_TIME_AND_ID = attrgetter("created_at", "event_id")


class _SessionEvents:
    """A chunk of sessions' events: the users from ``session_subjects(session_id)``, each
    user's log read once per export (grouped by session, kept while the cache holds
    fewer than LOG_CACHE_EVENTS events) instead of once per session the user appears in;
    the users of a chunk not kept yet are read together."""

    def __init__(self, store: Any, owner_subject: OwnerFilter, skip_users: set[str]) -> None:
        self._store = store
        self._owner = owner_subject
        self._skip = skip_users
        self._logs: dict[str, dict[str, list[Any]]] = {}
        self._cached = 0
        self._by_session: dict[str, list[str]] | None = None
        #: several users' logs in one read (SQL: its user index, newest first; Redis: two
        #: pipelines; MongoDB: one find), each session's part put in log order here
        self._several = event_defaults(store).events_of_users
        self._part_order = _BY_TIME_AND_ID if not keeps_sequences(store) else log_order

    def of_chunk(self, session_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """Each session's events, by user then in log order (``log_order``)."""
        users = {sid: sorted(set(self._subjects(sid)) - self._skip) for sid in session_ids}
        wanted = [u for u in dict.fromkeys(u for who in users.values() for u in who)
                  if u not in self._logs]
        read = self._read_logs(wanted) if wanted else {}
        found: dict[str, tuple[Any, ...]] = {}
        for sid, who in users.items():
            events: list[Any] = []
            for user in who:
                log = read[user][0] if user in read else self._logs[user]
                events.extend(log.get(sid, ()))
            found[sid] = tuple(events)  # users in order, each user's part in log order
        if self._cached + sum(n for _, n in read.values()) > LOG_CACHE_EVENTS:
            self._logs.clear()
            self._cached = 0
        for user, (by_session, n) in read.items():
            self._logs[user] = by_session
            self._cached += n
        return found

    def close(self) -> None:
        """Nothing held between chunks but the cache."""
        self._logs.clear()

    def _read_logs(self, users: list[str]) -> dict[str, Any]:
        """Each user's log grouped by session, with its number of events; from
        ``events_of_users`` (one query for the chunk's users) each session's part is put
        in log order here, once."""
        logs = self._several(users, owner_subject=self._owner)
        read: dict[str, Any] = {}
        for user, events in logs.items():
            by_session: dict[str, list[Any]] = {}
            for event in events:
                by_session.setdefault(event.session_id, []).append(event)
            for part in by_session.values():
                part.sort(key=self._part_order)
            read[user] = (by_session, len(events))
        return read

    def _subjects(self, session_id: str) -> list[str]:
        """A store that can map every session to its users in one pass (Redis, where
        each ``session_subjects`` call scans the whole log) is asked once per export."""
        if not offers(self._store, Capability.SUBJECTS_BY_SESSION):
            return self._store.session_subjects(session_id)
        if self._by_session is None:
            self._by_session = self._store.subjects_by_session()
        return self._by_session.get(session_id, [])


def _encoded_pass(store: Any, owner_subject: OwnerFilter) -> Iterator[tuple[str, Any]]:
    """The store's pass in a process of its own, each session's events as the archive's
    bytes (:class:`EncodedEvents`)."""
    from backends.archive.canonical import events_json

    for session_id, count, encoded in store.encoded_events_by_session(
            events_json, owner_subject=owner_subject):
        yield session_id, EncodedEvents(encoded, count)


class _StreamedEvents:
    """Chunks of sessions' events matched, merge-join style, against one pass over the
    store's events in session-id order (``events_by_session``: the SQL store's one sorted
    query, where the engine's layout has no ``session_id`` index): for an export of the
    whole listing, which comes in the same order. Should an id ever come out of that
    order, the rest is read the per-user way (:class:`_SessionEvents`)."""

    def __init__(self, store: Any, owner_subject: OwnerFilter, *, encoded: bool = False) -> None:
        self._pass = (_encoded_pass(store, owner_subject) if encoded
                      else store.events_by_session(owner_subject=owner_subject))
        self._ahead: tuple[str, tuple[Any, ...]] | None = None
        self._started = False
        self._last: str | None = None
        self._fallback = _SessionEvents(store, owner_subject, set())
        self._in_order = True

    def of_chunk(self, session_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """Each session's events, by user then in log order (``log_order``)."""
        if not self._in_order or not self._ordered(session_ids):
            return self._fallback.of_chunk(session_ids)
        if not self._started:  # the server sorts now: on the read-ahead thread
            self._started = True
            self._ahead = next(self._pass, None)
        found: dict[str, tuple[Any, ...]] = {}
        for sid in session_ids:
            while self._ahead is not None and self._ahead[0] < sid:
                self._ahead = next(self._pass, None)  # a session not listed: not exported
            if self._ahead is not None and self._ahead[0] == sid:
                found[sid] = self._ahead[1]
                self._ahead = next(self._pass, None)
            else:
                found[sid] = ()
        return found

    def _ordered(self, session_ids: Sequence[str]) -> bool:
        last = self._last
        for sid in session_ids:
            if last is not None and sid <= last:
                self._in_order = False
                self.close()
                return False
            last = sid
        self._last = last
        return True

    def close(self) -> None:
        """End the pass (its query and connection), read to the end or not."""
        if isinstance(self._pass, Generator):
            self._pass.close()


#: sessions from which an export's events pass is worth a process of its own (its start
#: costs a fraction of a second; below this the export is over in about as long)
EVENTS_PASS_APART = 5000


def _large(adapter: Any, store: Any, owner_subject: OwnerFilter) -> bool:
    """Whether the store can run its events pass apart and holds enough sessions for it."""
    if getattr(store, "encoded_events_by_session", None) is None:
        return False
    count = state_defaults(adapter.state_store()).count_sessions(owner_subject=owner_subject)
    return count is not None and count >= EVENTS_PASS_APART


def user_sessions(adapter: Any, users: Sequence[str], owner_subject: OwnerFilter) -> set[str]:
    """The sessions the users have events in (what a whole-user export selects)."""
    store = adapter.event_store()
    return {e.session_id for user in users
            for e in store.list_events(user, owner_subject=owner_subject) if e.session_id}


def write_user_logs(adapter: Any, writer: ArchiveWriter, users: Sequence[str],
                    owner_subject: OwnerFilter = UNSCOPED) -> None:
    """Stream each user's log into ``writer`` in parts (see ``ArchiveWriter.add_user_log``),
    then the counter, read after the events: it only grows, so it covers every one."""
    store = adapter.event_store()
    read_counter = counter_reader(adapter)
    for user in users:
        events: Iterable[Any] = iter_user_log(store, user, owner_subject)
        if not event_defaults(store).assigns_sequences:  # read newest first: sort it
            events = sorted(events, key=log_order)
        def counter(top: int, user: str = user) -> int | None:
            return max(int(read_counter(user)), top) if read_counter is not None else None

        writer.add_user_log(user, events, counter)


class DamagedSession(IntegrityError):
    """A session the export could not read strictly (the store raised a damaged-row
    error): the export stops, naming it, and leaves no file, unless ``skip_damaged``."""

    def __init__(self, session_id: str, why: str) -> None:
        self.session_id = session_id
        super().__init__(f"{why}; nothing was exported (no file was written). Pass "
                         "--skip-damaged to export the other sessions and list what was left out")


def _damage(exc: CorruptState) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _load_chunk(load_many: Any, load_one: Any, ids: list[str], owner_subject: OwnerFilter,
                result: ExportResult, skip_damaged: bool | None) -> list[Any]:
    """The chunk's states. A damaged row: ``skip_damaged=None`` lets the store's error
    through, False raises :class:`DamagedSession` (the export's refusal, with advice),
    True reads around it (the chunk again, one session at a time), records it in
    ``result.damaged`` and gives ``_DAMAGED`` in its place."""
    try:
        return load_many(ids, owner_subject)
    except CorruptState as exc:
        if skip_damaged is None:
            raise
        if not skip_damaged:
            raise DamagedSession(getattr(exc, "session_id", "?"), _damage(exc)) from None
    states: list[Any] = []
    for sid in ids:
        try:
            states.append(load_one(sid, owner_subject=owner_subject))
        except CorruptState as exc:
            result.damaged.append((sid, _damage(exc)))
            states.append(_DAMAGED)
    return states


#: a chunk slot whose session was damaged and left out (not "vanished")
_DAMAGED = object()


def _with_events(chunks_of: Iterable[list[Any]], events_of: _SessionEvents | _StreamedEvents
                 ) -> Iterator[tuple[list[Any], Any]]:
    """Each chunk with its sessions' events (what :func:`read_ahead` reads on its thread
    while the chunk before is written), or with the error reading them raised, which the
    caller raises after the chunk's states are read, as it did before reading ahead."""
    try:
        for chunk in chunks_of:
            try:
                found: Any = events_of.of_chunk([s.session_id for s in chunk])
            except Exception as exc:  # noqa: BLE001 - handed to the caller, unchanged
                yield chunk, exc
                return
            yield chunk, found
    finally:
        events_of.close()


def iter_records(adapter: Any, result: ExportResult, *, owner_subject: OwnerFilter = UNSCOPED,
                 match: str | None = None, with_items: bool = False, with_events: bool = False,
                 users: Sequence[str] = (), batch_size: int = 500,
                 summaries: Iterable[Any] | None = None,
                 skip_damaged: bool | None = None,
                 updated_since: datetime | None = None,
                 encoded_events: bool = False) -> Iterator[SessionRecord]:
    """Full records for every enumerated session, in enumeration order, read a chunk of
    64 at a time (see :mod:`backends.transfer.batch_reads`): memory is bounded by the chunk.
    With ``users``, only the sessions those users have events in; with ``summaries``,
    exactly those (already selected by the caller, e.g. ``sessions prune``). A session
    whose strict read fails (any ``CorruptState``) stops the export naming it (the
    store's error, or with ``skip_damaged=False`` :class:`DamagedSession`), unless
    ``skip_damaged``: then it is left out and listed in ``result.damaged``. With
    ``updated_since``, only sessions whose stored write time is at or after it. With
    ``encoded_events`` (what only an archive writer may ask), a large store's events may
    come already encoded (:class:`EncodedEvents`), from a pass in a process of its own."""
    load_many = batch_loader(adapter)
    load_one = adapter.state_store().load_full
    drift = drift_reader(adapter)
    store = session_event_source(adapter) if with_events else None
    selected = user_sessions(adapter, users, owner_subject) if users else None
    events_of: _SessionEvents | _StreamedEvents | None = None
    if store is not None:
        whole_listing = summaries is None and not users and match is None and updated_since is None
        events_of = (_StreamedEvents(store, owner_subject, encoded=encoded_events and _large(
                         adapter, store, owner_subject))
                     if whole_listing and getattr(store, "events_by_session", None) is not None
                     else _SessionEvents(store, owner_subject, set(users)))
    keeps_clock = state_defaults(adapter.state_store()).records_write_time
    if summaries is None:
        summaries = adapter.iter_sessions(owner_subject=owner_subject, match=match,
                                          batch_size=batch_size)
    if selected is not None:
        summaries = (s for s in summaries if s.session_id in selected)
    if updated_since is not None:
        since = as_utc(updated_since)
        summaries = (s for s in summaries
                     if s.updated_at is not None and as_utc(s.updated_at) >= since)
    steps: Iterable[tuple[list[Any], Any]] = ((chunk, None) for chunk in chunks(summaries, READ_CHUNK))
    if events_of is not None:
        steps = read_ahead(_with_events(chunks(summaries, READ_CHUNK), events_of))
    for chunk, chunk_events in steps:
        states = _load_chunk(load_many, load_one, [s.session_id for s in chunk], owner_subject,
                             result, skip_damaged)
        if isinstance(chunk_events, BaseException):  # after the chunk's states, as before
            raise chunk_events
        read_at = utc_now()
        for summary, state in zip(chunk, states):
            if state is _DAMAGED:
                continue
            if state is None:  # deleted (or re-owned out of scope) since it was enumerated
                result.vanished += 1
                continue
            items = None
            if with_items:
                items = tuple(adapter.iter_live_items(summary.session_id, owner_subject=owner_subject))
            events = None if chunk_events is None else chunk_events[summary.session_id]
            expires_at = (None if summary.ttl_seconds is None
                          else read_at + timedelta(seconds=summary.ttl_seconds))
            yield SessionRecord(
                session_id=summary.session_id, version=state.version,
                owner_subject=state.owner_subject, pending_message=state.pending_message,
                blob=bytes(state.blob), expires_at=expires_at, items=items,
                drift_exempt=drift(summary), events=events,
                updated_at=summary.updated_at if keeps_clock else None,
            )


def write_archive(adapter: Any, stream: IO[bytes], *, source_uri: str,
                  owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                  with_items: bool = False, with_events: bool = False,
                  users: Sequence[str] = (), allow_loss: bool = False, batch_size: int = 500,
                  progress: Progress | None = None,
                  skip_damaged: bool | None = None,
                  updated_since: datetime | None = None,
                  shred_keys: Any = None) -> ExportResult:
    """One pass: enumerate and write. Duplicates are only *suspected* here (see module).

    What the source cannot provide is refused by the loss rule before the first line is
    written; with ``allow_loss`` it is left out and said in ``result.warnings``. With
    ``shred_keys`` (an open :class:`~backends.archive.shred.Keyring`) every session is
    sealed per subject and session, and the keys made are durable before this returns."""
    users = tuple(dict.fromkeys(users))
    warnings = check_exportable(adapter, with_items=with_items, with_events=with_events,
                                users=users, allow_loss=allow_loss, updated_since=updated_since)
    with_items = with_items and offers(adapter, Capability.LIVE_ITEMS)
    with_events = with_events and session_event_source(adapter) is not None
    result = ExportResult(warnings=warnings)
    header = make_header(adapter, source_uri, with_items=with_items, owner_subject=owner_subject,
                         match=match, with_events=with_events, users=users,
                         updated_since=updated_since)
    sealer = _sealer(adapter, shred_keys, users)
    if sealer is not None:
        header = replace(header, shred={"key_id": sealer.key_id})
    writer = ArchiveWriter(stream, header, sealer=sealer)
    seen = SeenFilter()
    records: Iterable[SessionRecord] = iter_records(
        adapter, result, owner_subject=owner_subject, match=match, with_items=with_items,
        with_events=with_events, users=users, batch_size=batch_size, skip_damaged=skip_damaged,
        updated_since=updated_since, encoded_events=True)
    if progress is not None:
        records = progress(records)
    for record in records:
        seen.add(record.session_id)
        result.owned += record.owner_subject is not None
        writer.add(record)
    write_user_logs(adapter, writer, users, owner_subject)
    result.digest = writer.finish()
    if shred_keys is not None:  # before the archive appears under its name
        shred_keys.flush()
    result.count, result.items, result.suspects = writer.count, writer.items, seen.suspects
    result.events, result.users = writer.events, writer.users
    return result


def _sealer(adapter: Any, shred_keys: Any, users: Sequence[str]) -> Any:
    if shred_keys is None:
        return None
    if users:
        raise OperationRefused("--shred-keys cannot seal whole-user logs (--user) yet; "
                               "nothing was exported")
    from backends.transfer.shredding import sealer_for

    return sealer_for(adapter, shred_keys)


def rewrite_records(reader: ArchiveReader, dest: IO[bytes], duplicates: set[str],
                    result: ExportResult, sealer: Any = None) -> None:
    """Copy what ``reader`` reads, keeping only the first record of each duplicated id
    (sealed again with ``sealer`` when the archive is sealed)."""
    written: set[str] = set()
    writer = ArchiveWriter(dest, reader.header, sealer=sealer)
    for record in reader.records():
        if isinstance(record, SessionRecord) and record.session_id in duplicates:
            if record.session_id in written:
                result.duplicates_dropped += 1
                continue
            written.add(record.session_id)
        writer.add(record)
    result.digest = writer.finish()
    result.count, result.items = writer.count, writer.items
    result.events, result.users = writer.events, writer.users


def export_to_path(adapter: Any, path: str | os.PathLike[str], *,
                   recipients: Sequence[Any] = (), **options: Any) -> ExportResult:
    """Export into ``path`` atomically (0600, temp + fsync + rename; gzip for ``.gz``),
    age-encrypted to ``recipients`` when there are any.

    On any failure or interruption the target name is left as it was (absent, or the
    previous file) and the temp file is removed. An encrypted export is also encrypted
    to a throw-away key, the only way to read it back when duplicates must be settled.
    """
    reader_key, extra = new_identity() if recipients else (None, None)
    with atomic_output(path, [*recipients, extra] if recipients else ()) as out:
        result = write_archive(adapter, out, **options)
    if result.suspects:
        keys = [reader_key] if reader_key is not None else None
        ring = options.get("shred_keys")
        with ArchiveReader(path, identities=keys, keyring=ring) as current:
            dups = confirmed_duplicates((r.session_id for r in current.sessions()),
                                        result.suspects)
        if dups:
            with ArchiveReader(path, identities=keys, keyring=ring) as current, \
                    atomic_output(path, recipients) as out:
                rewrite_records(current, out, dups, result, _sealer(adapter, ring, ()))
    return result


@contextlib.contextmanager
def staged_export(adapter: Any, *, recipients: Sequence[Any] = (),
                  **options: Any) -> Iterator[tuple[IO[bytes], ExportResult]]:
    """Export into an anonymous private temp file (deleted on close), duplicates settled;
    yields the file rewound to its start. Used for stdout and for ``copy``. With
    ``recipients`` the file holds only ciphertext, also encrypted to a throw-away key
    (what reads it back to settle duplicates; a rewrite goes to ``recipients`` alone)."""
    reader_key, extra = new_identity() if recipients else (None, None)
    keys = [reader_key] if reader_key is not None else []

    ring = options.get("shred_keys")

    def reread(staged: IO[bytes]) -> ArchiveReader:
        staged.seek(0)
        shared: IO[bytes] = Unclosable(staged)  # type: ignore[assignment]
        return ArchiveReader(decrypted_if_age(shared, keys, "the staged export"),
                             close_source=True, keyring=ring)

    with contextlib.ExitStack() as stack:
        staged = stack.enter_context(tempfile.TemporaryFile())
        with encrypted_to(staged, [*recipients, extra] if recipients else ()) as sink:
            result = write_archive(adapter, sink, **options)
        if result.suspects:
            with reread(staged) as reader:
                dups = confirmed_duplicates((r.session_id for r in reader.sessions()),
                                            result.suspects)
            if dups:
                final = stack.enter_context(tempfile.TemporaryFile())
                with reread(staged) as reader, encrypted_to(final, recipients) as sink:
                    rewrite_records(reader, sink, dups, result, _sealer(adapter, ring, ()))
                staged = final
        staged.seek(0)
        yield staged, result


def export_to_stream(adapter: Any, stream: IO[bytes], *, recipients: Sequence[Any] = (),
                     **options: Any) -> ExportResult:
    """Export onto a non-seekable stream (stdout): staged first, so duplicates can be
    settled and an export that fails half-way sends nothing; age-encrypted to
    ``recipients`` when there are any (then only ciphertext is staged)."""
    with staged_export(adapter, recipients=recipients, **options) as (staged, result):
        shutil.copyfileobj(staged, stream, 1 << 20)
        stream.flush()
    return result
