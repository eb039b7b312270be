"""Before a live migration writes: what the target cannot keep (the one loss rule,
:func:`backends.transfer.loss.settle`, as ``sessions copy`` applies it) and the plan.

The loss rule needs counts; they are taken by one scan of the source, and only when a
loss is possible at all for this pair (a pair that can keep everything is not scanned).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from backends.contract import (Capability, OwnerFilter, UNSCOPED, offers, event_defaults, state_defaults)
from backends.transfer.batch_reads import batch_loader, chunks
from backends.transfer.loss import (
    Loss,
    export_losses,
    import_losses,
    persistence_warning,
    session_event_source,
    settle,
    state_store_member,
)

#: sessions read by the plan's timed sample
SAMPLE = 200


def _capability_losses(source: Any, target: Any) -> list[Loss]:
    """Losses this pair could have, whatever the data (counts unknown)."""
    every = SimpleNamespace(items=1, sessions_expiring=1, sessions_with_write_time=1,
                            drift_exempt=1, events=1, sequenced_events=1, dimensions=())
    if not offers(source, Capability.LIVE_ITEMS):
        every.items = 0
    if session_event_source(source) is None:
        every.events = every.sequenced_events = 0
    elif not event_defaults(source.event_store()).assigns_sequences:
        every.sequenced_events = 0
    if not state_defaults(source.state_store()).records_write_time:
        every.sessions_with_write_time = 0
    if not state_defaults(source.state_store()).lists_expiry:
        every.sessions_expiring = 0
    return import_losses(target, every)


@dataclass
class SourceCounts:
    sessions: int = 0
    items: int = 0
    sessions_expiring: int = 0
    sessions_with_write_time: int = 0
    drift_exempt: int = 0
    events: int = 0
    sequenced_events: int = 0
    owners: dict[str, int] = field(default_factory=dict)
    #: user id -> (events, counter)
    users: dict[str, tuple[int, int]] = field(default_factory=dict)
    dimensions: tuple[int, ...] = ()


#: users whose logs and counters are read together while counting the source
COUNT_BATCH = 1000


def count_source(source: Any, *, owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                 items: bool = True, events: bool = True, batch_size: int = 500) -> SourceCounts:
    """One scan of the source: what a migration would move."""
    counts = SourceCounts()
    is_exempt = state_store_member(source, Capability.DRIFT_STATUS)
    keeps_clock = state_defaults(source.state_store()).records_write_time
    with_items = items and offers(source, Capability.LIVE_ITEMS)
    sids = []
    for summary in source.iter_sessions(owner_subject=owner_subject, match=match,
                                        batch_size=batch_size):
        counts.sessions += 1
        owner = summary.owner_subject or "(unowned)"
        counts.owners[owner] = counts.owners.get(owner, 0) + 1
        counts.sessions_expiring += summary.ttl_seconds is not None
        counts.sessions_with_write_time += bool(keeps_clock and summary.updated_at is not None)
        reported = (summary.extra or {}).get("drift_exempt")
        if isinstance(reported, bool):
            counts.drift_exempt += reported
        elif is_exempt is not None:
            counts.drift_exempt += bool(is_exempt(summary.session_id))
        if with_items:
            counts.items += sum(1 for _ in source.iter_live_items(summary.session_id,
                                                                  owner_subject=owner_subject))
        if events:
            sids.append(summary.session_id)
    store = session_event_source(source) if events else None
    if store is not None and sids:
        if offers(store, Capability.SUBJECTS_BY_SESSION):
            by_session = store.subjects_by_session()
            users = {u for sid in sids for u in by_session.get(sid, ())}
        else:
            users = {u for sid in sids for u in store.session_subjects(sid)}
        bulk = event_defaults(store)
        for part in chunks(sorted(users), COUNT_BATCH):  # one read of logs, one of counters
            sizes = bulk.log_sizes(part, owner_subject=owner_subject)
            counters = bulk.read_counters(part)
            for user in part:
                logged, numbered = sizes.get(user, (0, 0))
                counts.users[user] = (logged, int(counters.get(user, 0)))
                counts.events += logged
                counts.sequenced_events += numbered
    return counts


def migration_losses(source: Any, target: Any, *, owner_subject: OwnerFilter = UNSCOPED,
                     match: str | None = None) -> list[Loss]:
    """What moving ``source`` into ``target`` would lose, counted (see module)."""
    losses = export_losses(source, with_items=False,
                           with_events=source.event_store() is not None)
    if _capability_losses(source, target):
        counts = count_source(source, owner_subject=owner_subject, match=match)
        losses += import_losses(target, counts)
    return losses


def check_losses(source: Any, target: Any, *, allow_loss: bool,
                 owner_subject: OwnerFilter = UNSCOPED, match: str | None = None) -> list[str]:
    """THE loss rule for a migration: raises ``LossyTransfer`` naming every loss, or
    returns one warning line per accepted loss (and the non-persistent target's note)."""
    if not offers(source, Capability.SESSIONS):
        from backends.errors import UnsupportedOperation

        raise UnsupportedOperation(f"backend {source.name!r} cannot enumerate sessions, so it "
                                   "cannot be migrated from")
    if not offers(target, Capability.RESTORE):
        from backends.errors import UnsupportedOperation

        raise UnsupportedOperation(f"backend {target.name!r} cannot restore sessions at a "
                                   "version, so a live migration cannot keep versions there")
    warnings = settle(migration_losses(source, target, owner_subject=owner_subject, match=match),
                      allow_loss=allow_loss)
    note = persistence_warning(target)
    return warnings + ([note] if note else [])


# -- plan ------------------------------------------------------------------------------


def _side(adapter: Any, timeout: float) -> dict[str, Any]:
    from backends.probe import call_with_timeout

    side: dict[str, Any] = {"backend": str(adapter.name)}
    try:
        side["healthy"] = bool(call_with_timeout(adapter.check_health, timeout))
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        side["healthy"] = False
        side["health_error"] = type(exc).__name__
    if offers(adapter, Capability.HEALTH_DETAILS):
        try:
            side["details"] = adapter.health_details(timeout)
        except Exception as exc:  # noqa: BLE001
            side["details"] = {"error": type(exc).__name__}
    return side


def _index_findings(target: Any) -> list[str]:
    if not offers(target, Capability.INDEXES):
        return []
    try:
        reports = target.validate_indexes()
    except Exception as exc:  # noqa: BLE001 - reported in the plan
        return [f"indexes could not be validated ({type(exc).__name__})"]
    return [f"index {r.name} on {r.target}: {r.status}" + (f" ({r.detail})" if r.detail else "")
            + "; create it with 'semvecctl indexes ensure'"
            for r in reports if not r.ok]


def plan(source: Any, target: Any, *, owner_subject: OwnerFilter = UNSCOPED,
         match: str | None = None, timeout: float = 5.0) -> dict[str, Any]:
    """The preflight of both sides, what moves, what cannot be kept, and an estimate of
    the bulk pass from a timed sample of source reads. Writes nothing."""
    counts = count_source(source, owner_subject=owner_subject, match=match)
    losses = export_losses(source, with_items=False, with_events=source.event_store() is not None)
    losses += import_losses(target, counts)
    losses = [loss for loss in losses if loss.count is None or loss.count > 0]
    load = batch_loader(source)
    sample, started = [], time.monotonic()
    for summary in source.iter_sessions(owner_subject=owner_subject, match=match):
        sample.append(summary.session_id)
        if len(sample) >= SAMPLE:
            break
    if sample:
        load(sample, owner_subject)
    took = time.monotonic() - started
    rate = len(sample) / took if sample and took > 0 else None
    requirements = _index_findings(target)
    target_side = _side(target, timeout)
    details = target_side.get("details") or {}
    if details.get("durable") is False:  # the engine's requirement of a session store
        requirements.append(f"the target is not durable: {details.get('reason', 'no reason given')}")
    if details.get("can_evict_keys"):
        requirements.append(f"the target may evict keys (maxmemory-policy "
                            f"{details.get('maxmemory_policy')}): sessions could vanish")
    if not offers(target, Capability.RESTORE):
        requirements.append(f"backend {target.name!r} cannot restore sessions at a version")
    note = persistence_warning(target)
    if note:
        requirements.append(note)
    return {
        "source": _side(source, timeout),
        "target": target_side,
        "target_requirements": requirements,
        "privileges": "not probed: the plan writes nothing; 'migrate run' fails on its first "
                      "write (exit 3/4) if the target refuses writes",
        "sessions": counts.sessions,
        "owners": counts.owners,
        "items": counts.items,
        "events": counts.events,
        "users": {u: {"events": n, "counter": c} for u, (n, c) in sorted(counts.users.items())},
        "sessions_expiring": counts.sessions_expiring,
        "losses": [loss.describe() for loss in losses],
        "sample_sessions": len(sample),
        "estimate_read_rate_per_s": None if rate is None else round(rate, 1),
        "estimate_bulk_seconds": None if rate is None else round(counts.sessions / rate, 1),
    }
