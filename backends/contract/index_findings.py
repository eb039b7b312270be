"""``indexes validate`` as findings, split by who needs the index: the engine's own
indexes are deployment requirements (an error when missing or drifted), semvecctl's are
recommendations (a warning), and informational ``extra`` indexes are not findings.

A store as the engine makes it has none of semvecctl's recommended indexes: there a missing
recommendation is a note, not a warning (nothing is wrong with a stock engine store; the
note says what ``indexes ensure`` would add). Once any recommendation exists (semvecctl
provisioned the store), a missing or drifted one is a warning again."""

from __future__ import annotations

from typing import Any, Iterator

from backends.contract.findings import Finding, Section, Severity


def engine_index_names(adapter: Any) -> set[str]:
    """The names the adapter's index plan marks ``required`` (what the engine creates)."""
    return {spec.name for spec in adapter.index_plan() if getattr(spec, "required", True)}


def index_findings(adapter: Any, *, engine: set[str]) -> Iterator[Finding]:
    reports = list(adapter.validate_indexes())
    recommended = [r for r in reports if r.name not in engine and r.status != "extra"]
    # no recommendation of ours exists at all: the store is as the engine makes it
    stock = bool(recommended) and all(r.status in ("missing", "unsupported") for r in recommended)
    for report in reports:
        if report.ok:
            continue
        required = report.name in engine
        if stock and not required and report.status == "missing":
            yield Finding(
                "index.missing", Severity.info, f"index {report.name} on {report.target}",
                "semvecctl recommends this index; the store has none of semvecctl's "
                "recommended indexes, as the engine makes it"
                + (f" ({report.detail})" if report.detail else ""),
                "the engine does not need it; semvecctl's retrieval and listings are faster "
                "with it",
                "semvecctl indexes ensure --yes, if you want semvecctl's recommendations",
                Section.advice)
            continue
        if report.status == "unsupported":
            yield Finding(
                "index.unsupported", Severity.info, f"index {report.name} on {report.target}",
                f"the deployment cannot hold this index: {report.detail}",
                "server-side retrieval that needs it falls back or fails",
                "use a deployment with Atlas Search, or keep retrieval in-process",
                Section.engine if required else Section.advice)
            continue
        diffs = "; ".join(f"{d.field}: want {d.expected!r}, have {d.actual!r}"
                          for d in report.differences)
        yield Finding(
            f"index.{report.status}", Severity.error if required else Severity.warning,
            f"index {report.name} on {report.target}",
            f"index {report.status}" + (f" ({diffs})" if diffs else "")
            + (f": {report.detail}" if report.detail else ""),
            "the engine relies on it" if required else
            "semvecctl's retrieval and listings are slow or unavailable without it",
            "semvecctl indexes ensure --yes (add --recreate for drift)",
            Section.engine if required else Section.advice)
