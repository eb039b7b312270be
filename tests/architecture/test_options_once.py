"""Issue 33 Build 5: the shared CLI options are declared once (semvecctl/options.py) and
the connection flags go through one bundle (semvecctl.connection.Connection), resolved
once per command: the commands parse, call, render. Asserted over the source tree, and
on the bundle's behaviour."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.source_tree import ROOT, tree_of
COMMANDS = sorted(p for p in (ROOT / "semvecctl" / "commands").glob("*.py"))

SHARED_FLAGS = {"--backend", "--uri", "--adapter", "--owner", "--unowned", "--timeout",
                "--output", "--yes"}
#: the set-up the bundle does; a command calling these repeats it
SET_UP = {"resolve_connection", "open_adapter", "owner_filter"}


def _calls(tree: ast.AST) -> set[str]:
    return {node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Name, ast.Attribute))}


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: p.name)
def test_commands_declare_no_shared_flag_and_repeat_no_connection_set_up(path):
    tree = tree_of(path)
    declared = sorted(
        arg.value for node in ast.walk(tree) if isinstance(node, ast.Call)
        and getattr(node.func, "attr", "") == "Option" for arg in node.args
        if isinstance(arg, ast.Constant) and arg.value in SHARED_FLAGS)
    assert declared == []  # take them from semvecctl.options
    assert _calls(tree) & SET_UP == set()  # go through semvecctl.connection.Connection


def test_each_shared_flag_is_declared_in_options_only_by_its_factories():
    source = (ROOT / "semvecctl" / "options.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    owner_decls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and getattr(node.func, "attr", "") == "Option"
                   and any(isinstance(a, ast.Constant) and a.value == "--owner" for a in node.args)]
    assert len(owner_decls) == 1  # one factory makes every command's --owner


def test_events_say_events_in_their_owner_help():
    from typer.testing import CliRunner

    from semvecctl.app import app

    for command in ("list", "inspect", "count", "export"):
        text = CliRunner().invoke(app, ["events", command, "--help"],
                                  env={"COLUMNS": "200"}).stdout
        assert "Only events of this exact owner" in text and "Only events with no owner" in text
        assert "Only sessions" not in text, command


def test_the_bundle_resolves_each_part_once_and_in_the_order_asked(monkeypatch):
    from semvecctl import connection as module
    from semvecctl.errors import CliError

    calls = []
    real = module.resolve_connection
    monkeypatch.setattr(module, "resolve_connection",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    conn = module.Connection("memory", owner="acme")
    assert calls == []                       # nothing resolved until asked
    assert conn.scope == "acme"
    assert conn.spec.backend == "memory" and conn.spec is conn.resolve() is conn.spec
    with conn.open() as adapter:
        assert adapter.name == "memory"
    assert calls == [("memory", None, None)]  # resolved once for scope, spec and open
    with pytest.raises(CliError) as refused:
        _ = module.Connection("memory", owner="a", unowned=True).scope
    assert refused.value.code == 2 and "exclude each other" in refused.value.message
    assert calls == [("memory", None, None)]  # an owner refusal looks no store up


# -- each option declared once (issue 42: the second `Apply` silently won) -------------------


def _module_level_bindings(tree: ast.Module) -> list[tuple[str, int]]:
    """Every name the module binds at its top level, with the line: assignment targets
    (plain, annotated, augmented, tuple unpacking, walrus), definitions and imports,
    including those inside module-level if/try/with blocks (never inside a function or
    class body)."""
    found: list[tuple[str, int]] = []

    def targets(node: ast.AST) -> Iterator[ast.Name]:
        if isinstance(node, ast.Name):
            yield node
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                yield from targets(element)
        elif isinstance(node, ast.Starred):
            yield from targets(node.value)

    def visit(statements: list[ast.stmt]) -> None:
        for stmt in statements:
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    found.extend((n.id, stmt.lineno) for n in targets(target))
            elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
                found.extend((n.id, stmt.lineno) for n in targets(stmt.target))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append((stmt.name, stmt.lineno))
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                found.extend(((a.asname or a.name).split(".")[0], stmt.lineno)
                             for a in stmt.names if a.name != "*")
            elif isinstance(stmt, (ast.If, ast.For, ast.While)):
                visit(stmt.body)
                visit(stmt.orelse)
            elif isinstance(stmt, ast.With):
                visit(stmt.body)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body)
                for handler in stmt.handlers:
                    visit(handler.body)
                visit(stmt.orelse)
                visit(stmt.finalbody)
            for node in ast.walk(stmt) if not isinstance(
                    stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ():
                if isinstance(node, ast.NamedExpr):
                    found.append((node.target.id, node.lineno))

    visit(tree.body)
    return found


def test_no_module_level_name_is_declared_twice_in_options():
    from collections import defaultdict

    tree = tree_of(ROOT / "semvecctl" / "options.py")
    lines: dict[str, list[int]] = defaultdict(list)
    for name, line in _module_level_bindings(tree):
        lines[name].append(line)
    twice = {name: at for name, at in lines.items() if len(at) > 1}
    assert twice == {}, f"declared more than once in semvecctl/options.py (name: lines): {twice}"
    assert {"Apply", "MigrateApply", "Yes", "Output"} <= set(lines)  # the walk sees them


def test_the_binding_walk_finds_every_kind_of_second_declaration():
    source = ("import a\nfrom b import c as Apply\nApply = 1\nX: int = 2\nX += 1\n(Y, [Z]) = 3, [4]\n"
              "def Y(): W = 5\nif True:\n    Z = 6\ntry:\n    pass\nexcept Exception:\n    a = 7\n"
              "class K:\n    Apply = 8\n(V := 9)\n")
    names = [n for n, _ in _module_level_bindings(ast.parse(source))]
    assert sorted(names) == sorted(["a", "Apply", "Apply", "X", "X", "Y", "Z", "Y", "Z", "a",
                                    "K", "V"])


#: the writing commands whose --help showed migrate's "Write to the target (default:
#: preview only)" while the second declaration won
NOT_MIGRATE_WRITERS = [("erase",), ("sessions", "delete"), ("indexes", "ensure"),
                       ("sessions", "prune"), ("load", "run"), ("sessions", "copy"),
                       ("sessions", "import")]
MIGRATE_WRITERS = [("migrate", "run"), ("migrate", "cutover"), ("migrate", "abort")]


def _apply_help(path: tuple[str, ...]) -> str:
    import typer

    from semvecctl.app import app

    command = typer.main.get_command(app)
    for name in path:
        command = command.get_command(None, name)  # type: ignore[union-attr]
    (apply,) = [p for p in command.params if "--apply" in getattr(p, "opts", ())]
    return apply.help


def _help_text(path: tuple[str, ...]) -> str:
    from typer.testing import CliRunner

    from semvecctl.app import app

    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "250", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


@pytest.mark.parametrize("path", NOT_MIGRATE_WRITERS, ids=" ".join)
def test_a_writing_commands_help_shows_its_own_apply_text(path):
    from semvecctl.options import Apply

    assert _apply_help(path) == Apply.__metadata__[0].help
    text = _help_text(path)
    assert "--apply" in text and "Write (without it: a preview, nothing changed, exit 0)" in text
    assert "Write to the target" not in text and "preview only" not in text


@pytest.mark.parametrize("path", MIGRATE_WRITERS, ids=" ".join)
def test_migrate_says_its_apply_writes_to_the_target(path):
    from semvecctl.options import MigrateApply

    assert _apply_help(path) == MigrateApply.__metadata__[0].help
    text = _help_text(path)
    assert "--apply" in text and "Write to the target (without it: a preview" in text
