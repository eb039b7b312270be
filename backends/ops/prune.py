"""Finding and deleting idle sessions: those not written for longer than a duration.

Only where the store says when a session was last written: MongoDB and the SQL layout
stamp ``updated_at`` on every write (their state stores declare
``records_write_time``). Redis keeps no write time; the engine re-applies its idle TTL
on every write, so the last write is ``now - (ttl - remaining)``, but only the operator
can say which TTL the engine applies (``assume_ttl``), and a key with more TTL left than
that proves the assumption false and stops the run. Anywhere else :func:`write_clock`
refuses (UnsupportedOperation) rather than guess; a single session without a readable
write time is counted as ``unknown`` and never deleted.

Deletes are version-checked (``delete(expected_version=)``): a session written after it
was judged idle has moved on and survives, counted as ``kept``. With an archive, the
idle sessions are written to it first (atomically) and what is deleted is exactly what
the archive holds, at the archived version (:class:`Prune`, one run, journals an ``apply``
beside its archive, see :mod:`backends.ops.journal`, so a rerun continues it and never
replaces the archive).
Everything streams: memory is bounded by a
read chunk, whatever the number of sessions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Iterator, Sequence

from backends.archive import ArchiveReader, ArchiveWriter, atomic_output
from backends.archive.encryption import new_identity
from backends.contract import UNSCOPED, OwnerFilter, StateVersionConflict, as_utc, state_defaults
from backends.errors import BackendConfigError, OperationRefused, UnsupportedOperation

Clock = Callable[[Any, datetime], "datetime | None"]


class AssumedTtlTooShort(BackendConfigError):
    """A session has more TTL left than ``--assume-ttl`` allows: the assumed idle TTL is
    not the one the store's writer applies, so no write time derived from it is true."""


def _ttl_variable(adapter: Any) -> str | None:
    """The variable in which the engine is given this backend's idle TTL (BackendInfo)."""
    from backends.info import known

    info = known(getattr(adapter, "name", ""))
    return info.ttl_env if info else None


def _assumed_ttl_check(assume_ttl: int, variable: str | None) -> Callable[[Any], None]:
    applied = f"the TTL the engine applies (its {variable})" if variable else "the TTL the engine applies"

    def check(summary: Any) -> None:
        left = summary.ttl_seconds
        if left is not None and int(left) > assume_ttl:
            raise AssumedTtlTooShort(
                f"session {summary.session_id!r} has {int(left)}s of TTL left, more than the "
                f"assumed idle TTL of {assume_ttl}s, so the writer applies a longer TTL and "
                f"idle times derived from --assume-ttl would be wrong; pass {applied}; "
                "nothing was deleted")
    return check


def write_clock(adapter: Any, *, assume_ttl: int | None = None) -> Clock:
    """``clock(summary, now)`` -> when the session was last written (None: unknown).

    From a stored write time only (``records_write_time``). A store that keeps none
    (Redis) is refused unless the operator states the idle TTL the writer applies
    (``assume_ttl``, seconds): then the last write is ``now - (assume_ttl - remaining)``,
    and a session with more TTL left than assumed raises :class:`AssumedTtlTooShort`
    (the assumption is false). Never from this process's environment: the operator's
    TTL variable says nothing about what the engine applied."""
    store = adapter.state_store()
    name = getattr(adapter, "name", "?")
    if state_defaults(store).records_write_time:
        return lambda summary, _now: summary.updated_at
    if assume_ttl is not None:
        if isinstance(assume_ttl, bool) or not isinstance(assume_ttl, int) or assume_ttl <= 0:
            raise ValueError("assume_ttl must be a positive number of seconds")
        check = _assumed_ttl_check(assume_ttl, _ttl_variable(adapter))

        def from_ttl(summary: Any, now: datetime) -> datetime | None:
            if summary.ttl_seconds is None:  # a session without expiry: no write time
                return None
            check(summary)
            return now - timedelta(seconds=assume_ttl - int(summary.ttl_seconds))
        return from_ttl
    variable = _ttl_variable(adapter)
    hint = (": pass --assume-ttl DURATION, the idle TTL the engine applies on every write "
            f"(its {variable}), and the write time is derived from the TTL "
            "left and checked against it" if variable else "")
    raise UnsupportedOperation(f"backend {name!r} keeps no time of a session's last write, "
                               "so idle sessions cannot be told apart; nothing was deleted"
                               f"{hint}")


