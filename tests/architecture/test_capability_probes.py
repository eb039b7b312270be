"""What an adapter offers is asked one way: ``offers()`` / ``capabilities_of()`` of
``backends.contract``. This reads the source of ``backends/`` and ``semvecctl/`` (function
bodies included) and fails on any probe that bypasses them: ``isinstance``/``issubclass``
against a seam protocol of the capability table, or ``getattr``/``hasattr`` of a member
name that reveals a capability or of a shortcut with a default (called, never probed).
Only ``backends/contract/`` itself may look."""

from __future__ import annotations

import ast
from pathlib import Path

from backends.contract import (CAPABILITIES, REQUIRED_ADAPTER_MEMBERS, AdapterDefaults,
                               EventStoreDefaults, StateStoreDefaults, protocol_members)

from tests.support.source_tree import ROOT, files_under, text_of
CONTRACT = ROOT / "backends" / "contract"

SEAM_PROTOCOLS = {spec.protocol.__name__ for spec in CAPABILITIES.values()}
#: the shortcuts and declarations with a default on a base are never probed either: they
#: are called (through ``state_defaults()`` and its kin where a store may not inherit)
DEFAULTED_MEMBERS = {name for base in (AdapterDefaults, EventStoreDefaults, StateStoreDefaults)
                     for name in vars(base) if not name.startswith("_")}
SEAM_MEMBERS = {name for spec in CAPABILITIES.values()
                for name, _callable in protocol_members(spec.protocol)} | DEFAULTED_MEMBERS


def _sources() -> list[Path]:
    files = list(files_under())
    return [p for p in files if CONTRACT not in p.parents]


def _named(node: ast.expr) -> set[str]:
    """The class names an isinstance second argument mentions (a name, an attribute, a
    tuple of them)."""
    if isinstance(node, ast.Tuple):
        return {name for element in node.elts for name in _named(element)}
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def probes_in(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        func, args = node.func.id, node.args
        if func in ("isinstance", "issubclass") and len(args) == 2:
            for name in sorted(_named(args[1]) & SEAM_PROTOCOLS):
                found.append((node.lineno, f"{func}(..., {name})"))
        elif func in ("getattr", "hasattr") and len(args) >= 2 \
                and isinstance(args[1], ast.Constant) and args[1].value in SEAM_MEMBERS:
            found.append((node.lineno, f"{func}(..., {args[1].value!r})"))
    return found


def test_no_capability_probe_bypasses_offers():
    bad = [f"{path.relative_to(ROOT)}:{line}: {what}"
           for path in _sources() for line, what in probes_in(text_of(path))]
    assert not bad, "probe through backends.contract.offers() instead:\n" + "\n".join(bad)


def test_the_check_sees_each_kind_of_probe():
    sample = (
        "def f(adapter, store):\n"
        "    a = isinstance(adapter, LiveItemSource)\n"
        "    b = isinstance(adapter, (int, contract.IndexManager))\n"
        "    c = getattr(store, 'event_refs', None)\n"
        "    d = hasattr(adapter, 'erasure_backend')\n"
        "    e = isinstance(adapter, BackendAdapter)\n"  # the required contract: not a probe
        "    f = getattr(adapter, 'name', '?')\n"
    )
    assert [line for line, _ in probes_in(sample)] == [2, 3, 4, 5]


def test_capability_members_come_from_the_protocols():
    for cap, spec in CAPABILITIES.items():
        members = protocol_members(spec.protocol)
        assert spec.methods == tuple(n for n, is_method in members if is_method), cap
        assert spec.flag == next((n for n, is_method in members if not is_method), None), cap
    from backends.contract import BackendAdapter

    assert REQUIRED_ADAPTER_MEMBERS == protocol_members(BackendAdapter)
    assert REQUIRED_ADAPTER_MEMBERS == (
        ("name", False), ("is_persistent", False), ("state_store", True),
        ("event_store", True), ("retrieval_backend", True), ("commit_turn", True),
        ("check_health", True))
