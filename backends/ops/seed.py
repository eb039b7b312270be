"""``sessions seed``: a few example sessions, each written by one turn with its events, so
a newcomer has a store to try every other command on (the "Try it" page of the manual).

Written the way the engine writes a turn (``commit_turn``: the state and its events land
together), insert-only: a session that already exists is left as it is and counted, never
overwritten, so running it twice changes nothing."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from backends.errors import OperationRefused, is_state_version_conflict


@dataclass
class SeedResult:
    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    events: int = 0
    user: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"created": self.created, "existing": self.existing, "events": self.events,
                "user": self.user}


def seed_sessions(adapter: Any, *, prefix: str = "try-", sessions: int = 3, events: int = 2,
                  owner: str = "demo") -> SeedResult:
    """Sessions ``PREFIX0``… owned by ``owner``, each committed at version 1 with ``events``
    events of the user ``PREFIXuser``. A store without an event store is refused when
    events are asked for (``commit_turn`` would refuse them anyway, half-way)."""
    from backends.contract import MemoryEvent

    if events and adapter.event_store() is None:
        raise OperationRefused(f"backend {adapter.name!r} keeps no events: pass --events 0")
    result = SeedResult(user=f"{prefix}user")
    for i in range(sessions):
        sid = f"{prefix}{i}"
        turn = [MemoryEvent(event_id=str(uuid.uuid4()), user_id=result.user,
                            content=f"example event {n + 1} of {sid}", session_id=sid,
                            owner_subject=owner, meta={"example": True})
                for n in range(events)]
        try:
            adapter.commit_turn(sid, f"example state of {sid}".encode(), expected_version=None,
                                owner_subject=owner, events=turn or None)
        except Exception as exc:
            if not is_state_version_conflict(exc):
                raise
            result.existing.append(sid)
            continue
        result.created.append(sid)
        result.events += len(turn)
    return result
