"""One ``doctor`` run: the audit, the repairs asked for, and the proof.

With ``fix`` each finding gets its repair plan; with ``apply`` too, the repairs that
cannot lose data are made. Then the whole store is audited again, read-only: what a
repair claimed and the re-audit still finds is not counted as repaired, and every
problem that remains (repairable, claimed, or never shown by the first pass) is listed
again. The counts are what a caller reports and exits on.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from backends.contract.findings import Finding, apply_repair, blocking, plan


class Checkup:
    """The counts of one run (``counts``: findings by severity, repaired, blocking;
    ``checks``: findings by (check, severity); ``reaudit``: the proof's counts, None until
    a repair was attempted), filled as :meth:`findings` is consumed."""

    def __init__(self, *, fix: bool = False, apply: bool = False, batch: int = 500,
                 timeout: float = 5.0) -> None:
        self.fix, self.apply, self.batch, self.timeout = fix, apply, batch, timeout
        self.counts = {"error": 0, "warning": 0, "info": 0, "repaired": 0, "blocking": 0}
        self.checks: dict[tuple[str, str], int] = {}
        self.reaudit: dict[str, int] | None = None
        self._claimed: set[tuple[str, str]] = set()  # what this run says it repaired
        self._listed: set[tuple[str, str]] = set()   # what the first pass showed

    def _audit(self, adapter: Any, progress: Callable[[int], None] | None) -> Iterator[Finding]:
        from backends.ops.doctor import audit

        return audit(adapter, batch=self.batch, timeout=self.timeout, progress=progress)

    def findings(self, adapter: Any, *,
                 progress: Callable[[int], None] | None = None) -> Iterator[Finding]:
        """Every finding of the audit (repaired or planned as asked), then what the
        re-audit finds remaining."""
        attempted = 0
        for finding in self._audit(adapter, progress):
            if self.fix:
                (apply_repair if self.apply else plan)(finding)
            attempted += self.apply and finding.safe
            self._count(finding)
            yield finding
        if attempted:
            yield from self._reaudited(adapter, progress)

    def _count(self, finding: Finding) -> None:
        counts = self.counts
        counts[finding.severity.value] += 1
        key = (finding.check, finding.severity.value)
        self.checks[key] = self.checks.get(key, 0) + 1
        if finding.outcome == "repaired":
            counts["repaired"] += 1
            self._claimed.add((finding.check, finding.where))
        counts["blocking"] += blocking(finding)
        if self.apply:
            self._listed.add((finding.check, finding.where))

    def _reaudited(self, adapter: Any,
                   progress: Callable[[int], None] | None) -> Iterator[Finding]:
        """The proof: the whole store audited again, read-only. A repairable problem, a
        place a repair claimed, or any problem the first pass did not show (never
        reached, or new) is listed; one that needs a human and was listed is counted."""
        reaudit = self.reaudit = {"error": 0, "warning": 0, "info": 0, "remaining": 0,
                                  "blocking": 0, "false_claims": 0}
        for again in self._audit(adapter, progress):
            reaudit[again.severity.value] += 1
            reaudit["blocking"] += blocking(again)
            place = (again.check, again.where)
            if place in self._claimed:
                reaudit["false_claims"] += 1
            if again.safe or place in self._claimed or place not in self._listed:
                reaudit["remaining"] += 1
                again.outcome = "remains after the re-audit"
                yield again
        self.counts["repaired"] -= reaudit["false_claims"]
        self.counts["blocking"] = reaudit["blocking"]

    def totals(self) -> dict[str, Any]:
        """The summary a streamed document ends with."""
        body: dict[str, Any] = {"summary": dict(self.counts)}
        if self.reaudit is not None:
            body["reaudit"] = dict(self.reaudit)
        return body
