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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from backends.archive import ArchiveReader, ArchiveSummary, SessionRecord, verify_archive
from backends.contract import UNSCOPED, ItemMirror, SessionRestorer
from backends.errors import UnsupportedOperation, is_state_version_conflict
from backends.migrate.errors import ImportConflict
from backends.migrate.verify import Expected, VerifyReport, check_all

ON_CONFLICT = ("error", "skip")


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
    action: str  # create | skip | conflict
    detail: str
    items: int | None


@dataclass
class PlanTotals:
    create: int = 0
    skip: int = 0
    conflict: int = 0
    first_conflict: str | None = None


@dataclass
class ImportResult:
    created: int = 0
    skipped: int = 0
    items_synced: int = 0
    items_not_imported: int = 0
    versions_preserved: bool = True
    skipped_ids: set[str] = field(default_factory=set, repr=False)


class SessionImporter:
    """Import an archive (``source.open()`` gives a fresh stream per pass) into ``adapter``."""

    def __init__(self, adapter: Any, source: Any, *, on_conflict: str = "error",
                 keep_versions: bool = False) -> None:
        if on_conflict not in ON_CONFLICT:
            raise ValueError(f"on_conflict must be one of {', '.join(ON_CONFLICT)}")
        self.adapter = adapter
        self.source = source
        self.on_conflict = on_conflict
        self.keep_versions = keep_versions
        self.restores_versions = isinstance(adapter, SessionRestorer)
        self.mirrors_items = isinstance(adapter, ItemMirror)
        self.summary: ArchiveSummary | None = None
        self.totals = PlanTotals()
        self.result: ImportResult | None = None

    @property
    def target_name(self) -> str:
        return str(getattr(self.adapter, "name", "?"))

    # -- 1. verify -------------------------------------------------------------------

    def verify(self) -> ArchiveSummary:
        if self.summary is None:
            self.summary = verify_archive(self.source.open)
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

    def notes(self) -> list[str]:
        """What will not travel as archived, said plainly (verify first)."""
        summary = self.verify()
        notes = []
        if not self.restores_versions:
            notes.append(f"backend {self.target_name!r} cannot restore versions: sessions are "
                         "created at version 1 instead of their archived version")
        if summary.sessions_with_ttl and not getattr(self.adapter, "keeps_session_ttl", False):
            notes.append(f"{summary.sessions_with_ttl} session(s) carry a time to live but backend "
                         f"{self.target_name!r} keeps no per-session expiry: they are imported "
                         "without one")
        if summary.items and not self.mirrors_items:
            notes.append(f"the archive carries {summary.items} item(s) but backend "
                         f"{self.target_name!r} has no item mirror: items are not imported")
        return notes

    # -- 2. plan ---------------------------------------------------------------------

    def _records(self) -> Iterator[SessionRecord]:
        self.verify()
        with ArchiveReader(self.source.open(), close_source=True) as reader:
            yield from reader.sessions()

    def _exists(self, session_id: str) -> bool:
        return self.adapter.state_store().current_version(session_id, owner_subject=UNSCOPED) is not None

    def _row(self, record: SessionRecord) -> PlanRow:
        items = None if record.items is None else len(record.items)
        if self._exists(record.session_id):
            action = "conflict" if self.on_conflict == "error" else "skip"
            return PlanRow(record.session_id, record.version, record.owner_subject, action,
                           "already exists on the target", items)
        if self.restores_versions:
            detail = f"at version {record.version}"
        else:
            detail = f"at version 1 (archived at {record.version})"
        return PlanRow(record.session_id, record.version, record.owner_subject, "create", detail,
                       items)

    def plan(self) -> Iterator[PlanRow]:
        """Stream the preview; ``self.totals`` is complete once the stream is exhausted."""
        self.totals = PlanTotals()
        for record in self._records():
            row = self._row(record)
            setattr(self.totals, row.action, getattr(self.totals, row.action) + 1)
            if row.action == "conflict" and self.totals.first_conflict is None:
                self.totals.first_conflict = row.session_id
            yield row

    # -- 3. apply --------------------------------------------------------------------

    def _conflict(self, first: str, count: int, written: int) -> ImportConflict:
        done = ("nothing was written" if written == 0 else
                f"{written} session(s) were written before it")
        return ImportConflict(
            f"{count} session(s) of the archive already exist on the target (first: {first!r}); "
            f"{done}. Nothing is ever overwritten: rerun with --on-conflict skip to import the rest"
        )

    def _write(self, record: SessionRecord) -> None:
        if self.restores_versions:
            self.adapter.restore_session(
                record.session_id, record.blob, version=record.version,
                owner_subject=record.owner_subject, pending_message=record.pending_message,
                ttl_seconds=record.ttl_seconds,
            )
        else:
            self.adapter.state_store().save(
                record.session_id, record.blob, expected_version=None,
                owner_subject=record.owner_subject, pending_message=record.pending_message,
            )

    def apply(self, progress: Callable[[Iterable[SessionRecord]], Iterable[SessionRecord]] | None = None
              ) -> ImportResult:
        self.verify()
        self.check_capabilities()
        if self.on_conflict == "error":
            for _ in self.plan():
                pass
            if self.totals.conflict:
                raise self._conflict(self.totals.first_conflict or "?", self.totals.conflict, 0)
        result = ImportResult(versions_preserved=self.restores_versions)
        self.result = result
        records: Iterable[SessionRecord] = self._records()
        if progress is not None:
            records = progress(records)
        for record in records:
            if self.on_conflict == "skip" and self._exists(record.session_id):
                result.skipped += 1
                result.skipped_ids.add(record.session_id)
                continue
            try:
                self._write(record)
            except Exception as exc:
                if not is_state_version_conflict(exc):
                    raise
                if self.on_conflict == "error":  # a writer got in after the plan
                    raise self._conflict(record.session_id, 1, result.created) from None
                result.skipped += 1
                result.skipped_ids.add(record.session_id)
                continue
            result.created += 1
            if record.items is not None:
                if self.mirrors_items:
                    self.adapter.sync_items(record.session_id, record.items,
                                            owner_subject=record.owner_subject)
                    result.items_synced += len(record.items)
                else:
                    result.items_not_imported += len(record.items)
        return result

    # -- 4. read back ----------------------------------------------------------------

    def verify_target(self) -> VerifyReport:
        """Compare every archived session with the target (after ``apply``)."""
        result = self.result or ImportResult(versions_preserved=self.restores_versions)
        report = VerifyReport()
        expected = (
            Expected(record.session_id, record.blob_sha256, record.version,
                     record.owner_subject, record.pending_message,
                     record.items if (record.items is not None and self.mirrors_items) else None)
            for record in self._records()
        )
        check_all(report, self.adapter, expected, skipped=result.skipped_ids,
                  versions_preserved=result.versions_preserved)
        return report
