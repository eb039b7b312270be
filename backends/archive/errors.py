"""Why an archive was refused, in two categories a caller can act on differently.

``ArchiveDamaged`` is a failed check (the bytes are not what the writer wrote: truncated,
reordered, duplicated, tampered); ``ArchiveUnsupported`` means the file is not an archive
this version can read (another format, a newer format version). Neither is ever read
best-effort, and both are raised before an importer writes anything.
"""

from __future__ import annotations

from backends.errors import BackendError, IntegrityError


class ArchiveError(BackendError):
    """Base of the archive refusals; the message is one line and names the line number."""


class ArchiveDamaged(ArchiveError, IntegrityError):
    """The archive failed verification; nothing from it may be written."""


class ArchiveUnsupported(ArchiveError):
    """Not a sessions archive, or a format version this semvecctl does not know."""
