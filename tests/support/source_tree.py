"""The project's source, read and parsed once per test process: every architecture rule
(tests/architecture/) walks the same trees instead of parsing the tree again."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("backends", "semvecctl")


@lru_cache(maxsize=None)
def text_of(path: Path) -> str:
    return Path(path).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def tree_of(path: Path) -> ast.Module:
    return ast.parse(text_of(Path(path)), filename=str(path))


@lru_cache(maxsize=None)
def files_under(*roots: Path) -> tuple[Path, ...]:
    """The ``*.py`` files under ``roots`` (default: the packages), sorted."""
    roots = roots or tuple(ROOT / p for p in PACKAGES)
    return tuple(p for root in roots for p in sorted(Path(root).rglob("*.py"))
                 if "__pycache__" not in p.parts)
