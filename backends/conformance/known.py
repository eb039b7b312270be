"""Known divergences: a published list of cases a backend fails, each with its reason, that
the suite holds the author to.

The file (YAML)::

    backend: engine-redis 0.8.9          # optional, shown in reports
    known_failures:
      - case: commit_turn.owner_check
        reason: the engine's Redis script checks the version but not the owner
        link: https://example.org/issue/1  # optional

A listed case that fails (or errors) is an *expected failure*, shown with its reason; a
listed case that passes fails the run ("unexpectedly passing: remove it from the list"),
so the list can only shrink as the backend is fixed. A listed case that is not applicable
stays not applicable. The report keeps both levels: the strict one (the list ignored)
and the one with the known divergences accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from backends.conformance.model import CaseResult, Status


class KnownFailuresError(ValueError):
    """The known-failures file cannot be read or says something the suite cannot hold."""


@dataclass(frozen=True)
class KnownFailure:
    case_id: str
    reason: str
    link: str = ""

    def describe(self) -> str:
        return f"{self.reason} ({self.link})" if self.link else self.reason


@dataclass
class KnownFailures:
    entries: dict[str, KnownFailure]
    #: Where the list came from and what it says, carried into the report.
    source: dict[str, Any] = field(default_factory=dict)

    def judge(self, result: CaseResult) -> CaseResult:
        """The result with the list applied (the strict status kept in ``strict_status``)."""
        known = self.entries.get(result.case_id)
        if known is None:
            return result
        if result.status in Status.BAD:
            return replace(result, status=Status.EXPECTED_FAILURE, strict_status=result.status,
                           message=f"expected failure: {known.describe()} -- {result.message}",
                           known_reason=known.reason, known_link=known.link)
        if result.status in (Status.PASSED, Status.ADVISORY):
            return replace(result, status=Status.FAILED, strict_status=result.status,
                           message=(f"unexpectedly passing: remove it from the list "
                                    f"(listed as: {known.describe()})"),
                           expected="a failure (the known-failures file lists it)",
                           actual="passed", known_reason=known.reason, known_link=known.link)
        return replace(result, known_reason=known.reason, known_link=known.link,
                       message=f"{result.message} [listed as a known failure: "
                               f"{known.describe()}]")


def parse_known_failures(data: Any, *, origin: str = "known failures") -> KnownFailures:
    """Validate the loaded YAML; every case id must be in the catalogue."""
    from backends.conformance.catalogue import select_cases

    if isinstance(data, list):
        data = {"known_failures": data}
    if not isinstance(data, dict) or not isinstance(data.get("known_failures"), list):
        raise KnownFailuresError(f"{origin}: expected a mapping with a 'known_failures' list "
                                 "of {case, reason, link} entries")
    unknown_keys = sorted(set(data) - {"known_failures", "backend", "description"})
    if unknown_keys:
        raise KnownFailuresError(f"{origin}: unknown key(s) {', '.join(unknown_keys)} "
                                 "(known_failures, backend, description)")
    catalogue = {c.case_id for c in select_cases()}
    entries: dict[str, KnownFailure] = {}
    for number, item in enumerate(data["known_failures"], 1):
        where = f"{origin}: entry {number}"
        if not isinstance(item, dict):
            raise KnownFailuresError(f"{where}: expected a mapping with case, reason, link")
        extra = sorted(set(item) - {"case", "reason", "link"})
        if extra:
            raise KnownFailuresError(f"{where}: unknown key(s) {', '.join(map(str, extra))} "
                                     "(case, reason, link)")
        case_id, reason = item.get("case"), item.get("reason")
        link = item.get("link") or ""
        if not isinstance(case_id, str) or not case_id.strip():
            raise KnownFailuresError(f"{where}: 'case' must be a case id such as "
                                     "commit_turn.owner_check")
        case_id = case_id.strip()
        if case_id not in catalogue:
            raise KnownFailuresError(f"{where}: no case {case_id!r} in the catalogue "
                                     "(list them with 'semvecctl conformance list')")
        if not isinstance(reason, str) or not reason.strip():
            raise KnownFailuresError(f"{where} ({case_id}): 'reason' must say why it fails")
        if not isinstance(link, str):
            raise KnownFailuresError(f"{where} ({case_id}): 'link' must be a string")
        if case_id in entries:
            raise KnownFailuresError(f"{where}: {case_id} is listed twice")
        entries[case_id] = KnownFailure(case_id, reason.strip(), link.strip())
    source = {"origin": origin, "backend": data.get("backend"),
              "cases": [{"case": k.case_id, "reason": k.reason, "link": k.link}
                        for k in entries.values()]}
    return KnownFailures(entries, source)


def load_known_failures(path: str | Path) -> KnownFailures:
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KnownFailuresError(f"cannot read the known-failures file {str(path)!r}: "
                                 f"{exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KnownFailuresError(f"{str(path)!r} is not valid YAML: "
                                 f"{str(exc).splitlines()[0]}") from None
    return parse_known_failures(data, origin=path.name)


def shipped_known_failures(name: str) -> Path:
    """The path of a list shipped with the suite (``backends/conformance/known/NAME.yaml``)."""
    return Path(__file__).with_name("known") / f"{name}.yaml"
