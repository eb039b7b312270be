"""A journal beside the evidence of a resumable destructive operation (an archive, a
receipt): what was decided and done, so an interrupted run is continued by a rerun and
its evidence covers the whole operation.

JSON lines, appended and fsynced one record at a time (the file and, when created, its
directory), so a record that was written survives SIGKILL and power loss; a torn last
line (killed mid-write) is ignored on reading. The first record is the header: the
operation's kind and arguments, which a rerun must repeat exactly. The journal is removed
only by :meth:`Journal.finish`, after the evidence is complete and synced.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Iterator

from backends.errors import OperationRefused

SUFFIX = ".journal"


class JournalMismatch(OperationRefused):
    """The journal beside the evidence belongs to a run with other arguments (or is no
    journal): refused before anything is changed."""


def journal_path(evidence: str | os.PathLike[str]) -> Path:
    """``FILE.journal`` beside ``FILE``."""
    target = Path(evidence)
    return target.with_name(target.name + SUFFIX)


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Journal:
    """An open journal: :meth:`open` creates it or reads the one an earlier run left."""

    def __init__(self, path: Path, header: dict[str, Any], records: list[dict[str, Any]],
                 resumed: bool) -> None:
        self.path = path
        self.header = header
        #: the records after the header, in order (earlier runs' first)
        self.records = records
        #: whether an earlier run left this journal
        self.resumed = resumed

    @staticmethod
    def read(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """(header, records) of the journal at ``path``, or None when there is none."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        records: list[dict[str, Any]] = []
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue  # a torn last line: the record was never complete
            if isinstance(value, dict):
                records.append(value)
        if not records or records[0].get("journal") != 1:
            raise JournalMismatch(f"{path} is not a semvecctl journal")
        return records[0], records[1:]

    @classmethod
    def open(cls, evidence: str | os.PathLike[str], kind: str,
             arguments: dict[str, Any]) -> "Journal":
        """The journal of ``evidence``: a new one with this header, or the one left by
        an interrupted run with the same kind and arguments (else JournalMismatch)."""
        path = journal_path(evidence)
        found = cls.read(path)
        header = {"journal": 1, "kind": kind, "arguments": arguments}
        if found is not None:
            old, records = found
            if old.get("kind") != kind or old.get("arguments") != arguments:
                raise JournalMismatch(
                    f"{path} belongs to an interrupted {old.get('kind', '?')} with other "
                    f"arguments ({_differences(old.get('arguments') or {}, arguments)}): "
                    "run that command again to finish it")
            return cls(path, old, records, resumed=True)
        journal = cls(path, header, [], resumed=False)
        journal._write(header, create=True)
        return journal

    def append(self, record: dict[str, Any]) -> None:
        """Write one record durably before returning."""
        self._write(record)
        self.records.append(record)

    def _write(self, record: dict[str, Any], *, create: bool = False) -> None:
        line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_EXCL if create else 0)
        fd = os.open(self.path, flags, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if create:
            _sync_directory(self.path.parent)

    def where(self, **match: Any) -> Iterator[dict[str, Any]]:
        """The records whose fields equal ``match``."""
        return (r for r in self.records if all(r.get(k) == v for k, v in match.items()))

    def finish(self) -> None:
        """Remove the journal (call only once the evidence is complete and synced)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        _sync_directory(self.path.parent)


def _differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(f"{k}: was {old.get(k)!r}, now {new.get(k)!r}" for k in keys) or "?"
