"""The module import graph of ``backends/`` and ``semvecctl/``, built from the SOURCE.

Every ``import`` and ``from ... import`` is an edge, wherever it stands (module level,
inside a function, under ``TYPE_CHECKING``): a function-level import only hides a cycle
until the day someone hoists it. Relative imports are resolved against the importing
module; ``from package import name`` is an edge to ``package.name`` when that is a module,
else to ``package``. Importing a submodule also runs its package's ``__init__``, so an edge
to ``a.b.c`` counts as edges to ``a.b`` and ``a`` as well.

Nothing here imports the code under test: the graph is read with :mod:`ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("backends", "semvecctl")

#: Edges of cycles being removed on another branch; each names the branch that removes
#: it, so the lead can delete the entry at merge. Keep this list empty otherwise.
KNOWN_EDGES: dict[tuple[str, str], str] = {
    # (importer, imported): "branch that removes it". None today: the issue's
    # cleanup.py <-> conformance/context.py circle has no static edge back on this branch
    # (backends.cleanup imports conformance.drive, which imports no context).
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that module ``name`` imports (at any depth of its code)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                targets.update(_with_parents(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets.update(_with_parents(prefix))
            for alias in node.names:
                if f"{prefix}.{alias.name}" in modules:
                    targets.update(_with_parents(f"{prefix}.{alias.name}"))
    # a module's own packages are already being imported when it runs: no edge
    own = set(_with_parents(name))
    return {t for t in targets if t in modules and t not in own}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path ``a -> b -> ... -> a``) per strongly connected component
    that has one (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return [_cycle_in(graph, set(component)) for component in components]


def _cycle_in(graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """A shortest cycle through the first member of a strongly connected component."""
    start = min(members)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover


def _without_known(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {node: {t for t in targets if (node, t) not in KNOWN_EDGES}
            for node, targets in graph.items()}


def test_no_import_cycle_in_backends_or_semvecctl():
    cycles = find_cycles(_without_known(import_graph()))
    assert not cycles, "import cycles (function-level imports included):\n" + "\n".join(
        " -> ".join(cycle) for cycle in cycles)


def test_known_edges_still_exist():
    """An entry of KNOWN_EDGES whose import is gone must be removed from the list."""
    graph = import_graph()
    stale = [edge for edge in KNOWN_EDGES if edge[1] not in graph.get(edge[0], set())]
    assert not stale, f"remove these from KNOWN_EDGES, the imports are gone: {stale}"


def test_sql_layer_imports_nothing_from_pgvector():
    """``backends/postgres/`` is the base; ``backends/pgvector/`` a flavour that imports it."""
    graph = import_graph()
    offending = sorted(
        f"{module} -> {target}" for module, targets in graph.items()
        if module == "backends.postgres" or module.startswith("backends.postgres.")
        for target in targets
        if target == "backends.pgvector" or target.startswith("backends.pgvector."))
    assert not offending, "backends/postgres/ must not import backends/pgvector/:\n" + "\n".join(
        offending)


def test_pgvector_holds_only_what_it_adds():
    """Everything in backends/pgvector/ is pgvector's own: the shared layer lives in sql/.
    (``detect`` is pgvector's: it looks for pgvector's tables, declared in BackendInfo.)"""
    shared = {"pool", "driver", "database", "state", "events", "indexes"}
    present = {p.stem for p in (ROOT / "backends" / "pgvector").glob("*.py")}
    assert not (present & shared), f"shared SQL modules in backends/pgvector/: {present & shared}"
    # its config.py says which variables it reads; the resolver is the base's
    config = (ROOT / "backends" / "pgvector" / "config.py").read_text(encoding="utf-8")
    assert "class SqlConfig" not in config and "def resolve" not in config
    graph = import_graph()
    assert any(t.startswith("backends.postgres") for t in graph["backends.pgvector.adapter"])


def _code_strings(path: Path) -> list[str]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(getattr(n, "body", None), list) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_the_shared_sql_layer_holds_no_flavour_ddl():
    """The item table's DDL, its vector and text indexes and its statistics are pgvector's
    (backends/pgvector/schema.py); sql/ provisions the layout it is given and learns a
    flavour's tables from the layout its BackendInfo declares, so no backend misreads
    another's: a ``postgres`` adapter knows pgvector's tables and takes their rows along."""
    from backends.pgvector.schema import PGVECTOR_LAYOUT
    from backends.postgres.schema import ENGINE_LAYOUT, companion_tables, legacy_tables

    for path in sorted((ROOT / "backends" / "postgres").glob("*.py")):
        code = " ".join(_code_strings(path)).lower()
        for word in ("vector(", "hnsw", "tsvector", "semvec_items_", "semvec_memory_items",
                     "compliance_event"):
            assert word not in code, f"{path.name} spells {word!r}"
    added = set(PGVECTOR_LAYOUT.tables) - set(ENGINE_LAYOUT.tables)
    assert added and added <= set(companion_tables("postgres", ENGINE_LAYOUT))
    assert set(PGVECTOR_LAYOUT.legacy_tables) <= set(legacy_tables("postgres", ENGINE_LAYOUT))
    assert set(ENGINE_LAYOUT.indexes) < set(PGVECTOR_LAYOUT.indexes)


def test_the_postgres_base_never_names_pgvector():
    """backends/postgres/ is generic, as SQLAlchemy's dialect base is: a flavour passes its
    layout, connection hook and variables; not even a comment names pgvector."""
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for path in sorted((ROOT / "backends" / "postgres").rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts
            for n, line in enumerate(path.read_text(encoding="utf-8",
                                                    errors="replace").splitlines(), 1)
            if "pgvector" in line.lower()]
    assert not hits, "backends/postgres/ names pgvector:\n" + "\n".join(hits)


# -- the detector itself is tested, so a green run means something ----------------------


def test_cycle_finder_sees_a_cycle_hidden_in_a_function(tmp_path, monkeypatch):
    package = tmp_path / "backends"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from backends import b\n")
    (package / "b.py").write_text("def f():\n    from .c import x\n")
    (package / "c.py").write_text("import backends.a as a\nx = 1\n")
    (package / "d.py").write_text("from backends.a import thing\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "PACKAGES", ("backends",))
    graph = import_graph()
    assert graph["backends.b"] == {"backends.c"}
    assert graph["backends.d"] == {"backends.a"}
    cycles = find_cycles(graph)
    assert cycles == [["backends.a", "backends.b", "backends.c", "backends.a"]]


def test_cycle_finder_passes_a_tree():
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": set()}
    assert find_cycles(graph) == []


def test_redaction_is_a_leaf():
    """Every adapter imports backends.redaction: it imports nothing else of the package."""
    graph = import_graph()
    assert not {t for t in graph["backends.redaction"] if t != "backends"}


def test_selection_names_no_backend_module():
    """SQL detection is declared in BackendInfo, not named in the selector."""
    source = (ROOT / "backends" / "selection.py").read_text(encoding="utf-8")
    assert "backends.postgres" not in source and "backends.pgvector" not in source
    from backends.info import declared

    assert declared("pgvector").detect == "backends.pgvector.detect:DETECTOR"
