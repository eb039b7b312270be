"""Writing an archive: a streaming encoder and an atomic, private output file.

The writer keeps only the running digest and a count, so an export's memory does not grow
with the number of sessions. ``atomic_output`` gives the all-or-nothing file: a temp file
in the target's directory (mode 0600 from creation), fsync, then rename; on any exception
(KeyboardInterrupt included) the temp file is removed and the target name never appears.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

from backends.archive.encryption import SUFFIX, encrypting
from backends.archive.format import (
    USER_PART_EVENTS,
    ArchiveHeader,
    ArchiveRecord,
    UserRecord,
    canonical,
    sealed_session_line,
    session_line,
    user_line,
)


class ArchiveWriter:
    """Encode header, sessions, user logs and trailer onto a binary stream (always the
    newest format version). Sessions come first: a session after a user log is refused,
    because the reader refuses it."""

    def __init__(self, stream: IO[bytes], header: ArchiveHeader, *, sealer: Any = None) -> None:
        if (sealer is None) != (not header.shred):
            raise ValueError("a sealed archive needs both a sealer and the header's shred field")
        #: seals each session for a shred keyring (:mod:`backends.archive.shred`), or None
        self._sealer = sealer
        self._stream = stream
        self._chain = hashlib.sha256()
        self.count = 0
        self.users = 0
        self.items = 0
        self.events = 0
        #: user records written (a v3 log is one or more parts)
        self.lines_of_users = 0
        self._closed = False
        self._emit(canonical(header.to_record()))

    def _emit(self, line: bytes) -> None:
        line += b"\n"
        self._chain.update(line)
        self._stream.write(line)

    def add(self, record: ArchiveRecord) -> None:
        if self._closed:
            raise ValueError("archive already finished")
        n = self.count + self.lines_of_users + 1
        if isinstance(record, UserRecord):
            if self._sealer is not None:
                raise ValueError("user logs cannot be sealed for a shred keyring yet")
            self.users += record.final
            self.lines_of_users += 1
            self.events += len(record.events)
            self._emit(user_line(record, n))
            return
        if self.lines_of_users:
            raise ValueError("sessions must be written before the user logs")
        self.count += 1
        self.items += len(record.items or ())
        self.events += len(record.events or ())
        self._emit(session_line(record, n) if self._sealer is None
                   else sealed_session_line(record, n, self._sealer))

    def add_user_log(self, user_id: str, events: Iterable[Any],
                     counter: Callable[[int], int | None], *,
                     part_events: int = USER_PART_EVENTS) -> tuple[int, int | None]:
        """Stream one user's log as consecutive parts of at most ``part_events`` events,
        holding one part at a time. ``counter(top)`` is called after the last event is
        read (the highest sequence seen is ``top``) and its value goes in the final part.
        Returns (events written, counter)."""
        part, written, top = 1, 0, 0
        batch: list[Any] = []
        for event in events:
            top = max(top, int(event.sequence or 0))
            batch.append(event)
            if len(batch) == part_events:
                self.add(UserRecord(user_id, None, tuple(batch), part, final=False))
                written += len(batch)
                part, batch = part + 1, []
        value = counter(top)
        self.add(UserRecord(user_id, value, tuple(batch), part, final=True))
        return written + len(batch), value

    def finish(self) -> str:
        """Write the trailer; returns the chain digest."""
        digest = self._chain.hexdigest()
        trailer = {"kind": "trailer", "count": self.count, "users": self.users, "digest": digest}
        self._stream.write(canonical(trailer) + b"\n")
        self._closed = True
        return digest


def is_gzip_name(path: str | os.PathLike[str]) -> bool:
    """Whether an archive name asks for gzip (a trailing ``.age`` is the encryption's)."""
    name = str(path).lower()
    return name.removesuffix(SUFFIX).endswith(".gz")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str],
                  recipients: Sequence[Any] = ()) -> Iterator[IO[bytes]]:
    """A binary stream that becomes ``path`` only when the block completes.

    Gzip-compressed when the name ends in ``.gz`` (or ``.gz.age``), then age-encrypted to
    ``recipients`` when there are any (the plaintext only passes through a pipe). The file
    is created 0600 (mkstemp), so an archive full of session state is never readable by
    others, not even briefly.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=directory)
    raw = os.fdopen(fd, "wb")
    try:
        with contextlib.ExitStack() as layers:
            stream: IO[bytes] = raw
            if recipients:
                stream = layers.enter_context(encrypting(raw, recipients))
            if is_gzip_name(target):
                # mtime=0 and no file name: the same sessions give the same bytes
                zipped = gzip.GzipFile(filename="", mode="wb", fileobj=stream, mtime=0)
                stream = layers.enter_context(zipped)  # type: ignore[arg-type]
            yield stream
        raw.flush()
        os.fsync(raw.fileno())
        raw.close()
        os.replace(tmp_name, target)
        _sync_directory(directory)
    except BaseException:
        raw.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
