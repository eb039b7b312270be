"""The linter and the type checker the code's ``# noqa`` and ``# type: ignore`` comments
assume, run by the suite (so by ``.ci/run`` through the README's test command). Both come
with the test extra: a missing tool is a failure, not a skip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff_is_clean():
    result = _run("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean_on_backends():
    # the configuration ([tool.mypy] in pyproject.toml) names backends/ as the files
    result = _run("mypy", "--no-incremental", "--cache-dir", "/dev/null")
    assert result.returncode == 0, result.stdout + result.stderr
