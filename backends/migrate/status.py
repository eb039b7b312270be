"""``migrate status``: what the state file says, as one value (a row or a dict), so the
CLI renders it as a table, JSON, or a watch view refreshing it.

Read from the state file only (it never touches either store): lag is "as of the last
pass": the changes that pass found and has not yet written (intent rows), and the time
since that pass began (a change newer than that is not seen yet).

Counts are truthful after any interruption, SIGKILL included: each session is counted once
(an unfolded journal's repeated entries are not counted twice), ``copied`` is the sessions
the target holds a copy of (a newer version announced does not take one away), and
``remaining`` is ``total - copied``: the total is the source's count taken when the bulk
pass started (``source_total``: where the source counts itself; for a reshard, its moves)
until the bulk pass has seen every session, then every session the file tracks. Without
such a count while the bulk pass runs, total and remaining are unknown (None), never a
guess.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from backends.migrate.state import MigrationState


@dataclass(frozen=True)
class MigrationStatus:
    phase: str
    source: str
    target: str
    sessions_copied: int
    #: every session to copy (None while unknown) and how many of them have no copy yet
    sessions_total: int | None
    sessions_remaining: int | None
    #: announced and never copied (a changed session already copied is in the lag only)
    sessions_pending: int
    sessions_deleted: int
    conflicts: int
    events_copied: int
    events_pending: int
    passes: int
    last_pass: str | None
    last_pass_changed: int | None
    lag_sessions: int
    lag_age_seconds: float | None
    rate_per_second: float | None
    eta_seconds: float | None
    cutover_possible: bool
    why_not: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_row(self) -> dict[str, Any]:
        """The table's columns (a watch view redraws these)."""
        def num(value: float | None, unit: str = "") -> str:
            return "-" if value is None else f"{value:.1f}{unit}"

        unknown = f"unknown (at least {self.sessions_pending})"  # announced, not yet copied
        return {"phase": self.phase, "copied": self.sessions_copied,
                "remaining": unknown if self.sessions_remaining is None
                else self.sessions_remaining,
                "total": "unknown" if self.sessions_total is None else self.sessions_total,
                "conflicts": self.conflicts,
                "events": self.events_copied, "lag": self.lag_sessions,
                "lag age": num(self.lag_age_seconds, "s"), "rate": num(self.rate_per_second, "/s"),
                "eta": num(self.eta_seconds, "s"),
                "cutover": "possible" if self.cutover_possible else f"no: {self.why_not}"}


def migration_status(state: MigrationState) -> MigrationStatus:
    passes = state.passes(limit=20)
    done = [p for p in passes if p["finished"] is not None]
    last = passes[0] if passes else None
    counts = state.session_counts()
    pending = counts["intent"]  # every announced write: the lag
    events_pending = state.event_count("intent")
    rate = None
    timed = [p for p in done if p["copied"] and p["finished"] > p["started"]]
    if timed:
        rate = sum(p["copied"] for p in timed) / sum(p["finished"] - p["started"] for p in timed)
    lag = pending
    age = None if last is None else max(0.0, time.time() - last["started"])
    conflicts = counts["conflict"] + len(state.event_conflicts())
    copied = counts["copied"]
    tracked = copied + counts["uncopied"] + counts["conflict"]
    counted = state.meta("source_total")
    total: int | None = tracked if state.meta("bulk_done") == "1" else (
        None if counted is None else max(int(counted), tracked))
    remaining = None if total is None else total - copied
    left = pending if remaining is None else max(remaining, pending)
    phase = state.phase
    why = ""
    if phase in ("cut-over", "aborted"):
        why = f"the migration is {phase}"
    elif not done:
        why = "no pass has finished yet"
    elif state.meta("bulk_done") != "1":
        why = "the bulk pass has not finished"
    elif pending or events_pending:
        why = f"{pending + events_pending} change(s) not yet copied"
    elif conflicts:
        why = f"{conflicts} conflict(s) on the target"
    return MigrationStatus(
        phase=phase, source=state.meta("label.source") or "?",
        target=state.meta("label.target") or "?",
        sessions_copied=copied, sessions_total=total, sessions_remaining=remaining,
        sessions_pending=counts["uncopied"], sessions_deleted=counts["deleted"], conflicts=conflicts,
        events_copied=state.event_count("copied"), events_pending=events_pending,
        passes=len(state.passes(limit=1_000_000)),
        last_pass=None if last is None else last["kind"],
        last_pass_changed=None if not done else done[0]["changed"],
        lag_sessions=lag, lag_age_seconds=age,
        rate_per_second=rate, eta_seconds=(left / rate) if rate and left else (0.0 if rate else None),
        cutover_possible=not why, why_not=why,
    )
