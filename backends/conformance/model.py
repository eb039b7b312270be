"""Result types of a conformance run: per case, per group, and the whole report.

Kept free of any adapter or driver import so the CLI, the JUnit writer and the pytest
plugin can read a report without paying for anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class Status:
    """Outcome of one case (and, aggregated, of one group)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    NOT_APPLICABLE = "not-applicable"
    SKIPPED = "skipped"
    #: A finding beyond the published contract (e.g. NaN accepted in an embedding):
    #: reported, never counted against the level or the exit status.
    ADVISORY = "advisory"
    #: A failure the run's known-failures list names, with its reason (see ``known``):
    #: not counted against the level with known divergences, counted in the strict one.
    EXPECTED_FAILURE = "expected-failure"

    ALL = (PASSED, FAILED, ERROR, NOT_APPLICABLE, SKIPPED, ADVISORY, EXPECTED_FAILURE)
    BAD = (FAILED, ERROR)


class Level:
    """How far a backend conforms.

    FULL    every group that applies to the adapter passed (groups the adapter cannot
            have, e.g. ``events`` without an event store, are not applicable and do not
            count against it);
    PARTIAL every core group passed (contract, state, commit_turn, durability,
            concurrency, health, faults, isolation, failover) but an optional capability it offers (events,
            retrieval, indexes) failed, so the core session path is safe and the
            capability is not;
    FAILED  a core group failed: the backend must not hold sessions.
    NONE    nothing was certified: no case that ran passed (every case was not
            applicable, or nothing ran at all); never a success, the run exits 1.

    Advisory findings (beyond the published contract) never lower the level. With a
    known-failures list, a report has two levels: ``strict_level`` (the list ignored:
    every expected failure counts as the failure it is) and ``level`` (the known
    divergences accepted); without one they are the same.
    """

    FULL = "FULL"
    PARTIAL = "PARTIAL"
    FAILED = "FAILED"
    NONE = "NONE"


#: Groups whose failure makes a backend unfit to hold sessions at all.
CORE_GROUPS = ("contract", "state", "commit_turn", "durability", "concurrency", "health",
               "faults", "isolation", "failover")


class CaseFailure(AssertionError):
    """A behaviour the contract demands did not happen. ``check`` says what was being
    checked; ``expected`` and ``actual`` say what should and did happen."""

    def __init__(self, check: str, expected: Any, actual: Any) -> None:
        self.check = check
        self.expected = str(expected)
        self.actual = str(actual)
        super().__init__(f"{check}: expected {self.expected}, got {self.actual}")


class AdvisoryFinding(CaseFailure):
    """The adapter does something the published contract does not forbid but the suite
    advises against (it is known to break readers, e.g. NaN in a stored embedding).
    Reported as ``advisory``; the level and the exit status are not lowered."""


class ConformanceAdvisory(UserWarning):
    """Warned by the pytest faces for an advisory finding, so it shows in the summary
    without failing the test."""


