"""Property-based: every command's option parsing on random argv fragments.

For each leaf command of the live app (found by walking it, so new commands are covered
without editing this file) hypothesis builds argv from the command's own options, stray
flags and hostile values. Whatever the line: no traceback, an exit code from the
documented set, and a failure explained in exactly one ``error:`` line.

Safety: the environment points every backend at CLOSED loopback ports, HOME and the
working directory are temporary, so no random line can reach the system Redis or
PostgreSQL or write outside the test's directory.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.support.fixtures.redis_server import closed_port

EXAMPLES = int(os.environ.get("SEMVEC_HYPOTHESIS_EXAMPLES", "12"))
EXIT_CODES = {0, 1, 2, 3, 4}
PORT = closed_port()


def leaf_commands() -> list[tuple[tuple[str, ...], list]]:
    import typer

    from semvecctl.app import app

    found: list[tuple[tuple[str, ...], list]] = []

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in sorted(command.commands.items()):
                walk(sub, path + (name,))
        else:
            found.append((path, list(command.params)))

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = leaf_commands()
#: commands that write for as long as they are told: bounded up front (a later random
#: value may still override, which only costs time)
BOUNDS = {("load", "run"): ("--duration", "0.2", "--max-commits", "50")}

hostile_text = st.one_of(
    st.sampled_from(["", " ", "-", "--", "-1", "0", "1e309", "nan", "inf", "-inf", "3",
                     "99999999999999999999", "\u2603", "a\nb", "*", "?[", "]]", "'\"",
                     "%s%n", "x" * 300, "json", "jsonl", "yaml", "table", "bash", "zsh",
                     "memory", "redis", "pg-vector", "PgVector", "nope", "s1,s2",
                     "contract", "state", "1,2,3", "0.5,0.5", "a.jsonl", "sub/x.jsonl",
                     "memory://", f"redis://:hunter2@127.0.0.1:{PORT}/0",
                     f"postgresql://u:pw@127.0.0.1:{PORT}/db",
                     "mongodb://127.0.0.1:%d/?serverSelectionTimeoutMS=100" % PORT,
                     "redis://", "http://x", "unix://", "nope:nothing", "os:getcwd",
                     "tests.support.fixtures.mongo:cli_adapter"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
            max_size=12),
)
stray = st.sampled_from(["--nope", "-x", "--", "-", "--help", "--output", "-o", "--yes",
                         "--verbose", "--no-color", "--profile", "--config"])


def argv_for(params) -> st.SearchStrategy[list[str]]:
    names = [opt for p in params for opt in p.opts if opt.startswith("-")]
    fragment = st.one_of(
        st.tuples(st.sampled_from(names or ["--nope"]), hostile_text).map(list),
        st.sampled_from(names or ["--nope"]).map(lambda n: [n]),
        hostile_text.map(lambda v: [v]),
        stray.map(lambda s: [s]),
    )
    return st.lists(fragment, max_size=5).map(lambda parts: [x for p in parts for x in p])


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    for var in ("SEMVEC_SESSION_BACKEND", "SEMVECCTL_CONFIG", "SEMVEC_MONGO_DB",
                "DATABASE_URL", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{PORT}/0")
    monkeypatch.setenv("MONGODB_URI",
                       f"mongodb://127.0.0.1:{PORT}/?serverSelectionTimeoutMS=100"
                       "&connectTimeoutMS=100")
    monkeypatch.setenv("SEMVEC_PGVECTOR_URL", f"postgresql://u:pw@127.0.0.1:{PORT}/db")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check_result(argv: list[str], result) -> None:
    where = f"argv={argv!r}\nstdout={result.stdout[-800:]!r}\nstderr={result.stderr[-800:]!r}"
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"{type(exc).__name__}: {exc}\n{where}"
    assert result.exit_code in EXIT_CODES, where
    if not {"--verbose", "-v"} & set(argv):  # a traceback is --verbose's job only
        assert "Traceback" not in result.stderr, where
    assert "Traceback" not in result.stdout, where
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    shows_help = "Usage:" in result.stderr or "Usage:" in result.stdout
    if result.exit_code in (2, 3, 4) and not shows_help:
        assert len(errors) == 1, where
    assert len(errors) <= 1, where


@pytest.mark.parametrize("path, params", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_random_argv_never_crashes(path, params, sandbox):
    runner = CliRunner()

    @settings(max_examples=EXAMPLES, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(argv_for(params))
    def run(extra):
        from semvecctl.app import app

        argv = [*path, *BOUNDS.get(path, ()), *extra]
        result = runner.invoke(app, argv)
        check_result(argv, result)

    run()


def test_the_walk_found_every_group():
    groups = {path[0] for path, _ in COMMANDS}
    assert {"backends", "health", "indexes", "sessions", "retrieve", "conformance",
            "config", "completions"} <= groups
