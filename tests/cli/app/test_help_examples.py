"""#28 item 6: every command's ``--help`` ends with examples, and every example runs as
written (the README's substitution: the example hosts become the suite's real Redis and a
fresh PostgreSQL database, seeded as the README's examples are), in the table's order, in
a fresh working directory and HOME; in-process through CliRunner where the line is a plain
command (tests/support/doc_examples.py), in bash where it needs a shell. An example ending in ``# exit N`` must exit N; every
other one exits 0. The commands are discovered from the app, so a new command without
examples fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from semvecctl.app import app
from semvecctl.examples import EXAMPLES
from tests.cli.app.test_documented_examples import _seed, _substitute
from tests.support.doc_examples import Workspace, forget_modules, run

ROOT = Path(__file__).resolve().parents[3]


def leaves(command=None, path=()):
    command = command or typer.main.get_command(app)
    subs = getattr(command, "commands", None)
    if isinstance(subs, dict) and subs:
        for name, sub in sorted(subs.items()):
            yield from leaves(sub, path + (name,))
    else:
        yield " ".join(path)


COMMANDS = list(leaves())


def test_every_command_has_examples_and_every_entry_is_a_command():
    missing = [c for c in COMMANDS if not EXAMPLES.get(c)]
    assert not missing, f"add examples to semvecctl/examples.py for: {missing}"
    assert set(EXAMPLES) <= set(COMMANDS), set(EXAMPLES) - set(COMMANDS)
    for path, lines in EXAMPLES.items():
        for line in lines:
            assert f"semvecctl {path} " in f"{line} ", (path, line)


@pytest.mark.parametrize("path", COMMANDS)
def test_help_shows_the_examples(path):
    result = CliRunner().invoke(app, [*path.split(), "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    text = result.stdout
    assert "Examples:" in text
    for line in EXAMPLES[path]:
        assert line in text, line  # verbatim, not rewrapped


def _expected(line: str) -> int:
    found = re.search(r"#\s*exit (\d+)", line)
    return int(found.group(1)) if found else 0


@pytest.mark.redis
@pytest.mark.postgres
def test_every_help_example_runs(redis_url, pgvector_url, tmp_path):
    _seed(redis_url, pgvector_url, tmp_path)
    workspace = Workspace(tmp_path)  # in-process where the line is a plain command
    failures = []
    ran = 0
    try:
        for lines in EXAMPLES.values():
            for line in lines:
                command = _substitute(line, redis_url, pgvector_url)
                outcome = run(command, workspace)
                ran += 1
                if outcome.exit_code != _expected(line) or outcome.crashed:
                    failures.append(f"{line}\n exit {outcome.exit_code} (in-process: {outcome.in_process})\n"
                                    f"{outcome.stdout[-600:]}\n{outcome.stderr[-600:]}\n{outcome.crashed}")
    finally:
        forget_modules("my_pkg")
    assert not failures, "\n\n".join(failures)
    assert ran >= len(COMMANDS)
    for made in ("backup.jsonl.gz", "u-17.jsonl.gz", "u-17.json", "idle.jsonl.gz", "indexes.md",
                 "diff.md", "conformance.xml"):
        assert (tmp_path / made).exists(), made