class NotApplicable(Exception):
    """The adapter cannot have this behaviour (the reason says why); never a pass."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class SubCheckNotApplicable(NotApplicable):
    """One step of a case cannot be asked of this adapter (e.g. an "unowned rows only"
    read of an adapter that speaks the engine's ``scope=``, which has no such read).
    Inside :meth:`CaseContext.subcheck` it skips that step with a note; anywhere else it
    makes the whole case not applicable."""


@dataclass
class CaseResult:
    group: str
    case: str
    status: str
    duration: float = 0.0
    message: str = ""
    expected: str | None = None
    actual: str | None = None
    doc: str = ""
    #: Set by a known-failures list: the status before the list was applied, and the
    #: entry's reason and link.
    strict_status: str | None = None
    known_reason: str | None = None
    known_link: str | None = None
    #: What the case measured (the failover group's counts, its seed), when it did.
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def case_id(self) -> str:
        return f"{self.group}.{self.case}"

    @property
    def ok(self) -> bool:
        return self.status not in Status.BAD

    @property
    def strict(self) -> str:
        """The status with no known-failures list applied."""
        return self.strict_status or self.status

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "case": self.case,
            "status": self.status,
            "duration": round(self.duration, 4),
            "message": self.message,
            "expected": self.expected,
            "actual": self.actual,
            **({"strict_status": self.strict_status} if self.strict_status else {}),
            **({"known_reason": self.known_reason, "known_link": self.known_link}
               if self.known_reason else {}),
            **({"figures": dict(self.figures)} if self.figures else {}),
        }


@dataclass
class GroupResult:
    name: str
    status: str
    reason: str = ""
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return sum(c.duration for c in self.cases)

    def counts(self) -> dict[str, int]:
        counts = {s: 0 for s in Status.ALL}
        for case in self.cases:
            counts[case.status] += 1
        return counts

    @property
    def strict_status(self) -> str:
        return group_status(self.cases, strict=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "strict_status": self.strict_status,
            "reason": self.reason,
            "duration": round(self.duration, 4),
            "counts": self.counts(),
            "cases": [c.to_dict() for c in self.cases],
        }


def group_status(cases: list[CaseResult], *, strict: bool = False) -> str:
    """A group fails if any case failed or errored, passes if at least one case passed
    (or failed as a known divergence) and none failed, and is not applicable when none of
    its cases could run. ``strict``: the statuses before a known-failures list."""
    statuses = {c.strict if strict else c.status for c in cases}
    if Status.ERROR in statuses or Status.FAILED in statuses:
        return Status.FAILED
    if statuses & {Status.PASSED, Status.ADVISORY, Status.EXPECTED_FAILURE}:
        return Status.PASSED
    if Status.SKIPPED in statuses:
        return Status.SKIPPED
    return Status.NOT_APPLICABLE


def compute_level(groups: list[GroupResult], *, strict: bool = False) -> str:
    status = {g.name: (g.strict_status if strict else g.status) for g in groups}
    core_failed = any(name in CORE_GROUPS and s == Status.FAILED for name, s in status.items())
    if core_failed:
        return Level.FAILED
    if Status.FAILED in status.values():
        return Level.PARTIAL
    if Status.PASSED not in status.values():
        return Level.NONE  # nothing applicable: nothing certified, never FULL
    if Status.SKIPPED in status.values():
        return Level.PARTIAL
    return Level.FULL


@dataclass
class ConformanceReport:
    backend: str
    prefix: str
    started_at: datetime
    duration: float
    groups: list[GroupResult]
    selection: tuple[str, ...] | None = None
    target: str = ""
    #: What the adapter declares and offers (persistence, halves, operator seams).
    capabilities: dict[str, Any] = field(default_factory=dict)
    #: The known-failures list the run applied (origin, backend, cases), or None.
    known_failures: dict[str, Any] | None = None

    @property
    def level(self) -> str:
        """The level with the run's known divergences accepted (strict without a list)."""
        return compute_level(self.groups)

    @property
    def strict_level(self) -> str:
        """The level with every failure counted, known or not."""
        return compute_level(self.groups, strict=True)

    @property
    def ok(self) -> bool:
        """Every case that ran is fine AND something was certified: a run where nothing
        applies (level NONE) is not a pass."""
        return all(c.ok for c in self.cases) and self.level != Level.NONE

    @property
    def cases(self) -> list[CaseResult]:
        return [c for g in self.groups for c in g.cases]

    def group(self, name: str) -> GroupResult:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)

    def case(self, case_id: str) -> CaseResult:
        for c in self.cases:
            if c.case_id == case_id:
                return c
        raise KeyError(case_id)

    @property
    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.ok]

    def counts(self) -> dict[str, int]:
        counts = {s: 0 for s in Status.ALL}
        for case in self.cases:
            counts[case.status] += 1
        return counts

    def summary(self) -> str:
        counts = self.counts()
        parts = [f"{counts[s]} {s}" for s in Status.ALL if counts[s]]
        subset = f" (subset: {', '.join(self.selection)})" if self.selection else ""
        text = (f"conformance level {self.level} for backend {self.backend!r}{subset}: "
                f"{', '.join(parts) or 'nothing ran'} in {self.duration:.2f}s")
        if self.known_failures is not None:
            known = counts[Status.EXPECTED_FAILURE]
            text += (f"; strict level {self.strict_level} ({known} known divergence(s) "
                     f"accepted from {self.known_failures.get('origin')})")
        if self.level == Level.NONE:
            text += ("; nothing applicable, nothing certified (run the groups this "
                     "backend has, or give it the capabilities the cases need)")
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "target": self.target,
            "level": self.level,
            "strict_level": self.strict_level,
            "ok": self.ok,
            "known_failures": self.known_failures,
            "prefix": self.prefix,
            "started_at": self.started_at.isoformat(),
            "duration": round(self.duration, 4),
            "selection": list(self.selection) if self.selection else None,
            "capabilities": dict(self.capabilities),
            "counts": self.counts(),
            "groups": [g.to_dict() for g in self.groups],
        }
