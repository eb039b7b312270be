"""#15.1: a backend the operator named (flag, environment, profile) that is neither shipped
nor installed is a usage error (exit 2) in every command, with close matches; only
``backends resolve`` shows the engine's degrade-to-memory rule."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from semvecctl.app import app

COMMANDS = [
    ["health"],
    ["sessions", "list"],
    ["sessions", "inspect", "s1"],
    ["sessions", "delete", "s1", "--apply", "--yes"],
    ["sessions", "export", "--out", "{tmp}/x.jsonl"],
    ["sessions", "import", "{tmp}/missing.jsonl"],
    ["load", "run", "--apply", "--yes", "--duration", "0.1"],
    ["indexes", "plan"],
    ["retrieve", "run", "-s", "s1", "--query", "x"],
    ["config", "view"],
]


def run(args, env=None):
    return CliRunner().invoke(app, args, env=env)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("how", ["flag", "env", "profile"])
def test_typo_is_exit_2_everywhere(command, how, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    env = {"SEMVEC_SESSION_BACKEND": "", "SEMVECCTL_CONFIG": str(tmp_path / "none.yaml")}
    if how == "flag":
        args += ["--backend", "reddis"]
        env.pop("SEMVECCTL_CONFIG")
    elif how == "env":
        env["SEMVEC_SESSION_BACKEND"] = "reddis"
        env.pop("SEMVECCTL_CONFIG")
    else:
        cfg = tmp_path / "c.yaml"
        cfg.write_text("current-profile: p\nprofiles:\n  p:\n    backend: reddis\n")
        env["SEMVECCTL_CONFIG"] = str(cfg)
    result = run(args, env=env)
    if result.exit_code == 2 and "unknown backend" not in result.stderr:
        pytest.fail(f"exit 2 for another reason: {result.stderr}")
    assert result.exit_code == 2, (args, result.stdout, result.stderr)
    assert "unknown backend 'reddis'" in result.stderr
    assert "did you mean 'redis'" in result.stderr
    assert "Traceback" not in result.stderr


def test_backends_resolve_still_shows_the_engine_fallback():
    result = run(["backends", "resolve", "reddis", "-o", "json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["resolved"] == "memory" and data["fell_back"] is True
    assert "redis" in data["close_matches"]


def test_library_keeps_the_degrade_to_memory_rule():
    import warnings

    from backends.registry import load_adapter

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        adapter = load_adapter("reddis")
    assert adapter.name == "memory"


def test_known_names_still_work_in_every_spelling():
    for name in ("memory", "MEMORY", " me-mory "):
        result = run(["health", "--backend", name, "-o", "json"], env={"SEMVEC_SESSION_BACKEND": ""})
        assert result.exit_code == 0, (name, result.stderr)
