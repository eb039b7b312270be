"""Reading one user's compliance log for operators: stream it, count it, archive it.

Filters (owner, session) are applied before any limit. A store that assigns sequence
numbers is read a page at a time in sequence order; the engine's SQL layout keeps no
sequence, so its log is read the way the engine lists it, newest first, a page at a time
where the store offers ``iter_events`` (ours does), else in one query. Memory is bounded
by the page. An export is an archive of one user's log (its events with their sequence
numbers, in parts of a bounded size, then the counter) that ``sessions import`` reads
back, written as it is read; a log without sequence numbers is archived oldest first
(``created_at``, then event id), the order an import numbers it in, which needs the
whole filtered log in memory to sort (only on such a store).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import IO, Any, Callable, Iterable, Iterator

from backends.archive import ArchiveWriter
from backends.archive.format import log_order
from backends.contract import UNSCOPED, OwnerFilter, event_defaults
from backends.errors import UnsupportedOperation
from backends.transfer.batch_reads import EVENT_PAGE, iter_user_log
from backends.transfer.export import make_header
from backends.transfer.loss import counter_reader

#: events read per round trip from a store that assigns sequences
PAGE = EVENT_PAGE


def require_event_store(adapter: Any) -> Any:
    """The adapter's event store, or UnsupportedOperation naming the backend."""
    store = adapter.event_store()
    if store is None:
        raise UnsupportedOperation(f"backend {getattr(adapter, 'name', '?')!r} keeps no "
                                   "compliance events (it has no event store)")
    return store


def order_of(store: Any) -> str:
    """How :func:`iter_events` orders this store's log, in words."""
    if event_defaults(store).assigns_sequences:
        return "sequence order"
    return "newest first (this store keeps no sequence numbers, as the engine lists them)"


def iter_events(store: Any, user_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
                session_id: str | None = None, limit: int | None = None,
                page: int = PAGE) -> Iterator[Any]:
    """The user's events under the owner and session filters, then at most ``limit``."""
    events = iter_user_log(store, user_id, owner_subject, page)
    if session_id is not None:
        events = (e for e in events if e.session_id == session_id)
    return itertools.islice(events, limit) if limit is not None else events


def stored_count(store: Any, user_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
                 session_id: str | None = None) -> int | None:
    """The store's own count of the user's events when nothing is filtered (one query),
    else None: what a progress total may cost."""
    if owner_subject is UNSCOPED and session_id is None and callable(
            getattr(store, "count_for_user", None)):
        return int(store.count_for_user(user_id))
    return None


def count_events(store: Any, user_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
                 session_id: str | None = None) -> int:
    """The store's own count when nothing is filtered, else a streamed count."""
    counted = stored_count(store, user_id, owner_subject=owner_subject, session_id=session_id)
    if counted is not None:
        return counted
    return sum(1 for _ in iter_events(store, user_id, owner_subject=owner_subject,
                                      session_id=session_id))


def event_row(event: Any, *, full: bool = False) -> dict[str, Any]:
    """An event as a JSON-safe row; the embedding is summarised unless ``full``."""
    row = event.to_dict()
    row["sequence"] = event.sequence
    if not full:
        row["dimensions"] = len(row.pop("embedding"))
    return row


@dataclass
class EventExport:
    events: int = 0
    counter: int | None = None
    digest: str = ""


def write_user_archive(adapter: Any, stream: IO[bytes], user_id: str, *, source_uri: str,
                       owner_subject: OwnerFilter = UNSCOPED, session_id: str | None = None,
                       progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None
                       ) -> EventExport:
    """Write one user's (filtered) log as an archive ``sessions import`` reads back.

    The counter is read after the events (it only grows, so it covers every one of them).
    Events are streamed a part at a time from a store that assigns sequences; a store
    that keeps none is sorted oldest first, so its filtered log is held to sort it."""
    store = require_event_store(adapter)
    header = make_header(adapter, source_uri, with_items=False, owner_subject=owner_subject,
                         match=None, users=(user_id,))
    if session_id is not None:
        header = replace(header, filters={**header.filters, "session_id": session_id})
    events: Iterable[Any] = iter_events(store, user_id, owner_subject=owner_subject,
                                        session_id=session_id)
    if progress is not None:
        events = progress(events)
    if not event_defaults(store).assigns_sequences:  # read newest first: archive oldest first
        events = sorted(events, key=log_order)
    read = counter_reader(adapter)
    writer = ArchiveWriter(stream, header)
    count, counter = writer.add_user_log(
        user_id, events, lambda top: max(int(read(user_id)), top) if read is not None else None)
    return EventExport(events=count, counter=counter, digest=writer.finish())


def engine_readers_note(store: Any, user_id: str, shown: int) -> str | None:
    """A note where the engine's own event readers would answer otherwise than we do: on
    a sharded SQL deployment they open the primary only (ENGINE-WIRE section 7)."""
    counter = getattr(store, "primary_only_count", None)
    seen = counter(user_id) if counter is not None else None
    if seen is None:
        return None
    return (f"note: the engine's own event readers open the primary only on a sharded "
            f"deployment: of the user's events they see {seen} (those appended outside a "
            f"turn); {shown} shown here, from every database")
