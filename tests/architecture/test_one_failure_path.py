"""Issue 33 Build 4: one failure vocabulary and one way out, asserted over the source tree
so they stay true. Every error class of ``backends.errors`` carries its category, one table
(``backends.errors.CATEGORIES``) gives a category its wording, the CLI alone maps it to an
exit code (``semvecctl.exit_codes.EXIT_CODES``), and the CLI leaves only through
``current().abort(message, ExitCode.X)``."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from backends import errors as be
from semvecctl.exit_codes import ExitCode

from tests.support.source_tree import ROOT, files_under, tree_of
CLI = ROOT / "semvecctl"
COMMANDS = CLI / "commands"

#: the error classes whose kind the table decides (isinstance on them = a category)
CATEGORISED = {
    name for name, obj in vars(be).items()
    if inspect.isclass(obj) and issubclass(obj, BaseException) and "category" in vars(obj)
} | {"ArchiveDamaged", "ArchiveError", "ArchiveUnsupported", "LossyTransfer", "InvalidURI"}

def _py(*roots: Path):
    for root in roots:
        yield from files_under(root)


def _tree(path: Path) -> ast.AST:
    return tree_of(path)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _names(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))}


def _tested(test: ast.AST) -> set[str]:
    """The categorised classes an ``if`` test checks an exception against."""
    found: set[str] = set()
    for node in ast.walk(test):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if callee == "isinstance" and len(node.args) == 2:
            found |= _names(node.args[1]) & CATEGORISED
        elif callee == "is_state_version_conflict":
            found.add("StateVersionConflict")
    return found


def _category_answers(fn: ast.AST) -> set[str]:
    """The categorised classes ``fn`` answers for: ``if isinstance(exc, X): return ...``,
    or a literal pairing a class with a word (``(BackendUnreachable, "unreachable")``).
    Two or more make ``fn`` a classifier."""
    found: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and node.body and isinstance(node.body[0], ast.Return):
            found |= _tested(node.test)
        elif isinstance(node, ast.Tuple) and any(
                isinstance(e, ast.Constant) and isinstance(e.value, (str, int)) for e in node.elts):
            found |= {e.id for e in node.elts if isinstance(e, ast.Name)} & CATEGORISED
    return found


def test_every_error_class_of_backends_errors_carries_a_category_in_the_table():
    classes = [obj for obj in vars(be).values()
               if inspect.isclass(obj) and issubclass(obj, BaseException)
               and obj.__module__ == be.__name__]
    assert classes
    for cls in classes:
        assert isinstance(vars(cls).get("category"), be.Category), cls.__name__
    assert set(be.CATEGORIES) == set(be.Category)  # every category has its one row
    from semvecctl.exit_codes import EXIT_CODES

    assert set(EXIT_CODES) == set(be.Category)  # ... and its one exit code, in the CLI
    for category, code in EXIT_CODES.items():
        assert code in (ExitCode.CHECK_FAILED, ExitCode.USAGE,
                        ExitCode.ENVIRONMENT, ExitCode.UNREACHABLE), category


def test_the_library_keeps_categories_and_the_cli_alone_maps_them_to_exit_codes():
    """No row of the library's table holds a process exit code: what a failure means to
    a process is the CLI's to say (``semvecctl.exit_codes``), not the backend layer's."""

    fields = set(be.CategoryRule._fields)
    assert not {name for name in fields if "exit" in name}, fields
    source = (ROOT / "backends" / "errors.py").read_text(encoding="utf-8")
    assert "ExitCode" not in source.replace("semvecctl.exit_codes", "")
    assert "semvecctl" not in "".join(
        line for line in source.splitlines() if line.lstrip().startswith(("import", "from")))


def test_an_unclassified_error_is_one_answer_everywhere():
    """An exception no category names is 3 (permanent until shown otherwise) in every
    command and in ``health``: it used to be 4 in ``health`` and 3 elsewhere."""
    from semvecctl.commands.health import categorise
    from semvecctl.errors import classify

    exc = RuntimeError("probe exploded")
    assert be.category_of(exc) is be.Category.UNKNOWN
    assert classify(exc)[0] == ExitCode.ENVIRONMENT
    assert categorise(exc)["exit"] == ExitCode.ENVIRONMENT


def test_health_classify_and_the_load_run_read_the_same_table():
    from semvecctl.commands.health import categorise
    from semvecctl.errors import classify

    for exc in (be.BackendUnreachable("down"), be.BackendAuthError("no"),
                be.BackendConfigError("cfg"), be.BackendTransient("later"),
                be.MissingDriver("redis", "redis", "redis"), RuntimeError("odd")):
        assert categorise(exc)["exit"] == classify(exc)[0], type(exc).__name__


def test_no_category_is_computed_outside_the_table():
    """A function testing an exception against two or more categorised classes is a
    classifier; the only one is backends/errors.py (the CLI and the load run read it)."""
    offenders = []
    for path in _py(CLI, ROOT / "backends"):
        if _rel(path) in ("backends/errors.py", "backends/errors/__init__.py"):
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = [n for n in ast.walk(node) if n is not node
                         and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                checks = _category_answers(node) - set().union(*map(_category_answers, inner))
                if len(checks) >= 2:
                    offenders.append(f"{_rel(path)}:{node.lineno} {node.name} {sorted(checks)}")
    assert offenders == []


def test_the_cli_asks_no_exception_its_category():
    """In semvecctl/ an exception's kind comes from the table only (the one conflict
    test that decides what a transfer reports is a control-flow check, not a category)."""
    offenders = []
    for path in _py(CLI):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance" \
                    and len(node.args) == 2 and _names(node.args[1]) & CATEGORISED:
                offenders.append(f"{_rel(path)}:{node.lineno}")
    assert offenders == []


@pytest.mark.parametrize("path", list(_py(COMMANDS)), ids=_rel)
def test_commands_leave_only_through_abort(path):
    offenders = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Raise) and node.exc is not None and "CliError" in _names(node.exc):
            offenders.append(f"{node.lineno}: raise CliError")
        if isinstance(node, ast.Attribute) and node.attr == "Exit" \
                and getattr(node.value, "id", "") == "typer":
            offenders.append(f"{node.lineno}: typer.Exit")
        if isinstance(node, ast.Attribute) and node.attr == "exit" \
                and getattr(node.value, "id", "") == "sys":
            offenders.append(f"{node.lineno}: sys.exit")
        if isinstance(node, ast.ImportFrom) and any(a.name in ("Exit", "exit") for a in node.names):
            offenders.append(f"{node.lineno}: imports {node.module}'s exit")
    assert offenders == []


def test_cli_error_is_raised_by_abort_and_caught_only_at_the_boundary():
    raised, caught, helpers = [], [], []
    for path in _py(CLI):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Raise) and node.exc is not None and "CliError" in _names(node.exc):
                raised.append(_rel(path))
            if isinstance(node, ast.ExceptHandler) and node.type is not None \
                    and "CliError" in _names(node.type):
                caught.append(f"{_rel(path)}:{node.lineno}")
            if isinstance(node, ast.Name) and node.id in ("usage_error", "environment_error"):
                helpers.append(f"{_rel(path)}:{node.lineno}")
    assert raised == []          # abort builds it and raises it; nobody else
    assert caught == []          # the boundary in app.py classifies every exception
    assert helpers == []         # the old helpers are gone: abort(message, ExitCode.X)
    source = (CLI / "application.py").read_text(encoding="utf-8")
    assert "raise error" in source and "CliError(" in source
