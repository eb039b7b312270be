"""Import: verify the whole archive, plan, then write without ever overwriting.

Order of work, each step a full pass over the archive (memory stays flat):

1. ``verify()``: every line checksum, sequence number, blob sha256, the trailer's count
   and chain digest, and duplicate ids. A damaged archive stops here; nothing is written.
2. ``plan()``: for each session, does the target already hold it? -> create, skip or
   conflict (per ``on_conflict``). Read-only; the preview is this pass.
3. ``apply()``: with ``on_conflict="error"`` the plan runs first and any conflict refuses
   the import before the first write. Each session is created with ``restore_session`` at
   its archived version when the target implements SessionRestorer; otherwise (and only
   without ``keep_versions``) with ``save(expected_version=None)``, i.e. at version 1.
   Items go through ``sync_items`` when the target has an item mirror.
4. ``verify_target()``: read every session back and compare.

Archive v2: a session whose expiry time has passed is not imported (counted as
expired); the others get the time *remaining now* as their TTL. ``drift_exempt`` is set
with the store's ``set_drift_exempt``. Events are restored with their sequence numbers
through the target's ``EventRestorer`` (``restore_events``), then each user's counter is
raised (``raise_counter``: to the highest restored sequence, or a user log's archived
counter) so the next append continues the sequence. An event whose id, or whose
(user, sequence), the target already holds is a conflict like an existing session.
Events of an expired session are still restored: the compliance log does not expire
with session state. Events archived without a number (from a store that keeps none)
are appended once every record is read, user by user in log order (``created_at``, then
event id), so a target that numbers them gives 1 to the oldest. The events of a session
skipped as already there are restored where the target lacks them (a resumed import),
the others are skipped. Whatever the target cannot keep is settled by the one loss rule
(:mod:`backends.transfer.loss`) before the first write.

The target's erasure ledger (and, for a copy, the source's: ``carry_from``) is loaded once:
every session and event of an erased subject older than its erasure is withheld, counted
and named (:mod:`backends.transfer.withhold` says the rule); a copy carries the source's
ledger entries to the target before its first write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from backends.archive import ArchiveReader, ArchiveSummary, SessionRecord, UserRecord, verify_archive
from backends.archive.format import log_order
from backends.archive.reader import claimed_records
from backends.contract import Capability, UNSCOPED, event_defaults, offers, state_defaults
from backends.errors import BackendError, UnsupportedOperation, is_state_version_conflict
from backends.transfer.batch_reads import chunks
from backends.transfer.errors import ImportConflict, UnimportableRecord
from backends.transfer.import_batch import RECORDS, PendingWrites, batch_restorer, present, session_ids
from backends.transfer.loss import (
    event_restorer,
    import_losses,
    keeps_expiry,
    keeps_sequences,
    persistence_warning,
    settle,
    state_store_member,
    write_time_restorer,
)
from backends.transfer.progress import (CHECKING, CONFLICTS, READING_BACK, READING_BACK_EVENTS,
                                      VERIFYING, WRITING, Phases, counted, quiet)
from backends.transfer.verify import Expected, VerifyReport, check_all, check_events
from backends.transfer.withhold import Withholding, carry_entries, carry_ledger, ledger_from_record

ON_CONFLICT = ("error", "skip")
#: unnumbered events appended (and numbered by the store) per call
UNNUMBERED_BATCH = 2000


def target_item_dimensions(adapter: Any) -> int | None:
    """The embedding width the target's item mirror requires, when it says so: an
    ``item_dimensions`` attribute, else an explicit ``dimensions`` in its settings/config.
    None = unknown or unconstrained (then sync_items is the judge)."""
    width = getattr(adapter, "item_dimensions", None)
    if isinstance(width, int) and not isinstance(width, bool):
        return width
    for holder in (getattr(adapter, "config", None), getattr(adapter, "settings", None)):
        value = getattr(holder, "dimensions", None)
        if (isinstance(value, int) and not isinstance(value, bool)
                and getattr(holder, "dimensions_explicit", True)):
            return value
    return None


@dataclass(frozen=True)
class PlanRow:
    session_id: str
    version: int
    owner_subject: str | None
    action: str  # create | skip | conflict | expired | withheld
    detail: str
    items: int | None
    events: int | None = None
    #: "session", or "user" for a whole-user log (then session_id is "")
    kind: str = "session"
    user_id: str | None = None


@dataclass
class PlanTotals:
    create: int = 0
    skip: int = 0
    conflict: int = 0
    expired: int = 0
    #: sessions of an erased subject older than its erasure: never written
    withheld: int = 0
    #: events withheld (in sessions written or not, and in user logs)
    withheld_events: int = 0
    first_conflict: str | None = None
    #: why the first conflict is one (the session exists, or an event is already there)
    first_conflict_detail: str | None = None


@dataclass
class ImportResult:
    created: int = 0
    skipped: int = 0
    #: sessions whose archived expiry time had passed: not imported
    expired: int = 0
    items_synced: int = 0
    items_not_imported: int = 0
    events_restored: int = 0
    #: events the target already held (by id or by user and sequence), left as they are
    events_skipped: int = 0
    events_not_imported: int = 0
    #: user id -> the counter after the import
    counters: dict[str, int] = field(default_factory=dict)
    versions_preserved: bool = True
    skipped_ids: set[str] = field(default_factory=set, repr=False)
    expired_ids: set[str] = field(default_factory=set, repr=False)
    skipped_event_ids: set[str] = field(default_factory=set, repr=False)
    #: sessions and events of an erased subject older than its erasure, in archive order
    withheld_sessions: list[str] = field(default_factory=list)
    withheld_events: list[str] = field(default_factory=list)
    #: sealed sessions whose state key was destroyed (crypto-shredded: never written; the
    #: events of their other subjects still are), and events whose subject's key was
    shredded: int = 0
    shredded_events: int = 0
    shredded_ids: set[str] = field(default_factory=set, repr=False)


class _TargetLogs:
    """What the target's event logs already hold, per user, read once per user and kept
    current as events are restored (ids and sequence numbers)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._users: dict[str, tuple[set[str], set[int]]] = {}

    def _load(self, user: str) -> tuple[set[str], set[int]]:
        if user not in self._users:
            lister = getattr(self._store, "list_events", None) or self._store.list_by_user
            events = lister(user)
            self._users[user] = ({e.event_id for e in events},
                                 {e.sequence for e in events if e.sequence})
        return self._users[user]

    def prefetch(self, users: Iterable[str]) -> None:
        """The logs of ``users`` not read yet, read in one batch."""
        missing = [u for u in dict.fromkeys(users) if u not in self._users]
        if missing:
            for user, events in event_defaults(self._store).events_of_users(missing).items():
                self._users[user] = ({e.event_id for e in events},
                                     {e.sequence for e in events if e.sequence})

    def clash(self, event: Any) -> str | None:
        ids, sequences = self._load(event.user_id)
        if event.event_id in ids:
            return f"event {event.event_id} already exists on the target"
        if event.sequence and event.sequence in sequences:
            return (f"sequence {event.sequence} of user {event.user_id!r} is taken on the "
                    "target by another event")
        return None

    def add(self, events: Iterable[Any]) -> None:
        for event in events:
            ids, sequences = self._load(event.user_id)
            ids.add(event.event_id)
            if event.sequence:
                sequences.add(event.sequence)


