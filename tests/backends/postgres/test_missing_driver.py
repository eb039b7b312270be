"""A SQL backend without its driver names the backend the user selected (issue 33)."""

from __future__ import annotations

import sys

import pytest

from backends.errors import MissingDriver


@pytest.mark.parametrize("module", ["backends.postgres:PostgresAdapter",
                                    "backends.pgvector:PgVectorAdapter"])
def test_missing_psycopg_names_the_selected_backend(monkeypatch, module):
    import importlib

    path, name = module.split(":")
    adapter_class = getattr(importlib.import_module(path), name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(MissingDriver) as caught:
        adapter_class("postgresql://u@127.0.0.1:1/db")
    backend = adapter_class.name
    assert caught.value.backend == backend
    assert str(caught.value).startswith(f"backend {backend!r} needs the 'psycopg' driver")
    assert "pip install 'semvecctl[pgvector]'" in str(caught.value)


def test_missing_pool_names_the_selected_backend(monkeypatch):
    from backends.postgres.pool import _load_pool_class

    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    with pytest.raises(MissingDriver, match=r"^backend 'postgres' needs the 'psycopg_pool'"):
        _load_pool_class("postgres")
