"""What a consistency audit reports: one :class:`Finding` per problem.

A finding says what is wrong, where (the key, row or collection), why it matters and
how to repair it. A repair that cannot lose data (drop an index entry whose event is
gone, raise a counter, index an unindexed event) is attached as ``fix`` with a
``verify`` that re-reads the same place, so ``doctor --fix --apply`` can perform it and
then prove it held. Everything else is advice for a human; the audit never writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
import re
from typing import Any, Callable, Iterator


class Severity(str, Enum):
    """``error``: the engine will fail or lose data; ``warning``: it works but drifts;
    ``info``: worth knowing, nothing breaks."""

    error = "error"
    warning = "warning"
    info = "info"


class Section(str, Enum):
    """Where a finding comes from: the stored data, what the engine requires of the
    deployment, or semvecctl's own advice (kept apart so advice never reads as a fault)."""

    data = "data"
    engine = "engine requirements"
    advice = "semvecctl recommendations"


@dataclass
class Finding:
    """One problem in one place. ``fix``/``verify`` are set only for safe repairs."""

    check: str
    severity: Severity
    where: str
    what: str
    why: str
    repair: str
    section: Section = Section.data
    fix: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    verify: Callable[[], bool] | None = field(default=None, repr=False, compare=False)
    #: '' while only found; 'planned', 'repaired', 'still present', 'failed: …' under --fix
    outcome: str = ""
    #: the stored event the finding is about, when it is about one (so a repair that would
    #: make an erased subject's event visible again can be withheld: ops.doctor)
    event_id: str | None = field(default=None, repr=False, compare=False)

    @property
    def safe(self) -> bool:
        return self.fix is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "check": self.check, "severity": self.severity.value, "section": self.section.value,
            "where": self.where, "what": self.what, "why": self.why, "repair": self.repair,
            "safe_repair": self.safe,
        }
        if self.outcome:
            out["outcome"] = self.outcome
        return out


def apply_repair(finding: Finding) -> Finding:
    """Perform a safe repair, then re-audit its place: ``repaired`` only when the problem
    is gone on a fresh read. An unsafe finding is left untouched."""
    if finding.fix is None:
        finding.outcome = "left (needs a human)"
        return finding
    try:
        finding.fix()
    except Exception as exc:  # noqa: BLE001 - reported per finding, the audit goes on
        finding.outcome = f"failed: {type(exc).__name__}: {exc}".splitlines()[0]
        return finding
    gone = finding.verify() if finding.verify is not None else True
    finding.outcome = "repaired" if gone else "still present"
    return finding


def plan(finding: Finding) -> Finding:
    """``--fix`` without ``--apply``: say what would be done, do nothing."""
    finding.outcome = "would repair" if finding.safe else "left (needs a human)"
    return finding


def blocking(finding: Finding) -> bool:
    """Does this finding make the audit fail (exit 1)? Errors do, unless repaired."""
    return finding.severity is Severity.error and finding.outcome != "repaired"


def chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    """Fixed-size lists from a stream, so every pass holds at most one batch."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class SequenceWalk:
    """One user's sequence numbers, fed in ascending order: reports each duplicate as it
    is seen and the gaps (counted, the first five named) at the end, and keeps the
    highest number for the counter check. Holds a few integers, however long the log."""

    def __init__(self, user: str, place: str, why_duplicate: str) -> None:
        self.user, self.place, self.why_duplicate = user, place, why_duplicate
        self.previous: int | None = None
        self.top = 0
        self.gaps: list[str] = []
        self.missing = 0

    def feed(self, seq: int, member: Any) -> Finding | None:
        previous, self.previous, self.top = self.previous, seq, max(self.top, seq)
        if previous is not None and seq == previous:
            return Finding(
                "events.duplicate-sequence", Severity.error, f"{self.place} sequence {seq}",
                f"two events of user {self.user!r} share sequence {seq} (one is {member})",
                self.why_duplicate,
                "renumber by hand after deciding the true order (not automatic: it "
                "rewrites events)")
        if previous is not None and seq > previous + 1:
            self.missing += seq - previous - 1
            if len(self.gaps) < 5:
                lo, hi = previous + 1, seq - 1
                self.gaps.append(str(lo) if lo == hi else f"{lo}-{hi}")
        return None

    def gap_finding(self) -> Finding | None:
        if not self.missing:
            return None
        more = " …" if self.missing > len(self.gaps) else ""
        return Finding(
            "events.sequence-gap", Severity.info, self.place,
            f"user {self.user!r} is missing {self.missing} sequence number(s): "
            f"{', '.join(self.gaps)}{more}",
            "the engine deletes single events by id (ENGINE-WIRE 6b), which leaves "
            "exactly such gaps: not damage on its own",
            "nothing to do if those events were deleted on purpose; otherwise compare "
            "with the last export or the audit trail")


def unreadable_state(where: str, session_id: Any, damage: str) -> Finding:
    """A session row that fails the store's strict read (``damage``: what and why)."""
    from backends.contract.session_ids import shown

    return Finding(
        "state.unreadable", Severity.error, where,
        f"session {shown(str(session_id))} fails a strict read: {damage}",
        "the engine refuses to load it (CorruptState); a best-effort read would save over "
        "the real state",
        "restore the session from an archive (sessions import) or delete it")


