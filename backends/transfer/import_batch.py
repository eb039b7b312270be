"""An import's writes, a batch of records at a time (:data:`RECORDS`): what the target
holds of the batch's sessions and users is read first in one read each, the sessions
are written in one set-based restore where the target has one (``restore_sessions``:
one COPY per database on PostgreSQL, one script call on Redis), their events and the
other records' in one set-based event write (:mod:`backends.transfer.batches`), and the
users' counters raised in one call. A conflict found by a write (a writer got in after
the plan) holds back that session or event alone: the rest of the batch lands."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backends.contract import Capability, RestoreRow, UNSCOPED, event_defaults, offers
from backends.transfer.batch_reads import batch_loader
from backends.transfer.loss import keeps_expiry, write_time_restorer

#: archive records read, checked and written together
RECORDS = 1000


def session_ids(records: list[Any]) -> list[str]:
    from backends.archive import SessionRecord

    return [r.session_id for r in records if isinstance(r, SessionRecord)]


def present(adapter: Any, ids: list[str]) -> dict[str, bool]:
    """Which of ``ids`` the target holds: one batch read (a store that cannot read a row
    whole, a damaged one, is asked per id, as the single check asks)."""
    if not ids:
        return {}
    try:
        rows = batch_loader(adapter)(ids, UNSCOPED)
    except Exception:  # noqa: BLE001 - a damaged row: the per-id check says it exists
        store = adapter.state_store()
        return {sid: store.current_version(sid, owner_subject=UNSCOPED) is not None
                for sid in ids}
    return {sid: row is not None for sid, row in zip(ids, rows)}


def batch_restorer(adapter: Any) -> Any:
    """The target's set-based session restore, or None (then each record is written
    on its own)."""
    store = adapter.state_store()
    if offers(adapter, Capability.RESTORE) and offers(store, Capability.BATCH_RESTORE):
        return store.restore_sessions
    return None


@dataclass
class PendingWrites:
    """What a batch of records will write at its flush."""

    sessions: list[tuple[Any, RestoreRow]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    tops: dict[str, int] = field(default_factory=dict)

    def add_session(self, adapter: Any, record: Any, ttl: int | None) -> None:
        updated = record.updated_at if write_time_restorer(adapter) is not None else None
        self.sessions.append((record, RestoreRow(
            record.session_id, record.blob, record.version, record.owner_subject,
            record.pending_message, ttl if keeps_expiry(adapter) else None,
            bool(record.drift_exempt), updated)))

    def raise_top(self, user: str, top: int) -> None:
        if top:
            self.tops[user] = max(self.tops.get(user, 0), top)

    def write_events(self, store: Any) -> set[str]:
        """The batch's events written, set-based; returns the ids that clashed."""
        events, self.events = self.events, []
        return event_defaults(store).restore_event_batch(events) if events else set()

    def write_counters(self, store: Any) -> dict[str, int]:
        """Each user's counter raised once (one call), then read back (one read)."""
        tops, self.tops = self.tops, {}
        if not tops:
            return {}
        bulk = event_defaults(store)
        bulk.raise_counters(tops)
        return bulk.read_counters(list(tops))
