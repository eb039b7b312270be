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
    that a restore wrote back around it); UnsupportedOperation when it offers nothing to
    audit."""
    import itertools

    from backends.ops.ledger import ledger_findings

    return itertools.chain(_store_audit(adapter, **options), ledger_findings(adapter))


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
