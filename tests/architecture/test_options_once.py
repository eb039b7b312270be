"""Issue 33 Build 5: the shared CLI options are declared once (semvecctl/options.py) and
the connection flags go through one bundle (semvecctl.connection.Connection), resolved
once per command: the commands parse, call, render. Asserted over the source tree, and
on the bundle's behaviour."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Iterator

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


def _every_command() -> list[tuple[tuple[str, ...], Any]]:
    """Every leaf command of the tree (each module loaded), with its path."""
    import typer

    from semvecctl.app import app

    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subs = getattr(command, "commands", None)
        if isinstance(subs, dict) and subs:
            for name in list(subs):
                walk(command.get_command(None, name), (*path, name))
        else:
            found.append((path, command))

    walk(typer.main.get_command(app), ())
    return found


def _declared(command: Any, name: str) -> Any:
    """The typer declaration (OptionInfo/ArgumentInfo) the command's own signature gives
    parameter ``name``: its Annotated metadata, or its default."""
    import inspect
    import typing

    from typer.models import ParameterInfo

    param = inspect.signature(command.callback, eval_str=True).parameters[name]
    for extra in typing.get_args(param.annotation)[1:]:
        if isinstance(extra, ParameterInfo):
            return extra
    return param.default if isinstance(param.default, ParameterInfo) else None


COMMANDS_TREE = _every_command()
WRITERS = [path for path, command in COMMANDS_TREE
           if any("--apply" in getattr(p, "opts", ()) for p in command.params)]


def test_the_walk_finds_every_command_and_the_writers():
    assert len(COMMANDS_TREE) > 40
    assert {("erase",), ("doctor",), ("sessions", "prune"), ("migrate", "run")} <= set(WRITERS)


@pytest.mark.parametrize("path,command", COMMANDS_TREE, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_no_option_of_any_command_is_declared_twice(path, command):
    """Every option of every command: no flag is taken by two parameters (click would let
    one win silently), and each shows the help its command's own signature declares (a
    second declaration of a shared name cannot win unseen, as issue 42's ``Apply`` did)."""
    from collections import Counter

    flags = Counter(flag for p in command.params for flag in (*p.opts, *p.secondary_opts))
    assert [flag for flag, n in flags.items() if n > 1] == [], " ".join(path)
    names = Counter(p.name for p in command.params)
    assert [name for name, n in names.items() if n > 1] == [], " ".join(path)
    for param in command.params:
        declared = _declared(command, param.name)
        assert declared is not None, f"{' '.join(path)} {param.name}: no declaration"
        assert getattr(param, "help", None) == declared.help, f"{' '.join(path)} {param.opts}"


@pytest.mark.parametrize("path", WRITERS, ids=" ".join)
def test_a_writing_commands_help_shows_its_own_apply_text(path):
    """Every command that writes (it takes --apply): its --help shows the --apply text its
    own signature declares, and no other command's."""
    from semvecctl import options

    command = dict(COMMANDS_TREE)[path]
    (apply,) = [p for p in command.params if "--apply" in p.opts]
    own = _declared(command, apply.name).help
    text = _help_text(path)
    assert "--apply" in text and " ".join(own.split()) in text
    others = {options.Apply, options.MigrateApply, options.FixApply}
    for other in others:
        other_help = other.__metadata__[0].help
        if other_help != own:
            assert " ".join(other_help.split()) not in text, path
    migrate_text = options.MigrateApply.__metadata__[0].help
    if path[0] == "migrate":
        assert own == migrate_text  # written to the target
    else:  # the second declaration that won in issue 42 showed migrate's everywhere
        assert own != migrate_text and "Write to the target" not in text, path


def _help_text(path: tuple[str, ...]) -> str:
    from typer.testing import CliRunner

    from semvecctl.app import app

    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "250", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


def test_every_store_command_shows_the_store_options_in_its_help():
    """--backend/--uri/--adapter are declared once (options.store_command) and listed in
    the --help of each command that works on one store."""
    stores = [path for path, command in COMMANDS_TREE
              if {"--uri", "--backend"} <= {f for p in command.params for f in p.opts}]
    assert len(stores) >= 25
    for path in stores:
        text = _help_text(path)
        assert "--backend" in text and "--uri" in text, path
