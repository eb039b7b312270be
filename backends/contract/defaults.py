"""Shortcuts with a correct default, fsspec's ``cat_ranges`` way: the base does the slow,
correct thing with the required contract alone; a store that can do it faster overrides
the method (Redis pipelines ``load_full_many``, SQL hashes digests server-side). Callers
just call the method: a shortcut is never a capability to detect.

The bases are mixed into every shipped store and adapter (``DerivedReads``,
``EngineEventSurface`` and ``StateStoreSeams`` of :mod:`backends.contract.mixins` build on
them). A third-party store that does not inherit a base still works: callers reach it
through :func:`state_defaults`, :func:`event_defaults` or :func:`adapter_defaults`, which
hand back the object itself when it has the base and otherwise a view that adds the
defaults it lacks and keeps what it has (its own shortcuts, and its declarations:
``assigns_sequences = False`` on a store of the engine's SQL layout is honoured whether or
not it inherits anything). This module is the one place that looks.

Declarations are class attributes whose absence means the base's value:

* state store: ``records_write_time`` (summaries carry ``updated_at``, the last write),
  ``lists_expiry`` (summaries may carry ``ttl_seconds``), ``idempotent_retries`` (a save
  retried with the same bytes after a lost reply is answered as the first was);
* event store: ``assigns_sequences`` (per-user, 1-based; False for the engine's SQL layout);
* adapter: ``keeps_session_ttl`` (``restore_session`` restores the expiry too).
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Iterator, Mapping, Sequence

from backends.contract.owner import UNSCOPED, OwnerFilter, speaks_both_conventions
from backends.contract.seams import StoredDigest
from backends.contract.values import LoadedState, MemoryEvent


@speaks_both_conventions
class StateStoreDefaults:
    """A state store's shortcuts, each with its correct default over ``load_full``."""

    records_write_time: bool = False
    lists_expiry: bool = True
    idempotent_retries: bool = False

    def load_full_many(self, session_ids: Sequence[str], *,
                       owner_subject: OwnerFilter = UNSCOPED) -> list[LoadedState | None]:
        """``load_full`` of each id, in order, ``None`` where missing or filtered out (what
        an export reads; a store that can, reads them in one round trip)."""
        return [self.load_full(sid, owner_subject=owner_subject)  # type: ignore[attr-defined]
                for sid in session_ids]

    def load_digests_many(self, session_ids: Sequence[str], *,
                          owner_subject: OwnerFilter = UNSCOPED) -> list[StoredDigest | None]:
        """``load_full_many`` with each blob as its sha256 and the row's drift flag (False
        where the store keeps none): what ``migrate verify`` compares. A store that can
        hashes server-side, so no blob travels."""
        from backends.contract.capabilities import Capability, offers

        drift = offers(self, Capability.DRIFT_STATUS)
        rows = self.load_full_many(list(session_ids), owner_subject=owner_subject)
        return [None if st is None else StoredDigest(
            hashlib.sha256(st.blob).hexdigest(), st.version, st.owner_subject,
            st.pending_message,
            bool(self.is_drift_exempt(sid)) if drift else False)  # type: ignore[attr-defined]
            for sid, st in zip(session_ids, rows)]

    def count_sessions(self, *, owner_subject: OwnerFilter = UNSCOPED,
                       match: str | None = None) -> int | None:
        """How many sessions a listing with these filters would show, counted by the store
        (one query, or a scan of keys that reads no value); None when it cannot count
        them more cheaply than the listing (the caller then counts the listing)."""
        return None

    def check_write(self, session_id: str, blob: bytes, *, version: int | None,
                    owner_subject: str | None = None,
                    pending_message: str | None = None) -> None:
        """Run the checks a save or restore of these values runs, without any I/O (raises
        what the write would): the contract's, unless the store's rules are stricter."""
        from backends.contract.validation import validate_save_args

        validate_save_args(session_id, blob, version, owner_subject)


