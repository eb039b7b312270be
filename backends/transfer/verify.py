"""After a write, read the target back and compare it with what should be there.

The comparison is per session: blob sha256, owner, pending message, version (when the
target could preserve it) and, when items travelled, the live item ids and texts (and
embeddings within float32 rounding: pgvector stores float4), and the drift-exempt flag
where the target stores one. Sessions the import skipped because they already existed
(or had expired) are counted apart, not as mismatches. Events are compared one by one
(every field; the sequence where the target keeps sequences) and each restored user's
counter must have reached the archived one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from backends.archive.format import sha256_hex
from backends.contract import Capability, StoredDigest, UNSCOPED, event_defaults, offers
from backends.transfer.batch_reads import chunks, digest_loader
from backends.transfer.loss import keeps_sequences, state_store_member

MAX_EXAMPLES = 20
#: sessions read back per round trip, events per read of the target's events
SESSION_CHECK_BATCH = 500
EVENT_CHECK_BATCH = 2000


@dataclass
class VerifyReport:
    compared: int = 0
    matched: int = 0
    skipped: int = 0
    mismatched: int = 0
    examples: list[str] = field(default_factory=list)
    source_count: int | None = None
    events_compared: int = 0
    events_matched: int = 0
    events_skipped: int = 0

    @property
    def ok(self) -> bool:
        return self.mismatched == 0

    def note(self, reason: str) -> None:
        self.mismatched += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(reason)


@dataclass(frozen=True)
class Expected:
    session_id: str
    blob_sha256: str
    version: int
    owner_subject: str | None
    pending_message: str | None
    items: Sequence[Any] | None = None  # MemoryItem; None = not compared
    drift_exempt: bool | None = None  # None = not compared


def _same_embedding(a: Sequence[float] | None, b: Sequence[float] | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if len(a) != len(b):
        return False
    return all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-7) for x, y in zip(a, b))


def item_difference(expected: Sequence[Any], actual: Sequence[Any]) -> str | None:
    want = {i.item_id: i for i in expected}
    have = {i.item_id: i for i in actual}
    if set(want) != set(have):
        missing = sorted(set(want) - set(have))
        extra = sorted(set(have) - set(want))
        return f"live items differ (missing {missing[:3]}, unexpected {extra[:3]})"
    for item_id, item in want.items():
        other = have[item_id]
        if (item.text, item.tier, tuple(item.tiers), dict(item.unit)) != (
                other.text, other.tier, tuple(other.tiers), dict(other.unit)):
            return f"item {item_id!r} differs"
        if not _same_embedding(item.embedding, other.embedding):
            return f"item {item_id!r} has a different embedding"
    return None


def compare(target: Any, expected: Expected, state: Any, *,
            versions_preserved: bool) -> str | None:
    """The first difference between ``state`` (the target's row, read unscoped) and
    ``expected``, or None."""
    sid = expected.session_id
    if state is None:
        return f"{sid!r}: missing on the target"
    digest = state.blob_sha256 if isinstance(state, StoredDigest) else sha256_hex(state.blob)
    if digest != expected.blob_sha256:
        return f"{sid!r}: blob sha256 differs"
    if state.owner_subject != expected.owner_subject:
        return f"{sid!r}: owner differs"
    if (state.pending_message or None) != (expected.pending_message or None):
        return f"{sid!r}: pending message differs"
    if versions_preserved and state.version != expected.version:
        return f"{sid!r}: version {state.version} on the target, {expected.version} expected"
    if expected.drift_exempt is not None:
        is_exempt = state_store_member(target, Capability.DRIFT_STATUS)
        exempt = (state.drift_exempt if isinstance(state, StoredDigest) and is_exempt is not None
                  else None if is_exempt is None else bool(is_exempt(sid)))
        if exempt is None or exempt != expected.drift_exempt:
            return f"{sid!r}: drift_exempt differs"
    if expected.items is not None and offers(target, Capability.LIVE_ITEMS):
        diff = item_difference(expected.items, list(target.iter_live_items(sid)))
        if diff:
            return f"{sid!r}: {diff}"
    return None


def check_all(report: VerifyReport, target: Any, expected: Iterable[Expected], *,
              skipped: set[str], versions_preserved: bool,
              compare_skipped: frozenset[str] | set[str] = frozenset()) -> None:
    """Compare every expected session with the target, reading the target's rows a chunk
    per round trip where it can batch reads (see :mod:`backends.transfer.batch_reads`).

    Sessions in ``skipped`` are counted apart and not compared, except those also in
    ``compare_skipped`` (a copy's "already there": the source is the truth, so a target
    row that differs from it is a mismatch, said as one that was skipped)."""
    load_many = digest_loader(target)  # the drift flag with the row, hashed where it can
    for chunk in chunks(expected, SESSION_CHECK_BATCH):
        report.compared += len(chunk)
        wanted = [e for e in chunk if e.session_id not in skipped or e.session_id in compare_skipped]
        report.skipped += sum(1 for e in chunk if e.session_id in skipped)
        if not wanted:
            continue
        states = load_many([e.session_id for e in wanted], UNSCOPED)
        for want, state in zip(wanted, states):
            reason = compare(target, want, state, versions_preserved=versions_preserved)
            if reason is None:
                report.matched += 1
            elif want.session_id in skipped:
                report.note(f"{reason} (skipped as already there; the target was left as it "
                            "is and differs from the source)")
            else:
                report.note(reason)


def event_difference(want: Any, have: Any, *, sequences: bool) -> str | None:
    """The first field in which the target's event differs from the archived one."""
    if have is None:
        return f"event {want.event_id}: missing on the target"
    fields = ["user_id", "content", "owner_subject", "session_id", "source_event_id"]
    if sequences and want.sequence:
        fields.append("sequence")
    for name in fields:
        if (getattr(want, name) or "") != (getattr(have, name) or ""):
            return f"event {want.event_id}: {name} differs"
    if dict(want.meta) != dict(have.meta):
        return f"event {want.event_id}: meta differs"
    if abs((want.created_at - have.created_at).total_seconds()) > 1e-3:
        return f"event {want.event_id}: created_at differs"
    if not _same_embedding(tuple(want.embedding), tuple(have.embedding)):
        return f"event {want.event_id}: embedding differs"
    return None


def check_events(report: VerifyReport, store: Any, batches: Iterable[tuple[Sequence[Any], Any]], *,
                 skipped: set[str], tick: Callable[[int], None] | None = None) -> None:
    """Compare archived events with the target's event store. ``batches`` yields
    ``(events, counter)`` where counter is ``(user_id, value)`` for a user log, else None.
    Events in ``skipped`` (already on the target) are counted apart; ``tick(n)`` is
    called as each batch's events are compared (progress)."""
    sequences = keeps_sequences(store)
    bulk = event_defaults(store)
    tops: dict[str, int] = {}
    pending: list[Any] = []

    def compare_pending() -> None:  # one read of the target per EVENT_CHECK_BATCH events
        have = bulk.events_by_ids([e.event_id for e in pending])
        for event in pending:
            reason = event_difference(event, have.get(event.event_id), sequences=sequences)
            if reason is None:
                report.events_matched += 1
                tops[event.user_id] = max(tops.get(event.user_id, 0), event.sequence)
            else:
                report.note(reason)
        pending.clear()

    for events, counter in batches:
        for event in events:
            report.events_compared += 1
            if event.event_id in skipped:
                report.events_skipped += 1
                continue
            pending.append(event)
        if len(pending) >= EVENT_CHECK_BATCH:
            compare_pending()
        if tick is not None and events:
            tick(len(events))
        if counter is not None:
            tops[counter[0]] = max(tops.get(counter[0], 0), counter[1])
    compare_pending()
    if not sequences:
        return
    users = sorted(tops)
    for part in chunks(users, EVENT_CHECK_BATCH):  # one read of counters per batch
        counters = bulk.read_counters(part)
        for user in part:
            have, top = int(counters.get(user, 0)), tops[user]
            if have < top:
                report.note(f"the counter of user {user!r} is {have} on the target, below {top}")
