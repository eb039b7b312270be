"""Verify a live migration by content: is the target what the source holds now?

Per session: blob sha256, version, owner, pending message, drift-exempt flag (where both
stores keep one) and expiry (within ``ttl_tolerance`` seconds, where both keep one). Per
user: every event (every field, the sequence where both keep sequences), the log's order,
and the counter (the target's must have reached the source's). A difference is
classified: the source moved since this migration last copied it (a writer is still
active: the next pass copies it), or the target differs (a real difference). Sessions
someone else wrote on the target under an id we copy are conflicts (kept, reported);
sessions on the target that the source never had and we never wrote are listed as
foreign (kept, never a difference). What the erasure ledger withholds (the passes never
write it: :mod:`backends.transfer.withhold`) is counted as withheld, never as missing.

Digests are order-independent (a sum of per-row hashes), so source and target digests
can be compared whatever order each store enumerates in; both go into the receipt.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from backends.archive.format import log_order
from backends.contract import (Capability, OwnerFilter, StoredDigest, UNSCOPED, offers, adapter_defaults,
                               event_defaults)
from backends.transfer.batch_reads import chunks, digest_loader
from backends.transfer.export import drift_reader
from backends.migrate.state import MigrationState
from backends.transfer.loss import keeps_expiry, keeps_sequences, session_event_source, state_store_member
from backends.transfer.verify import event_difference
from backends.transfer.withhold import SourceLogs, Withholding

MAX_LISTED = 50
#: sessions compared per round trip to the target
CHUNK = 500
#: users whose logs (and counters) are read together on each side
USER_CHUNK = 1000
_MOD = 1 << 256


class _Withheld:
    """The ledgers of both stores, and the source's logs, read once for a verify."""

    def __init__(self, source: Any, target: Any, owner_subject: OwnerFilter) -> None:
        self.rule = Withholding.load(target, source)
        events = session_event_source(source) if self.rule else None
        self.logs = SourceLogs(events, owner_subject) if events is not None else None

    def session(self, summary: Any) -> bool:
        return self.logs is not None and self.rule.withholds_session(
            self.logs.session_log(summary.session_id), summary.updated_at)

    def event(self, event: Any) -> bool:
        return self.logs is not None and self.rule.withholds_event(event)


class _SetDigest:
    def __init__(self) -> None:
        self.total = 0

    def add(self, *parts: Any) -> None:
        h = hashlib.sha256("\x00".join(str(p) for p in parts).encode("utf-8", "surrogateescape"))
        self.total = (self.total + int.from_bytes(h.digest(), "big")) % _MOD

    def hexdigest(self) -> str:
        return f"{self.total:064x}"


@dataclass
class LiveVerifyReport:
    sessions_compared: int = 0
    sessions_matched: int = 0
    events_compared: int = 0
    events_matched: int = 0
    users: int = 0
    #: differences because the source moved after the last pass (writers active)
    source_moved: int = 0
    differences: list[str] = field(default_factory=list)
    different: int = 0
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    sessions_digest: str = ""
    events_digest: str = ""
    sampled: bool = False
    #: sessions and events the erasure ledger withholds (absent on the target by design)
    withheld: int = 0
    withheld_events: int = 0

    @property
    def ok(self) -> bool:
        return not self.different and not self.source_moved and not self.conflicts

    def note(self, reason: str, *, moved: bool = False) -> None:
        if moved:
            self.source_moved += 1
            reason += " (moved on the source since the last pass)"
        else:
            self.different += 1
        if len(self.differences) < MAX_LISTED:
            self.differences.append(reason)

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["conflicts"] = [{"session_id": s, "why": w} for s, w in self.conflicts]
        data["ok"] = self.ok
        return data


