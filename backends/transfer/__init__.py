"""Moving sessions between backends without losing or silently changing any: export to
an archive, import from one (verify, plan, apply, read back), and copy (both, staged).

Usable without the CLI::

    from backends.transfer import export_to_path, SessionImporter, ArchiveFile
    export_to_path(redis_adapter, "backup.jsonl.gz", source_uri=redact_uri(url))
    importer = SessionImporter(pg_adapter, ArchiveFile("backup.jsonl.gz"), on_conflict="skip")
    importer.verify(); importer.apply(); assert importer.verify_target().ok

What a target cannot keep (or a source cannot provide) is refused by one rule,
:func:`backends.transfer.loss.settle`, unless ``allow_loss=True``.
"""

from backends.transfer.copy import staged_copy, verify_copy
from backends.transfer.errors import ImportConflict, LossyTransfer, UnimportableRecord
from backends.transfer.export import (
    ExportResult,
    check_exportable,
    export_to_path,
    export_to_stream,
    staged_export,
    write_archive,
)
from backends.transfer.importer import ImportResult, PlanRow, PlanTotals, SessionImporter
from backends.transfer.loss import Loss, persistence_warning, settle
from backends.transfer.sources import ArchiveFile, StagedStream
from backends.transfer.verify import VerifyReport

__all__ = [
    "ArchiveFile",
    "ExportResult",
    "ImportConflict",
    "ImportResult",
    "Loss",
    "LossyTransfer",
    "PlanRow",
    "PlanTotals",
    "SessionImporter",
    "StagedStream",
    "UnimportableRecord",
    "VerifyReport",
    "check_exportable",
    "export_to_path",
    "export_to_stream",
    "persistence_warning",
    "settle",
    "staged_copy",
    "staged_export",
    "verify_copy",
    "write_archive",
]
