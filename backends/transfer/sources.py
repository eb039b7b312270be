"""Where an importer reads its archive from, once per pass.

An import reads the archive at least twice (verify everything, then apply), so the
source must hand out a fresh stream per pass and must notice if a file was replaced or
appended to in between: a changed file is refused rather than applied unverified.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any, Sequence

from backends.archive import ArchiveDamaged
from backends.archive.encryption import decrypted_if_age, open_archive


class ArchiveFile:
    """An archive on disk, opened afresh for each pass."""

    def __init__(self, path: str | os.PathLike[str], identities: Sequence[Any] = ()) -> None:
        self.path = Path(path)
        #: age identities: an encrypted archive is decrypted afresh on each pass
        self.identities = tuple(identities)
        self._stamp: tuple[int, int, int, int] | None = None

    def _current_stamp(self) -> tuple[int, int, int, int]:
        st = os.stat(self.path)
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def open(self) -> IO[bytes]:
        stamp = self._current_stamp()
        if self._stamp is None:
            self._stamp = stamp
        elif stamp != self._stamp:
            raise ArchiveDamaged(f"{self.path} changed after it was verified; nothing more was imported")
        return open_archive(self.path, self.identities)

    def __str__(self) -> str:
        return str(self.path)


class Unclosable:
    """Hands out a shared file without letting a reader close it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    def close(self) -> None:
        pass


class StagedStream:
    """A private seekable temp file we wrote ourselves (stdin spooled, or a copy's export)."""

    def __init__(self, stream: IO[bytes], label: str = "staged archive",
                 identities: Sequence[Any] = ()) -> None:
        self._stream = stream
        self._label = label
        #: age identities: an encrypted archive is decrypted afresh on each pass
        self.identities = tuple(identities)

    def open(self) -> IO[bytes]:
        self._stream.seek(0)
        shared: IO[bytes] = Unclosable(self._stream)  # type: ignore[assignment]
        return decrypted_if_age(shared, self.identities, self._label)

    def __str__(self) -> str:
        return self._label
