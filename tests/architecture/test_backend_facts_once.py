"""Issue 33: every backend fact (its schemes, URI, secret and TTL variables, its extra and
drivers) is said once, in :mod:`backends.info`, and read from there. Asserted over the
source tree so copies that drift apart (``unix://`` in one scheme list and not another)
cannot come back. Docstrings and comments may name a fact; code may not spell one."""

from __future__ import annotations

import ast
from pathlib import Path

from backends.info import KNOWN_INFO

from tests.support.source_tree import ROOT, files_under, tree_of
SOURCES = (ROOT / "backends", ROOT / "semvecctl")
HOME = {ROOT / "backends" / "info.py", ROOT / "backends" / "errors.py"}
#: the leaf that may not import backends.info keeps one named copy, held to it below
LEAF_COPY = ROOT / "backends" / "redaction.py"

#: a scheme that is also a backend's name ("redis", "memory") is its name where code says it
SCHEMES = {s for info in KNOWN_INFO for s in info.schemes} - {info.name for info in KNOWN_INFO}
VARIABLES = {v for info in KNOWN_INFO for v in (*info.uri_env, *info.secret_env, info.ttl_env) if v}
DRIVERS = {d for info in KNOWN_INFO for d in info.drivers}
#: what installs a backend's drivers (other extras, metrics or otel, are not backend facts)
HINTS = {f"semvecctl[{info.extra}]" for info in KNOWN_INFO if info.extra}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            found.add(id(body[0].value))
    return found


def _spelled_facts(path: Path) -> list[str]:
    tree = tree_of(path)
    skip = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if callee == "MissingDriver" and any(isinstance(a, ast.Constant) for a in node.args):
                out.append(f"{node.lineno}: MissingDriver(...) with literal facts")
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
            continue
        text = node.value
        if text in SCHEMES:
            out.append(f"{node.lineno}: scheme {text!r}")
        elif text in VARIABLES:
            out.append(f"{node.lineno}: variable {text!r}")
        elif any(hint in text for hint in HINTS):
            out.append(f"{node.lineno}: install hint {text!r}")
    return out


def test_no_backend_fact_is_spelled_outside_backend_info():
    offenders = [f"{path.relative_to(ROOT)}:{hit}"
                 for path in files_under(*SOURCES)
                 if path not in HOME | {LEAF_COPY} and "__pycache__" not in path.parts
                 for hit in _spelled_facts(path)]
    assert offenders == []


def test_the_facts_the_rule_guards_are_the_declared_ones():
    """The rule reads BackendInfo, so it guards what is declared, not a list of its own."""
    assert {"rediss", "unix", "mongodb", "mongodb+srv", "postgresql"} <= SCHEMES
    assert {"REDIS_URL", "MONGODB_URI", "DATABASE_URL"} <= VARIABLES
    assert {"redis", "pymongo", "psycopg"} <= DRIVERS


def test_redactions_copy_of_the_bare_userinfo_schemes_is_the_declared_one():
    from backends.redaction import BARE_USERINFO_SCHEMES

    declared = {s for info in KNOWN_INFO if info.bare_userinfo_is_password for s in info.schemes}
    assert BARE_USERINFO_SCHEMES == declared
    tree = tree_of(LEAF_COPY)
    spelled = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and n.value in SCHEMES and id(n) not in _docstrings(tree)]
    assert len(spelled) == len(BARE_USERINFO_SCHEMES - {i.name for i in KNOWN_INFO})  # the one copy
