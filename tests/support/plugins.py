"""Throw-away distributions for registry tests: real ``*.dist-info`` directories with an
``entry_points.txt`` on ``sys.path``, exactly what ``pip install`` would leave behind."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

GOOD_ADAPTER = '''
import os

MARKER = os.environ.get("SEMVEC_TEST_IMPORT_MARKER")
if MARKER:
    with open(MARKER, "a") as fh:
        fh.write(__name__ + "\\n")

from backends.memory import MemoryStateStore


class {cls}:
    name = "{name}"
    is_persistent = {persistent}

    def __init__(self, uri=None):
        self.uri = uri
        self._store = MemoryStateStore()

    def state_store(self):
        return self._store

    def event_store(self):
        return None

    def retrieval_backend(self):
        return None

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        return self._store.save(session_id, blob, expected_version=expected_version,
                                owner_subject=owner_subject, pending_message=pending_message)

    def check_health(self):
        return True
'''


def make_distribution(root: Path, dist: str, version: str, entry_points: dict[str, str],
                      modules: dict[str, str] | None = None) -> Path:
    """Write a distribution into ``root`` (a sys.path entry) and return ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
    )
    lines = ["[semvec.backends]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for module, source in (modules or {}).items():
        path = root / (module.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    importlib.invalidate_caches()
    return root


def adapter_source(cls: str, name: str, persistent: str = "True") -> str:
    return GOOD_ADAPTER.format(cls=cls, name=name, persistent=persistent)


def forget_modules(prefix: str) -> None:
    for mod in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        del sys.modules[mod]
