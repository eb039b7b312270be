"""#23 Build 9: an embedding-column dimension mismatch is drift everywhere. On a
``vector(8)`` item table, ``indexes plan|ensure|validate --dimensions 384`` all report
the dimension (ensure cannot change a column's type, even with --recreate, so it exits 1
naming it instead of building an index validate then rejects). Real PostgreSQL."""

from __future__ import annotations

import json

import psycopg
import pytest
from typer.testing import CliRunner

from semvecctl.app import app

pytestmark = pytest.mark.postgres


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def _dims_rows(result):
    return [r for r in json.loads(result.stdout)["indexes"] if r["name"] == "semvec_items_vec"]


@pytest.fixture
def table8(pgvector_url, pgvector_adapter_factory):
    """Tables made at vector(8) (the factory's dimension) with no vector index yet."""
    adapter = pgvector_adapter_factory(dimensions=8)
    adapter.ensure_indexes(dimensions=8)
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute("DROP INDEX semvec_items_vec")
    return pgvector_url


@pytest.mark.parametrize("recreate", [[], ["--recreate"]], ids=["plain", "recreate"])
def test_ensure_refuses_a_dimension_it_cannot_give(table8, recreate):
    url = table8
    plan = run("indexes", "plan", "--uri", url, "--dimensions", "384", *recreate, "-o", "json")
    assert plan.exit_code == 1, plan.output
    (row,) = _dims_rows(plan)
    assert row["action"] == "mismatch" and "vector(384)" in row["detail"], row
    assert "vector(8)" in row["detail"]

    ensure = run("indexes", "ensure", "--uri", url, "--dimensions", "384", "--apply", "--yes", *recreate,
                 "-o", "json")
    assert ensure.exit_code == 1, ensure.output
    (row,) = _dims_rows(ensure)
    assert row["action"] == "mismatch" and row["applied"] is False
    assert "semvec_items_vec" in ensure.stderr and "dimensions" in ensure.stderr
    with psycopg.connect(url) as conn:  # nothing built at the wrong dimension
        assert conn.execute("SELECT to_regclass('semvec_items_vec')").fetchone()[0] is None

    validate = run("indexes", "validate", "--uri", url, "--dimensions", "384", "-o", "json")
    assert validate.exit_code == 1
    (row,) = _dims_rows(validate)
    assert row["state"] == "drift"
    assert {"field": "dimensions", "expected": "vector(384)", "actual": "vector(8)"} \
        in row["differences"]


def test_matching_dimensions_still_create_the_index(table8):
    ensure = run("indexes", "ensure", "--uri", table8, "--dimensions", "8", "--apply", "--yes")
    assert ensure.exit_code == 0, ensure.output
    assert run("indexes", "validate", "--uri", table8, "--dimensions", "8").exit_code == 0