@speaks_both_conventions
class EventStoreDefaults:
    """An event store's shortcuts, each with its correct default over ``list_events``."""

    assigns_sequences: bool = True

    def iter_events(self, user_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
                    page: int = 500) -> Iterator[MemoryEvent]:
        """A user's events in the store's listing order, a page per round trip where the
        store can page (the default reads them in one query)."""
        yield from self.list_events(user_id, owner_subject=owner_subject)  # type: ignore[attr-defined]

    def append_batch(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        """``append`` of each event, in order (what restoring a batch of copied events into
        a store that keeps no numbers does; a store that can writes them in one
        transaction, all or none)."""
        return [self.append(event) for event in events]  # type: ignore[attr-defined]

    def events_of_users(self, user_ids: Sequence[str], *,
                        owner_subject: OwnerFilter = UNSCOPED) -> dict[str, list[MemoryEvent]]:
        """Several users' logs, each in the store's listing order: what a transfer reads
        for a batch of users (a store that can reads them in one or two round trips; the
        default lists each user)."""
        return {user: list(self.list_events(user, owner_subject=owner_subject))  # type: ignore[attr-defined]
                for user in dict.fromkeys(user_ids)}

    def log_sizes(self, user_ids: Sequence[str], *,
                  owner_subject: OwnerFilter = UNSCOPED) -> dict[str, tuple[int, int]]:
        """Each user's number of events and of numbered events (what a migration's loss
        check counts); a store that can counts without reading the events."""
        return {user: (len(log), sum(1 for e in log if e.sequence))
                for user, log in self.events_of_users(user_ids, owner_subject=owner_subject).items()}

    def events_by_ids(self, event_ids: Sequence[str]) -> dict[str, MemoryEvent]:
        """The stored events among ``event_ids`` (any owner), by id: a transfer's
        existence check and read-back for a batch (the default gets each)."""
        found = {}
        for event_id in dict.fromkeys(event_ids):
            event = self.get_event(event_id)  # type: ignore[attr-defined]
            if event is not None:
                found[event_id] = event
        return found

    def read_counters(self, user_ids: Sequence[str]) -> dict[str, int]:
        """Each user's sequence counter (0 where none, or where the store restores no
        numbers): read for a batch at once where the store can."""
        from backends.contract.capabilities import Capability, offers

        if not offers(self, Capability.RESTORE_EVENTS):
            return {user: 0 for user in user_ids}
        return {user: int(self.read_counter(user)) for user in dict.fromkeys(user_ids)}  # type: ignore[attr-defined]

    def raise_counters(self, values: Mapping[str, int]) -> None:
        """``raise_counter`` of each user to its value (never lowered), for a batch at
        once where the store can; nothing where it restores no numbers."""
        from backends.contract.capabilities import Capability, offers

        if offers(self, Capability.RESTORE_EVENTS):
            for user, value in values.items():
                if value > 0:
                    self.raise_counter(user, value)  # type: ignore[attr-defined]

    def restore_event_batch(self, events: Sequence[MemoryEvent]) -> set[str]:
        """``restore_events`` of a batch where one clash holds back only itself: returns
        the ids NOT written because the id (or the user's sequence number) is taken; the
        rest lands. The default tries the batch whole, then, when refused, each event."""
        from backends.errors import is_state_version_conflict

        if not events:
            return set()
        try:
            self.restore_events(list(events))  # type: ignore[attr-defined]
            return set()
        except Exception as exc:  # noqa: BLE001 - only a conflict is told apart
            if not is_state_version_conflict(exc) or len(events) == 1:
                if is_state_version_conflict(exc):
                    return {events[0].event_id}
                raise
        clashes: set[str] = set()
        for event in events:
            clashes |= self.restore_event_batch([event])
        return clashes

    def event_refs(self, user_id: str) -> Iterable[tuple[Any, ...]]:
        """Every event of a user id under any owner as ``(event_id, owner_subject,
        session_id, problem)``; a store that reads rows raw finds damaged ones too (the
        default lists what decodes)."""
        return [(e.event_id, e.owner_subject or "", e.session_id or "", None)
                for e in self.list_events(user_id)]  # type: ignore[attr-defined]

    def index_entries(self, user_id: str) -> dict[str, int]:
        """How many index entries of each kind a user id has, on a store that keeps its
        indexes apart from its events (Redis); none elsewhere."""
        return {}

    def drop_index_entries(self, user_id: str, event_ids: Sequence[str]) -> int:
        """Drop a user id's index entries that point at no event; nothing to drop where
        the indexes are the store's own."""
        return 0

    def iter_stored_events(self) -> Iterator[MemoryEvent]:
        """Every stored event that decodes, whether or not an index names it (the doctor's
        erasure-ledger check: a restored event must be found without its index entry).
        The default lists each user's log; a store whose indexes live apart from its
        events (Redis) reads the events themselves."""
        for user in sorted(self.user_ids() or ()):
            yield from self.list_events(user)  # type: ignore[attr-defined]

    def user_ids(self) -> set[str] | None:
        """Every user id with a log (the doctor's erasure-ledger check reads each), or
        None where the store cannot list them in one pass; the default asks the log
        shapes or the sessions' subjects."""
        from backends.contract.capabilities import Capability, offers

        if offers(self, Capability.EVENT_LOG_SHAPES):
            return {shape.user_id for shape in self.iter_log_shapes()}  # type: ignore[attr-defined]
        if offers(self, Capability.SUBJECTS_BY_SESSION):
            return {u for users in self.subjects_by_session().values()  # type: ignore[attr-defined]
                    for u in users}
        return None


@speaks_both_conventions
class AdapterDefaults:
    """An adapter's shortcuts, each with its correct default over ``iter_sessions``."""

    keeps_session_ttl: bool = False

    def iter_session_ids(self, *, owner_subject: OwnerFilter = UNSCOPED,
                         match: str | None = None) -> Iterator[str]:
        """The ids ``iter_sessions`` lists (under the owner filter and glob), in no set
        order; a store that can lists them without reading the rows."""
        for summary in self.iter_sessions(  # type: ignore[attr-defined]
                owner_subject=owner_subject, match=match):
            yield summary.session_id

    def change_feed(self) -> Any:
        """A feed of what changed (``drain()`` gives ``(session ids, user ids)`` touched
        since the last drain, or None when it may have lost messages), or None when the
        store has none: a live migration then scans versions."""
        return None

    def item_mirror_size(self) -> dict[str, int | None] | None:
        """How big the item mirror is (rows, evicted rows and, where cheap, bytes), or
        None where the adapter keeps none or cannot say."""
        return None


def _declarations(base: type) -> dict[str, bool]:
    return {name: value for name, value in vars(base).items() if isinstance(value, bool)}


def _shortcuts(base: type) -> list[str]:
    return [name for name, value in vars(base).items()
            if callable(value) and not name.startswith("_")]


def _view_class(base: Any) -> type:
    class View(base):
        """``inner`` with the defaults of ``base`` where it has no such member of its
        own; its own shortcuts and declarations are kept (only a real bool counts)."""

        def __init__(self, inner: Any) -> None:
            object.__setattr__(self, "_inner", inner)
            for name in _shortcuts(base):
                own = getattr(inner, name, None)
                if callable(own):
                    object.__setattr__(self, name, own)
            for name, default in _declarations(base).items():
                declared = getattr(inner, name, default)
                object.__setattr__(self, name, declared is not False if default
                                   else declared is True)

        def __getattr__(self, name: str) -> Any:
            return getattr(object.__getattribute__(self, "_inner"), name)

    View.__name__ = View.__qualname__ = f"Defaulted{base.__name__.replace('Defaults', '')}"
    return View


_VIEWS: dict[type, type] = {base: _view_class(base) for base in (StateStoreDefaults, EventStoreDefaults,
                                                AdapterDefaults)}


def _with(obj: Any, base: type) -> Any:
    if obj is None or isinstance(obj, base):
        return obj
    return _VIEWS[base](obj)


def state_defaults(store: Any) -> StateStoreDefaults:
    """``store`` with the state-store shortcuts (itself when it inherits them)."""
    return _with(store, StateStoreDefaults)


def event_defaults(store: Any) -> EventStoreDefaults:
    """``store`` with the event-store shortcuts (itself when it inherits them); None for
    an adapter without an event store."""
    return _with(store, EventStoreDefaults)


def adapter_defaults(adapter: Any) -> AdapterDefaults:
    """``adapter`` with the adapter shortcuts (itself when it inherits them)."""
    return _with(adapter, AdapterDefaults)
