"""The passes of a live migration: bulk, catch-up and final, all one algorithm.

A pass enumerates the source (the version scan: ``iter_sessions``, whose summaries carry
each session's version and blob digest; ``iter_session_states`` where the source lists
each row with its summary, so a blob is read once and the digest is that of the bytes
copied; read one step ahead, :mod:`backends.transfer.readahead`), compares each session
with the state file, and copies only what moved: a session never copied, or whose version or digest changed. The
state file says what this migration last wrote on the target; every target write is
checked against it:

- a session we never wrote must be absent on the target (else someone else wrote it: a
  conflict, reported and never overwritten, unless it is exactly the row our own
  interrupted write left, which the state's ``intent`` row names, or identical to the
  source's); it is written insert-if-absent, and the target is read only when a row
  was there;
- a session we wrote must still be at the version we wrote (then it is replaced: a
  version-checked delete, then a restore at the source's version), else a conflict.

Sessions deleted on the source after we copied them are deleted on the target (again
only while the target row is still ours). Events: the users of the sessions that moved
(every known user in a bulk or final pass) have their source log compared with what the
state says was copied; what is new is restored with its sequence number (appended where
the target keeps none), each event's id recorded as an intent first, so an interrupted
run neither loses nor duplicates one. The user's counter is raised to the source's.

What the target cannot keep was settled before the first write (:mod:`.checks`).

Each pass loads the target's and the source's erasure ledgers once and carries the
source's entries to the target first; a session or event of an erased subject older
than its erasure is never written (:mod:`backends.transfer.withhold` says the rule), and
is counted and named in the pass's result. A session is tied to its subjects through the
source's event log (each user's log read once per pass, only while the ledger holds entries).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Iterable

from backends.archive.format import sha256_hex
from backends.contract import (Capability, OwnerFilter, RestoreRow, UNSCOPED, offers, adapter_defaults)
from backends.errors import is_state_version_conflict
from backends.transfer.batch_reads import batch_loader, chunks
from backends.transfer.readahead import read_ahead
from backends.migrate.state import MigrationState, SessionRow
from backends.migrate.event_batch import EventBatch
from backends.migrate.writebehind import WriteBehind
from backends.transfer.loss import (
    counter_reader,
    event_restorer,
    keeps_expiry,
    session_event_source,
    state_store_member,
    write_time_restorer,
)
from backends.transfer.withhold import SourceLogs, Withholding, carry_ledger

#: sessions compared with the state file per step
STEP = 2500
#: sessions read, announced and written per batch (two SQLite transactions and one COPY
#: per batch): with 2,500 instead of 1,000 the 1M bulk pass of bench/bench_migrate.py took
#: 33 s instead of 40 s, for about 13 MiB more held (the read-ahead keeps up to three steps)
WRITE_BATCH = 2500
#: users whose events are read, checked, written and recorded together (one source read,
#: one target check, one write and one state transaction per batch)
USER_BATCH = 1000
#: outcomes of :meth:`LiveMigration._prepare` besides a conflict's reason
_DONE, _WRITE = object(), object()


@dataclass
class PassResult:
    kind: str
    n: int = 0
    scanned: int = 0
    changed: int = 0
    copied: int = 0
    deleted: int = 0
    conflicts: int = 0
    events: int = 0
    event_conflicts: int = 0
    seconds: float = 0.0
    #: the way changes were found ("version scan", or a change feed)
    method: str = "version scan"
    new_conflicts: list[tuple[str, str]] = field(default_factory=list)
    #: sessions and events of erased subjects older than their erasure: not written
    withheld: list[str] = field(default_factory=list)
    withheld_events: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "new_conflicts"} | {
            "new_conflicts": [{"session_id": s, "why": w} for s, w in self.new_conflicts]}


@dataclass
class _Batch:
    """One write batch between its announcement and its record: what the state file
    knew, what the target held, the journal batch announcing it, and each session's
    decision (already copied, to be written, or a conflict)."""
    known: dict[str, SessionRow]
    on_target: dict[str, Any]
    journal: int | None
    copied: list[tuple[str, int, str]] = field(default_factory=list)
    fresh: list[tuple[Any, Any, str]] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)


def _ours(row: SessionRow | None, version: int, digest: str) -> bool:
    """Is this target row one this migration wrote: the last copy it recorded, or the
    write it had announced (``intent``) when it was interrupted?"""
    if row is None:
        return False
    return ((row.tgt_version == version and row.digest == digest)
            or (row.want_version == version and row.want_digest == digest))


class LiveMigration:
    """Passes from ``source`` to ``target`` recorded in ``state`` (see module)."""

    def __init__(self, source: Any, target: Any, state: MigrationState, *,
                 owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                 batch_size: int = 500, with_items: bool = True,
                 progress: Callable[[int], None] | None = None,
                 write_batch: int | None = None, copier: Any = None) -> None:
        self.source, self.target, self.state = source, target, state
        #: reads and writes a full pass's rows as the source's driver fetched them, where
        #: the pair allows it (a reshard: :class:`.reshard_copy.ReshardCopier`)
        self.copier = copier
        self.scope, self.match, self.batch_size = owner_subject, match, batch_size
        #: sessions compared per step and written per batch (a smaller ``write_batch``:
        #: more, shorter transactions, as ``shards run --batch-size`` asks)
        self.step = STEP if write_batch is None else write_batch
        self.write_batch = WRITE_BATCH if write_batch is None else write_batch
        self.progress = progress
        self._read_source = batch_loader(source)
        self._read_target = batch_loader(target)
        self._target_store = target.state_store()
        self.with_items = (with_items and offers(source, Capability.LIVE_ITEMS)
                           and offers(target, Capability.ITEM_MIRROR))
        self._restore_clock = write_time_restorer(target)
        self._keeps_ttl = keeps_expiry(target)
        self._drift_read = state_store_member(source, Capability.DRIFT_STATUS)
        self._drift_write = state_store_member(target, Capability.DRIFT_EXEMPT)
        self._events_src: Any = session_event_source(source)
        self._events_dst: Any = event_restorer(target) if self._events_src is not None else None
        self._source_counter = counter_reader(source)
        self._withholding = Withholding()
        #: the source's session subjects and (while the ledger holds entries) its users'
        #: logs, each read once per pass
        self._logs: SourceLogs | None = self._source_logs()
        self.feed: Any = None
        self._batch_restore = (self._target_store.restore_sessions
                               if offers(self._target_store, Capability.BATCH_RESTORE) else None)

    # -- one pass ------------------------------------------------------------------------

    def start_feed(self) -> str:
        """Subscribe to the source's change feed where it has one and it is on (before
        the full scan it will extend); says which way changes will be found."""
        if self.feed is None:
            self.feed = adapter_defaults(self.source).change_feed()
        return self.feed.method if self.feed is not None else "version scan"

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
            self.feed = None

    def run_pass(self, kind: str = "catch-up", *, all_users: bool = False,
                 use_feed: bool = False) -> PassResult:
        """One pass. With ``use_feed`` (a catch-up pass after a full one) and a feed that
        lost nothing, only the sessions and users it names are read; else the version
        scan of every session."""
        started = time.monotonic()
        self.state.fold()  # what another reader left unfolded: every pass starts from rows
        result = PassResult(kind=kind, n=self.state.begin_pass(kind))
        self._load_ledger()
        drained = self.feed.drain() if (use_feed and self.feed is not None) else None
        if drained is not None:
            users = self._feed_pass(result, *drained)
        else:
            if use_feed and self.feed is not None:
                result.method = "version scan (the change feed may have lost messages)"
            users = self._scan_pass(result, all_users or kind != "catch-up",
                                    versions_only=kind == "catch-up")
        self._copy_events(sorted(users), result)
        result.seconds = time.monotonic() - started
        self.state.end_pass(result.n, scanned=result.scanned, changed=result.changed,
                            copied=result.copied, events=result.events, deleted=result.deleted,
                            conflicts=result.conflicts)
        return result

    def _scan_pass(self, result: PassResult, all_users: bool, *,
                   versions_only: bool = False) -> set[str]:
        """Every session: its summary (version and blob digest), or, in a catch-up pass
        over a source that lists versions without blobs, its version (then only the
        sessions whose version moved are described); the final pass compares digests."""
        self.state.begin_seen(needed_only=True)
        moved_users: set[str] = set()
        steps: Generator[tuple[list[Any], dict[str, Any] | None], None, None]
        if versions_only and offers(self.source, Capability.VERSION_LIST):
            if result.method == "version scan":
                result.method = "version scan (versions only; digests in the final pass)"
            steps = self._moved_by_version(result)
        elif self.copier is not None and self.copier.usable():  # rows as fetched
            pairs = self.copier.iter_rows(owner_subject=self.scope, match=self.match,
                                          batch_size=self.batch_size)
            steps = self._counted_pairs(read_ahead(chunks(pairs, self.step)), result)
        elif not versions_only and offers(self.source, Capability.SESSION_STATES):
            # a full pass reads each blob once; a catch-up pass without a version list
            # lists digests (read server-side) and loads only what moved
            pairs = self.source.iter_session_states(owner_subject=self.scope, match=self.match,
                                                    batch_size=self.batch_size)
            steps = self._counted_pairs(read_ahead(chunks(pairs, self.step)), result)
        else:
            summaries = self.source.iter_sessions(owner_subject=self.scope, match=self.match,
                                                  batch_size=self.batch_size)
            steps = self._counted(chunks(summaries, self.step), result)
        moved: list[str] = []
        # a target that restores in batches writes each batch while the next is announced
        behind: WriteBehind[set[str]] | None = (WriteBehind() if self._batch_restore is not None
                                                else None)
        # (the closing stops a read-ahead thread when a step fails)
        with behind or contextlib.nullcontext(), contextlib.closing(steps):
            for step, states in steps:
                self._copy_step(step, result, moved, states, behind)
                moved_users.update(self._subjects(moved))
                moved.clear()
                if self.progress is not None:
                    self.progress(len(step))
        moved_users.update(self._subjects(moved))  # the last batch, recorded at the settle
        self.state.fold()  # this pass's journal, sorted into rows once
        self._settle_deletions(result)
        users = set(moved_users)
        if all_users:
            users.update(self.state.users())
        self.state.add_users(moved_users)
        return users

    def _counted(self, steps: Iterable[list[Any]], result: PassResult
                 ) -> Generator[tuple[list[Any], None], None, None]:
        for step in steps:
            self.state.add_seen(s.session_id for s in step)
            result.scanned += len(step)
            yield step, None

    def _counted_pairs(self, steps: Iterable[list[tuple[Any, Any]]], result: PassResult
                       ) -> Generator[tuple[list[Any], dict[str, Any]], None, None]:
        """Steps of summaries with the rows read beside them (copied from those bytes)."""
        for step in steps:
            summaries = [summary for summary, _ in step]
            self.state.add_seen(s.session_id for s in summaries)
            result.scanned += len(step)
            yield summaries, {summary.session_id: st for summary, st in step}

    def _moved_by_version(self, result: PassResult
                          ) -> Generator[tuple[list[Any], None], None, None]:
        """Steps of summaries of the sessions whose version differs from the state's."""
        listing = self.source.iter_versions(owner_subject=self.scope, match=self.match,
                                            batch_size=self.batch_size)
        # the next step's versions are read while this one is compared with the state
        with contextlib.closing(read_ahead(chunks(listing, self.step))) as steps:
            for step in steps:
                ids = [sid for sid, _ in step]
                self.state.add_seen(ids)
                result.scanned += len(step)
                moved = self.state.moved(step)
                found = (self.source.describe_session(sid, owner_subject=self.scope)
                         for sid in moved)
                yield [s for s in found if s is not None], None

    def _feed_pass(self, result: PassResult, sids: set[str], feed_users: set[str]) -> set[str]:
        """Read only what the feed named: each session's summary (gone = deleted), and
        the users whose log grew."""
        import fnmatch

        result.method = self.feed.method if self.feed is not None else "change feed"
        summaries, gone = [], []
        for sid in sorted(sids):
            if self.match is not None and not fnmatch.fnmatchcase(sid, self.match):
                continue
            summary = self.source.describe_session(sid, owner_subject=self.scope)
            (gone.append(sid) if summary is None else summaries.append(summary))
        moved: list[str] = []
        for step in chunks(summaries, self.step):
            result.scanned += len(step)
            self._copy_step(step, result, moved)
        self.state.fold()
        for row in self.state.sessions(gone).values():
            if row.state in ("copied", "intent"):
                self._delete_row(row, result)
        if self.scope is UNSCOPED and self.match is None:
            users = set(feed_users)  # every user's log moves with the store
        else:
            users = feed_users & (set(self.state.users()) | self._subjects(moved))
        self.state.add_users(users)
        return users

    # -- sessions ----------------------------------------------------------------------

    def _copy_step(self, step: list[Any], result: PassResult, moved: list[str],
                   states: dict[str, Any] | None = None,
                   behind: "WriteBehind[set[str]] | None" = None) -> None:
        """Copy what moved of ``step``, each id copied added to ``moved`` when recorded;
        ``states``: the rows read with the summaries (else they are read now). With
        ``behind``, each batch's write runs on its thread while the next batch is
        announced: a batch is recorded (and its ids added) at the next batch's push or
        at the ``behind``'s settle."""
        ids = [s.session_id for s in step]
        if behind is not None and behind.touches(ids):
            behind.settle()  # SCAN repeated a key the running write writes: read after it
        known = self.state.sessions(ids)
        todo = []
        for summary in step:
            row = known.get(summary.session_id)
            if row is not None and row.state == "conflict":
                continue  # reported once; never overwritten
            if (row is not None and row.state == "copied" and row.src_version == summary.version
                    and row.digest == summary.blob_sha256):
                continue
            todo.append(summary)
        todo = self._not_withheld(todo, result)
        if not todo:
            return
        result.changed += len(todo)
        for part in chunks(todo, self.write_batch):
            batch = self._announce(part, known, states)
            if batch is None:
                continue
            if behind is None:
                moved.extend(self._record(batch, self._restore_all(batch.fresh), result))
            else:
                behind.push([s.session_id for s, _, _ in batch.fresh],
                            functools.partial(self._restore_all, batch.fresh),
                            functools.partial(self._recorded, batch, result, moved))

    def _announce(self, part: list[Any], known: dict[str, SessionRow],
                  states: dict[str, Any] | None) -> "_Batch | None":
        """Everything before a batch's write: its rows (read now unless ``states`` has
        them), the target read where the state file knows a session, the intents
        committed, and each session decided. None when nothing of ``part`` is left."""
        part = list({s.session_id: s for s in part}.values())  # SCAN may repeat a key
        ids = [s.session_id for s in part]
        if states is not None:  # read with the summary: its digest is that of these bytes
            live = [(s, states[s.session_id]) for s in part]
            digests = {s.session_id: s.blob_sha256 for s in part}
        else:
            loaded = self._read_source(ids, self.scope)
            live = [(s, st) for s, st in zip(part, loaded) if st is not None]  # gone since the
            digests = {s.session_id: sha256_hex(st.blob) for s, st in live}  # scan: the deletion
        if not live:                                                           # step sees it
            return None
        # the target is read first only where the state file knows the session; one it
        # never recorded is written insert-if-absent and read only if that finds a row
        asked = [s.session_id for s, _ in live if s.session_id in known]
        on_target = dict(zip(asked, self._read_target(asked, UNSCOPED))) if asked else {}
        self._settle_intents(known, on_target)
        announced = [(s.session_id, st.version, digests[s.session_id]) for s, st in live]
        with self.state.transaction() as db:  # a row each where the file knows the session,
            self.state.mark_intent(db, [a for a in announced if a[0] in known])  # else
            journal = self.state.journal_intent(db, [a for a in announced if a[0] not in known])
        batch = _Batch(known, on_target, journal)
        self._decide([(s, st, digests[s.session_id]) for s, st in live], known, on_target,
                     batch.copied, batch.fresh, batch.conflicts)
        return batch

    def _recorded(self, batch: "_Batch", result: PassResult, moved: list[str],
                  existed: set[str]) -> None:
        moved.extend(self._record(batch, existed, result))

    def _record(self, batch: "_Batch", existed: set[str], result: PassResult) -> list[str]:
        """Everything after a batch's write (``existed``: the ids someone else had
        created first): the late ones decided again, the extras, the outcome in the state
        file and in ``result``. Returns the ids copied."""
        known, on_target, copied, conflicts = (batch.known, batch.on_target, batch.copied,
                                               batch.conflicts)
        fresh = batch.fresh
        late = [f for f in fresh if f[0].session_id in existed and f[0].session_id not in on_target]
        if late:  # insert-if-absent found a row: decided again, from the folded journal
            retried, existed_again = self._recheck(late, copied, conflicts)
            late_ids = {f[0].session_id for f in late}
            fresh = [f for f in fresh if f[0].session_id not in late_ids] + retried
            existed = (existed - late_ids) | existed_again
        for summary, st, digest in fresh:
            sid = summary.session_id
            if sid in existed:
                conflicts.append((sid, "written on the target by someone else "
                                       "while being copied; kept"))
            else:
                self._extras(summary, fresh_row=True)
                copied.append((summary.session_id, st.version, digest))
        with self.state.transaction() as db:
            if (batch.journal is not None and not late
                    and self.state.journal_copied(db, batch.journal)):
                self.state.mark_copied(db, [c for c in copied if c[0] in known])
            else:  # the batch was folded (here or by another reader): rows for all
                self.state.mark_copied(db, copied)
            for sid, why in conflicts:
                self.state.mark_conflict(db, sid, why)
        result.copied += len(copied)
        result.conflicts += len(conflicts)
        result.new_conflicts.extend(conflicts)
        return [sid for sid, _, _ in copied]

    def _recheck(self, late: list[tuple[Any, Any, str]], copied: list[tuple[str, int, str]],
                 conflicts: list[tuple[str, str]]) -> tuple[list[tuple[Any, Any, str]], set[str]]:
        """Sessions written insert-if-absent that found a row there. The file may hold
        them in the journal (SCAN returned the key twice and this pass copied it already),
        so the journal is folded and each is decided as if the target had been read
        first; returns what was written again and which of those someone else created
        first (a conflict)."""
        self.state.fold()
        ids = [summary.session_id for summary, _, _ in late]
        prior = self.state.sessions(ids)
        found = dict(zip(ids, self._read_target(ids, UNSCOPED)))
        again: list[tuple[Any, Any, str]] = []
        self._decide(late, prior, found, copied, again, conflicts)
        return again, self._restore_all(again)

    def _decide(self, items: list[tuple[Any, Any, str]], rows: dict[str, SessionRow],
                there: dict[str, Any], copied: list[tuple[str, int, str]],
                writes: list[tuple[Any, Any, str]], conflicts: list[tuple[str, str]]) -> None:
        """Each (summary, source row, digest) decided by :meth:`_prepare` against what the
        state file recorded (``rows``) and the target holds (``there``), into ``copied``,
        ``writes`` or ``conflicts``."""
        for summary, st, digest in items:
            sid = summary.session_id
            outcome = self._prepare(summary, st, digest, rows.get(sid), there.get(sid))
            if outcome is _DONE:
                copied.append((sid, st.version, digest))
            elif outcome is _WRITE:
                writes.append((summary, st, digest))
            else:
                conflicts.append((sid, str(outcome)))

    def _settle_intents(self, known: dict[str, SessionRow], on_target: dict[str, Any]) -> None:
        """An announced write the target holds landed before an interruption: record it
        as copied before a newer intent replaces the announcement."""
        landed = []
        for sid, have in on_target.items():
            row = known.get(sid)
            if row is None or row.state != "intent" or have is None:
                continue
            if row.want_version == have.version and row.want_digest == sha256_hex(have.blob):
                landed.append((sid, have.version, row.want_digest))
                known[sid] = dataclasses.replace(row, state="copied", src_version=have.version,
                                                 tgt_version=have.version, digest=row.want_digest)
        if landed:
            with self.state.transaction() as db:
                self.state.mark_copied(db, landed)

    def _prepare(self, summary: Any, st: Any, digest: str, row: SessionRow | None,
                 have: Any) -> Any:
        """Decide one session: ``_DONE`` (the target already holds it), ``_WRITE`` (absent,
        or ours and now deleted, version-checked, to be written anew), or why it is a
        conflict."""
        if have is None:
            return _WRITE
        there = sha256_hex(have.blob)
        if have.version == st.version and there == digest and have.owner_subject == st.owner_subject:
            self._extras(summary, fresh_row=False)  # our interrupted write, or an identical copy
            return _DONE
        if not _ours(row, have.version, there):
            wrote = "nothing" if row is None or row.tgt_version is None else \
                f"version {row.tgt_version}"
            return (f"written on the target by someone else (version {have.version} there, "
                    f"this migration wrote {wrote}); kept")
        try:  # still what we wrote: replace it, version-checked
            self._target_store.delete(summary.session_id, expected_version=have.version)
        except Exception as exc:
            if not is_state_version_conflict(exc):
                raise
            return "changed on the target while being replaced; kept"
        return _WRITE

    def _restore_all(self, fresh: list[tuple[Any, Any, str]]) -> set[str]:
        """Write the sessions (in one round trip where the target batches restores);
        returns the ids that someone else created first."""
        if not fresh:
            return set()
        if self.copier is not None:
            fetched: list[tuple[Any, Any, str]] = []
            rest: list[tuple[Any, Any, str]] = []
            for item in fresh:
                (fetched if self.copier.owns(item[1]) else rest).append(item)
            if fetched:
                return self.copier.write(fetched) | self._restore_all(rest)
        if self._batch_restore is not None:
            return set(self._batch_restore([RestoreRow(
                summary.session_id, st.blob, st.version, st.owner_subject, st.pending_message,
                summary.ttl_seconds if self._keeps_ttl else None, self._exempt(summary),
                summary.updated_at if self._restore_clock is not None else None)
                for summary, st, _ in fresh]))
        existed = set()
        for summary, st, _ in fresh:
            sid = summary.session_id
            ttl = summary.ttl_seconds if self._keeps_ttl else None
            try:
                if self._restore_clock is not None and summary.updated_at is not None:
                    self._restore_clock(sid, st.blob, version=st.version,
                                        owner_subject=st.owner_subject,
                                        pending_message=st.pending_message, ttl_seconds=ttl,
                                        updated_at=summary.updated_at)
                else:
                    self.target.restore_session(sid, st.blob, version=st.version,
                                                owner_subject=st.owner_subject,
                                                pending_message=st.pending_message,
                                                ttl_seconds=ttl)
            except Exception as exc:
                if not is_state_version_conflict(exc):
                    raise
                existed.add(sid)
        return existed

    def _exempt(self, summary: Any) -> bool:
        reported = (summary.extra or {}).get("drift_exempt")
        if isinstance(reported, bool):
            return reported
        return bool(self._drift_read(summary.session_id)) if self._drift_read is not None else False

    def _extras(self, summary: Any, *, fresh_row: bool) -> None:
        """What travels beside the row: the drift flag (a freshly written row is not
        exempt, or was written with its flag by a batch restore) and the live items."""
        sid = summary.session_id
        if self._drift_write is not None and not (fresh_row and self._batch_restore is not None):
            exempt = self._exempt(summary)  # (a batch restore wrote it with the row)
            if not fresh_row or exempt:
                self._drift_write(sid, exempt)
        if self.with_items:
            items = list(self.source.iter_live_items(sid, owner_subject=self.scope))
            self.target.sync_items(sid, items, owner_subject=summary.owner_subject)

    def _settle_deletions(self, result: PassResult) -> None:
        """Sessions we copied that the source no longer holds: deleted on the target while
        the row there is still ours. (A session that left the filters but still exists on
        the source is left where it is.)"""
        while True:
            rows = self.state.unseen_copied()
            if not rows:
                return
            for row in rows:
                self._delete_row(row, result)
                self.state.add_seen([row.sid])

    def _delete_row(self, row: SessionRow, result: PassResult) -> None:
        """A session we copied that the source may no longer hold."""
        if self.source.state_store().current_version(row.sid, owner_subject=UNSCOPED) is not None:
            return  # still there (out of the filters, or the scan missed it): left alone
        current = self._target_store.current_version(row.sid, owner_subject=UNSCOPED)
        note = None
        if current is not None:
            if current in (row.tgt_version, row.want_version):
                try:
                    self._target_store.delete(row.sid, expected_version=current)
                except Exception as exc:
                    if not is_state_version_conflict(exc):
                        raise
                    note = "deleted on the source, changed on the target; kept"
            else:
                note = "deleted on the source, rewritten on the target by someone else; kept"
        with self.state.transaction() as db:
            if note is None:
                self.state.mark_deleted(db, row.sid)
                result.deleted += 1
            else:
                self.state.mark_conflict(db, row.sid, note)
                result.conflicts += 1
                result.new_conflicts.append((row.sid, note))

    # -- events --------------------------------------------------------------------------

    def _subjects(self, sids: list[str]) -> set[str]:
        if self._logs is None:
            return set()
        return {u for sid in sids for u in self._logs.subjects(sid)}

    def _copy_events(self, users: Iterable[str], result: PassResult) -> None:
        if self._events_src is None or self._events_dst is None:
            return
        for batch in chunks(users, USER_BATCH):
            EventBatch(self, batch, result).copy()

    # -- the erasure ledger ----------------------------------------------------------------

    def _load_ledger(self) -> None:
        """Carry the source's ledger to the target, then load both, once per pass."""
        carry_ledger(self.source, self.target)
        self._withholding = Withholding.load(self.target, self.source)
        self._logs = self._source_logs()

    def _source_logs(self) -> SourceLogs | None:
        return SourceLogs(self._events_src, self.scope) if self._events_src is not None else None

    @property
    def _withholding_active(self) -> bool:
        return self._logs is not None and bool(self._withholding)

    def withholds(self, summary: Any) -> bool:
        """Whether the last pass's ledger withholds this source session (never copied)."""
        logs = self._logs
        return (logs is not None and bool(self._withholding)
                and self._withholding.withholds_session(logs.session_log(summary.session_id),
                                                        summary.updated_at))

    def withholds_event(self, event: Any) -> bool:
        return self._withholding_active and self._withholding.withholds_event(event)

    def _not_withheld(self, todo: list[Any], result: PassResult) -> list[Any]:
        """``todo`` without the sessions the ledger withholds (named in ``result``)."""
        if not self._withholding_active:
            return todo
        kept = []
        for summary in todo:
            if self.withholds(summary):
                result.withheld.append(summary.session_id)
            else:
                kept.append(summary)
        return kept