def check_assumed_ttl(adapter: Any, assume_ttl: int, *, owner_subject: OwnerFilter = UNSCOPED,
                      match: str | None = None, batch_size: int = 500) -> int:
    """Read every session in scope once and raise :class:`AssumedTtlTooShort` at the
    first with more TTL left than ``assume_ttl``: run before any delete that streams.
    Returns the number of sessions read."""
    check = _assumed_ttl_check(assume_ttl, _ttl_variable(adapter))
    read = 0
    for summary in adapter.iter_sessions(owner_subject=owner_subject, match=match,
                                         batch_size=batch_size):
        read += 1
        check(summary)
    return read


@dataclass(frozen=True)
class IdleSession:
    session_id: str
    version: int
    owner_subject: str | None
    last_written: datetime
    idle_seconds: int
    #: the enumeration's summary (what an archive of the session reads: TTL, drift flag)
    summary: Any = field(default=None, compare=False, repr=False)

    def row(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "version": self.version,
                "owner_subject": self.owner_subject,
                "last_written": self.last_written.astimezone(timezone.utc).isoformat(timespec="seconds"),
                "idle_seconds": self.idle_seconds}


@dataclass
class PruneResult:
    examined: int = 0
    idle: int = 0
    #: sessions whose last write the store could not tell (never deleted)
    unknown: int = 0
    deleted: int = 0
    #: written after they were judged idle (version moved): left as they are
    kept: int = 0
    #: gone before their turn (deleted by someone else)
    vanished: int = 0
    archived: int = 0
    digest: str = ""


def find_idle(adapter: Any, idle_for: timedelta, result: PruneResult, *,
              owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
              batch_size: int = 500, now: datetime | None = None,
              assume_ttl: int | None = None) -> Iterator[IdleSession]:
    """Stream the sessions not written for longer than ``idle_for``."""
    clock = write_clock(adapter, assume_ttl=assume_ttl)
    now = now or datetime.now(timezone.utc)
    cutoff = now - idle_for
    for summary in adapter.iter_sessions(owner_subject=owner_subject, match=match,
                                         batch_size=batch_size):
        result.examined += 1
        written = clock(summary, now)
        if written is None:
            result.unknown += 1
            continue
        written = as_utc(written)
        if written < cutoff:
            result.idle += 1
            yield IdleSession(summary.session_id, summary.version, summary.owner_subject,
                              written, int((now - written).total_seconds()), summary)


def _deleter(adapter: Any) -> Callable[..., bool]:
    from backends.registry import accepts_keyword

    store = adapter.state_store()
    if not accepts_keyword(store.delete, "expected_version"):  # never delete unchecked
        raise UnsupportedOperation(f"backend {getattr(adapter, 'name', '?')!r} has no "
                                   "version-checked delete; nothing was deleted")
    return store.delete


def delete_idle(adapter: Any, sessions: Iterable[IdleSession], result: PruneResult, *,
                owner_subject: OwnerFilter = UNSCOPED) -> Iterator[tuple[IdleSession, str]]:
    """Delete each session at the version it was judged idle at; yields (session,
    outcome) with outcome ``deleted``, ``kept`` (written since) or ``vanished``."""
    delete = _deleter(adapter)
    for idle in sessions:
        try:
            gone = delete(idle.session_id, owner_subject=owner_subject,
                          expected_version=idle.version)
        except StateVersionConflict:
            result.kept += 1
            yield idle, "kept"
            continue
        if gone:
            result.deleted += 1
            yield idle, "deleted"
        else:
            result.vanished += 1
            yield idle, "vanished"


