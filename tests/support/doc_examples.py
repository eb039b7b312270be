"""Run documented shell examples (README.md, docs/*.md, the ``--help`` examples) the way a
reader would, but in-process where that gives the same answer.

An example line that is a plain ``semvecctl ...`` command (optionally ending in
``> FILE``) runs through Typer's CliRunner on :data:`semvecctl.app.app`: the same argument
parsing, the same error boundary and the same exit code as the console script, in a
working directory and environment of the example's own (HOME, XDG dirs, no SEMVEC_* /
REDIS_URL / ... from the caller's shell). Anything else a shell must interpret (a pipe,
``$(...)``, ``eval``), or that needs a real process (a signal sent by ``timeout``, a
``python -c`` one-liner), runs in ``bash -c`` with the same environment.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: variables of the caller's shell that would change what an example does
SCRUBBED_PREFIXES = ("SEMVEC_", "REDIS_URL", "MONGODB_URI", "SEMVECCTL_", "DATABASE_URL", "OTEL_")

#: shell words that make a line something only a shell can run
_SHELL_ONLY = re.compile(r"[|;&<`$]|\beval\b")


@dataclass
class Example:
    """One documented command: where it is, the line as written, the output shown under
    it (``console`` blocks only; None when none is shown) and the exit codes it may give."""

    source: str
    line: str
    output: str | None = None
    codes: frozenset[int] = frozenset({0})


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    in_process: bool
    crashed: str = ""  # a traceback, when the command raised past the error boundary


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in document order."""
    return [(m.group(1), m.group(2))
            for m in re.finditer(r"^```([\w-]*)[^\n]*\n(.*?)^```", text, flags=re.S | re.M)]


def _joined(body: str) -> str:
    return body.replace("\\\n", " ")


def _annotated_code(line: str) -> int | None:
    found = re.search(r"#\s*exit (\d+)", line)
    return int(found.group(1)) if found else None


def examples_of(source: str, text: str, expected: dict[str, set[int]] | None = None) -> list[Example]:
    """Every shell example of a Markdown page: each command line of an ``sh`` block, and
    each ``$ `` line of a ``console`` block with the lines under it as its output."""
    expected = expected or {}

    def codes(line: str) -> frozenset[int]:
        annotated = _annotated_code(line)
        if annotated is not None:
            return frozenset({annotated})
        return frozenset(next((c for key, c in expected.items() if key in line), {0}))

    found: list[Example] = []
    for lang, body in fenced_blocks(text):
        if lang == "sh":
            for raw in _joined(body).splitlines():
                line = raw.strip()
                if line and not line.startswith("#"):
                    found.append(Example(source, line, None, codes(line)))
        elif lang == "console":
            current: Example | None = None
            shown: list[str] = []
            for raw in _joined(body).splitlines():
                if raw.startswith("$ "):
                    if current is not None:
                        current.output = "\n".join(shown) if shown else None
                        found.append(current)
                    line = raw[2:].strip()
                    current, shown = Example(source, line, None, codes(line)), []
                elif current is not None:
                    shown.append(raw)
            if current is not None:
                current.output = "\n".join(shown) if shown else None
                found.append(current)
    return found


@dataclass
class Workspace:
    """A fresh working directory and HOME for a run of examples."""

    root: Path
    path_prefix: list[str] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    def environment(self) -> dict[str, str | None]:
        """The overrides of os.environ every example runs with (None: unset)."""
        env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(SCRUBBED_PREFIXES)}
        env.update(HOME=str(self.home), NO_COLOR="1",
                   XDG_CONFIG_HOME=str(self.home / ".config"),
                   XDG_DATA_HOME=str(self.home / ".local" / "share"),
                   PYTHONPATH=os.pathsep.join([str(self.root), str(ROOT)]),
                   PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        return env

    def subprocess_environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()}
        for key, value in self.environment().items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env


def _in_process_words(line: str) -> tuple[list[str], str | None] | None:
    """The arguments of a plain ``semvecctl`` line and the file its stdout goes to, or
    None when only a shell can run the line."""
    if not line.startswith("semvecctl ") or _SHELL_ONLY.search(line.split("#", 1)[0]):
        return None
    words = shlex.split(line, comments=True)
    target = None
    if ">" in words:
        at = words.index(">")
        if at != len(words) - 2:
            return None
        target = words[-1]
        words = words[:at]
    if any(w.startswith((">", "<", "2>")) for w in words):
        return None
    return words[1:], target


def run(line: str, workspace: Workspace, *, timeout: float = 300) -> Outcome:
    """Run one example line in ``workspace``: in-process when it is a plain semvecctl
    command, else in ``bash -c``."""
    parsed = _in_process_words(line)
    if parsed is None:
        result = subprocess.run(["bash", "-c", line], cwd=workspace.root,
                                env=workspace.subprocess_environment(),
                                capture_output=True, text=True, timeout=timeout)
        crashed = result.stderr if "Traceback" in result.stderr else ""
        return Outcome(result.returncode, result.stdout, result.stderr, False, crashed)
    args, target = parsed
    return _invoke(args, target, workspace)


def _invoke(args: list[str], target: str | None, workspace: Workspace) -> Outcome:
    import traceback

    from typer.testing import CliRunner

    from semvecctl.app import app

    previous_cwd, previous_path = os.getcwd(), list(sys.path)
    os.chdir(workspace.root)
    sys.path.insert(0, str(workspace.root))  # what PYTHONPATH gives the console script
    try:
        result = CliRunner().invoke(app, args, env=workspace.environment(), catch_exceptions=True)
    finally:
        os.chdir(previous_cwd)
        sys.path[:] = previous_path
    crashed = ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        crashed = "".join(traceback.format_exception(type(result.exception), result.exception,
                                                     result.exception.__traceback__))
    stdout = result.stdout
    if target is not None:
        path = Path(target.replace("~", str(workspace.home), 1) if target.startswith("~") else target)
        if not path.is_absolute():
            path = workspace.root / path
        path.write_text(stdout, encoding="utf-8")
        stdout = ""
    return Outcome(result.exit_code, stdout, result.stderr, True, crashed)


def forget_modules(prefix: str) -> None:
    """Drop modules an example imported from its workspace (``my_pkg``), so the next
    workspace's copy is the one imported."""
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        del sys.modules[name]
