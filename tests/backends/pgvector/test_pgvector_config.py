"""pgvector adapter configuration and plugin discovery (no server needed)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from backends.errors import BackendConfigError


def test_importing_the_package_loads_no_driver():
    code = (
        "import sys, backends.pgvector as p; "
        "assert p.PgVectorAdapter.is_persistent is True; "
        "print(sorted(m for m in ('psycopg', 'numpy', 'pgvector') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_entry_point_advertises_the_adapter():
    matches = [ep for ep in entry_points(group="semvec.backends") if ep.name == "pgvector"]
    assert len(matches) == 1
    assert matches[0].value == "backends.pgvector:PgVectorAdapter"
    assert matches[0].dist is not None and matches[0].dist.name == "semvecctl"
    from backends.pgvector import PgVectorAdapter

    assert matches[0].load() is PgVectorAdapter


def test_no_uri_and_no_env_is_a_config_error(monkeypatch):
    from backends.pgvector import PgVectorAdapter

    monkeypatch.delenv("SEMVEC_PGVECTOR_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(BackendConfigError, match="SEMVEC_PGVECTOR_URL or DATABASE_URL"):
        PgVectorAdapter()


def test_the_location_comes_from_our_variable_then_the_engines(monkeypatch):
    from backends.pgvector.config import PGVECTOR_VARIABLES
    from backends.postgres.config import SqlConfig

    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u:pw@engine-host/db")
    monkeypatch.delenv("SEMVEC_PGVECTOR_URL", raising=False)
    config = SqlConfig.resolve(None, {}, variables=PGVECTOR_VARIABLES)
    assert config.conninfo == "postgresql://u:pw@engine-host/db"  # SQLAlchemy's +driver dropped
    assert "pw" not in config.display_uri
    monkeypatch.setenv("SEMVEC_PGVECTOR_URL", "postgresql://ours/db")
    assert SqlConfig.resolve(None, {}, variables=PGVECTOR_VARIABLES).conninfo == "postgresql://ours/db"
    # the postgres backend reads the engine's variable only, and says so
    assert SqlConfig.resolve(None, {}).conninfo == \
        "postgresql://u:pw@engine-host/db"
    monkeypatch.delenv("DATABASE_URL")
    with pytest.raises(BackendConfigError, match="postgres backend needs a location.*DATABASE_URL"):
        SqlConfig.resolve(None, {})
    with pytest.raises(BackendConfigError, match="postgres option pool_size"):
        SqlConfig.resolve("postgresql://h/db", {"pool_size": 0})


def test_env_supplies_uri_dimensions_and_schema(monkeypatch):
    from backends.pgvector import PgVectorAdapter

    monkeypatch.setenv("SEMVEC_PGVECTOR_URL", "postgresql://u:pw@db.example:5433/semvec")
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", "768")
    monkeypatch.setenv("SEMVEC_PGVECTOR_SCHEMA", "mem")
    adapter = PgVectorAdapter()  # no I/O in the constructor
    try:
        assert adapter.config.dimensions == 768
        assert adapter.config.schema == "mem"
        assert "pw" not in adapter.config.display_uri and "pw" not in repr(adapter)
    finally:
        adapter.close()


def test_defaults():
    from backends.pgvector import PgVectorAdapter

    adapter = PgVectorAdapter("postgresql://localhost/db")
    try:
        assert adapter.config.dimensions == 384 and adapter.config.schema == "public"
    finally:
        adapter.close()


@pytest.mark.parametrize(
    "uri, options, message",
    [
        ("redis://localhost", {}, "postgresql://"),
        ("postgresql://localhost/db", {"dimensions": 0}, "dimensions"),
        ("postgresql://localhost/db", {"dimensions": "many"}, "dimensions"),
        ("postgresql://localhost/db", {"schema": "bad-name;drop"}, "schema"),
        ("postgresql://localhost/db", {"colour": "blue"}, "colour"),
        ("postgresql://u:topsecret@localhost/db", {"pool_size": 0}, "pool_size"),
        ("postgresql://localhost/db", {"search_mode": "fast"}, "search_mode"),
        ("postgresql://localhost/db", {"exact_search_limit": -1}, "exact_search_limit"),
    ],
)
def test_bad_configuration_is_refused_without_leaking_secrets(uri, options, message):
    from backends.pgvector import PgVectorAdapter

    with pytest.raises(BackendConfigError, match=message) as info:
        PgVectorAdapter(uri, **options)
    assert "topsecret" not in str(info.value)


def test_missing_driver_names_the_extra(monkeypatch):
    import builtins

    from backends.errors import MissingDriver
    from backends.pgvector import PgVectorAdapter

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "psycopg" or name.startswith("psycopg."):
            raise ImportError("no psycopg")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(MissingDriver, match=r"semvecctl\[pgvector\]"):
        PgVectorAdapter("postgresql://localhost/db")
