"""The one rule for lossy transfers, used by export, import and copy alike.

A transfer that cannot carry everything it was asked to carry (items, events, sequence
numbers or counters, session expiry times or write times, drift-exempt flags; for a copy,
also the source's events it was not asked to carry) is refused *before
anything is written*, naming each loss, unless the caller accepts the loss
(``allow_loss=True``; ``--allow-loss`` on the command line, where the refusal is a failed
check, exit 1). Accepted losses are returned as warning lines, so they are said, never
silent. Writing into a backend that is not persistent is allowed but always said: the
data dies with the process.

The capability probes below are the only place that decides what a backend can read or
keep; the exporter and importer ask them rather than probing on their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from backends.contract import (Capability, OwnerFilter, UNSCOPED, offers, adapter_defaults, event_defaults, state_defaults)
from backends.transfer.errors import LossyTransfer


@dataclass(frozen=True)
class Loss:
    """One kind of data a transfer cannot carry. ``count`` is None when it is not known
    before reading (an export that cannot read items does not know how many there are)."""

    what: str  # a plural-able noun: "item", "event", ...
    count: int | None
    why: str

    def describe(self) -> str:
        amount = f"{self.count} {self.what}(s)" if self.count is not None else f"the {self.what}s"
        return f"{amount} ({self.why})"


def _name(adapter: Any) -> str:
    return str(getattr(adapter, "name", "?"))


def settle(losses: Sequence[Loss], *, allow_loss: bool) -> list[str]:
    """THE rule: raise :class:`LossyTransfer` naming every loss, or, when the loss is
    accepted, return one warning line per loss."""
    losses = [loss for loss in losses if loss.count is None or loss.count > 0]
    if not losses:
        return []
    if not allow_loss:
        listed = "; ".join(loss.describe() for loss in losses)
        raise LossyTransfer(
            f"the transfer would lose {listed}; nothing was written. Rerun with --allow-loss "
            "(allow_loss=True) to accept the loss",
            tuple(losses),
        )
    return [f"accepted loss: {loss.describe()} not transferred" for loss in losses]


def persistence_warning(adapter: Any) -> str | None:
    """A line to show when writing into a backend that keeps nothing past the process."""
    if getattr(adapter, "is_persistent", True):
        return None
    return (f"backend {_name(adapter)!r} is not persistent: what is written lives only in this "
            "process and is gone when it exits")


# -- what a backend can read --------------------------------------------------------------


def state_store_member(adapter: Any, capability: Capability) -> Any:
    """The member that offers ``capability`` (a one-method state-store seam, such as
    ``Capability.DRIFT_EXEMPT``) on the adapter's state store, else on the adapter, or
    None; asked through :func:`~backends.contract.offers`."""
    from backends.contract import CAPABILITIES

    (member,) = CAPABILITIES[capability].methods
    for holder in (adapter.state_store(), adapter):
        if offers(holder, capability):
            return getattr(holder, member)
    return None


def session_event_source(adapter: Any) -> Any:
    """The event store when it can find a session's events (``session_subjects``), else None."""
    store = adapter.event_store()
    if not offers(store, Capability.SESSION_SUBJECTS):
        return None
    return store


def counter_reader(adapter: Any) -> Any:
    """``read_counter`` of the adapter's event store, or None."""
    store = adapter.event_store()
    return store.read_counter if offers(store, Capability.RESTORE_EVENTS) else None


def export_losses(adapter: Any, *, with_items: bool, with_events: bool,
                  users: Sequence[str] = ()) -> list[Loss]:
    """What an export from ``adapter`` could not carry although it was asked to."""
    name = _name(adapter)
    losses = []
    if with_items and not offers(adapter, Capability.LIVE_ITEMS):
        losses.append(Loss("item", None, f"backend {name!r} has no item mirror to read them from"))
    if with_events and session_event_source(adapter) is None:
        why = ("has no event store" if adapter.event_store() is None
               else "cannot find a session's events (its event store has no session_subjects)")
        losses.append(Loss("event", None, f"backend {name!r} {why}"))
    store = adapter.event_store()
    if users and store is not None and keeps_sequences(store) and counter_reader(adapter) is None:
        losses.append(Loss("sequence counter", len(users),
                           f"backend {name!r} cannot report them; an import continues after "
                           "the highest exported sequence instead"))
    return losses


def events_left_behind(adapter: Any, session_ids: Any, *,
                       owner_subject: OwnerFilter = UNSCOPED) -> list[Loss]:
    """A copy without events would leave the source's compliance log behind: the events
    the source holds for ``session_ids`` (under the owner filter), as a
    loss. A source whose event store cannot tell which events belong to a session is a
    loss of unknown size (refused too: nothing may be left behind unsaid)."""
    store = adapter.event_store()
    ids = set(session_ids)
    if store is None or not ids:
        return []
    name = _name(adapter)
    advice = "pass --with-events to carry them"
    if offers(store, Capability.SUBJECTS_BY_SESSION):
        by_session = store.subjects_by_session()
        users = {u for sid in ids for u in by_session.get(sid, ())}
    elif offers(store, Capability.SESSION_SUBJECTS):
        users = {u for sid in sorted(ids) for u in store.session_subjects(sid)}
    else:
        return [Loss("event", None, f"backend {name!r} keeps events but cannot tell which "
                                    f"belong to a session; {advice}")]
    count = 0
    for user in sorted(users):  # one user's log in memory at a time
        count += sum(1 for e in store.list_events(user, owner_subject=owner_subject)
                     if e.session_id in ids)
    if not count:
        return []
    return [Loss("event", count, f"the source's event store holds them for the copied "
                                 f"sessions and the copy would leave them behind; {advice}")]


