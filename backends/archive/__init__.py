"""The sessions archive: a versioned, checksummed JSON Lines format for backups and
migrations between backends (``semvecctl sessions export/import/copy``).

Public API: :class:`ArchiveWriter` and :func:`atomic_output` to write,
:class:`ArchiveReader` and :func:`verify_archive` to read, :class:`SessionRecord`,
:class:`UserRecord` and :class:`ArchiveHeader` for the content, and the refusals :class:`ArchiveDamaged` /
:class:`ArchiveUnsupported`. See :mod:`backends.archive.format` for the layout.
"""

from backends.archive.errors import ArchiveDamaged, ArchiveError, ArchiveUnsupported
from backends.archive.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    ArchiveHeader,
    SessionRecord,
    UserRecord,
)
from backends.archive.reader import ArchiveReader, ArchiveSummary, verify_archive
from backends.archive.writer import ArchiveWriter, atomic_output, is_gzip_name

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ArchiveDamaged",
    "ArchiveError",
    "ArchiveHeader",
    "ArchiveReader",
    "ArchiveSummary",
    "ArchiveUnsupported",
    "ArchiveWriter",
    "SessionRecord",
    "UserRecord",
    "atomic_output",
    "is_gzip_name",
    "verify_archive",
]
