"""Checking a registry entry without instantiating it: import, contract, capabilities.

Used by ``backends list --check`` and ``backends show``. Importing is the point here (the
operator asked for a check), but nothing is constructed, so no connection is opened.
"""

from __future__ import annotations

import inspect
from typing import Any

from backends.info import info_from_class
from backends.registry import (
    BackendEntry,
    contract_problems,
    driver_available,
    import_object,
    import_target,
    read_persistence,
)

def seams_of(target: Any) -> list[str]:
    """The operator seams a class (or instance) offers, named as ``backends list`` shows
    them; detected by :func:`backends.contract.capabilities_of` from the class alone."""
    from backends.contract import CAPABILITIES, capabilities_of

    return [cap.value for cap in capabilities_of(target, stores=False) if CAPABILITIES[cap].seam]


def factory_problem(target: Any, where: str) -> str | None:
    """Why a non-class target cannot be an adapter factory, judged from its signature
    alone (nothing is called): not callable, or it needs positional arguments the registry
    never passes (``json:dumps`` needs ``obj``)."""
    if not callable(target):
        return f"target {where} is a {type(target).__name__}, not an adapter class or factory"
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    needed = [p.name for p in sig.parameters.values()
              if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
              and p.name != "uri"]
    needed += [p.name for p in sig.parameters.values()
               if p.default is p.empty and p.kind is p.KEYWORD_ONLY and p.name != "uri"]
    if needed:
        return (f"target {where} is not an adapter factory: it needs argument(s) "
                f"{', '.join(repr(n) for n in needed)} that the registry never passes")
    return None


def _returned_class(target: Any) -> Any:
    """The class a factory's return annotation names (None: none or not a class); that
    class is then checked like a class target."""
    try:
        hints = __import__("typing").get_type_hints(target)
    except Exception:  # noqa: BLE001 - unresolvable annotations: judge nothing
        return None
    ret = hints.get("return")
    if ret is None:
        return None
    return ret if inspect.isclass(ret) and ret is not type(None) else None


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
    except Exception as exc:  # noqa: BLE001 - reported: one broken plugin must not hide others
        if entry.status == "driver-missing":
            return result
        cause = exc.__cause__ or exc
        result.update(status="import-error", detail=f"import error: {type(cause).__name__}: {cause}")
        return result
    if not inspect.isclass(target):
        problem = factory_problem(target, entry.target)
        if problem:
            result.update(status="contract-error", detail=f"contract error: {problem}")
            return result
        annotated = _returned_class(target)
        if annotated is None:
            return result
        target = annotated
    info = info_from_class(entry.name, entry.target, target,
                           package=entry.distribution or "semvecctl")
    missing = [m for m in info.drivers if not driver_available(m)]
    if missing and entry.status == "ok":
        result.update(status="driver-missing",
                      detail=f"driver missing: {', '.join(missing)} is not installed "
                             f"({info.install_hint})")
    result["persistent"] = read_persistence(target)
    if inspect.isclass(target):
        result["capabilities"] = seams_of(target)
        problems = contract_problems(target, selected_name=entry.name)
        if problems and entry.status in ("ok", "driver-missing"):
            result.update(status="contract-error", detail="contract error: " + "; ".join(problems))
    return result
