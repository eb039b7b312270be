"""Reading a chunk of sessions per round trip where the backend allows it.

The contract reads one session per call; an export reads every session, so on a network
store the round trips dominate (on Redis about two thirds of the export time). An adapter
or its state store MAY offer ``load_full_many(session_ids, *, owner_subject)`` returning
one ``LoadedState | None`` per id, in order (``backends.contract.BatchStateReader``); it
is used when present (Redis pipelines it). Every other backend falls back to
``load_full`` per session.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

from backends.contract import Capability, LoadedState, OwnerFilter, offers

BatchLoader = Callable[[Sequence[str], OwnerFilter], list[LoadedState | None]]

#: sessions read per round trip (where the backend can batch reads)
READ_CHUNK = 64


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
