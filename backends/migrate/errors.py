"""Refusals of an import that are not about the archive's bytes."""

from __future__ import annotations

from backends.errors import StateVersionConflict


class ImportConflict(StateVersionConflict):
    """Sessions of the archive already exist on the target and ``on_conflict`` is
    ``error``: refused (before the first write when the conflict was visible up front)."""
