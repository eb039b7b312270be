"""Copy: export piped into import, staged in an anonymous private temp file.

The staged archive gets the full import treatment (verified before the first write, a
preview unless applied, no overwrite). The final check reads the SOURCE again, with the
same filters, and compares each session's blob sha256, owner, pending message, version
(when preserved) and items with the target, and the counts on both sides.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from backends.contract import UNSCOPED, LiveItemSource, OwnerFilter
from backends.migrate.export import ExportResult, staged_export
from backends.migrate.importer import ImportResult, SessionImporter
from backends.migrate.sources import StagedStream
from backends.migrate.verify import Expected, VerifyReport, check_all


@contextlib.contextmanager
def staged_copy(source: Any, target: Any, *, source_uri: str, owner_subject: OwnerFilter = UNSCOPED,
                match: str | None = None, with_items: bool = False, batch_size: int = 500,
                progress: Any = None, on_conflict: str = "error",
                keep_versions: bool = False) -> Iterator[tuple[SessionImporter, ExportResult]]:
    """Export ``source`` into a staged archive and hand back an importer into ``target``
    (verified already). The staged file disappears when the block ends."""
    with staged_export(source, source_uri=source_uri, owner_subject=owner_subject, match=match,
                       with_items=with_items, batch_size=batch_size,
                       progress=progress) as (staged, exported):
        importer = SessionImporter(target, StagedStream(staged, "staged copy"),
                                   on_conflict=on_conflict, keep_versions=keep_versions)
        importer.verify()
        yield importer, exported


def verify_copy(source: Any, target: Any, result: ImportResult, *,
                owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                with_items: bool = False, batch_size: int = 500) -> VerifyReport:
    """Re-read the source (fresh summaries) and compare each session with the target."""
    compare_items = with_items and isinstance(source, LiveItemSource) and isinstance(target, LiveItemSource)
    report = VerifyReport(source_count=0)

    def expected() -> Iterator[Expected]:
        for summary in source.iter_sessions(owner_subject=owner_subject, match=match,
                                            batch_size=batch_size):
            report.source_count = (report.source_count or 0) + 1
            items = (list(source.iter_live_items(summary.session_id, owner_subject=owner_subject))
                     if compare_items else None)
            yield Expected(summary.session_id, summary.blob_sha256, summary.version,
                           summary.owner_subject, summary.pending_message, items)

    check_all(report, target, expected(), skipped=result.skipped_ids,
              versions_preserved=result.versions_preserved)
    return report
