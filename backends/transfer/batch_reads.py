"""Reading a chunk of sessions (or a page of a user's log) per round trip.

The contract reads one session per call; an export reads every session, so on a network
store the round trips dominate (on Redis about two thirds of the export time). An adapter
or its state store MAY offer ``load_full_many(session_ids, *, owner_subject)`` returning
one ``LoadedState | None`` per id, in order (``backends.contract.BatchStateReader``); it
is used when present (Redis pipelines it). Every other backend falls back to
``load_full`` per session. A verification reads digests instead
(:func:`digest_loader`: ``load_digests_many``, ``backends.contract.BatchDigestReader``,
where offered: the store hashes, the drift flag comes with the row). :func:`iter_user_log`
pages a user's event log the same way (export and the operator's event-log commands
share it).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

from backends.archive.format import sha256_hex
from backends.contract import Capability, LoadedState, OwnerFilter, StoredDigest, offers
from backends.transfer.loss import state_store_member

BatchLoader = Callable[[Sequence[str], OwnerFilter], list[LoadedState | None]]
DigestLoader = Callable[[Sequence[str], OwnerFilter], list[StoredDigest | None]]

#: sessions read per round trip (where the backend can batch reads)
READ_CHUNK = 64
#: events read per round trip from a store that assigns sequences
EVENT_PAGE = 500


def iter_user_log(store: Any, user_id: str, owner_subject: OwnerFilter,
                  page: int = EVENT_PAGE) -> Iterator[Any]:
    """A user's events under the owner filter, a page per round trip: in sequence order
    from a store that assigns sequences; newest first from one that keeps none (the
    engine's SQL layout), paged where it offers ``iter_events``, else in one query."""
    if not offers(store, Capability.ASSIGNS_SEQUENCES):
        if offers(store, Capability.PAGED_EVENTS):
            yield from store.iter_events(user_id, owner_subject=owner_subject, page=page)
        else:
            yield from store.list_events(user_id, owner_subject=owner_subject)
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


def _one_by_one(store: Any) -> BatchLoader:
    def load(ids: Sequence[str], owner_subject: OwnerFilter) -> list[LoadedState | None]:
        return [store.load_full(sid, owner_subject=owner_subject) for sid in ids]

    return load


def batch_loader(adapter: Any) -> BatchLoader:
    """The fastest faithful way to read many sessions of ``adapter``."""
    store = adapter.state_store()
    for owner in (adapter, store):
        if offers(owner, Capability.BATCH_READS):
            many = owner.load_full_many
            return lambda ids, scope: list(many(list(ids), owner_subject=scope))
    return _one_by_one(store)


def digest_loader(adapter: Any, *, drift: bool) -> DigestLoader:
    """The fastest faithful way to read many sessions of ``adapter`` as digests. Where
    no holder batches them, the rows are read (:func:`batch_loader`) and hashed here
    and, with ``drift``, each flag is read on its own (False where the store keeps
    none)."""
    store = adapter.state_store()
    for owner in (adapter, store):
        if offers(owner, Capability.BATCH_DIGESTS):
            many = owner.load_digests_many
            return lambda ids, scope: list(many(list(ids), owner_subject=scope))
    load = batch_loader(adapter)
    is_exempt = state_store_member(adapter, Capability.DRIFT_STATUS) if drift else None

    def read(ids: Sequence[str], scope: OwnerFilter) -> list[StoredDigest | None]:
        return [None if st is None else StoredDigest(
            sha256_hex(st.blob), st.version, st.owner_subject, st.pending_message,
            bool(is_exempt(sid)) if is_exempt is not None else False)
            for sid, st in zip(ids, load(ids, scope))]

    return read
