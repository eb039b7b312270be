"""Erasing a data subject the way the engine does (ENGINE-WIRE §9), with a receipt.

The subject is owner-scoped: ``(user_id, owner)``; two tenants' "alice" are two subjects,
and ``owner=None`` is the subject whose events carry no owner. In the engine's order:

1. read the subject's events (raw, so a damaged event is found and named too) and derive
   the sessions from their ``session_id``;
2. census: a session whose log names other subjects is *shared*: reported, its whole
   state goes, the co-subjects' events survive;
3. erase the materialized item rows through the adapter's ``erasure_backend()`` (the
   engine does this after step 4; first here, so that a store whose state delete takes
   the item rows along, pgvector, still reports how many went);
4. delete each derived session's state under the subject's owner (an unowned row of a
   derived session is adopted, as the engine does); re-read to find survivors;
5. (the engine rebuilds shared sessions from the co-subjects' events; we cannot build an
   engine state, so the receipt names them for the engine to do it);
6. delete the subject's events one by one by id, only while no state survives (the log is
   the only mapping left for a retry); index entries without an event go too. The user's
   sequence counter is kept, as the engine keeps it: the user's next event continues the
   sequence (ENGINE-WIRE §9 step 6).

Then a residual scan of every place the subject can be (events, index entries, derived
states, item rows). Only the subject's rows, keys and documents are touched:
other subjects, and the same user id under another owner, stay byte-identical.

``apply_erasure`` records each step in a :class:`~backends.ops.journal.Journal` when given
one: a rerun continues it and its receipt covers the whole operation.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Iterable, NamedTuple, Sequence

from backends.contract import Capability, offers, event_defaults
from backends.errors import UnsupportedOperation
from backends.ops.eventlog import require_event_store

Progress = Callable[[Iterable[Any]], Iterable[Any]]
#: a context manager around one unit of work and its journal line (the CLI's
#: ``interrupts.deferred``: a signal is taken between units, never inside a driver call)
Unit = Callable[[], ContextManager[Any]]
#: events deleted between two journal records
EVENT_BATCH = 200


class EventRef(NamedTuple):
    """One event as erasure sees it: read raw, so damage does not hide it."""

    event_id: str
    #: ``""`` = unowned; None = unknown (an index entry whose event is gone)
    owner_subject: str | None
    session_id: str | None
    #: why the event cannot be decoded, or None
    problem: str | None = None


def event_refs(store: Any, user_id: str) -> list[EventRef]:
    """Every event of ``user_id`` under any owner, damaged ones included."""
    return [EventRef(*ref) for ref in event_defaults(store).event_refs(user_id)]


def _owner_of(ref_owner: str | None) -> str | None:
    return ref_owner or None


@dataclass
class ErasurePlan:
    """What an erasure of one subject would remove, read without changing anything."""

    user_id: str
    #: the subject's owner; None = the unowned subject
    owner: str | None
    backend: str
    #: the subject's events (damaged ones included), in log order
    event_ids: list[str] = field(default_factory=list)
    #: event id -> why it cannot be decoded (it is erased all the same)
    damaged: dict[str, str] = field(default_factory=dict)
    #: index entries of the user whose event is gone
    dangling: list[str] = field(default_factory=list)
    #: sessions derived from the subject's events, in order of first appearance
    sessions: list[str] = field(default_factory=list)
    #: shared session -> the other subjects its log names
    shared: dict[str, list[str]] = field(default_factory=dict)
    #: derived sessions whose state the subject's delete will remove
    states: list[str] = field(default_factory=list)
    #: live item rows per derived session under the subject's owner
    items: dict[str, int] = field(default_factory=dict)
    #: events of the same user id under other owners (they stay, and so does the counter)
    other_owner_events: int = 0
    counter: int | None = None
    indexes: dict[str, int] = field(default_factory=dict)
    hook_present: bool = False
    notes: list[str] = field(default_factory=list)
    #: on a deployment of several databases (SQL shards): ``event:<id>`` / ``state:<session>``
    #: -> the database holding it, read before anything is removed
    locations: dict[str, str] = field(default_factory=dict)

    def places(self) -> dict[str, dict[str, Any]]:
        places: dict[str, dict[str, Any]] = {
            "events": {"count": len(self.event_ids),
                       "detail": (f"{len(self.damaged)} damaged, named in the receipt"
                                  if self.damaged else "deleted one by one by id")},
            "states": {"count": len(self.states), "sessions": list(self.states),
                       "detail": "state of the derived sessions"},
            "item_rows": {"count": sum(self.items.values()),
                          "detail": ("through erasure_backend()" if self.hook_present
                                     else "this backend keeps no item mirror")},
            "shared_sessions": {"count": len(self.shared), "sessions": sorted(self.shared),
                                "detail": "; ".join(f"{sid}: also {', '.join(who)}"
                                                    for sid, who in sorted(self.shared.items()))
                                or "none: no other subject in the derived sessions' logs"},
        }
        if self.dangling:
            places["dangling_index_entries"] = {"count": len(self.dangling),
                                                "detail": "index entries without an event"}
        if self.other_owner_events:
            places["counter"] = {"count": 0, "value": self.counter,
                                 "detail": f"kept: user id has {self.other_owner_events} "
                                           "event(s) under other owners"}
        else:
            places["counter"] = {"count": 0, "value": self.counter,
                                 "detail": "kept, as the engine keeps it: the user's next "
                                           "event continues the sequence"}
            if self.indexes:
                places["index_entries"] = {"count": sum(self.indexes.values()),
                                           "detail": ", ".join(f"{k} {v}" for k, v in
                                                               self.indexes.items())}
        return places

    def record(self) -> dict[str, Any]:
        """The plan as a JSON-safe journal record."""
        return {"step": "plan", **{k: v for k, v in asdict(self).items()
                                   if k in ("event_ids", "damaged", "dangling", "sessions",
                                            "shared", "states", "items", "notes",
                                            "locations")}}


def _subject_label(user_id: str, owner: str | None) -> str:
    return f"{user_id} (owner {owner})" if owner else f"{user_id} (unowned)"


def item_eraser(adapter: Any) -> Any:
    """``adapter.erasure_backend()`` (the engine's optional seam), or None."""
    return adapter.erasure_backend() if offers(adapter, Capability.ERASURE) else None


def plan_erasure(adapter: Any, user_id: str, owner: str | None, *,
                 progress: Progress | None = None) -> ErasurePlan:
    """Read what erasing the subject ``(user_id, owner)`` would remove; refuses
    (UnsupportedOperation) where the store has no event store or cannot delete by id."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError("user_id must be a non-empty string")
    if owner is not None and (not isinstance(owner, str) or not owner):
        raise ValueError("owner must be None (the unowned subject) or a non-empty string")
    store = require_event_store(adapter)
    name = str(getattr(adapter, "name", "?"))
    if not offers(store, Capability.DELETE_EVENT):
        raise UnsupportedOperation(f"backend {name!r} cannot erase a subject (its event store "
                                   "cannot delete an event by id)")
    plan = ErasurePlan(user_id=user_id, owner=owner, backend=name)
    refs: Iterable[EventRef] = event_refs(store, user_id)
    if progress is not None:
        refs = progress(refs)
    sessions: dict[str, None] = {}
    other_owners: dict[str, set[str]] = {}
    for ref in refs:
        if ref.owner_subject is None:
            plan.dangling.append(ref.event_id)
            continue
        if (ref.owner_subject or None) != owner:
            plan.other_owner_events += 1
            if ref.session_id:
                other_owners.setdefault(ref.session_id, set()).add(ref.owner_subject or "")
            continue
        plan.event_ids.append(ref.event_id)
        if ref.problem:
            plan.damaged[ref.event_id] = ref.problem
        if ref.session_id:
            sessions[ref.session_id] = None
    plan.sessions = list(sessions)
    plan.shared = _census(store, user_id, plan.sessions, other_owners)
    state = adapter.state_store()
    plan.states = [sid for sid in plan.sessions if _visible_state(state, sid, owner)]
    eraser = item_eraser(adapter)
    plan.hook_present = eraser is not None
    if eraser is not None and offers(adapter, Capability.LIVE_ITEMS):
        plan.items = {sid: sum(1 for _ in adapter.iter_live_items(sid, owner_subject=owner))
                      for sid in plan.sessions}
    plan.indexes = _index_entries(store, user_id)
    plan.locations = _locations(store, state, plan.event_ids, plan.states)
    if offers(store, Capability.RESTORE_EVENTS):
        plan.counter = int(store.read_counter(user_id))
    if plan.shared:
        plan.notes.append(f"{len(plan.shared)} shared session(s) lose their whole state; the "
                          "other subjects' events stay, for the engine to rebuild them")
    return plan


def _locations(store: Any, state: Any, event_ids: Sequence[str],
               states: Sequence[str]) -> dict[str, str]:
    """Where each event and state is, on a store of several databases that can say
    (``locate_events`` / ``locate_sessions``: the SQL shards); empty elsewhere."""
    found: dict[str, str] = {}
    if hasattr(store, "locate_events"):
        found.update({f"event:{e}": where for e, where in store.locate_events(event_ids).items()})
    if hasattr(state, "locate_sessions"):
        found.update({f"state:{s}": where for s, where in state.locate_sessions(states).items()})
    return found


def _census(store: Any, user_id: str, sessions: Sequence[str],
            other_owners: dict[str, set[str]]) -> dict[str, list[str]]:
    """Shared sessions: derived sessions whose log names other subjects too."""
    found: dict[str, set[str]] = {sid: {_subject_label(user_id, o or None) for o in owners}
                                  for sid, owners in other_owners.items() if sid in sessions}
    if sessions and offers(store, Capability.SUBJECTS_BY_SESSION):
        everyone = store.subjects_by_session()
        for sid in sessions:
            for user in everyone.get(sid, ()):
                if user != user_id:
                    found.setdefault(sid, set()).add(user)
    elif offers(store, Capability.SESSION_SUBJECTS):
        for sid in sessions:
            for user in store.session_subjects(sid):
                if user != user_id:
                    found.setdefault(sid, set()).add(user)
    return {sid: sorted(who) for sid, who in found.items() if who}


def _visible_state(state: Any, session_id: str, owner: str | None) -> bool:
    """The subject's delete would remove this state: its owner's row, or an unowned row
    (which the engine adopts)."""
    if state.load_full(session_id, owner_subject=owner) is not None:
        return True
    return owner is not None and state.load_full(session_id, owner_subject=None) is not None


def _index_entries(store: Any, user_id: str) -> dict[str, int]:
    """``index_entries(user_id)`` of a store that keeps its indexes apart (Redis), else {}."""
    return dict(event_defaults(store).index_entries(user_id))


def removed_ids(events: Iterable[str], states: Iterable[str]) -> list[str]:
    """The names a receipt's digest covers: ``event:<id>`` and ``state:<session>``."""
    return [f"event:{e}" for e in events] + [f"state:{s}" for s in states]


def removed_digest(ids: Iterable[str]) -> str:
    """sha256 over the sorted ids, one per line."""
    h = hashlib.sha256()
    for value in sorted(ids):
        h.update(value.encode("utf-8") + b"\n")
    return h.hexdigest()


def verify_erased(adapter: Any, user_id: str, owner: str | None,
                  sessions: Iterable[str] = ()) -> dict[str, Any]:
    """The residual scan: what is left of the subject, per place; ``ok`` when nothing is.

    Events (damaged ones too) and index entries of the user that point at the subject's
    events or at nothing; once the user id has no event under any owner, its index keys
    (not its counter: kept); the derived sessions' state under the subject's owner (and unowned);
    their live item rows under that owner."""
    store = require_event_store(adapter)
    refs = event_refs(store, user_id)
    mine = [r for r in refs if r.owner_subject is not None and (r.owner_subject or None) == owner]
    others = [r for r in refs if r.owner_subject is not None and (r.owner_subject or None) != owner]
    left: dict[str, int] = {
        "events": len(mine),
        "dangling_index_entries": sum(1 for r in refs if r.owner_subject is None),
    }
    if not others:
        left.update({f"index_entries.{k}": v for k, v in _index_entries(store, user_id).items()})
    state = adapter.state_store()
    sessions = list(sessions)
    left["states"] = sum(1 for sid in sessions if _visible_state(state, sid, owner))
    if offers(adapter, Capability.LIVE_ITEMS):
        left["item_rows"] = sum(sum(1 for _ in adapter.iter_live_items(sid, owner_subject=owner))
                                for sid in sessions)
    return {"ok": not any(left.values()), "left": left}


def _now() -> str:
    return _stamp(datetime.now(timezone.utc))


def _stamp(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


class _NoJournal:
    records: list[dict[str, Any]] = []

    def append(self, record: dict[str, Any]) -> None:
        pass


def apply_erasure(adapter: Any, plan: ErasurePlan, journal: Any = None,
                  unit: Unit = nullcontext) -> dict[str, Any]:
    """Erase what ``plan`` found (in the engine's order), verify, and return the receipt
    (JSON-safe). With a ``journal`` every step is recorded before the next starts, and the
    receipt covers every run the journal holds (a resumed erasure reports the whole). Each
    step and its journal line run inside ``unit()``, so an interruption held by it lands
    between steps: the journal then says exactly what was removed."""
    journal = journal if journal is not None else _NoJournal()
    _merge_earlier_runs(plan, journal.records)
    journal.append(plan.record())
    store = require_event_store(adapter)
    state = adapter.state_store()
    owner = plan.owner
    # the item rows first: a store whose state delete takes the session's item rows with
    # it (pgvector) would otherwise leave the eraser nothing to count
    eraser = item_eraser(adapter)
    if eraser is not None:
        with unit():
            removed = int(eraser.erase_sessions(list(plan.sessions), user_id=plan.user_id,
                                                owner_subject=owner))
            journal.append({"step": "materialized", "count": removed})
    with unit():
        deleted_states = [sid for sid in plan.sessions if _delete_state(state, sid, owner)]
        journal.append({"step": "states", "deleted": deleted_states})
    survivors = [sid for sid in plan.sessions if _visible_state(state, sid, owner)]
    if not survivors:
        for start in range(0, len(plan.event_ids), EVENT_BATCH):
            with unit():
                batch = plan.event_ids[start:start + EVENT_BATCH]
                gone_ids = [eid for eid in batch if store.delete_event(eid)]
                journal.append({"step": "events", "deleted": gone_ids})
        if plan.dangling:
            with unit():
                event_defaults(store).drop_index_entries(plan.user_id, plan.dangling)
                journal.append({"step": "dangling", "dropped": list(plan.dangling)})
        # the sequence counter stays (the engine never touches it when it erases)
    from backends.ops.ledger import store_clock

    clock = store_clock(adapter)  # after the deletes: what the subject writes later flows
    result = receipt(adapter, plan, journal.records, survivors, clock)
    record_in_ledger(adapter, plan, result, clock)
    return result


def record_in_ledger(adapter: Any, plan: ErasurePlan, result: dict[str, Any],
                     clock: Any = None) -> None:
    """Record the subject in the store's erasure ledger (a keyed hash, never the ids), with
    the keyed hashes of its sessions, so that no restore path writes its older data back
    (an archive without events is withheld by session); the receipt is named by its
    digest. The time is the store's clock, read after the deletes."""
    from backends.ops.ledger import record_subject

    record_subject(adapter, plan.user_id, plan.owner, sessions=result["sessions"],
                   receipt=f"sha256:{result['digest']['value']}", clock=clock)


def shred_keys_of(adapter: Any, plan: ErasurePlan, result: dict[str, Any], keyring: Any) -> int:
    """Destroy, durably, the shred keys of the erased subject and of the sessions the
    erasure removed (the ones its ledger entry names); how many there were."""
    from backends.transfer.shredding import shred_names

    sessions = {*result.get("sessions", ()), *plan.states}
    return keyring.destroy(shred_names(adapter, plan.user_id, plan.owner, sorted(sessions)))


def _delete_state(state: Any, sid: str, owner: str | None) -> bool:
    """Delete one session's state; an unowned row of an owned erasure is adopted."""
    if state.delete(sid, owner_subject=owner):
        return True
    if owner is not None and state.load_full(sid, owner_subject=None) is not None:
        return bool(state.delete(sid, owner_subject=None))
    return False


def _merge_earlier_runs(plan: ErasurePlan, records: Sequence[dict[str, Any]]) -> None:
    """Add what an interrupted run planned and may not have finished: its sessions (whose
    events it may already have deleted), event ids and dangling entries (deleting an id
    twice is harmless)."""
    for record in records:
        if record.get("step") != "plan":
            continue
        for sid in record.get("sessions", []):
            if sid not in plan.sessions:
                plan.sessions.append(sid)
        for eid in record.get("event_ids", []):
            if eid not in plan.event_ids:
                plan.event_ids.append(eid)
        for eid in record.get("dangling", []):
            if eid not in plan.dangling:
                plan.dangling.append(eid)


def receipt(adapter: Any, plan: ErasurePlan, records: Sequence[dict[str, Any]],
            survivors: Sequence[str], clock: Any = None) -> dict[str, Any]:
    """The receipt of the whole operation: every plan and step the journal holds. Its
    time is the store's (``clock``, a :class:`~backends.contract.ledger.ClockReading`),
    and ``clock`` says how far the erasing machine's clock was from it."""
    from backends.ops.ledger import clock_record
    sessions: dict[str, None] = {}
    event_ids: dict[str, None] = {}
    damaged: dict[str, str] = {}
    dangling: dict[str, None] = {}
    shared: dict[str, set[str]] = {}
    had_state: dict[str, None] = {}
    notes: dict[str, None] = {}
    locations: dict[str, str] = {}
    materialized = 0
    runs = 0
    for record in records:
        step = record.get("step")
        if step == "plan":
            runs += 1
            sessions.update(dict.fromkeys(record.get("sessions", [])))
            event_ids.update(dict.fromkeys(record.get("event_ids", [])))
            damaged.update(record.get("damaged", {}))
            dangling.update(dict.fromkeys(record.get("dangling", [])))
            had_state.update(dict.fromkeys(record.get("states", [])))
            notes.update(dict.fromkeys(record.get("notes", [])))
            locations.update(record.get("locations", {}))
            for sid, who in record.get("shared", {}).items():
                shared.setdefault(sid, set()).update(who)
        elif step == "states":
            had_state.update(dict.fromkeys(record.get("deleted", [])))
        elif step == "materialized":
            materialized += int(record.get("count", 0))
    verification = verify_erased(adapter, plan.user_id, plan.owner, sessions)
    store = require_event_store(adapter)
    remaining = {r.event_id for r in event_refs(store, plan.user_id)}
    state = adapter.state_store()
    states_deleted = [sid for sid in had_state if not _visible_state(state, sid, plan.owner)]
    events_deleted = [eid for eid in event_ids if eid not in remaining]
    ids = removed_ids(events_deleted, states_deleted)
    per_database: dict[str, dict[str, int]] = {}
    for removed in ids if locations else ():
        kind, _, _ = removed.partition(":")
        where = per_database.setdefault(locations.get(removed, "unknown"),
                                        {"events_deleted": 0, "states_deleted": 0})
        where[f"{kind}s_deleted"] += 1
    extra = {"databases": dict(sorted(per_database.items()))} if per_database else {}
    return {
        "user_id": plan.user_id,
        "owner_subject": plan.owner,
        "unowned": plan.owner is None,
        "backend": plan.backend,
        "erased_at": _now() if clock is None else _stamp(clock.at),
        "clock": clock_record(clock),
        "runs": max(runs, 1),
        # the engine's ErasureResult fields
        "sessions": list(sessions),
        "states_deleted": len(states_deleted),
        "events_deleted": len(events_deleted),
        "materialized_deleted": materialized,
        "hook_present": plan.hook_present,
        "shared_sessions": sorted(shared),
        "state_survivors": list(survivors),
        "event_ids": list(event_ids),
        # ours
        "shared_with": {sid: sorted(who) for sid, who in sorted(shared.items())},
        "damaged_events": [{"event_id": eid, "problem": problem}
                           for eid, problem in damaged.items()],
        "dangling_index_entries": list(dangling),
        "rebuilt_sessions": [],
        "digest": {"algorithm": "sha256", "over": "sorted removed ids, one per line "
                   "('event:<id>', 'state:<session>')", "value": removed_digest(ids)},
        "verification": verification,
        "notes": list(notes),
        **extra,
    }


# -- one run: the receipt and the journal beside it ------------------------------------------


class Erasure:
    """One ``erase`` run over an open adapter, bound to its receipt file.

    The receipt is the evidence; ``RECEIPT.journal`` beside it records every step, so a
    rerun of the same erasure continues an interrupted one and its receipt covers the
    whole. In order: :meth:`finished` (a previous run wrote its receipt: done),
    :meth:`plan`, then for an apply :meth:`open_journal`, :meth:`run` and
    :meth:`write_receipt`. A request that contradicts what is on disk is refused
    (OperationRefused) before anything is erased."""

    def __init__(self, adapter: Any, user_id: str, owner: str | None, *,
                 receipt: str | None, source_uri: str, apply: bool = False,
                 overwrite: bool = False) -> None:
        self.adapter, self.user_id, self.owner = adapter, user_id, owner
        self.receipt, self.apply, self.overwrite = receipt, apply, overwrite
        self.arguments = {"uri": source_uri, "backend": str(getattr(adapter, "name", "?")),
                          "user": user_id, "owner": owner, "unowned": owner is None}
        #: an interrupted erasure's journal was found (a preview says --apply continues it)
        self.interrupted = False
        self.journal: Any = None

    def finished(self) -> bool:
        """Whether this very erasure had finished: its receipt exists and the journal it
        left (stopped before removing it) is removed now. Refuses to replace an existing
        receipt without ``overwrite``."""
        import os

        from backends.errors import OperationRefused
        from backends.ops.journal import Journal, JournalMismatch, journal_path

        if self.receipt is None:
            return False
        path = journal_path(self.receipt)
        try:
            found = Journal.read(path)
        except JournalMismatch as exc:
            raise OperationRefused(f"{exc}; move it away if it is not from an erasure") from exc
        if found is not None and os.path.exists(self.receipt):
            # the last run wrote its whole receipt (atomically), then stopped
            Journal(path, found[0], found[1], True).finish()
            if self.apply and found[0].get("arguments") == self.arguments:
                return True
            found = None
        if self.apply and found is None and os.path.exists(self.receipt) and not self.overwrite:
            raise OperationRefused(f"--receipt {self.receipt} already exists: choose another "
                                   "file, or pass --overwrite to replace it")
        self.interrupted = found is not None
        return False

    def plan(self, progress: Progress | None = None) -> ErasurePlan:
        return plan_erasure(self.adapter, self.user_id, self.owner, progress=progress)

    def open_journal(self) -> Any:
        """The journal of this erasure: new, or the interrupted one to continue
        (JournalMismatch when it is another erasure's)."""
        from backends.ops.journal import Journal

        self.journal = Journal.open(self.receipt or "", "erase", self.arguments)
        return self.journal

    def run(self, plan: ErasurePlan, unit: Unit = nullcontext) -> dict[str, Any]:
        """Erase, journalled step by step (each step inside ``unit()``); the receipt of
        the whole erasure."""
        return apply_erasure(self.adapter, plan, self.journal, unit)

    def write_receipt(self, result: dict[str, Any],
                      then: Callable[[str], Any] | None = None) -> str:
        """Write the receipt (atomically, synced), call ``then(path)`` (its signature),
        then remove the journal; its text. Stopped before the journal goes, a rerun finds
        the erasure finished (:meth:`finished`) and may sign its receipt then."""
        import json

        from backends.archive import atomic_output

        text = json.dumps(result, indent=2, sort_keys=True) + "\n"
        with atomic_output(self.receipt or "") as stream:
            stream.write(text.encode("utf-8"))
        if then is not None:
            then(self.receipt or "")
        self.journal.finish()  # the receipt is complete and synced
        return text
