"""Checking a registry entry without instantiating it: import, contract, capabilities.

Used by ``backends list --check`` and ``backends show``. Importing is the point here (the
operator asked for a check), but nothing is constructed, so no connection is opened.
"""

from __future__ import annotations

import inspect
from typing import Any

from backends.registry import (
    BackendEntry,
    contract_problems,
    import_object,
    import_target,
    read_persistence,
)

#: optional seam -> the member that reveals it on a class
SEAM_MEMBERS: tuple[tuple[str, str], ...] = (
    ("sessions", "iter_sessions"),
    ("restore", "restore_session"),
    ("indexes", "ensure_indexes"),
    ("live-items", "iter_live_items"),
    ("item-mirror", "sync_items"),
    ("health-details", "health_details"),
)


def capabilities_of(target: Any) -> list[str]:
    """Operator seams a class (or instance) offers, by the members it defines."""
    return [cap for cap, member in SEAM_MEMBERS if callable(getattr(target, member, None))]


def check_entry(entry: BackendEntry) -> dict[str, Any]:
    """Import ``entry`` and report persistence, capabilities and contract problems.

    The returned dict may override ``status``/``detail`` with ``import-error`` or
    ``contract-error``; a contested or shadowed status is kept (it is the bigger news).
    """
    result: dict[str, Any] = {"persistent": None, "capabilities": []}
    try:
        if entry.status == "driver-missing":
            target = import_object(entry.target)  # the driver check would refuse
        else:
            target = import_target(entry)
    except Exception as exc:  # report, never raise: one broken plugin must not hide others
        if entry.status == "driver-missing":
            return result
        cause = exc.__cause__ or exc
        result.update(status="import-error", detail=f"import error: {type(cause).__name__}: {cause}")
        return result
    result["persistent"] = read_persistence(target)
    if inspect.isclass(target):
        result["capabilities"] = capabilities_of(target)
        problems = contract_problems(target, selected_name=entry.name)
        if problems and entry.status in ("ok", "driver-missing"):
            result.update(status="contract-error", detail="contract error: " + "; ".join(problems))
    return result
