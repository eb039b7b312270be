"""Completion scripts: generated from the live app; the committed copies must be current."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from semvecctl.commands.completions import completion_script

COMPLETIONS = Path(__file__).resolve().parents[3] / "completions"
FILES = {"bash": "semvecctl.bash", "zsh": "_semvecctl", "fish": "semvecctl.fish"}


@pytest.mark.parametrize("shell", sorted(FILES))
def test_committed_scripts_are_current(shell):
    committed = (COMPLETIONS / FILES[shell]).read_text(encoding="utf-8")
    assert committed == completion_script(shell), (
        f"completions/{FILES[shell]} is stale: regenerate with "
        f"'semvecctl completions show {shell} > completions/{FILES[shell]}'"
    )


@pytest.mark.parametrize("shell", sorted(FILES))
def test_show_prints_the_script(shell):
    result = CliRunner().invoke(app, ["completions", "show", shell])
    assert result.exit_code == 0
    assert "_SEMVECCTL_COMPLETE" in result.stdout


def test_install_writes_where_the_shell_looks(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    result = CliRunner().invoke(app, ["completions", "install", "fish"])
    assert result.exit_code == 0, result.stderr
    target = tmp_path / "cfg" / "fish" / "completions" / "semvecctl.fish"
    assert target.read_text() == completion_script("fish")
    assert str(target) in result.stderr


def test_unknown_shell_is_a_usage_error():
    result = CliRunner().invoke(app, ["completions", "show", "tcsh"])
    assert result.exit_code == 2


def test_completion_protocol_answers(monkeypatch):
    import os
    import subprocess
    import sys

    env = dict(os.environ, _SEMVECCTL_COMPLETE="complete_bash", COMP_WORDS="semvecctl back",
               COMP_CWORD="1")
    proc = subprocess.run([sys.executable, "-m", "semvecctl"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "backends" in proc.stdout