class SessionImporter:
    """Import an archive (``source.open()`` gives a fresh stream per pass) into ``adapter``."""

    def __init__(self, adapter: Any, source: Any, *, on_conflict: str = "error",
                 keep_versions: bool = False, allow_loss: bool = False,
                 phases: Phases | None = None, carry_from: Any = None,
                 shred_keys: Any = None) -> None:
        if on_conflict not in ON_CONFLICT:
            raise ValueError(f"on_conflict must be one of {', '.join(ON_CONFLICT)}")
        self.adapter = adapter
        self.source = source
        self.on_conflict = on_conflict
        self.keep_versions = keep_versions
        self.allow_loss = allow_loss
        #: progress of each pass (see backends.transfer.progress)
        self.phases: Phases = phases or quiet
        self.restores_versions = offers(adapter, Capability.RESTORE)
        self.mirrors_items = offers(adapter, Capability.ITEM_MIRROR)
        self.summary: ArchiveSummary | None = None
        self.totals = PlanTotals()
        self.result: ImportResult | None = None
        #: user id -> events archived without a number, appended at the end of apply()
        self._unnumbered: dict[str, list[Any]] = {}
        #: the store a copy reads: its ledger is consulted too, and carried to the target
        self.carry_from = carry_from
        self._withholding: Withholding | None = None
        #: what the target holds of the current batch's sessions (read per batch)
        self._present: dict[str, bool] = {}
        #: the current batch's writes, flushed at its end
        self._pending = PendingWrites()
        #: the shred keyring that opens a sealed archive (:mod:`backends.archive.shred`)
        self.shred_keys = shred_keys

    @property
    def withholding(self) -> Withholding:
        """The target's ledger, the source's and the archive's (its header's), loaded once."""
        if self._withholding is None:
            self._withholding = Withholding.load(self.adapter, self.carry_from,
                                                 carried=self._archived_ledger())
        return self._withholding

    def _archived_ledger(self) -> tuple[list[Any], list[Any]]:
        return ledger_from_record(self.verify().header.ledger)

    def _withheld(self, record: SessionRecord) -> bool:
        return self.withholding.withholds_session(record.events, record.updated_at)

    def _kept(self, events: Iterable[Any]) -> list[Any]:
        """The events that flow (those of an erased subject older than its erasure do not)."""
        withholding = self.withholding
        if not withholding:
            return list(events)
        return [e for e in events if not withholding.withholds_event(e)]

    @property
    def target_name(self) -> str:
        return str(getattr(self.adapter, "name", "?"))

    # -- 1. verify -------------------------------------------------------------------

    def verify(self) -> ArchiveSummary:
        if self.summary is None:
            stream = self.source.open()
            try:  # the trailer's claim, as the progress total only
                total = claimed_records(stream)
            finally:
                stream.close()
            with self.phases(VERIFYING, total) as tick:
                self.summary = verify_archive(self.source.open, tick, keyring=self.shred_keys)
            if self.summary.sealed:
                from backends.archive.shred import KeyringRefused

                raise KeyringRefused("the archive's sessions are sealed for a shred keyring: "
                                     "give it with --shred-keys DIR; nothing was written")
        return self.summary

    def check_capabilities(self) -> None:
        """Refuse what the target cannot honour, before any write."""
        if self.keep_versions and not self.restores_versions:
            raise UnsupportedOperation(
                f"backend {self.target_name!r} cannot restore sessions at a given version, so "
                "--keep-versions cannot be honoured; drop it to import every session at version 1"
            )
        if self.summary is not None and self.summary.dimensions and self.mirrors_items:
            width = target_item_dimensions(self.adapter)
            foreign = sorted(d for d in self.summary.dimensions if d != width)
            if width is not None and foreign:
                raise UnsupportedOperation(
                    f"the archive's item embeddings have {foreign[0]} dimensions but backend "
                    f"{self.target_name!r} stores {width}; configure the target for "
                    f"{foreign[0]} dimensions (or import without items)"
                )

    def check_losses(self) -> list[str]:
        """The loss rule for this archive and target: raises ``LossyTransfer`` naming what
        the target cannot keep, or (``allow_loss``) returns one warning line per loss."""
        return settle(import_losses(self.adapter, self.verify()), allow_loss=self.allow_loss)

    def notes(self) -> list[str]:
        """What will not travel as archived, said plainly (verify first). Losses are not
        notes: :meth:`check_losses` refuses them unless accepted."""
        self.verify()
        notes = []
        if not self.restores_versions:
            notes.append(f"backend {self.target_name!r} cannot restore versions: sessions are "
                         "created at version 1 instead of their archived version")
        warning = persistence_warning(self.adapter)
        if warning:
            notes.append(warning)
        return notes

    # -- 2. plan ---------------------------------------------------------------------

    def _all_records(self) -> Iterator[SessionRecord | UserRecord]:
        for _line, record in self._numbered_records():
            yield record

    def _numbered_records(self) -> Iterator[tuple[int, SessionRecord | UserRecord]]:
        """Each record with its archive line (the header is line 1)."""
        self.verify()
        with ArchiveReader(self.source.open(), close_source=True,
                           keyring=self.shred_keys) as reader:
            for line, record in enumerate(reader.records(), 2):
                yield line, record

    def check_record(self, record: SessionRecord | UserRecord, line: int) -> None:
        """Run the checks the target's write runs on this record, without writing
        (``check_write`` where the target's state store has stricter rules, else the
        contract's): a record it would refuse is :class:`UnimportableRecord`, naming the
        session and the archive line, in the preview as before an import's first write."""
        if not isinstance(record, SessionRecord) or record.shredded:
            return
        version = record.version if self.restores_versions else None
        try:
            state_defaults(self.adapter.state_store()).check_write(
                record.session_id, record.blob, version=version,
                owner_subject=record.owner_subject, pending_message=record.pending_message)
        except (ValueError, TypeError) as exc:
            sid = record.session_id
            shown = repr(sid) if len(sid) <= 60 else f"{sid[:40]!r}… ({len(sid)} characters)"
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UnimportableRecord(
                f"archive line {line}: session {shown} cannot be stored in backend "
                f"{self.target_name!r}: {why}; nothing was written. Remove or rename that "
                "session at the source and export again") from None

    def check_records(self) -> None:
        """:meth:`check_record` for every record (an import runs it before its first write)."""
        with self.phases(CHECKING, self.verify().records) as tick:
            for line, record in counted(self._numbered_records(), tick):
                self.check_record(record, line)

    def _records(self) -> Iterator[SessionRecord]:
        for record in self._all_records():
            if isinstance(record, SessionRecord):
                yield record

    def _exists(self, session_id: str) -> bool:
        known = self._present.get(session_id)
        if known is not None:
            return known
        return self.adapter.state_store().current_version(session_id, owner_subject=UNSCOPED) is not None

    def _prefetch(self, records: list[Any], logs: _TargetLogs | None) -> None:
        """What the target holds of a batch's sessions and of its events' users, one
        read each, before the batch is planned or written."""
        self._present = present(self.adapter, session_ids(records))
        if logs is not None:
            logs.prefetch(e.user_id for r in records for e in (r.events or ()))

    def _batches(self) -> Iterator[list[tuple[int, SessionRecord | UserRecord]]]:
        return chunks(self._numbered_records(), RECORDS)

    def _logs(self) -> _TargetLogs | None:
        store = event_restorer(self.adapter)
        return None if store is None else _TargetLogs(store)

    @staticmethod
    def _event_clash(logs: _TargetLogs | None, events: Iterable[Any]) -> str | None:
        if logs is None:
            return None
        for event in events:
            clash = logs.clash(event)
            if clash:
                return clash
        return None

    def _user_row(self, record: UserRecord, events: int, clash: str | None) -> PlanRow:
        """One row for a user's whole log (``events`` and the first ``clash`` summed over
        its parts; ``record`` is the final part, which carries the counter)."""
        counter = "" if record.counter is None else f", counter {record.counter}"
        detail = f"log of user {record.user_id!r}: {events} event(s){counter}"
        action = "create"
        if clash:
            action, detail = ("conflict", clash) if self.on_conflict == "error" else (
                "create", f"{detail}; events the target holds are skipped")
        return PlanRow("", 0, None, action, detail, None, events, "user", record.user_id)

    def _row(self, record: SessionRecord, logs: _TargetLogs | None) -> PlanRow:
        conflict = "conflict" if self.on_conflict == "error" else "skip"
        items = None if record.items is None else len(record.items)
        events = None if record.events is None else len(record.events)
        row = lambda action, detail: PlanRow(  # noqa: E731
            record.session_id, record.version, record.owner_subject, action, detail, items, events)
        kept = self._kept(record.events or ())
        self.totals.withheld_events += len(record.events or ()) - len(kept)
        clash = self._event_clash(logs, kept)  # (what is withheld is never written)
        if record.shredded:
            if clash and conflict == "conflict":
                return row("conflict", clash)
            return row("withheld", "crypto-shredded: its key was destroyed; not written")
        if record.events and self._withheld(record):
            if clash and conflict == "conflict":  # the other subjects' events still are
                return row("conflict", clash)
            return row("withheld", "an erased subject's session, older than the erasure; "
                                   "not written")
        if self._exists(record.session_id):
            return row(conflict, "already exists on the target")
        if clash and conflict == "conflict":
            return row("conflict", clash)
        left = record.ttl_left()
        if left is not None and left <= 0 and record.expires_at is not None:
            return row("expired", f"expired at {record.expires_at.isoformat()}; not imported")
        if self.restores_versions:
            detail = f"at version {record.version}"
        else:
            detail = f"at version 1 (archived at {record.version})"
        if left is not None and keeps_expiry(self.adapter):
            detail += f", expires in {left}s"
        return row("create", detail)

    def plan(self) -> Iterator[PlanRow]:
        """Stream the preview; ``self.totals`` is complete once the stream is exhausted."""
        self.totals = PlanTotals()
        logs = self._logs()
        log_events, log_clash = 0, None  # of the user log being read (v3: in parts)
        for line, record in self._prefetched(logs):
            self.check_record(record, line)  # what --apply would refuse, the preview refuses
            if isinstance(record, UserRecord):
                kept = self._kept(record.events)
                self.totals.withheld_events += len(record.events) - len(kept)
                log_events += len(kept)
                log_clash = log_clash or self._event_clash(logs, kept)
                if not record.final:
                    continue
                row = self._user_row(record, log_events, log_clash)
                log_events, log_clash = 0, None
            else:
                row = self._row(record, logs)
            setattr(self.totals, row.action, getattr(self.totals, row.action) + 1)
            if row.action == "conflict" and self.totals.first_conflict is None:
                self.totals.first_conflict = row.session_id or f"log of user {row.user_id!r}"
                self.totals.first_conflict_detail = row.detail
            yield row

    def _prefetched(self, logs: _TargetLogs | None
                    ) -> Iterator[tuple[int, SessionRecord | UserRecord]]:
        """The numbered records, each batch's target reads done before its first record."""
        for batch in self._batches():
            self._prefetch([record for _, record in batch], logs)
            yield from batch

    # -- 3. apply --------------------------------------------------------------------

    def _conflict(self, first: str, count: int, written: int,
                  detail: str | None = None) -> ImportConflict:
        done = ("nothing was written" if written == 0 else
                f"{written} session(s) were written before it")
        why = detail or "already exists on the target"
        return ImportConflict(
            f"{count} record(s) of the archive conflict with the target (first: {first!r}: {why}); "
            f"{done}. Nothing is ever overwritten: rerun with --on-conflict skip to import the rest"
        )

    def _write(self, record: SessionRecord, ttl: int | None) -> None:
        restore_clock = write_time_restorer(self.adapter) if record.updated_at else None
        if self.restores_versions and restore_clock is not None:
            restore_clock(  # the source's write time, so the idle clock does not restart
                record.session_id, record.blob, version=record.version,
                owner_subject=record.owner_subject, pending_message=record.pending_message,
                ttl_seconds=ttl if keeps_expiry(self.adapter) else None,
                updated_at=record.updated_at,
            )
        elif self.restores_versions:
            self.adapter.restore_session(
                record.session_id, record.blob, version=record.version,
                owner_subject=record.owner_subject, pending_message=record.pending_message,
                ttl_seconds=ttl if keeps_expiry(self.adapter) else None,
            )
        else:
            self.adapter.state_store().save(
                record.session_id, record.blob, expected_version=None,
                owner_subject=record.owner_subject, pending_message=record.pending_message,
            )
        if record.drift_exempt:
            mark = state_store_member(self.adapter, Capability.DRIFT_EXEMPT)
            if mark is not None:  # else an accepted loss
                mark(record.session_id, True)

    def _restore_events(self, events: tuple[Any, ...], logs: _TargetLogs | None,
                        result: ImportResult, counter: tuple[str, int] | None = None) -> None:
        """Restore events keeping their numbers, then raise each user's counter."""
        store = event_restorer(self.adapter)
        events = self._withhold_events(events, result)
        if store is None:  # an accepted loss (check_losses ran first)
            result.events_not_imported += len(events)
            return
        fresh = []
        for event in events:
            clash = logs.clash(event) if logs is not None else None
            if clash and self.on_conflict == "error":  # a writer got in after the plan
                raise ImportConflict(f"{clash}; {result.created} session(s) and "
                                     f"{result.events_restored} event(s) were written before it. "
                                     "Rerun with --on-conflict skip to import the rest")
            if clash:
                result.events_skipped += 1
                result.skipped_event_ids.add(event.event_id)
            else:
                fresh.append(event)
        sequences = keeps_sequences(store)
        if fresh:  # written at the batch's flush; without numbers on a store that keeps
            numbered = [e for e in fresh if e.sequence or not sequences]  # none
            self._pending.events.extend(numbered)
            for event in fresh:  # from a store that kept no numbers: the target assigns them,
                if sequences and not event.sequence:  # in log order, once every record is
                    self._unnumbered.setdefault(event.user_id, []).append(event)  # read
            if logs is not None:
                logs.add(fresh)
        if not sequences:  # no numbers, no counters: a loss the rule named
            return
        for event in fresh:
            self._pending.raise_top(event.user_id, event.sequence)
        if counter is not None:
            self._pending.raise_top(*counter)

    def _withhold_events(self, events: tuple[Any, ...], result: ImportResult) -> tuple[Any, ...]:
        """The events that flow; the ones the ledger withholds are named in ``result``."""
        kept = self._kept(events)
        if len(kept) == len(events):
            return events
        flowing = {e.event_id for e in kept}
        result.withheld_events.extend(e.event_id for e in events if e.event_id not in flowing)
        return tuple(kept)

    def _append_unnumbered(self, result: ImportResult) -> None:
        """Append the events archived without a sequence number (from a store that keeps
        none), user by user in log order (``created_at``, then event id), wherever they
        were in the archive: a target that numbers them gives 1 to the oldest."""
        store = event_restorer(self.adapter)
        pending, self._unnumbered = self._unnumbered, {}
        ordered = [e for user in sorted(pending) for e in sorted(pending[user], key=log_order)]
        for part in chunks(ordered, UNNUMBERED_BATCH):  # numbered by the store, one step each
            event_defaults(store).append_batch(part)
            result.events_restored += len(part)

    def apply(self, progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None
              ) -> ImportResult:
        """Check, then write every record (see the module); ``progress`` wraps the stream
        of records written (the CLI holds signals between two of them)."""
        summary = self.verify()
        self.check_capabilities()
        self.check_losses()
        self.check_records()  # before the first write, whatever the conflict policy
        if self.on_conflict == "error":
            with self.phases(CONFLICTS, summary.count + summary.users) as tick:
                for _ in counted(self.plan(), tick):
                    pass
            if self.totals.conflict:
                raise self._conflict(self.totals.first_conflict or "?", self.totals.conflict, 0,
                                     self.totals.first_conflict_detail)
        with self.phases(WRITING, summary.records) as tick:
            return self._write_all(tick, progress)

    def _write_all(self, tick: Any, progress: Callable[[Iterable[Any]], Iterable[Any]] | None
                   ) -> ImportResult:
        result = ImportResult(versions_preserved=self.restores_versions,
                              shredded_events=self.verify().shredded_events)
        self.result = result
        # before the first write: the target withholds them from later restores too
        carry_entries(*self._archived_ledger(), self.adapter)
        if self.carry_from is not None:
            carry_ledger(self.carry_from, self.adapter)
        logs = self._logs()
        records: Iterable[SessionRecord | UserRecord] = counted(self._all_records(), tick)
        if progress is not None:
            records = progress(records)
        restore_many = batch_restorer(self.adapter) if self.restores_versions else None
        for batch in chunks(records, RECORDS):  # read whole before the batch's first write
            self._prefetch(batch, logs)
            for record in batch:
                self._apply_record(record, logs, result, restore_many is not None)
            self._flush(logs, result, restore_many)
        self._append_unnumbered(result)
        return result

    def _apply_record(self, record: SessionRecord | UserRecord, logs: _TargetLogs | None,
                      result: ImportResult, batched: bool) -> None:
        """One record: its session written now or queued for the batch's restore
        (``batched``), its events queued for the batch's event write."""
        if isinstance(record, UserRecord):
            self._restore_events(record.events, logs, result,
                                 (record.user_id, record.counter or 0))
            return
        if record.shredded:  # its key is gone: only the other subjects' events flow
            result.shredded += 1
            result.shredded_ids.add(record.session_id)
            self._restore_events(record.events or (), logs, result)
            return
        if record.events and self._withheld(record):
            result.withheld_sessions.append(record.session_id)
            self._restore_events(record.events, logs, result)  # the other subjects' only
            return
        if self.on_conflict == "skip" and self._exists(record.session_id):
            result.skipped += 1
            result.skipped_ids.add(record.session_id)
            if record.events:  # a resumed import: the events an earlier run did not
                self._restore_events(record.events, logs, result)  # write, the rest skipped
            return
        ttl = record.ttl_left()
        if ttl is not None and ttl <= 0:
            result.expired += 1
            result.expired_ids.add(record.session_id)
            if record.events:
                self._restore_events(record.events, logs, result)
            return
        if batched:
            self._pending.add_session(self.adapter, record, ttl)
            return
        if self._write_one(record, ttl, result):
            self._created(record, logs, result)

    def _write_one(self, record: SessionRecord, ttl: int | None, result: ImportResult) -> bool:
        """Write one session; False when it existed (skipped, or refused with ``error``)."""
        try:
            self._write(record, ttl)
        except (ValueError, TypeError) as exc:  # a rule check_record did not know
            if isinstance(exc, BackendError):
                raise
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UnimportableRecord(
                f"session {record.session_id[:60]!r} cannot be stored in backend "
                f"{self.target_name!r}: {why}; {result.created} session(s) were written "
                "before it. Fix or remove that session at the source, then rerun with "
                "--on-conflict skip") from None
        except Exception as exc:
            if not is_state_version_conflict(exc):
                raise
            self._existed(record, result)
            return False
        return True

    def _existed(self, record: SessionRecord, result: ImportResult) -> None:
        """A session a writer created after the plan: refused, or skipped."""
        if self.on_conflict == "error":
            raise self._conflict(record.session_id, 1, result.created) from None
        result.skipped += 1
        result.skipped_ids.add(record.session_id)

    def _created(self, record: SessionRecord, logs: _TargetLogs | None,
                 result: ImportResult) -> None:
        """What follows a session's write: its items, its events queued."""
        result.created += 1
        if record.items is not None:
            if self.mirrors_items:
                self.adapter.sync_items(record.session_id, record.items,
                                        owner_subject=record.owner_subject)
                result.items_synced += len(record.items)
            else:
                result.items_not_imported += len(record.items)
        if record.events:
            self._restore_events(record.events, logs, result)

    def _flush(self, logs: _TargetLogs | None, result: ImportResult, restore_many: Any) -> None:
        """A batch's writes: its sessions in one set-based restore (one that existed is
        refused or skipped alone), then its events in one write, then its counters."""
        pending = self._pending
        sessions, pending.sessions = pending.sessions, []
        existed = restore_many([row for _, row in sessions]) if sessions else set()
        for record, _row in sessions:
            if record.session_id in existed:
                self._existed(record, result)
            else:
                self._created(record, logs, result)
        store = event_restorer(self.adapter)
        if store is None:
            return
        queued = len(pending.events)
        clashes = pending.write_events(store)
        if clashes and self.on_conflict == "error":  # a writer got in after the plan
            raise ImportConflict(f"event {sorted(clashes)[0]} already exists on the target; "
                                 f"{result.created} session(s) and {result.events_restored} "
                                 "event(s) were written before it. Rerun with --on-conflict "
                                 "skip to import the rest")
        result.events_restored += queued - len(clashes)
        result.events_skipped += len(clashes)
        result.skipped_event_ids |= clashes
        if keeps_sequences(store):
            result.counters.update(pending.write_counters(store))

    # -- 4. read back ----------------------------------------------------------------

    def verify_target(self) -> VerifyReport:
        """Compare every archived session with the target (after ``apply``)."""
        result = self.result or ImportResult(versions_preserved=self.restores_versions)
        report = VerifyReport()
        keeps_drift = state_store_member(self.adapter, Capability.DRIFT_STATUS) is not None and \
            state_store_member(self.adapter, Capability.DRIFT_EXEMPT) is not None
        with self.phases(READING_BACK, self.verify().count) as tick:
            expected = (
                Expected(record.session_id, record.blob_sha256, record.version,
                         record.owner_subject, record.pending_message,
                         record.items if (record.items is not None and self.mirrors_items) else None,
                         record.drift_exempt if keeps_drift else None)
                for record in counted(self._records(), tick)
            )
            check_all(report, self.adapter, expected,
                      skipped=result.skipped_ids | result.expired_ids
                      | set(result.withheld_sessions) | result.shredded_ids,
                      versions_preserved=result.versions_preserved)
        self.verify_events(report)
        return report

    def verify_events(self, report: VerifyReport) -> None:
        """Compare every archived event the import wrote with the target's copy, and each
        user's counter with the archived one (a copy's read-back adds this too)."""
        store = event_restorer(self.adapter)
        if store is None or not self.verify().events:
            return
        result = self.result or ImportResult()

        def archived() -> Iterator[tuple[tuple[Any, ...], tuple[str, int] | None]]:
            for record in self._all_records():
                if isinstance(record, UserRecord):
                    yield record.events, (record.user_id, record.counter or 0)
                elif record.events:
                    yield record.events, None

        with self.phases(READING_BACK_EVENTS, self.verify().events) as tick:
            check_events(report, store, archived(),
                         skipped=result.skipped_event_ids | set(result.withheld_events), tick=tick)
