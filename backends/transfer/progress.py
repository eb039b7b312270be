"""Progress of a transfer, phase by phase, reported through one callback; drawing it is
the caller's business (the CLI draws a bar on a terminal), so nothing here renders.

``phases(label, total)`` is a context manager the use case enters for each phase (the
whole pass over the archive or the source) and that yields ``tick(n)``, called as work is
done; ``total`` is None where the amount is not known before the phase runs. The labels
are the phases' names, in the order a transfer runs them.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Iterable, Iterator, Optional

from backends.contract import UNSCOPED, OwnerFilter, state_defaults

Tick = Callable[[int], None]
Phases = Callable[[str, Optional[int]], ContextManager[Tick]]

#: reading the source and staging it (copy) or writing it to the archive (export)
STAGING = "reading source"
EXPORTING = "exporting"
#: every checksum, the trailer and duplicate ids (import, and copy's staged archive)
VERIFYING = "verifying archive"
#: the checks a write runs, on every record, before the first write
CHECKING = "checking records"
#: does the target already hold any record (before the first write)
CONFLICTS = "checking conflicts"
WRITING = "writing"
READING_BACK = "reading back"
READING_BACK_EVENTS = "reading back events"


def _ignore(_n: int) -> None:
    return None


@contextlib.contextmanager
def quiet(_label: str, _total: Optional[int]) -> Iterator[Tick]:
    """The phases of a caller that shows none."""
    yield _ignore


def counted(items: Iterable[Any], tick: Tick) -> Iterator[Any]:
    """``items`` unchanged, ticking once per item (after the consumer took it)."""
    for item in items:
        yield item
        tick(1)


def store_count(adapter: Any, *, owner_subject: OwnerFilter = UNSCOPED,
                match: str | None = None) -> int | None:
    """How many sessions an enumeration with these filters yields, where the state store
    counts them itself (its ``count_sessions``: one query); None elsewhere, so a
    progress total is never an enumeration of its own."""
    counted = state_defaults(adapter.state_store()).count_sessions(owner_subject=owner_subject,
                                                                  match=match)
    return None if counted is None else int(counted)
