"""Copy: export piped into import, staged in an anonymous private temp file.

The staged archive gets the full import treatment (verified before the first write, a
preview unless applied, no overwrite). The final check reads the SOURCE again, with the
same filters, and compares each session's blob sha256, owner, pending message, version
(when preserved) and items with the target, and the counts on both sides. The import
consults both stores' erasure ledgers and carries the source's to the target; what it
withheld is not compared. Sessions the
import skipped because the target already held them (``--on-conflict skip``, the way a
copy is resumed) are compared too: a difference is a mismatch, never "already there".
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, Sequence

from backends.contract import Capability, OwnerFilter, UNSCOPED, offers
from backends.transfer.batch_reads import batch_loader, chunks
from backends.transfer.errors import ImportConflict
from backends.transfer.export import ExportResult, drift_reader, staged_export
from backends.transfer.importer import ImportResult, SessionImporter
from backends.transfer.loss import events_left_behind, settle, state_store_member
from backends.transfer.progress import READING_BACK, STAGING, Phases, counted, quiet, store_count
from backends.transfer.sources import StagedStream
from backends.transfer.verify import Expected, VerifyReport, check_all


#: sessions looked up on the target per round trip while staging
HELD_CHUNK = 500


@contextlib.contextmanager
def staged_copy(source: Any, target: Any, *, source_uri: str, owner_subject: OwnerFilter = UNSCOPED,
                match: str | None = None, with_items: bool = False, with_events: bool = False,
                users: Sequence[str] = (), allow_loss: bool = False, batch_size: int = 500,
                progress: Any = None, on_conflict: str = "error",
                keep_versions: bool = False, phases: Phases | None = None,
                refuse_conflicts_early: bool = False,
                ) -> Iterator[tuple[SessionImporter, ExportResult]]:
    """Export ``source`` into a staged archive and hand back an importer into ``target``
    (verified already). The staged file disappears when the block ends. ``allow_loss``
    applies the one loss rule to both halves, and to the events a copy without
    ``with_events`` (or ``users``) would leave behind on the source: refused
    (``LossyTransfer``) before the target is touched, or said in
    ``exported.left_behind``. ``phases`` reports each pass (staging, then the importer's);
    with ``refuse_conflicts_early`` a session the target already holds stops the staging
    as soon as it is read (:class:`ImportConflict`), not after the whole source."""
    phases = phases or quiet
    total = None if users else store_count(source, owner_subject=owner_subject, match=match)

    def staging(records: Iterable[Any], tick: Any) -> Iterable[Any]:
        records = counted(records, tick)
        if progress is not None:
            records = progress(records)
        return _refuse_held(target, records) if refuse_conflicts_early else records

    with contextlib.ExitStack() as stack:
        with phases(STAGING, total) as tick:
            staged, exported = stack.enter_context(staged_export(
                source, source_uri=source_uri, owner_subject=owner_subject, match=match,
                with_items=with_items, with_events=with_events, users=users,
                allow_loss=allow_loss, batch_size=batch_size,
                progress=lambda records: staging(records, tick)))
        if not with_events and not users:
            exported.left_behind = settle(
                events_left_behind(source, _session_ids(staged), owner_subject=owner_subject),
                allow_loss=allow_loss)
        importer = SessionImporter(target, StagedStream(staged, "staged copy"),
                                   on_conflict=on_conflict, keep_versions=keep_versions,
                                   allow_loss=allow_loss, phases=phases, carry_from=source)
        importer.verify()
        yield importer, exported


def _refuse_held(target: Any, records: Iterable[Any]) -> Iterator[Any]:
    """The records as they are read, refusing at the first session the target already
    holds (reading the target a chunk per round trip): a copy that would refuse anyway
    says so before it reads the rest of the source, and nothing is written."""
    load_many = batch_loader(target)
    for chunk in chunks(records, HELD_CHUNK):
        held = load_many([r.session_id for r in chunk], UNSCOPED)
        for record, state in zip(chunk, held):
            if state is not None:
                raise ImportConflict(
                    f"session {record.session_id!r} already exists on the target (found while "
                    "reading the source, before the rest was read); nothing was written. "
                    "Nothing is ever overwritten: rerun with --on-conflict skip to copy the rest")
        yield from chunk


def _session_ids(staged: Any) -> set[str]:
    """The session ids of a staged archive (read once more; the file is rewound)."""
    from backends.archive import ArchiveReader

    try:
        with ArchiveReader(staged) as reader:
            return {record.session_id for record in reader.sessions()}
    finally:
        staged.seek(0)


def verify_copy(source: Any, target: Any, result: ImportResult, *,
                owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                with_items: bool = False, batch_size: int = 500,
                importer: SessionImporter | None = None,
                only: set[str] | None = None, phases: Phases | None = None) -> VerifyReport:
    """Re-read the source (fresh summaries) and compare each session with the target;
    with ``importer``, also compare the copied events with the staged archive's.
    ``only`` limits the sessions compared (a whole-user copy selects by the user's log)."""
    compare_items = with_items and offers(source, Capability.LIVE_ITEMS) and offers(target, Capability.LIVE_ITEMS)
    keeps_drift = state_store_member(target, Capability.DRIFT_EXEMPT) is not None and \
        state_store_member(target, Capability.DRIFT_STATUS) is not None
    drift = drift_reader(source)
    report = VerifyReport(source_count=0)

    def expected() -> Iterator[Expected]:
        for summary in source.iter_sessions(owner_subject=owner_subject, match=match,
                                            batch_size=batch_size):
            if only is not None and summary.session_id not in only:
                continue
            report.source_count = (report.source_count or 0) + 1
            items = (list(source.iter_live_items(summary.session_id, owner_subject=owner_subject))
                     if compare_items else None)
            yield Expected(summary.session_id, summary.blob_sha256, summary.version,
                           summary.owner_subject, summary.pending_message, items,
                           drift(summary) if keeps_drift else None)

    # a session skipped as "already there" is compared too: a resumed copy must not call
    # a target row that a first pass left behind (stale, or edited since) a match
    total = importer.summary.count if importer is not None and importer.summary else None
    with (phases or quiet)(READING_BACK, total) as tick:
        check_all(report, target, counted(expected(), tick),
                  skipped=result.skipped_ids | result.expired_ids | set(result.withheld_sessions),
                  versions_preserved=result.versions_preserved,
                  compare_skipped=result.skipped_ids)
    if importer is not None:
        importer.verify_events(report)
    return report