def unreadable_event(where: str, problems: str) -> Finding:
    return Finding(
        "event.unreadable", Severity.error, where,
        f"event the engine cannot read: {problems}",
        "the engine parses every event of a user when it lists them: one unreadable "
        "event makes that user's whole log unreadable",
        "fix the field from a backup, or export and erase the event")


def unknown_name(check: str, where: str, what: str) -> Finding:
    """Something in the engine's namespace that is none of its layout: reported only."""
    return Finding(check, Severity.info, where, what,
                   "another writer shares the prefix; semvecctl leaves it alone",
                   "find its writer; doctor never touches it")


#: the prefixes of the ids a load run and a conformance run write (removed afterwards
#: unless the run was killed): ``semvec-load-<hex>-`` and ``semvec-conf-<hex>-``
RUN_PREFIX = re.compile(r"(semvec-(load|conf)-[0-9a-f]+-)")


class Leftovers:
    """Ids seen under a load-run or conformance-run prefix, counted per run; one warning
    per run at the end, naming the prefix and the command that removes it."""

    def __init__(self, where: str, cleanup_hint: Callable[[str], str]) -> None:
        self.where = where
        self.cleanup_hint = cleanup_hint
        self.runs: dict[str, list[int]] = {}  # prefix -> [ids seen, highest load index]

    def see(self, name: str) -> bool:
        """Count ``name`` (a session or user id) if it is a run's; True when it is."""
        found = RUN_PREFIX.match(name)
        if found is None:
            return False
        prefix = found.group(1)
        entry = self.runs.setdefault(prefix, [0, -1])
        entry[0] += 1
        tail = name[len(prefix):]
        if tail[:1] in ("s", "u") and tail[1:].isdigit():
            entry[1] = max(entry[1], int(tail[1:]))
        return True

    def findings(self) -> Iterator[Finding]:
        for prefix in sorted(self.runs):
            seen, top = self.runs[prefix]
            if prefix.startswith("semvec-load-"):
                repair = (f"semvecctl load cleanup --prefix {prefix} --sessions "
                          f"{max(top + 1, 1)} --uri URI --yes")
                kind = "a load run (semvecctl load run)"
            else:
                repair = self.cleanup_hint(prefix)
                kind = "a conformance run (semvecctl conformance run)"
            yield Finding(
                "leftover.run-data", Severity.warning, f"{self.where} prefix {prefix}",
                f"{seen} key(s)/row(s) under {prefix}, left by {kind} that did not "
                "finish its cleanup",
                "test data in a live store: listings, exports and counts include it",
                repair)


def topology_findings(details: dict[str, Any], where: str, follow: str) -> Iterator[Finding]:
    """What a health report's replication facts mean for the engine: a server that follows
    a primary (``details["primary"]``) refuses the engine's writes (an error; ``follow``
    says how to reach the primary instead); a primary's ``replication`` line, and the
    ``sentinel`` line when there is one, are worth knowing (info); a lone server's
    "no replica" is no finding (most stores run so, and health says it)."""
    if details.get("primary"):
        yield Finding("deploy.replica", Severity.error, where,
                      f"a read-only copy of {details['primary']}: "
                      f"{details.get('replication', 'it follows a primary')}",
                      "every write of the engine is refused here", follow, Section.engine)
        return
    if details.get("replication") and (details.get("replicas") or details.get("standbys")):
        yield Finding("deploy.replication", Severity.info, where, details["replication"],
                      "what a promotion of a replica keeps is what reached it",
                      "health --require-replicated says whether acknowledged writes are "
                      "on a second server", Section.advice)
    if details.get("loss_bound") and details.get("replicas"):
        yield Finding("deploy.loss-bound", Severity.info, where,
                      f"what a failover can lose: {details['loss_bound']}",
                      "the engine's client connects to one URL and sends no WAIT: every "
                      "turn it has acknowledged inside that window is gone after a failover",
                      "min-replicas-to-write 1 with min-replicas-max-lag N bounds it to N s "
                      "(health --require-bounded-loss N checks it)", Section.advice)
    if details.get("sentinel"):
        yield Finding("deploy.sentinel", Severity.info, where, details["sentinel"],
                      "the sentinels name the primary the store is", "-", Section.advice)
