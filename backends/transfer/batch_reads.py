"""Reading a chunk of sessions (or a page of a user's log) per round trip.

The contract reads one session per call; an export reads every session, so on a network
store the round trips dominate (on Redis about two thirds of the export time). Every
state store has ``load_full_many(session_ids, *, owner_subject)`` (one ``LoadedState |
None`` per id, in order; ``backends.contract.StateStoreDefaults``): ``load_full`` per
session by default, one round trip where the store overrides it (Redis pipelines it). A
verification reads digests instead (``load_digests_many``: the store hashes where it can,
the drift flag comes with the row). :func:`iter_user_log` pages a user's event log the
same way (export and the operator's event-log commands share it).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

from backends.contract import LoadedState, OwnerFilter, StoredDigest, event_defaults, state_defaults

BatchLoader = Callable[[Sequence[str], OwnerFilter], list[LoadedState | None]]
DigestLoader = Callable[[Sequence[str], OwnerFilter], list[StoredDigest | None]]

#: sessions read per round trip (where the backend can batch reads); the events of a
#: chunk's users are read with it (one or two round trips), so a chunk is a transfer's batch
READ_CHUNK = 500
#: events read per round trip from a store that assigns sequences
EVENT_PAGE = 500


def iter_user_log(store: Any, user_id: str, owner_subject: OwnerFilter,
                  page: int = EVENT_PAGE) -> Iterator[Any]:
    """A user's events under the owner filter, a page per round trip: in sequence order
    from a store that assigns sequences; newest first from one that keeps none (the
    engine's SQL layout), through its ``iter_events`` (paged where the store pages)."""
    events = event_defaults(store)
    if not events.assigns_sequences:
        yield from events.iter_events(user_id, owner_subject=owner_subject, page=page)
        return
    after = 0
    while True:
        batch = store.list_events(user_id, owner_subject=owner_subject, after_sequence=after,
                                  limit=page)
        yield from batch
        if len(batch) < page:
            return
        after = max(e.sequence for e in batch)


def chunks(iterable: Iterable[Any], size: int = READ_CHUNK) -> Iterator[list[Any]]:
    """``iterable`` in lists of ``size`` (the last one shorter), read lazily."""
    chunk: list[Any] = []
    for value in iterable:
        chunk.append(value)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def batch_loader(adapter: Any) -> BatchLoader:
    """The fastest faithful way to read many sessions of ``adapter``."""
    many = state_defaults(adapter.state_store()).load_full_many
    return lambda ids, scope: list(many(list(ids), owner_subject=scope))


def digest_loader(adapter: Any) -> DigestLoader:
    """The fastest faithful way to read many sessions of ``adapter`` as digests (with
    each row's drift flag, False where the store keeps none)."""
    many = state_defaults(adapter.state_store()).load_digests_many
    return lambda ids, scope: list(many(list(ids), owner_subject=scope))