def verify_live(source: Any, target: Any, state: MigrationState, *,
                owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                sample: int | None = None, ttl_tolerance: float = 60.0,
                batch_size: int = 500) -> LiveVerifyReport:
    """Compare (see module). The target is read a chunk of ids per round trip, as
    digests with their drift flags where it offers that (``load_digests_many``); the
    source's flags come with its listing where it reports them."""
    report = LiveVerifyReport(sampled=sample is not None)
    report.conflicts = state.conflicts()
    conflicted = {sid for sid, _ in report.conflicts}
    both_drift = (state_store_member(source, Capability.DRIFT_STATUS) is not None
                  and state_store_member(target, Capability.DRIFT_STATUS) is not None)
    source_exempt = drift_reader(source)
    load_target = digest_loader(target)
    both_ttl = keeps_expiry(target) and keeps_expiry(source)
    src_digest, dst_digest = _SetDigest(), _SetDigest()
    summaries = source.iter_sessions(owner_subject=owner_subject, match=match, batch_size=batch_size)
    seen_sids: list[str] = []
    state.begin_seen()
    withheld = _Withheld(source, target, owner_subject)
    for chunk in chunks(summaries, CHUNK):
        if sample is not None:
            chunk = chunk[: max(0, sample - report.sessions_compared)]
            if not chunk:
                break
        state.add_seen(s.session_id for s in chunk)
        have = load_target([s.session_id for s in chunk], UNSCOPED)
        differing: list[tuple[Any, str]] = []
        for summary, st in zip(chunk, have):
            sid = summary.session_id
            seen_sids.append(sid)
            if st is None and withheld.session(summary):
                report.withheld += 1
                continue
            report.sessions_compared += 1
            src_digest.add(sid, summary.version, summary.blob_sha256, summary.owner_subject)
            if st is not None:
                dst_digest.add(sid, st.version, st.blob_sha256, st.owner_subject)
            if sid in conflicted:
                continue
            why = _session_difference(summary, st)
            if why is None and st is not None and both_drift \
                    and source_exempt(summary) != st.drift_exempt:
                why = "drift_exempt differs"
            if why is None and both_ttl and summary.ttl_seconds is not None:
                there = target.describe_session(sid)
                ttl = None if there is None else there.ttl_seconds
                if ttl is None or abs(ttl - summary.ttl_seconds) > ttl_tolerance:
                    why = f"expiry differs (source {summary.ttl_seconds}s, target {ttl}s)"
            if why is None:
                report.sessions_matched += 1
            else:
                differing.append((summary, why))
        _note_differences(report, state, differing)
    if sample is None:
        for row in state.unseen_copied():  # we copied it, the source no longer has it
            if target.state_store().current_version(row.sid, owner_subject=UNSCOPED) is not None:
                report.note(f"session {row.sid!r}: on the target, deleted on the source", moved=True)
        report.foreign = _foreign(source, target, state)
    report.sessions_digest = src_digest.hexdigest()
    if dst_digest.hexdigest() != src_digest.hexdigest() and report.ok:
        report.note("the session digests of source and target differ")
    _verify_events(source, target, state, report, owner_subject,
                   seen_sids if sample is not None else None, withheld)
    return report


def _note_differences(report: LiveVerifyReport, state: MigrationState,
                      differing: list[tuple[Any, str]]) -> None:
    """Each difference, as moved (the source changed after this migration last copied
    the session: the next pass copies it) or not; only these rows of the state file are
    read."""
    rows = state.sessions([summary.session_id for summary, _ in differing])
    for summary, why in differing:
        row = rows.get(summary.session_id)
        moved = (row is None or row.src_version != summary.version
                 or row.digest != summary.blob_sha256)
        report.note(f"session {summary.session_id!r}: {why}", moved=moved)


def _session_difference(summary: Any, st: StoredDigest | None) -> str | None:
    if st is None:
        return "missing on the target"
    if st.blob_sha256 != summary.blob_sha256:
        return "blob sha256 differs"
    if st.version != summary.version:
        return f"version {st.version} on the target, {summary.version} on the source"
    if st.owner_subject != summary.owner_subject:
        return "owner differs"
    if (st.pending_message or None) != (summary.pending_message or None):
        return "pending message differs"
    return None


