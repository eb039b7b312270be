"""How many sessions a store holds, and its sessions in an order an operator asks for
(``sessions count``, ``sessions list --sort``).

A count is the store's own (one query, its ``count_sessions``) where it offers one,
else the listing counted as it streams (memory stays flat either way). Sorting needs
the whole listing before the first row: with a limit only the ``limit`` best rows are
kept (a heap, memory bounded by the limit); without one every summary is held.
"""

from __future__ import annotations

import heapq
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator

from backends.contract import UNSCOPED, OwnerFilter, as_utc, state_defaults
from backends.errors import UnsupportedOperation
from backends.transfer.progress import store_count

#: --sort keys, each with what "first" means
SORT_KEYS = {
    "idle": "longest since the last write first",
    "size": "largest blob first",
    "version": "highest version first",
}

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def sessions_in_id_order(adapter: Any, *, owner_subject: OwnerFilter = UNSCOPED,
                         match: str | None = None, batch_size: int = 500) -> Iterator[Any]:
    """The listing in session-id order, as SQL, Mongo and memory list: a store whose
    enumeration has no order of its own (Redis SCAN) takes ``ordered=True`` and pays for
    it with the matching key names held (``sessions list``, completion)."""
    from backends.registry import accepts_keyword

    ordered = {"ordered": True} if accepts_keyword(adapter.iter_sessions, "ordered") else {}
    return adapter.iter_sessions(owner_subject=owner_subject, match=match,
                                 batch_size=batch_size, **ordered)


def count_sessions(adapter: Any, *, owner_subject: OwnerFilter = UNSCOPED,
                   match: str | None = None, batch_size: int = 500) -> tuple[int, bool]:
    """(sessions, counted by the store). The store's count where its state store offers
    one, else the enumeration streamed and counted."""
    counted = store_count(adapter, owner_subject=owner_subject, match=match)
    if counted is not None:
        return counted, True
    summaries = adapter.iter_sessions(owner_subject=owner_subject, match=match,
                                      batch_size=batch_size)
    return sum(1 for _ in summaries), False


def sort_key(adapter: Any, by: str) -> Callable[[Any], tuple]:
    """The key that puts a summary where ``--sort by`` wants it (ties by session id).
    ``idle`` needs a stored write time: refused on a store that keeps none."""
    if by == "idle":
        if not state_defaults(adapter.state_store()).records_write_time:
            raise UnsupportedOperation(
                f"backend {getattr(adapter, 'name', '?')!r} keeps no time of a session's last "
                "write, so --sort idle cannot order its sessions; sort by size or version")
        # sessions without a write time go last
        return lambda s: (s.updated_at is None,
                          as_utc(s.updated_at) if s.updated_at is not None else _EPOCH,
                          s.session_id)
    if by == "size":
        return lambda s: (-int(s.blob_size), s.session_id)
    if by == "version":
        return lambda s: (-int(s.version), s.session_id)
    raise ValueError(f"unknown sort key {by!r}: one of {', '.join(SORT_KEYS)}")


def sorted_sessions(adapter: Any, summaries: Iterable[Any], by: str,
                    limit: int | None = None) -> list[Any]:
    """``summaries`` in ``--sort`` order, at most ``limit`` (kept in a heap of that size)."""
    key = sort_key(adapter, by)
    if limit is not None:
        return heapq.nsmallest(limit, summaries, key=key)
    return sorted(summaries, key=key)