def run_migration(mig: LiveMigration, *, follow: bool = False, interval: float = 1.0,
                  max_passes: int | None = None, should_stop: Callable[[], bool] | None = None,
                  on_pass: Callable[[PassResult], None] | None = None) -> list[PassResult]:
    """The bulk pass (or, when the state says it finished, a catch-up pass: a resumed run
    settles its intents there), then with ``follow`` catch-up passes every ``interval``
    seconds until ``should_stop()`` says so or ``max_passes`` passes ran."""
    results: list[PassResult] = []
    state = mig.state
    state.claim()  # one process at a time runs a migration
    bulk_done = state.meta("bulk_done") == "1"
    state.set_meta(phase="bulk" if not bulk_done else "following")
    try:
        if follow:
            mig.start_feed()  # subscribed before the full pass, so nothing falls in between
        first = mig.run_pass("bulk" if not bulk_done else "catch-up", all_users=True)
        if not bulk_done:
            state.set_meta(bulk_done="1")
        state.set_meta(phase="following" if follow else "bulk-done")
        results.append(first)
        if on_pass is not None:
            on_pass(first)
        _follow(mig, follow, interval, max_passes, should_stop, on_pass, results)
    finally:
        mig.close()
    return results


def _follow(mig: LiveMigration, follow: bool, interval: float, max_passes: int | None,
            should_stop: Callable[[], bool] | None,
            on_pass: Callable[[PassResult], None] | None, results: list[PassResult]) -> None:
    while follow:
        if max_passes is not None and len(results) >= max_passes:
            break
        if should_stop is not None and should_stop():
            break
        time.sleep(interval)
        result = mig.run_pass("catch-up", use_feed=True)
        results.append(result)
        if on_pass is not None:
            on_pass(result)
