"""The set-based core every transfer writes events through: a batch (many users' events
at once) is checked against the target in one read, written in one set-based write per
kind (numbered events restored with their numbers, the store's own write holding back
each clash alone; unnumbered ones appended in log order, numbered by the store for the
whole batch in one step), and the users' counters raised in one call. Never one round
trip per user or per event: each store's ``bulk`` module does each step in one or two
round trips, the base's defaults (:class:`~backends.contract.defaults.EventStoreDefaults`)
the same step slowly where a store has no faster way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from backends.contract import event_defaults
from backends.errors import InvalidEvent
from backends.transfer.verify import event_difference


@dataclass
class EventOutcome:
    """What became of a batch of events: written (or found already there, identical),
    and clashing (another event holds the id, or the user's number)."""

    done: list[Any] = field(default_factory=list)
    clashes: list[Any] = field(default_factory=list)


def sort_against(events: Sequence[Any], have: Mapping[str, Any], *, sequences: bool,
                 outcome: EventOutcome) -> list[Any]:
    """The events to write: those the target lacks. One it holds identically (our own
    write before an interruption) is done; one it holds otherwise is a clash."""
    write = []
    for event in events:
        there = have.get(event.event_id)
        if there is None:
            write.append(event)
        elif event_difference(event, there, sequences=sequences) is None:
            outcome.done.append(event)
        else:
            outcome.clashes.append(event)
    return write


def copy_events(store: Any, events: Sequence[Any], *, sequences: bool) -> EventOutcome:
    """``events`` onto ``store`` (an event restorer): one existence read, then
    :func:`write_events`. Returns what was written or already there, and the clashes."""
    outcome = EventOutcome()
    if not events:
        return outcome
    bulk = event_defaults(store)
    have = bulk.events_by_ids([e.event_id for e in events])
    write = sort_against(events, have, sequences=sequences, outcome=outcome)
    written = write_events(store, write, sequences=sequences)
    outcome.done.extend(written.done)
    outcome.clashes.extend(written.clashes)
    return outcome


def write_events(store: Any, events: Sequence[Any], *, sequences: bool) -> EventOutcome:
    """Write a batch the target was found to lack: numbered events (where the store
    keeps numbers) in one set-based restore, a clash held back alone; the others appended
    in log order, numbered by the store in one step (where it keeps numbers) or restored
    set-wise (where it keeps none)."""
    from backends.archive.format import log_order

    outcome = EventOutcome()
    bulk = event_defaults(store)
    numbered = [e for e in events if e.sequence] if sequences else []
    ids = {e.event_id for e in numbered}
    rest = sorted((e for e in events if e.event_id not in ids), key=log_order)
    clashing = bulk.restore_event_batch(numbered) if numbered else set()
    if rest and not sequences:
        clashing |= bulk.restore_event_batch(rest)
    elif rest:
        clashing |= _append(bulk, rest)
    for event in (*numbered, *rest):
        (outcome.clashes if event.event_id in clashing else outcome.done).append(event)
    return outcome


def _append(bulk: Any, events: list[Any]) -> set[str]:
    """Unnumbered events appended in one step; when the batch is refused (an id someone
    wrote meanwhile), the ids now stored are the clashes and the rest is appended."""
    try:
        bulk.append_batch(events)
        return set()
    except InvalidEvent:
        taken = set(bulk.events_by_ids([e.event_id for e in events]))
        left = [e for e in events if e.event_id not in taken]
        if left:
            bulk.append_batch(left)
        return taken


def raise_counters(source: Any, target: Any, users: Sequence[str], tops: Mapping[str, int]) -> None:
    """Each user's counter on the target raised to the source's counter or the highest
    number of its log (``tops``), whichever is higher: one read, one write per batch."""
    counters = event_defaults(source).read_counters(list(users)) if source is not None else {}
    wanted = {u: max(int(counters.get(u, 0)), int(tops.get(u, 0))) for u in users}
    event_defaults(target).raise_counters({u: v for u, v in wanted.items() if v > 0})
