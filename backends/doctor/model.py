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