def _foreign(source: Any, target: Any, state: MigrationState) -> list[str]:
    """Target sessions this migration never wrote and the source does not hold."""
    found = []
    source_store = source.state_store()
    for chunk in chunks(_session_ids(target), CHUNK):
        ours = state.tracked(chunk)
        for sid in chunk:
            if sid not in ours and source_store.current_version(sid, owner_subject=UNSCOPED) is None:
                found.append(sid)
    return sorted(found)


def _session_ids(adapter: Any) -> Iterator[str]:
    """Every session id ``adapter`` lists, without reading its rows where it can."""
    return adapter_defaults(adapter).iter_session_ids(owner_subject=UNSCOPED)


def _verify_events(source: Any, target: Any, state: MigrationState, report: LiveVerifyReport,
                   owner_subject: OwnerFilter, sampled: list[str] | None,
                   withheld: _Withheld) -> None:
    src = session_event_source(source)
    dst = target.event_store()
    if src is None or dst is None:
        return
    sequences = keeps_sequences(dst) and keeps_sequences(src)
    users = set(state.users())
    if sampled is not None:
        users = set()
        for sid in sampled:
            users.update(src.session_subjects(sid))
    recorded_conflicts = set(state.event_conflicts())
    digest = _SetDigest()
    counters = offers(src, Capability.RESTORE_EVENTS) and offers(dst, Capability.RESTORE_EVENTS)
    src_bulk, dst_bulk = event_defaults(src), event_defaults(dst)
    for part in chunks(sorted(users), USER_CHUNK):  # each side read once per chunk of users
        logs = src_bulk.events_of_users(part, owner_subject=owner_subject)
        targets = dst_bulk.events_of_users(part)
        recorded = state.events_of_users(part)
        src_counters = src_bulk.read_counters(part) if counters and sequences else {}
        dst_counters = dst_bulk.read_counters(part) if counters and sequences else {}
        for user in part:
            report.users += 1
            there = {e.event_id: e for e in targets[user]}
            _verify_user(report, digest, user, logs[user], there, recorded[user], withheld,
                         recorded_conflicts, sequences)
            want, have = int(src_counters.get(user, 0)), int(dst_counters.get(user, 0))
            if have < want:
                report.note(f"user {user!r}: counter {have} on the target, {want} on the source",
                            moved=True)
    report.events_digest = digest.hexdigest()


def _verify_user(report: LiveVerifyReport, digest: _SetDigest, user: str, log: list[Any],
                 there: dict[str, Any], ours: dict[str, str], withheld: _Withheld,
                 recorded_conflicts: set[str], sequences: bool) -> None:
    """One user's source log against the target's (both read by the caller)."""
    kept = [e for e in log if e.event_id in there or not withheld.event(e)]
    report.withheld_events += len(log) - len(kept)
    log = kept
    for event in log:
        report.events_compared += 1
        digest.add(event.event_id, event.user_id, event.session_id,
                   hashlib.sha256(event.content.encode("utf-8", "surrogateescape")).hexdigest())
        if event.event_id in recorded_conflicts:
            continue
        why = event_difference(event, there.get(event.event_id), sequences=sequences)
        if why is None:
            report.events_matched += 1
        else:
            report.note(why, moved=ours.get(event.event_id) != "copied")
    source_ids = {e.event_id for e in log}
    for event_id in sorted(set(there) - source_ids):
        if ours.get(event_id) == "copied":
            report.note(f"event {event_id}: on the target, not on the source", moved=True)
    if sequences:  # the order of the log: the same ids in the same sequence order
        mine = [e.event_id for e in sorted((there[i] for i in source_ids if i in there),
                                           key=log_order)]
        theirs = [e.event_id for e in sorted(log, key=log_order)]
        if mine != theirs:
            report.note(f"user {user!r}: the event log's order differs")
