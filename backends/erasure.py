"""Erasing a data subject: every event of one user id, its sequence counter and index
entries, and optionally the item-mirror rows of the sessions the user has events in.

``plan_erasure`` reads what would go (per place, with counts) and changes nothing;
``apply_erasure`` removes it through the stores' own ``purge_user`` / ``purge_items``,
then reads the store again to verify nothing of the user is left, and returns a receipt
whose digest covers the sorted removed ids. Only the user's own keys, rows or documents
are touched, so other users stay byte-identical. Memory: the user's event ids (their
digest is over the sorted list), never the store's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from backends.contract import Capability, LiveItemSource, capabilities_of, offers
from backends.errors import UnsupportedOperation
from backends.eventlog import iter_events, require_event_store

Progress = Callable[[Iterable[Any]], Iterable[Any]]


@dataclass
class ErasurePlan:
    """What an erasure would remove, read without changing anything."""

    user_id: str
    backend: str
    event_ids: list[str] = field(default_factory=list)
    #: the user's last handed-out sequence (None: the store cannot report it)
    counter: int | None = None
    #: sessions the user has events in (only with sessions=True)
    sessions: list[str] = field(default_factory=list)
    #: live mirrored items per session (evicted rows are removed too, not counted here)
    items: dict[str, int] = field(default_factory=dict)
    with_sessions: bool = False
    notes: list[str] = field(default_factory=list)
    #: index entries per index, where the store keeps indexes apart from the events
    #: (Redis: the by-sequence and by-time sorted sets)
    indexes: dict[str, int] = field(default_factory=dict)

    def places(self) -> dict[str, dict[str, Any]]:
        places: dict[str, dict[str, Any]] = {
            "events": {"count": len(self.event_ids),
                       "detail": "each event with its index entries"},
            "counter": {"count": 1 if self.counter else 0, "value": self.counter},
        }
        if self.indexes:
            places["index_entries"] = {"count": sum(self.indexes.values()),
                                       "detail": ", ".join(f"{k} {v}" for k, v in self.indexes.items())}
        if self.with_sessions:
            places["item_mirror"] = {"count": sum(self.items.values()),
                                     "sessions": list(self.sessions),
                                     "detail": "live items counted; evicted rows go too"}
        return places


def plan_erasure(adapter: Any, user_id: str, *, sessions: bool = False,
                 progress: Progress | None = None) -> ErasurePlan:
    """Read what erasing ``user_id`` would remove; refuses (UnsupportedOperation) where
    the store cannot erase (no event store, no ``purge_user``)."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError("user_id must be a non-empty string")
    store = require_event_store(adapter)
    name = str(getattr(adapter, "name", "?"))
    if not offers(store, Capability.PURGE_USER):
        raise UnsupportedOperation(f"backend {name!r} cannot erase a user (its event store "
                                   "has no purge_user)")
    plan = ErasurePlan(user_id=user_id, backend=name, with_sessions=sessions)
    seen_sessions: dict[str, None] = {}
    events: Iterable[Any] = iter_events(store, user_id)
    if progress is not None:
        events = progress(events)
    for event in events:
        plan.event_ids.append(event.event_id)
        if event.session_id:
            seen_sessions[event.session_id] = None
    plan.indexes = _index_entries(store, user_id)
    if offers(store, Capability.RESTORE_EVENTS):
        plan.counter = int(store.read_counter(user_id))
    else:
        plan.notes.append(f"backend {name!r} keeps no per-user counter")
    if sessions:
        plan.sessions = sorted(seen_sessions)
        if Capability.PURGE_ITEMS not in capabilities_of(adapter, stores=False):
            plan.notes.append(f"backend {name!r} has no item mirror: no item rows to remove")
            plan.sessions = []
        elif isinstance(adapter, LiveItemSource):
            plan.items = {sid: sum(1 for _ in adapter.iter_live_items(sid))
                          for sid in plan.sessions}
    return plan


def _index_entries(store: Any, user_id: str) -> dict[str, int]:
    """``index_entries(user_id)`` of a store that keeps its indexes apart (Redis), else {}."""
    reader = getattr(store, "index_entries", None)
    return dict(reader(user_id)) if callable(reader) else {}


def removed_digest(ids: Iterable[str]) -> str:
    """sha256 over the sorted ids, one per line."""
    h = hashlib.sha256()
    for value in sorted(ids):
        h.update(value.encode("utf-8") + b"\n")
    return h.hexdigest()


def verify_erased(adapter: Any, user_id: str, sessions: Iterable[str] = ()) -> dict[str, Any]:
    """What is left of the user after an erasure, per place; ``ok`` when nothing is."""
    store = require_event_store(adapter)
    left: dict[str, int] = {
        "events": sum(1 for _ in iter_events(store, user_id)),
        "indexed": int(store.count_for_user(user_id)) if callable(
            getattr(store, "count_for_user", None)) else 0,
        **{f"index_entries.{k}": v for k, v in _index_entries(store, user_id).items()},
    }
    if offers(store, Capability.RESTORE_EVENTS):
        left["counter"] = int(store.read_counter(user_id))
    if isinstance(adapter, LiveItemSource):
        left["item_mirror"] = sum(sum(1 for _ in adapter.iter_live_items(sid)) for sid in sessions)
    return {"ok": not any(left.values()), "left": left}


def apply_erasure(adapter: Any, plan: ErasurePlan) -> dict[str, Any]:
    """Remove what ``plan`` found (and any event of the user written since), verify, and
    return the receipt (JSON-safe)."""
    store = require_event_store(adapter)
    removed_events = int(store.purge_user(plan.user_id))
    removed_items: dict[str, int] = {sid: int(adapter.purge_items(sid)) for sid in plan.sessions}
    ids = [f"event:{e}" for e in plan.event_ids] + [f"items:{s}" for s in plan.sessions]
    removed: dict[str, Any] = {
        "events": {"count": removed_events, "planned": len(plan.event_ids)},
        "counter": {"count": 1 if plan.counter else 0, "value": plan.counter},
    }
    if plan.indexes:
        removed["index_entries"] = {"count": sum(plan.indexes.values()), **plan.indexes}
    if plan.with_sessions:
        removed["item_mirror"] = {"count": sum(removed_items.values()), "sessions": removed_items}
    return {
        "user_id": plan.user_id,
        "backend": plan.backend,
        "erased_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "removed": removed,
        "ids": len(ids),
        "digest": {"algorithm": "sha256", "over": "sorted removed ids, one per line "
                   "('event:<id>', 'items:<session>')", "value": removed_digest(ids)},
        "verification": verify_erased(adapter, plan.user_id, plan.sessions),
        "notes": list(plan.notes),
    }
