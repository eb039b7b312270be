"""The architecture, declared once as import-linter contracts in pyproject.toml
(``[tool.importlinter]``: no cycle at any depth, the CLI above the library, the layers of
``backends/``, the postgres base below what builds on it, drivers imported by their backend
only) and checked here, with the few rules that are about strings rather than imports.

import-linter (grimp) counts every import, function-level and TYPE_CHECKING ones included.
The source is parsed once per test process (tests/support/source_tree.py)."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.source_tree import ROOT, text_of, tree_of


def _lint(config: Path, cwd: Path, monkeypatch) -> int:
    """``lint-imports`` in this process. It configures logging with ``dictConfig``, which
    disables every logger that exists: each one is enabled again afterwards, or a later
    test of this worker that reads a log (caplog) would find it silent."""
    import logging

    from importlinter.cli import lint_imports

    monkeypatch.chdir(cwd)
    monkeypatch.syspath_prepend(str(cwd))
    loggers = [lg for lg in logging.root.manager.loggerDict.values()
               if isinstance(lg, logging.Logger)]
    disabled = {lg: lg.disabled for lg in loggers}
    try:
        return lint_imports(config_filename=str(config), no_cache=True)
    finally:
        for lg, was in disabled.items():
            lg.disabled = was


def test_the_declared_contracts_are_kept(monkeypatch):
    assert _lint(ROOT / "pyproject.toml", ROOT, monkeypatch) == 0


@pytest.mark.parametrize("cycle", [
    # a -> b at module level, b -> a inside a function: a lazy import still closes it
    {"a.py": "import pkg.b\n", "b.py": "def f():\n    import pkg.a\n"},
    # two sibling packages that import each other through their modules
    {"x/__init__.py": "", "x/one.py": "from pkg.y import two\n",
     "y/__init__.py": "", "y/two.py": "from pkg.x import one\n"},
])
def test_a_cycle_breaks_the_acyclic_contract(tmp_path, monkeypatch, cycle):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, code in cycle.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(code)
    config = tmp_path / "contracts.toml"
    config.write_text(textwrap.dedent("""
        [tool.importlinter]
        root_packages = ["pkg"]
        [[tool.importlinter.contracts]]
        name = "acyclic"
        type = "acyclic_siblings"
        ancestors = ["pkg"]
    """))
    for name in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
        monkeypatch.delitem(sys.modules, name)
    assert _lint(config, tmp_path, monkeypatch) == 1


def test_pgvector_holds_only_what_it_adds():
    """Everything in backends/pgvector/ is pgvector's own: the base it builds on is
    backends/postgres/. (``detect`` is pgvector's: it looks for pgvector's tables, declared
    in BackendInfo.)"""
    shared = {"pool", "database", "state", "events", "indexes", "placement", "relocation"}
    present = {p.stem for p in (ROOT / "backends" / "pgvector").glob("*.py")}
    assert not (present & shared), f"shared SQL modules in backends/pgvector/: {present & shared}"
    # its config.py says which variables it reads; the resolver is the base's
    config = text_of(ROOT / "backends" / "pgvector" / "config.py")
    assert "class SqlConfig" not in config and "def resolve" not in config
    imported = {node.module for node in ast.walk(tree_of(ROOT / "backends" / "pgvector" / "adapter.py"))
                if isinstance(node, ast.ImportFrom) and node.module}
    assert any(m.startswith("backends.postgres") for m in imported)


def _code_strings(path: Path) -> list[str]:
    """String constants of a module that are not docstrings."""
    tree = tree_of(path)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(getattr(n, "body", None), list) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_the_shared_sql_layer_holds_no_flavour_ddl():
    """The item table's DDL, its vector and text indexes and its statistics are pgvector's
    (backends/pgvector/schema.py); the postgres base provisions the layout it is given and
    learns a flavour's tables from the layout its BackendInfo declares, so no backend
    misreads another's: a ``postgres`` adapter knows pgvector's tables and takes their rows
    along."""
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


def test_selection_names_no_backend_module():
    """SQL detection is declared in BackendInfo, not named in the selector."""
    source = text_of(ROOT / "backends" / "selection.py")
    assert "backends.postgres" not in source and "backends.pgvector" not in source
    from backends.info import declared

    assert declared("pgvector").detect == "backends.pgvector.detect:DETECTOR"


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
