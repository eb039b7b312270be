"""#23 Build 9: one exit-code rule in every command: a permanent configuration error is 3,
a transient or unreachable store 4, a malformed command line 2. Each case against the
suite's real PostgreSQL and Redis, in `health` and in commands that read the store."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.fixtures.redis_server import closed_port

#: a gate, a listing, an audit: the same answer in each
COMMANDS = [("health",), ("sessions", "list"), ("doctor",)]


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def _each(uri: str, backend: str, env: dict | None = None):
    return [(cmd, run(*cmd, "--backend", backend, "--uri", uri, env=env)) for cmd in COMMANDS]


def _assert_all(results, code: int, needle: str) -> None:
    for cmd, result in results:
        where = " ".join(cmd)
        assert result.exit_code == code, f"{where}: {result.exit_code} {result.output}"
        assert needle in result.stderr, f"{where}: {result.stderr}"
        assert "Traceback" not in result.output


@pytest.mark.postgres
def test_a_database_that_does_not_exist_is_configuration(pgvector_url):
    uri = pgvector_url.rsplit("/", 1)[0] + "/no_such_database_here"
    _assert_all(_each(uri, "pgvector"), 3, 'database "no_such_database_here" does not exist')


@pytest.mark.postgres
def test_a_role_that_does_not_exist_is_refused_credentials(pgvector_url):
    uri = pgvector_url.replace("://postgres@", "://no_such_role@")
    assert uri != pgvector_url
    _assert_all(_each(uri, "pgvector"), 3, 'role "no_such_role" does not exist')


@pytest.mark.postgres
def test_sslmode_require_against_a_server_without_tls_is_configuration(pgvector_url):
    _assert_all(_each(pgvector_url + "?sslmode=require", "pgvector"), 3,
                "server does not support SSL")


@pytest.mark.postgres
@pytest.mark.parametrize("where", ["uri", "env"])
def test_a_missing_ca_file_is_configuration(pgvector_url, tmp_path, where):
    missing = str(tmp_path / "no-ca.pem")
    if where == "uri":
        uri, env = f"{pgvector_url}?sslmode=verify-full&sslrootcert={missing}", None
    else:
        uri, env = pgvector_url + "?sslmode=verify-full", {"PGSSLROOTCERT": missing}
    _assert_all(_each(uri, "pgvector", env), 3, "no-ca.pem")


@pytest.mark.postgres
def test_a_server_that_is_down_is_still_unreachable(postgres_server):
    uri = f"postgresql://postgres@127.0.0.1:{closed_port()}/semvec?connect_timeout=2"
    for cmd, result in _each(uri, "pgvector"):
        assert result.exit_code == 4, f"{cmd}: {result.output}"


@pytest.mark.redis
def test_a_bad_redis_database_index_is_3_everywhere(redis_url):
    uri = redis_url.rsplit("/", 1)[0] + "/99"
    _assert_all(_each(uri, "redis"), 3, "no such database")


@pytest.mark.redis
@pytest.mark.parametrize("path", ["/abc", "/1x", "/0/extra"])
def test_a_redis_path_that_is_no_number_is_a_usage_error(redis_url, path):
    uri = redis_url.rsplit("/", 1)[0] + path
    _assert_all(_each(uri, "redis"), 2, f"the path {path!r} is not a database number")


@pytest.mark.redis
def test_a_missing_redis_ca_file_is_configuration(redis_url, tmp_path):
    host = redis_url.split("://", 1)[1]
    uri = f"rediss://{host}?ssl_ca_certs={tmp_path / 'no-ca.pem'}"
    _assert_all(_each(uri, "redis"), 3, "no-ca.pem")


@pytest.mark.redis
@pytest.mark.parametrize("path", ["", "/", "/0", "/3"])
def test_good_redis_paths_still_work(redis_url, path):
    uri = redis_url.rsplit("/", 1)[0] + path
    result = run("sessions", "list", "--uri", uri)
    assert result.exit_code == 0, result.output