def archive_idle(adapter: Any, sessions: Iterable[IdleSession], path: str | os.PathLike[str],
                 result: PruneResult, *, source_uri: str,
                 owner_subject: OwnerFilter = UNSCOPED, recipients: Sequence[Any] = (),
                 shred_keys: Any = None) -> None:
    """Write the idle sessions, whole, to an archive at ``path`` (atomic; absent if
    interrupted), age-encrypted to ``recipients`` when there are any, each session sealed
    under its own key in ``shred_keys`` when given (an erasure that removes the session
    destroys it). A session written between being judged idle and being read is left out
    (it is no longer idle)."""
    from backends.transfer.export import ExportResult, iter_records, make_header

    judged: dict[str, int] = {}

    def noted(items: Iterable[IdleSession]) -> Iterator[Any]:
        for idle in items:
            judged[idle.session_id] = idle.version
            yield idle.summary

    header = make_header(adapter, source_uri, with_items=False, owner_subject=owner_subject,
                         match=None)
    header = replace(header, filters={**header.filters, "pruned": True})
    sealer = None
    if shred_keys is not None:
        from backends.transfer.shredding import sealer_for

        sealer = sealer_for(adapter, shred_keys)
        header = replace(header, shred={"key_id": sealer.key_id})
    with atomic_output(path, recipients) as stream:
        writer = ArchiveWriter(stream, header, sealer=sealer)
        for record in iter_records(adapter, ExportResult(), owner_subject=owner_subject,
                                   summaries=noted(sessions)):
            if judged.pop(record.session_id, None) == record.version:
                writer.add(record)
        result.digest = writer.finish()
        result.archived = writer.count
        if shred_keys is not None:  # durable before the archive appears
            shred_keys.flush()


def archived_sessions(path: str | os.PathLike[str],
                      identities: Sequence[Any] | None = None,
                      shred_keys: Any = None) -> Iterator[IdleSession]:
    """The sessions an archive written by :func:`archive_idle` holds, for deleting
    (``identities`` decrypt an encrypted one, ``shred_keys`` open a sealed one)."""
    epoch = datetime.fromtimestamp(0, timezone.utc)
    with ArchiveReader(path, identities=identities, keyring=shred_keys) as reader:
        for record in reader.sessions():
            yield IdleSession(record.session_id, record.version, record.owner_subject, epoch, 0)



def discard_partials(path: str | os.PathLike[str]) -> int:
    """Remove the ``.partial`` files a killed archive write left beside ``path`` (they are
    never an archive: :func:`backends.archive.atomic_output` renames only a whole one)."""
    from pathlib import Path

    target = Path(path)
    removed = 0
    for leftover in target.parent.glob(f".{target.name}.*.partial"):
        try:
            leftover.unlink()
            removed += 1
        except FileNotFoundError:
            pass
    return removed


# -- one run: the checks, the journal beside the archive, the scan or its resume -----------


@dataclass(frozen=True)
class PruneRequest:
    """What the operator asked for. ``source_uri`` is the store's redacted location (what
    an archive's header and the journal name)."""

    idle_for: timedelta
    apply: bool = False
    archive: str | None = None
    overwrite: bool = False
    assume_ttl: int | None = None
    owner_subject: OwnerFilter = UNSCOPED
    match: str | None = None
    batch_size: int = 500
    source_uri: str = ""
    #: age recipients the archive is encrypted to (none: plain)
    recipients: tuple[Any, ...] = ()
    #: age identities that decrypt the archive of an interrupted run being continued
    identities: tuple[Any, ...] = ()
    #: an open shred keyring (:class:`backends.archive.shred.Keyring`) sealing the archive
    shred_keys: Any = None
    #: where an ``apply`` writes its receipt (None: no receipt)
    receipt: str | None = None

    def journal_arguments(self, backend: str) -> dict[str, Any]:
        """What a rerun must repeat to continue this run (the keys journals have had)."""
        owner = self.owner_subject if isinstance(self.owner_subject, str) else None
        return {"uri": self.source_uri, "backend": backend,
                "idle_for_s": int(self.idle_for.total_seconds()),
                "assume_ttl_s": self.assume_ttl, "owner": owner,
                "unowned": self.owner_subject is None, "match": self.match}


#: the format of a prune receipt
RECEIPT_FORMAT = "semvec-prune-receipt/1"


def _noop(*_: Any) -> None:
    return None


