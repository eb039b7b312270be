"""Read-only consistency audits of a store (``semvecctl doctor``).

:func:`audit` picks the audit for an adapter by its name (one module per store family)
and falls back to strict reads over the session enumeration for any other adapter that
can list its sessions. Audits stream :class:`~backends.doctor.model.Finding` objects and
never write; safe repairs ride on the findings and run only when a caller applies them.
"""

from __future__ import annotations

from typing import Any, Iterator

from backends.doctor.model import Finding, Section, Severity, apply_repair, blocking, plan

__all__ = ["Finding", "Section", "Severity", "apply_repair", "audit", "blocking", "plan"]

#: adapter name -> module holding its ``audit(adapter, **options)``
_AUDITS = {"redis": "backends.doctor.redis", "mongo": "backends.doctor.mongo",
           "postgres": "backends.sql.audit", "pgvector": "backends.sql.audit"}


def audit(adapter: Any, **options: Any) -> Iterator[Finding]:
    """The findings for ``adapter``; UnsupportedOperation when it offers nothing to audit."""
    import importlib

    from backends.contract import Capability, capabilities_of
    from backends.errors import UnsupportedOperation

    name = str(getattr(adapter, "name", ""))
    module = _AUDITS.get(name)
    if module is not None:
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            found = None
        if found is not None:
            return found.audit(adapter, **options)
    if Capability.SESSIONS in capabilities_of(adapter):
        from backends.doctor import generic

        return generic.audit(adapter, **options)
    raise UnsupportedOperation(
        f"doctor is not supported by backend {name!r}: it neither has an audit of its own "
        "nor lists its sessions")