# -- what a backend can keep --------------------------------------------------------------


def keeps_expiry(adapter: Any) -> bool:
    return offers(adapter, Capability.RESTORE) and adapter_defaults(adapter).keeps_session_ttl


def write_time_restorer(adapter: Any) -> Any:
    """The state store's ``restore_session`` when it restores a session's write time
    (takes ``updated_at``: SQL, MongoDB), else None."""
    import inspect

    store = adapter.state_store()
    if not offers(store, Capability.RESTORE):
        return None
    restore = store.restore_session
    try:
        params = inspect.signature(restore).parameters
    except (TypeError, ValueError):
        return None
    return restore if "updated_at" in params else None


def restarts_clocks(adapter: Any) -> bool:
    """True when ``adapter`` keeps a write time (its idle clock: prune, the engine's idle
    TTL) but an import could not restore it: every imported session would look fresh.
    A store that keeps no write time (Redis, memory) has no such clock to restart; its
    clock is the expiry, settled on its own."""
    return (state_defaults(adapter.state_store()).records_write_time
            and write_time_restorer(adapter) is None)


def keeps_sequences(store: Any) -> bool:
    return event_defaults(store).assigns_sequences


class _AppendRestorer:
    """Restores events into a store that keeps no sequence numbers (the engine's SQL
    layout): ``append`` with sequence 0 writes the event whole except for its number,
    which that store could not keep anyway (a loss the rule names). No counters."""

    assigns_sequences = False

    def __init__(self, store: Any) -> None:
        self._store = store

    def restore_events(self, events: Sequence[Any]) -> int:
        """The events appended as one batch (one transaction where the store can)."""
        event_defaults(self._store).append_batch([e.with_sequence(0) for e in events])
        return len(events)

    def restore_event_batch(self, events: Sequence[Any]) -> set[str]:
        """A batch written, the ids already stored held back alone (returned): the
        store's own set-based write where it inherits the base (one statement per
        database on PostgreSQL), else one existence read and one append batch."""
        from backends.contract.defaults import EventStoreDefaults

        if isinstance(self._store, EventStoreDefaults) and (
                type(self._store).restore_event_batch is not EventStoreDefaults.restore_event_batch
                or offers(self._store, Capability.RESTORE_EVENTS)):
            return self._store.restore_event_batch(events)  # the default needs restore_events
        taken = set(event_defaults(self._store).events_by_ids([e.event_id for e in events]))
        self.restore_events([e for e in events if e.event_id not in taken])
        return taken & {e.event_id for e in events}

    def read_counter(self, user_id: str) -> int:
        return 0

    def raise_counter(self, user_id: str, value: int) -> int:
        return 0

    def read_counters(self, user_ids: Sequence[str]) -> dict[str, int]:
        return {user: 0 for user in user_ids}

    def raise_counters(self, values: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def event_restorer(adapter: Any) -> Any:
    """How events are restored into ``adapter``: its event store when it restores them with
    their sequence numbers (EventRestorer); a store that keeps no sequences at all, through
    ``append``; else None (they cannot be restored)."""
    store = adapter.event_store()
    if offers(store, Capability.RESTORE_EVENTS):
        return store
    if store is not None and not keeps_sequences(store) and callable(getattr(store, "append", None)):
        return _AppendRestorer(store)
    return None


def import_losses(adapter: Any, summary: Any) -> list[Loss]:
    """What importing an archive (``ArchiveSummary``) into ``adapter`` could not keep."""
    name = _name(adapter)
    losses = []
    if summary.items and not offers(adapter, Capability.ITEM_MIRROR):
        losses.append(Loss("item", summary.items, f"backend {name!r} has no item mirror"))
    if summary.sessions_expiring and not keeps_expiry(adapter):
        losses.append(Loss("session expiry time", summary.sessions_expiring,
                           f"backend {name!r} keeps no per-session expiry; they would not expire"))
    if summary.sessions_with_write_time and restarts_clocks(adapter):
        losses.append(Loss("session write time", summary.sessions_with_write_time,
                           f"backend {name!r} cannot restore updated_at: their idle clocks "
                           "would restart"))
    if summary.drift_exempt and state_store_member(adapter, Capability.DRIFT_EXEMPT) is None:
        losses.append(Loss("drift-exempt flag", summary.drift_exempt,
                           f"backend {name!r} cannot store drift flags"))
    carried = summary.events
    if carried:
        restorer = event_restorer(adapter)
        if adapter.event_store() is None:
            losses.append(Loss("event", carried, f"backend {name!r} has no event store"))
        elif restorer is None:
            losses.append(Loss("event", carried, f"backend {name!r} cannot restore events with "
                                                 "their sequence numbers"))
        elif summary.sequenced_events and not keeps_sequences(restorer):
            losses.append(Loss("event sequence number", summary.sequenced_events,
                               f"backend {name!r} keeps no per-user sequences"))
    return losses
