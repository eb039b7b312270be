"""The layers of ``backends/`` point down (CONTRIBUTING.md, "Layout"): the use cases in
``backends/ops/`` sit above every adapter and above the conformance suite, so nothing
below imports them; and no two packages of ``backends/`` import each other. Read from the
source, function-level imports included (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]



def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "backends").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            for target in targets:
                found = resolve(target)
                if found is not None and found != module:
                    edges[module].add(found)
    return edges


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def test_nothing_below_ops_imports_it():
    upward = sorted(f"{module} -> {target}" for module, targets in _graph().items()
                    if _package(module) != "backends.ops"
                    for target in targets if _package(target) == "backends.ops")
    assert not upward, "\n".join(upward)


def test_no_two_packages_of_backends_import_each_other():
    packages: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        for target in targets:
            if _package(module) != _package(target):
                packages.setdefault(_package(module), set()).add(_package(target))
    cycles = list(_cycles(packages))
    assert not cycles, cycles


def test_the_cycle_check_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
