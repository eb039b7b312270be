"""Read-only consistency audits of a store (``semvecctl doctor``).

:func:`audit` picks the audit an adapter's :class:`~backends.info.BackendInfo` declares
(``audit``: each store family's own, in its backend's package) and falls back to strict
reads over the session enumeration for any other adapter that can list its sessions (the
generic audit). Audits stream :class:`~backends.contract.findings.Finding` objects and
never write; safe repairs ride on the findings and run only when a caller applies them.
"""

from __future__ import annotations

from typing import Any, Iterator

from backends.contract.findings import Finding, Section, Severity, apply_repair, blocking, plan

__all__ = ["Finding", "Section", "Severity", "apply_repair", "audit", "blocking", "plan"]


def audit(adapter: Any, **options: Any) -> Iterator[Finding]:
    """The findings for ``adapter``, then the erasure ledger's (data of an erased subject
    that a restore wrote back around it, found with or without its index entries);
    UnsupportedOperation when it offers nothing to audit.

    The ledger's findings are read first: a store finding about one of those events
    loses its repair (re-indexing an unindexed event would make an erased subject's data
    visible to the engine again), so ``--fix --apply`` leaves it unindexed and flagged."""
    from backends.ops.ledger import ledger_findings

    store = _store_audit(adapter, **options)
    ledger = list(ledger_findings(adapter))
    erased = {f.event_id for f in ledger if f.event_id}
    return _chain(_withheld_repairs(store, erased), ledger)


def _chain(first: Iterator[Finding], then: list[Finding]) -> Iterator[Finding]:
    yield from first
    yield from then


def _withheld_repairs(findings: Iterator[Finding], erased: set[str]) -> Iterator[Finding]:
    """``findings``, each about an erased subject's event stripped of its repair."""
    for finding in findings:
        if erased and finding.event_id in erased and finding.fix is not None:
            finding.fix = finding.verify = None
            finding.repair = ("none: the event belongs to an erased subject (see "
                              "erasure.restored-data); erase it, never index it again")
        yield finding


def _store_audit(adapter: Any, **options: Any) -> Iterator[Finding]:
    import importlib

    from backends.contract import Capability, capabilities_of
    from backends.errors import UnsupportedOperation
    from backends.info import known

    name = str(getattr(adapter, "name", ""))
    info = known(name)
    if info is not None and info.audit is not None:
        module, _, function = info.audit.partition(":")
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            found = None
        if found is not None:
            return getattr(found, function)(adapter, **options)
    if Capability.SESSIONS in capabilities_of(adapter):
        from backends.ops.doctor import generic

        return generic.audit(adapter, **options)
    raise UnsupportedOperation(
        f"doctor is not supported by backend {name!r}: it neither has an audit of its own "
        "nor lists its sessions")
