"""A store's shape in one streaming pass: sessions per owner, blob sizes, idle ages, TTL
left, the largest sessions, the longest event logs, events per day, and what a prune
would reclaim; on a sharded deployment, the sessions and blob bytes of each shard and
their skew (the largest shard over the mean).

Memory is flat whatever the number of sessions: sizes and ages go into fixed
log-bucketed histograms (quantiles within one bucket, at most 12.5% of the value), the
largest sessions and longest logs into heaps of ``top`` entries, owners into a
space-saving summary of ``owner_slots`` counters (exact while there are no more owners
than slots, then flagged approximate). The idle rule is prune's own: idle ages come from
:func:`backends.ops.prune.write_clock` and the reclaim preview is
:func:`backends.ops.prune.find_idle` reading the same stream, so ``stats --idle-for``
counts exactly what ``sessions prune --idle-for`` would delete.
"""

from __future__ import annotations

import heapq
import math
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Iterator

from backends.contract import UNSCOPED, Capability, OwnerFilter, as_utc, offers, adapter_defaults

#: values below this get a bucket each; above, 8 buckets per power of two
_EXACT = 16
_SUB = 8


def _bucket(value: int) -> int:
    if value < _EXACT:
        return max(value, 0)
    exp = value.bit_length() - 1
    return _EXACT + (exp - 4) * _SUB + ((value >> (exp - 3)) & (_SUB - 1))


def _bounds(index: int) -> tuple[int, int]:
    """[low, high) of a bucket."""
    if index < _EXACT:
        return index, index + 1
    exp, sub = divmod(index - _EXACT, _SUB)
    exp += 4
    width = 1 << (exp - 3)
    low = (_SUB + sub) * width
    return low, low + width


