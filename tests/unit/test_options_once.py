"""Issue 33 Build 5: the shared CLI options are declared once (semvecctl/options.py) and
the connection flags go through one bundle (semvecctl.connection.Connection), resolved
once per command: the commands parse, call, render. Asserted over the source tree, and
on the bundle's behaviour."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    tree = ast.parse(path.read_text(encoding="utf-8"))
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
