"""semvecctl on the ``postgres`` backend: discovery, URI disambiguation and overrides,
and the commands an operator of an engine SQL deployment uses, on a real PostgreSQL."""

from __future__ import annotations

import json

import psycopg
import pytest
from typer.testing import CliRunner

from semvecctl.app import app


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def test_backends_list_shows_postgres_and_pgvector_from_this_distribution():
    result = run("backends", "list", "-o", "json")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["postgres"]["target"] == "backends.postgres:PostgresAdapter"
    for name in ("postgres", "pgvector"):
        assert rows[name]["source"].startswith("semvecctl") and rows[name]["status"] == "ok"


def test_a_contradicting_backend_is_a_usage_error_but_either_sql_backend_fits():
    result = run("health", "--backend", "redis", "--uri", "postgresql://h:1/db")
    assert result.exit_code == 2
    assert "postgres" in result.output and "pgvector" in result.output


def test_an_unreachable_database_is_resolved_as_postgres_with_the_reason():
    result = run("backends", "resolve", "--uri", "postgresql://u:hunter2@127.0.0.1:1/x",
                 "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["resolved"] == "postgres" and "could not be inspected" in data["chosen_by"]
    assert "hunter2" not in result.output


pg = pytest.mark.postgres


@pg
def test_backend_flag_overrides_what_the_database_holds(pgvector_url, pgvector_adapter_factory):
    pgvector_adapter_factory().ensure_schema()  # item table + extension: auto is pgvector
    auto = run("health", "--uri", pgvector_url, "-o", "json")
    assert json.loads(auto.stdout)["backend"] == "pgvector", auto.output
    forced = run("health", "--backend", "postgres", "--uri", pgvector_url, "-o", "json")
    assert forced.exit_code == 0, forced.output
    report = json.loads(forced.stdout)
    assert report["backend"] == "postgres"
    assert report["details"]["database_layout"] == "pgvector"  # what the database holds


@pg
def test_sessions_delete_import_and_copy_on_postgres(pgvector_url, postgres_server, tmp_path,
                                                    postgres_adapter_factory):
    source = postgres_adapter_factory()
    source.state_store().save("a", b"\x00a", expected_version=None, owner_subject="acme")
    source.state_store().save("b", b"b", expected_version=None)
    archive = tmp_path / "out.jsonl"
    assert run("sessions", "export", "--backend", "postgres", "--uri", pgvector_url,
               "--out", str(archive), "--yes").exit_code == 0

    target = postgres_server.url(postgres_server.take_database())
    imported = run("sessions", "import", str(archive), "--backend", "postgres", "--uri", target,
                   "--apply", "--yes", "--keep-versions")
    assert imported.exit_code == 0, imported.output
    with psycopg.connect(target) as conn:
        rows = conn.execute("SELECT session_id, state_blob, version, owner_subject"
                            " FROM semvec_session_state ORDER BY session_id").fetchall()
    assert rows == [("a", b"\x00a", 1, "acme"), ("b", b"b", 1, None)]

    deleted = run("sessions", "delete", "b", "--backend", "postgres", "--uri", pgvector_url,
                  "--apply", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert source.state_store().load("b") is None


@pg
def test_sessions_copy_between_two_engine_databases(pgvector_url, postgres_server,
                                                   postgres_adapter_factory):
    source = postgres_adapter_factory()
    source.state_store().save("c", b"copy me", expected_version=None, owner_subject="acme")
    source.state_store().save("c", b"copy me 2", expected_version=1, owner_subject="acme")
    target = postgres_server.url(postgres_server.take_database())
    copied = run("sessions", "copy", "--from", pgvector_url, "--to", target, "--apply", "--yes",
                 "--keep-versions")
    assert copied.exit_code == 0, copied.output
    with psycopg.connect(target) as conn:
        assert conn.execute("SELECT state_blob, version, owner_subject, drift_exempt FROM"
                            " semvec_session_state").fetchall() == [(b"copy me 2", 2, "acme", False)]


def test_doctor_on_postgres_prints_no_false_rate(pgvector_url, postgres_adapter_factory):
    """The SQL audit asks the server for suspect rows only, so it counts nothing on a clean
    store: its summary said "(0/s)". Now no rate is printed when nothing was counted."""
    adapter = postgres_adapter_factory()
    adapter.state_store().save("clean", b"x", expected_version=None)
    result = run("doctor", "--uri", pgvector_url, "--backend", "postgres")
    assert result.exit_code == 0, result.output
    (summary,) = [ln for ln in result.stderr.splitlines() if "error(s)" in ln]
    assert "/s)" not in summary and " in " in summary, summary
