"""Issue 33 Build 7: commands are imported lazily. The command table in
``semvecctl.commands`` knows every command's name and one line of help without importing
its module; ``semvecctl --help`` imports no command module, ``semvecctl backends list``
only ``backends``'s; every command built lazily is the one ``--help`` describes."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest
import typer

PROBE = """
import contextlib, io, json, sys
from semvecctl.__main__ import main
sys.argv = ["semvecctl"] + json.loads(sys.argv[1])
try:
    with contextlib.redirect_stdout(io.StringIO()):
        main()
except SystemExit:
    pass
sys.stderr.write("COMMANDS=" + json.dumps(sorted(
    m for m in sys.modules if m.startswith("semvecctl.commands.")
)) + "\\n")
"""


def _command_modules(argv: list[str]) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)],
                          capture_output=True, text=True, timeout=60)
    line = [l for l in proc.stderr.splitlines() if l.startswith("COMMANDS=")][-1]
    return json.loads(line[len("COMMANDS="):])


@pytest.mark.parametrize("argv,expected", [
    (["--help"], []),
    ([], []),
    (["--version"], []),
    (["backends", "list"], ["semvecctl.commands.backends"]),
    (["backends", "list", "-o", "json"], ["semvecctl.commands.backends"]),
    (["health", "--help"], ["semvecctl.commands.health"]),
    (["sessions", "--help"], ["semvecctl.commands.sessions", "semvecctl.commands.sessions_prune",
                              "semvecctl.commands.sessions_transfer"]),
])
def test_an_invocation_imports_only_the_command_it_runs(argv, expected):
    assert _command_modules(argv) == expected


def test_the_table_names_every_command_module_once():
    import semvecctl.commands as package
    from semvecctl.commands import COMMANDS

    modules = {m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")}
    named = [e.module for e in COMMANDS.values()] + [x for e in COMMANDS.values() for x in e.extends]
    assert sorted(named) == sorted(modules)  # none missing from the table, none twice


@pytest.mark.parametrize("name", list(__import__("semvecctl.commands", fromlist=["COMMANDS"]).COMMANDS))
def test_each_lazily_built_command_is_the_one_the_table_describes(name):
    import importlib

    from semvecctl.app import app
    from semvecctl.commands import COMMANDS

    entry = COMMANDS[name]
    module = importlib.import_module(f"semvecctl.commands.{entry.module}")
    assert module.NAME == name and module.HELP == entry.help
    root = typer.main.get_command(app)
    command = root.commands[name]
    assert command.name == name and command.help == entry.help
    assert root.list_commands(None) == list(COMMANDS)  # the table's order is --help's


def test_the_root_help_lists_the_table_without_building_a_command(capsys):
    from semvecctl.app import LazyCommands, app
    from semvecctl.commands import COMMANDS

    root = typer.main.get_command(app)
    assert isinstance(root.commands, LazyCommands)
    assert root.main(["--help"], prog_name="semvecctl", standalone_mode=False) == 0
    assert not any(root.commands.is_loaded(n) for n in COMMANDS)
    shown = capsys.readouterr().out
    for name in COMMANDS:
        assert f"  {name} " in shown
