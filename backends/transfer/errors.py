"""Refusals of an import that are not about the archive's bytes."""

from __future__ import annotations

from backends.errors import BackendError, StateVersionConflict


class ImportConflict(StateVersionConflict):
    """Sessions of the archive already exist on the target and ``on_conflict`` is
    ``error``: refused (before the first write when the conflict was visible up front)."""


class LossyTransfer(BackendError):
    """The transfer would lose data the source holds (items, events, expiry times, drift
    flags, sequence numbers): refused before anything is written unless the caller
    accepts the loss (``allow_loss=True``, ``--allow-loss``). ``losses`` says what."""

    def __init__(self, message: str, losses: tuple = ()) -> None:
        super().__init__(message)
        self.losses = losses


class UnimportableRecord(LossyTransfer):
    """A record of the archive that the target refuses to store at all (an id longer
    than its column, text it cannot hold): found by the same checks the write runs,
    in the preview and before an import's first write, naming the record and its line.
    Refused like a loss (exit 1) but never accepted by ``allow_loss``: drop or rename
    the session at the source."""
