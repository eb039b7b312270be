"""Ending a live migration: ``cutover`` (a final pass, a quiet window, a full verify, a
receipt) or ``abort`` (remove what this migration wrote to the target, and only that).

Cutover claims success only when the target is identical to the source by content and
no source write happened during the final window: the window runs from the start of the
final pass to the end of a last scan after the verify, and any session or event that
moved on the source in it means writers are still active.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from backends.contract import Capability, UNSCOPED, offers
from backends.errors import is_state_version_conflict
from backends.migrate.passes import LiveMigration, PassResult
from backends.migrate.state import MigrationState
from backends.migrate.verify import LiveVerifyReport, verify_live

RECEIPT_FORMAT = "semvec-migrate-receipt/1"


@dataclass
class CutoverResult:
    final_pass: PassResult
    report: LiveVerifyReport
    moved_after: int = 0
    ok: bool = False
    reason: str = ""
    receipt: dict[str, Any] = field(default_factory=dict)


def quiet_check(mig: LiveMigration) -> int:
    """Sessions and events that moved on the source since the state last recorded them
    (read only: nothing is copied); what the erasure ledger withholds never moves."""
    moved = 0
    state = mig.state
    from backends.transfer.batch_reads import chunks

    for chunk in chunks(mig.source.iter_sessions(owner_subject=mig.scope, match=mig.match), 256):
        rows = state.sessions([s.session_id for s in chunk])
        for summary in chunk:
            row = rows.get(summary.session_id)
            if row is not None and row.state == "conflict":
                continue
            if row is None and mig.withholds(summary):
                continue  # the erasure ledger keeps it off the target
            if row is None or row.src_version != summary.version or row.digest != summary.blob_sha256:
                moved += 1
    events = mig.source.event_store() if mig._events_src is not None else None
    if events is not None:
        for user in state.users():
            recorded = state.events_of(user)
            moved += sum(1 for e in events.list_events(user, owner_subject=mig.scope)
                         if e.event_id not in recorded and not mig.withholds_event(e))
    return moved


def cutover(mig: LiveMigration, *, quiet_seconds: float = 2.0, ttl_tolerance: float = 60.0,
            switch: dict[str, str] | None = None) -> CutoverResult:
    started = time.time()
    mig.state.claim()  # no run of the same migration may write meanwhile
    final = mig.run_pass("final", all_users=True)
    if quiet_seconds > 0:
        time.sleep(quiet_seconds)
    report = verify_live(mig.source, mig.target, mig.state, owner_subject=mig.scope,
                         match=mig.match, ttl_tolerance=ttl_tolerance)
    result = CutoverResult(final, report)
    result.moved_after = quiet_check(mig)
    if report.source_moved or result.moved_after:
        result.reason = ("writers are still active: the source changed during the final window "
                         f"({report.source_moved + result.moved_after} change(s)); stop them and "
                         "run cutover again")
    elif not report.ok:
        result.reason = (f"source and target differ ({report.different} difference(s), "
                         f"{len(report.conflicts)} conflict(s))")
    else:
        result.ok = True
    result.receipt = {
        "format": RECEIPT_FORMAT, "ok": result.ok, "reason": result.reason,
        "source": mig.state.meta("label.source"), "target": mig.state.meta("label.target"),
        "started_at": started, "finished_at": time.time(),
        "sessions": report.sessions_compared, "sessions_matched": report.sessions_matched,
        "events": report.events_compared, "events_matched": report.events_matched,
        "users": report.users, "sessions_digest": report.sessions_digest,
        "events_digest": report.events_digest,
        "conflicts": [{"session_id": s, "why": w} for s, w in report.conflicts],
        "foreign_sessions_kept": report.foreign, "differences": report.differences,
        "switch": switch or {},
    }
    if result.ok:
        mig.state.set_meta(phase="cut-over")
    return result


def write_receipt(path: str, receipt: dict[str, Any]) -> None:
    """The receipt, atomically (temp + fsync + rename, 0600)."""
    from backends.archive import atomic_output

    with atomic_output(path) as out:
        out.write((json.dumps(receipt, indent=2, sort_keys=True) + "\n").encode())


# -- abort --------------------------------------------------------------------------------


@dataclass
class AbortPlan:
    sessions: list[tuple[str, int]] = field(default_factory=list)  # (sid, version we wrote)
    events: list[str] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)  # (what, why)
    removed_sessions: int = 0
    removed_events: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"sessions": len(self.sessions), "events": len(self.events),
                "removed_sessions": self.removed_sessions, "removed_events": self.removed_events,
                "kept": [{"what": w, "why": y} for w, y in self.kept]}


def abort_plan(target: Any, state: MigrationState) -> AbortPlan:
    """What abort would remove: each session whose target row is still one this migration
    wrote (its version and digest), each event it wrote; the rest is kept and said."""
    from backends.archive.format import sha256_hex
    from backends.transfer.batch_reads import batch_loader, chunks

    plan = AbortPlan()
    load = batch_loader(target)
    for chunk in chunks(state.rows(), 64):
        chunk = [r for r in chunk if r.state in ("copied", "intent")]
        if not chunk:
            continue
        for row, st in zip(chunk, load([r.sid for r in chunk], UNSCOPED)):
            if st is None:
                continue
            if st.version == row.tgt_version and sha256_hex(st.blob) == row.digest:
                plan.sessions.append((row.sid, st.version))
            elif row.want_version is not None and st.version == row.want_version and \
                    sha256_hex(st.blob) == row.want_digest:
                plan.sessions.append((row.sid, st.version))
            else:
                plan.kept.append((f"session {row.sid!r}", "changed on the target since this "
                                  "migration wrote it"))
    store = target.event_store()
    rows = [(e, u) for e, u, s in state.event_rows() if s in ("copied", "intent")]
    if rows and not offers(store, Capability.DELETE_EVENT):
        plan.kept.append((f"{len(rows)} event(s)", f"backend {target.name!r} cannot delete "
                          "single events; remove them with 'semvecctl erase' per user"))
    elif rows:
        plan.events = [e for e, _ in rows if store.get_event(e) is not None]
    if rows:
        plan.kept.append(("users' sequence counters", "a counter is never lowered; the next "
                          "append continues after the highest copied sequence"))
    return plan


def apply_abort(target: Any, state: MigrationState, plan: AbortPlan) -> AbortPlan:
    """Remove what ``plan`` lists, each session version-checked (a row changed since the
    plan is kept and said), and mark the state aborted."""
    state.claim()  # no run of the same migration may write meanwhile
    store = target.state_store()
    for sid, version in plan.sessions:
        try:
            if store.delete(sid, expected_version=version):
                plan.removed_sessions += 1
        except Exception as exc:
            if not is_state_version_conflict(exc):
                raise
            plan.kept.append((f"session {sid!r}", "changed on the target during the abort"))
        with state.transaction() as db:
            state.mark_deleted(db, sid)
    events = target.event_store()
    for event_id in plan.events:
        if events.delete_event(event_id):
            plan.removed_events += 1
    state.set_meta(phase="aborted")
    return plan


def switch_settings(backend: str, display_uri: str, *, adapter: str | None = None) -> dict[str, str]:
    """The settings that point the engine at the target (the URI already redacted)."""
    from backends.info import known

    settings = {"SEMVEC_SESSION_BACKEND": backend}
    info = known(backend)
    if adapter is None and info is not None and info.uri_env and display_uri != "-":
        settings[info.uri_env[0]] = display_uri
    return settings
