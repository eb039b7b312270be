"""One session's state and its enumeration summary, read at the same version.

``load_full`` returns the row; ``describe_session`` (the enumeration seam) adds what only
enumeration knows (TTL, updated_at, backend extras). They are two reads, so a writer can
slip in between; this retries until both describe one version, so an operator never sees
the blob of one version next to the metadata of another.
"""

from __future__ import annotations

from typing import Any

from backends.contract import Capability, LoadedState, OwnerFilter, SessionSummary, UNSCOPED, offers
from backends.errors import StateVersionConflict

ATTEMPTS = 5


def read_snapshot(adapter: Any, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
                  attempts: int = ATTEMPTS) -> tuple[LoadedState | None, SessionSummary | None]:
    """``(state, summary)`` at one version; ``(None, None)`` when there is no such session.

    ``summary`` is None for a backend without the enumeration seam. Raises
    :class:`StateVersionConflict` when the session keeps changing for ``attempts`` reads.
    """
    store = adapter.state_store()
    enumerates = offers(adapter, Capability.SESSIONS)
    for _ in range(attempts):
        state = store.load_full(session_id, owner_subject=owner_subject)
        if state is None:
            return None, None
        if not enumerates:
            return state, None
        summary = adapter.describe_session(session_id, owner_subject=owner_subject)
        if summary is not None and summary.version == state.version:
            return state, summary
        # deleted, re-owned or rewritten between the two reads: look again
    raise StateVersionConflict(
        f"session {session_id!r} kept changing during {attempts} reads; try again")