class Prune:
    """One ``sessions prune`` run over an open adapter.

    :meth:`start` refuses what cannot go on (OperationRefused, nothing changed), asks
    ``confirm`` before an ``apply``, and returns the sessions to delete (or preview): the
    idle ones found now, archived first when an archive is asked for, or, continuing an
    interrupted ``apply`` journalled beside its archive, exactly what that archive holds.
    :meth:`delete` deletes them and removes the journal once every one is dealt with.
    ``progress(items, label)`` wraps the archiving pass; ``notify`` hears a resumption;
    the counts go to ``result`` (a caller may watch it from the start)."""

    def __init__(self, adapter: Any, request: PruneRequest, *,
                 confirm: Callable[[], None] = _noop, notify: Callable[[str], None] = _noop,
                 progress: Callable[[Iterable[Any], str], Iterable[Any]] = lambda i, _: i,
                 result: PruneResult | None = None) -> None:
        self.adapter, self.request = adapter, request
        self.confirm, self.notify, self.progress = confirm, notify, progress
        self.result = result if result is not None else PruneResult()
        #: the journal of an ``apply`` with an archive (None otherwise)
        self.journal: Any = None
        #: whether this run continues an interrupted one (deleting what its archive holds)
        self.resumed = False
        #: the ids of each outcome (``deleted``, ``kept``, ``vanished``), for the receipt
        self.outcomes: dict[str, list[str]] = {"deleted": [], "kept": [], "vanished": []}

    def start(self) -> Iterable[IdleSession]:
        request = self.request
        if request.assume_ttl is not None and state_defaults(
                self.adapter.state_store()).records_write_time:
            raise OperationRefused(
                f"--assume-ttl is for stores that keep no write time; backend "
                f"{self.adapter.name!r} stores one (leave --assume-ttl out)")
        write_clock(self.adapter, assume_ttl=request.assume_ttl)  # before anything else
        self._refuse_what_the_journal_forbids()
        if request.apply:
            self.confirm()
        if request.archive is not None and request.apply:
            self.journal = self._open_journal()
            self.resumed = any(r.get("phase") == "archived" for r in self.journal.records)
        if request.assume_ttl is not None and request.apply and request.archive is None:
            # deletes stream: prove the assumed TTL on every key in scope before the first
            check_assumed_ttl(self.adapter, request.assume_ttl,
                              owner_subject=request.owner_subject, match=request.match,
                              batch_size=request.batch_size)
        if self.resumed:
            return self._resume()
        return self._scan()

    def _open_journal(self) -> Any:
        from backends.ops.journal import Journal

        return Journal.open(self.request.archive or "", "prune",
                            self.request.journal_arguments(str(self.adapter.name)))

    def _refuse_what_the_journal_forbids(self) -> None:
        """Refuse to replace an archive: one that exists (without ``overwrite``), or one an
        interrupted prune's deletes depend on. A journal whose run stopped before its first
        delete is removed (that archive holds nothing deleted: it may be replaced)."""
        from backends.ops.journal import Journal, JournalMismatch, journal_path

        archive, request = self.request.archive, self.request
        if archive is None:
            return
        jpath = journal_path(archive)
        try:
            found = Journal.read(jpath)
        except JournalMismatch as exc:
            raise OperationRefused(f"{exc}; move it away if it is not from a prune") from exc
        if found is not None and not any(r.get("phase") == "archived" for r in found[1]):
            # interrupted before its first delete (the archive, if written, holds nothing
            # that was deleted): start again
            os.unlink(jpath)
            return
        if found is not None and not request.apply:
            raise OperationRefused(
                f"{jpath} records an interrupted prune that deleted sessions archived in "
                f"{archive}; run it again with --apply to finish it (a preview would replace "
                "that archive)")
        if found is not None and request.overwrite:
            raise OperationRefused(
                f"{archive} holds sessions an interrupted prune deleted ({jpath}); --overwrite "
                "would lose them: run the same command without --overwrite to finish it")
        if found is None and os.path.exists(archive) and not request.overwrite:
            raise OperationRefused(f"--archive {archive} already exists: choose another file, "
                                   "or pass --overwrite to replace it")

    def _resume(self) -> Iterable[IdleSession]:
        archive, journal, result = self.request.archive or "", self.journal, self.result
        if not os.path.isfile(archive):
            raise BackendConfigError(
                f"{journal.path} records an interrupted prune whose deleted sessions are in "
                f"{archive}, but {archive} is gone: put it back and run the same command "
                "again (nothing more was deleted)")
        done = next(journal.where(phase="archived"))
        result.archived, result.digest = int(done["count"]), str(done["digest"])
        # what the interrupted run's scan found (journals before this field: none)
        result.examined = int(done.get("examined") or 0)
        result.idle = int(done.get("idle") or 0)
        result.unknown = int(done.get("unknown") or 0)
        self.notify(f"continuing the interrupted prune journalled in {journal.path}: deleting "
                    f"what {archive} holds ({result.archived} session(s)); the archive is kept")
        return archived_sessions(archive, self.request.identities, self.request.shred_keys)

    def _scan(self) -> Iterable[IdleSession]:
        request, result = self.request, self.result
        idle = find_idle(self.adapter, request.idle_for, result,
                         owner_subject=request.owner_subject, match=request.match,
                         batch_size=request.batch_size, assume_ttl=request.assume_ttl)
        if request.archive is None:
            return idle
        discard_partials(request.archive)
        # also to a throw-away key: what is deleted is read back from the archive itself
        reader_key, extra = new_identity() if request.recipients else (None, None)
        try:
            archive_idle(self.adapter, self.progress(idle, "archiving"), request.archive,
                         result, source_uri=request.source_uri,
                         owner_subject=request.owner_subject,
                         recipients=[*request.recipients, extra] if request.recipients else (),
                         shred_keys=request.shred_keys)
        except BaseException:  # nothing deleted yet: no run to continue
            if self.journal is not None:
                self.journal.finish()
            raise
        if self.journal is not None:
            self.journal.append({"phase": "archived", "count": result.archived,
                                 "digest": result.digest, "examined": result.examined,
                                 "idle": result.idle, "unknown": result.unknown})
        return archived_sessions(request.archive, [reader_key] if reader_key is not None else None,
                                 request.shred_keys)

    def delete(self, sessions: Iterable[IdleSession]) -> Iterator[tuple[IdleSession, str]]:
        """Delete ``sessions`` (from :meth:`start`), yielding each outcome; the journal
        goes once every one is dealt with (the archive was complete and synced before
        the first delete)."""
        result, noted = self.result, self.request.receipt is not None
        for idle, outcome in delete_idle(self.adapter, sessions, result,
                                         owner_subject=self.request.owner_subject):
            if noted:
                self.outcomes[outcome].append(idle.session_id)
            yield idle, outcome
        if self.resumed:
            # every session the resumed journal settles was examined, whatever the journal
            # recorded of the interrupted run's scan
            result.examined = max(result.examined, result.deleted + result.kept + result.vanished)
        if self.journal is not None:
            self.journal.finish()

    def receipt(self) -> dict[str, Any]:
        """What this ``apply`` removed, as evidence: the ids it deleted under a digest
        ``receipts verify`` recomputes (the erase receipt's: ``state:<id>`` lines), those
        written meanwhile and kept, and those already gone (for a continued run: deleted
        by the interrupted one, or by someone else)."""
        from backends.ops.erasure import removed_digest, removed_ids

        request, result, deleted = self.request, self.result, sorted(self.outcomes["deleted"])
        owner = request.owner_subject
        return {
            "format": RECEIPT_FORMAT, "backend": str(self.adapter.name),
            "target": request.source_uri, "pruned_at": datetime.now(timezone.utc).isoformat(),
            "idle_for_s": int(request.idle_for.total_seconds()),
            "owner_subject": owner if isinstance(owner, str) else None,
            "unowned": owner is None, "match": request.match, "resumed": self.resumed,
            "examined": result.examined,
            "archive": ({"path": request.archive, "sessions": result.archived,
                         "digest": result.digest} if request.archive else None),
            # the erase receipt's names, so one verifier recomputes both digests
            "event_ids": [], "events_deleted": 0,
            "sessions": deleted, "states_deleted": len(deleted),
            "kept": sorted(self.outcomes["kept"]),
            "already_gone": sorted(self.outcomes["vanished"]),
            "digest": {"algorithm": "sha256", "over": "sorted removed ids, one per line "
                       "('state:<session>')", "value": removed_digest(removed_ids([], deleted))},
        }

    def write_receipt(self, then: Callable[[str], Any] | None = None) -> str:
        """Write :meth:`receipt` to ``request.receipt`` (atomically, mode 0600), then call
        ``then(path)`` (its signature); the receipt's path."""
        import json

        path = self.request.receipt or ""
        with atomic_output(path) as stream:
            stream.write((json.dumps(self.receipt(), indent=2, sort_keys=True) + "\n").encode())
        if then is not None:
            then(path)
        return path