@dataclass
class Histogram:
    """Counts of non-negative integers in log buckets, with exact count, sum, min and max."""

    buckets: dict[int, int] = field(default_factory=dict)
    count: int = 0
    total: int = 0
    low: int | None = None
    high: int | None = None

    def add(self, value: float) -> None:
        number = max(int(value), 0)
        index = _bucket(number)
        self.buckets[index] = self.buckets.get(index, 0) + 1
        self.count += 1
        self.total += number
        self.low = number if self.low is None else min(self.low, number)
        self.high = number if self.high is None else max(self.high, number)

    def quantile(self, q: float) -> int | None:
        """The value at quantile ``q`` (0..1): the middle of its bucket, kept within the
        observed min and max (exact below 16)."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                low, high = _bounds(index)
                middle = low if high - low == 1 else (low + high - 1) // 2
                return min(max(middle, self.low or 0), self.high or 0)
        return self.high

    def bins(self) -> list[tuple[int, int, int]]:
        """(low, high, count) per power of two (0, 1, 2-3, 4-7, ...): what a chart draws."""
        merged: dict[int, int] = {}
        for index, number in self.buckets.items():
            low, _high = _bounds(index)
            octave = low.bit_length()  # 0 -> 0, 1 -> 1, 2..3 -> 2, 4..7 -> 3
            merged[octave] = merged.get(octave, 0) + number
        out = []
        for octave in sorted(merged):
            low = 0 if octave == 0 else 1 << (octave - 1)
            high = 1 if octave == 0 else 1 << octave
            out.append((low, high, merged[octave]))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count, "sum": self.total, "min": self.low, "max": self.high,
            "mean": round(self.total / self.count, 1) if self.count else None,
            "p50": self.quantile(0.5), "p90": self.quantile(0.9), "p99": self.quantile(0.99),
            "histogram": [{"low": lo, "high": hi, "count": n} for lo, hi, n in self.bins()],
        }


class SpaceSaving:
    """The most frequent keys in bounded memory (Metwally et al.'s space-saving): exact
    while no more than ``slots`` distinct keys were seen."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.counts: dict[str, int] = {}
        self.overflowed = False

    def add(self, key: str) -> None:
        if key in self.counts:
            self.counts[key] += 1
        elif len(self.counts) < self.slots:
            self.counts[key] = 1
        else:
            self.overflowed = True
            smallest = min(self.counts, key=self.counts.__getitem__)
            self.counts[key] = self.counts.pop(smallest) + 1

    def top(self, n: int) -> list[tuple[str, int]]:
        return sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


class _Top:
    """The ``n`` largest (value, key) pairs seen."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.heap: list[tuple[int, str, Any]] = []
        self._tie = itertools.count()

    def add(self, value: int, key: str, payload: Any = None) -> None:
        item = (value, key, payload)
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, item)
        elif item[:2] > self.heap[0][:2]:
            heapq.heapreplace(self.heap, item)

    def items(self) -> list[tuple[int, str, Any]]:
        return sorted(self.heap, key=lambda t: (-t[0], t[1]))


UNOWNED = "(no owner)"


@dataclass
class StoreStats:
    """What one pass found. ``to_dict`` is the ``-o json`` document and the report's input."""

    backend: str
    top: int = 10
    owner_slots: int = 10_000
    sessions: int = 0
    damaged: int = 0
    no_expiry: int = 0
    idle_unknown: int = 0
    idle_note: str = ""
    blob_bytes: Histogram = field(default_factory=Histogram)
    idle_seconds: Histogram = field(default_factory=Histogram)
    ttl_seconds: Histogram = field(default_factory=Histogram)
    owners: SpaceSaving = field(init=False)
    largest: _Top = field(init=False)
    sampled: bool = False
    # events
    events_note: str = ""
    users: int = 0
    events: int = 0
    event_counts: Histogram = field(default_factory=Histogram)
    longest_logs: _Top = field(init=False)
    events_per_day: dict[str, int] = field(default_factory=dict)
    #: the item mirror's rows, evicted rows and bytes (None: the backend has no mirror)
    item_mirror: dict[str, Any] | None = None
    #: a sharded deployment's shards, in the routing's order: name, database, redacted
    #: URI, and the sessions (and their blob bytes) the routing reads on each
    shards: list[dict[str, Any]] | None = None
    # prune preview
    idle_for_s: int | None = None
    reclaim_sessions: int = 0
    reclaim_bytes: int = 0

    def __post_init__(self) -> None:
        self.owners = SpaceSaving(self.owner_slots)
        self.largest = _Top(self.top)
        self.longest_logs = _Top(self.top)

    def observe(self, summary: Any, idle_s: int | None) -> None:
        self.sessions += 1
        if (summary.extra or {}).get("damaged"):
            self.damaged += 1
        self.owners.add(summary.owner_subject or UNOWNED)
        size = int(summary.blob_size or 0)
        self.blob_bytes.add(size)
        self.largest.add(size, summary.session_id, summary.owner_subject)
        if summary.ttl_seconds is None:
            self.no_expiry += 1
        else:
            self.ttl_seconds.add(summary.ttl_seconds)
        if idle_s is None:
            self.idle_unknown += 1
        else:
            self.idle_seconds.add(idle_s)

    def observe_log(self, shape: Any) -> None:
        self.users += 1
        self.events += int(shape.events)
        self.event_counts.add(int(shape.events))
        self.longest_logs.add(int(shape.events), shape.user_id)
        for day, count in shape.per_day.items():
            self.events_per_day[day] = self.events_per_day.get(day, 0) + int(count)

    def to_dict(self) -> dict[str, Any]:
        owners = self.owners.top(self.top)
        data: dict[str, Any] = {
            "backend": self.backend,
            "sampled": self.sampled,
            "sessions": self.sessions,
            "damaged": self.damaged,
            "owners": {"distinct": None if self.owners.overflowed else len(self.owners.counts),
                       "approximate": self.owners.overflowed,
                       "top": [{"owner": o, "sessions": n} for o, n in owners]},
            "blob_bytes": self.blob_bytes.to_dict(),
            "idle_seconds": self.idle_seconds.to_dict(),
            "idle_unknown": self.idle_unknown,
            "ttl_seconds": self.ttl_seconds.to_dict(),
            "no_expiry": self.no_expiry,
            "largest": [{"session_id": sid, "owner_subject": owner, "bytes": size}
                        for size, sid, owner in self.largest.items()],
            "events": {"users": self.users, "events": self.events,
                       "per_user": self.event_counts.to_dict(),
                       "longest_logs": [{"user_id": uid, "events": n}
                                        for n, uid, _ in self.longest_logs.items()],
                       "per_day": dict(sorted(self.events_per_day.items()))},
        }
        data["item_mirror"] = self.item_mirror
        if self.shards is not None:
            data["shards"] = {
                "count": len(self.shards),
                "skew": {"sessions": skew([s["sessions"] for s in self.shards]),
                         "blob_bytes": skew([s["blob_bytes"] for s in self.shards])},
                "per_shard": [dict(s) for s in self.shards],
            }
        if self.idle_note:
            data["idle_note"] = self.idle_note
        if self.events_note:
            data["events"]["note"] = self.events_note
        if self.idle_for_s is not None:
            data["prune_preview"] = {"idle_for_s": self.idle_for_s,
                                     "sessions": self.reclaim_sessions,
                                     "bytes": self.reclaim_bytes}
        return data


def skew(values: list[int]) -> float | None:
    """The largest of ``values`` over their mean (1.0: even; None: nothing to spread)."""
    total = sum(values)
    if not values or total <= 0:
        return None
    return round(max(values) / (total / len(values)), 3)


def _shard_tally(adapter: Any) -> tuple[list[dict[str, Any]] | None, Callable[[Any], None]]:
    """Per-shard rows for a sharded deployment (an adapter with a sharded ``placement``,
    the SQL backends'), and the observer that adds a session to its shard's row; (None, a
    no-op) for any other store."""
    placement = getattr(adapter, "placement", None)
    if placement is None or not getattr(placement, "sharded", False):
        return None, lambda summary: None
    shards = [{"shard": f"shard {i}", "database": placement.label(db),
               "uri": db.config.display_uri, "sessions": 0, "blob_bytes": 0}
              for i, db in enumerate(placement.shards)]

    def tally(summary: Any) -> None:
        row = shards[placement.index_of(summary.session_id)]
        row["sessions"] += 1
        row["blob_bytes"] += int(summary.blob_size or 0)

    return shards, tally


class _Tap:
    """The adapter as prune sees it, with every summary it enumerates also handed to
    ``observe``: prune's own selection reads the one stream stats reads."""

    def __init__(self, adapter: Any, observe: Callable[[Any], None], wrap: Callable[[Iterable[Any]], Iterable[Any]]) -> None:
        self._adapter = adapter
        self._observe = observe
        self._wrap = wrap
        self.name = getattr(adapter, "name", "?")

    def state_store(self) -> Any:
        return self._adapter.state_store()

    def iter_sessions(self, **options: Any) -> Iterator[Any]:
        for summary in self._wrap(self._adapter.iter_sessions(**options)):
            self._observe(summary)
            yield summary


def collect(adapter: Any, *, owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
            batch_size: int = 500, idle_for: timedelta | None = None,
            assume_ttl: int | None = None, top: int = 10, sample: int | None = None,
            with_events: bool = True, now: datetime | None = None,
            progress: Callable[[Iterable[Any]], Iterable[Any]] = lambda it: it) -> StoreStats:
    """One pass over the sessions (then, where the event store offers it, one over the
    users' event logs). ``sample``: stop after that many sessions (the cheap view
    ``--watch`` refreshes). ``progress`` wraps the session stream (a bar on a TTY)."""
    from backends.errors import UnsupportedOperation
    from backends.ops.prune import PruneResult, find_idle, write_clock

    stats = StoreStats(backend=str(getattr(adapter, "name", "?")), top=top)
    stats.shards, tally = _shard_tally(adapter)
    now = now or datetime.now(timezone.utc)
    try:
        clock = write_clock(adapter, assume_ttl=assume_ttl)
    except UnsupportedOperation as exc:
        why = str(exc).replace("; nothing was deleted", "")
        if idle_for is not None:  # a reclaim preview without a write time would be a guess
            raise UnsupportedOperation(why) from exc
        clock = None
        stats.idle_note = why

    def observe(summary: Any) -> None:
        idle_s = None
        if clock is not None:
            written = clock(summary, now)
            if written is not None:
                idle_s = max(int((now - as_utc(written)).total_seconds()), 0)
        stats.observe(summary, idle_s)
        tally(summary)

    def limited(stream: Iterable[Any]) -> Iterable[Any]:
        stream = itertools.islice(stream, sample) if sample is not None else stream
        return progress(stream)

    options = dict(owner_subject=owner_subject, match=match, batch_size=batch_size)
    if idle_for is not None:
        stats.idle_for_s = int(idle_for.total_seconds())
        result = PruneResult()
        tap = _Tap(adapter, observe, limited)
        for idle in find_idle(tap, idle_for, result, now=now, assume_ttl=assume_ttl, **options):
            stats.reclaim_sessions += 1
            stats.reclaim_bytes += int(getattr(idle.summary, "blob_size", 0) or 0)
    else:
        for summary in limited(adapter.iter_sessions(**options)):
            observe(summary)
    stats.sampled = sample is not None
    size = adapter_defaults(adapter).item_mirror_size() if sample is None else None  # a scan
    if size is not None:
        stats.item_mirror = dict(size)
    if with_events:
        _collect_events(adapter, stats, batch_size, sample)
    return stats


def _collect_events(adapter: Any, stats: StoreStats, batch_size: int, sample: int | None) -> None:
    events = adapter.event_store()
    if events is None:
        stats.events_note = f"backend {stats.backend!r} keeps no event log"
        return
    if not offers(events, Capability.EVENT_LOG_SHAPES):
        stats.events_note = (f"backend {stats.backend!r} cannot list its users' event logs "
                             "in one pass: event figures not collected")
        return
    shapes = events.iter_log_shapes(batch_size=batch_size)
    for shape in itertools.islice(shapes, sample) if sample is not None else shapes:
        stats.observe_log(shape)
