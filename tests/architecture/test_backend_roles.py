"""Every backend folder names its files by role, the same name for the same role in each
(a newcomer who knows where Redis keeps its settings knows where MongoDB keeps its): the
three stores have all nine roles (the erasure ledger among them; memory keeps its in memory.py); the pgvector flavour, built on the postgres base, only
the roles it adds to (its state, events, errors and probes are the base's); no file keeps
a name the layout retired."""

from __future__ import annotations

from pathlib import Path

import pytest

import backends

ROOT = Path(backends.__file__).parent
ROLES = {"adapter", "config", "errors", "state", "events", "schema", "audit", "health",
         "ledger"}
FLAVOUR_ROLES = {"adapter", "config", "schema", "audit"}
RETIRED = {"uris", "failures", "state_store", "event_store", "keys", "names", "driver"}


def _modules(backend: str) -> set[str]:
    return {p.stem for p in (ROOT / backend).glob("*.py")}


@pytest.mark.parametrize("backend", ["redis", "mongo", "postgres"])
def test_each_store_has_every_role_file(backend):
    assert ROLES - _modules(backend) == set()


def test_the_flavour_has_the_roles_it_adds_to():
    assert FLAVOUR_ROLES - _modules("pgvector") == set()


@pytest.mark.parametrize("backend", ["redis", "mongo", "postgres", "pgvector"])
def test_no_file_keeps_a_retired_name(backend):
    assert _modules(backend) & RETIRED == set()
