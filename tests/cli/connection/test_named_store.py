"""#23 finding 7: no empty store checked by default.

A command that works on a store refuses to run against the in-memory backend unless it
was named (``--backend memory``, ``memory://``, ``SEMVEC_SESSION_BACKEND=memory`` or a
profile), exits 2, and names the engine variables it saw; ``--uri ""`` is a usage error,
never "absent". Against the suite's real Redis and PostgreSQL: with only their URI
variable set, nothing is read from or written to them by an unnamed command.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from semvecctl.app import app

#: every variable that could name a store, cleared so only what a test sets counts
CLEAN = {"SEMVEC_SESSION_BACKEND": None, "REDIS_URL": None, "MONGODB_URI": None,
         "DATABASE_URL": None, "SEMVEC_PGVECTOR_URL": None, "SEMVECCTL_CONFIG": None,
         "SEMVECCTL_PROFILE": None}


def run(*args: str, env: dict | None = None, tmp_path=None):
    full = dict(CLEAN)
    if tmp_path is not None:
        full["XDG_CONFIG_HOME"] = str(tmp_path)  # no profile from the machine's config
    full.update(env or {})
    return CliRunner().invoke(app, list(args), env=full)


#: store commands, with the arguments each needs to get as far as choosing the store
STORE_COMMANDS = [
    ("sessions", "list"),
    ("sessions", "inspect", "some-id"),
    ("sessions", "delete", "some-id", "--apply", "--yes"),
    ("sessions", "export", "--out", "{out}"),
    ("sessions", "import", "{archive}"),
    ("sessions", "prune", "--idle-for", "1d"),
    ("events", "list", "--user", "u1"),
    ("events", "count", "--user", "u1"),
    ("events", "export", "--user", "u1"),
    ("erase", "--user", "u1", "--owner", "acme"),
    ("doctor",),
    ("indexes", "plan"),
    ("indexes", "ensure", "--apply", "--yes"),
    ("indexes", "validate"),
    ("retrieve", "run", "--session", "s1", "--query", "q"),
    ("load", "run", "--apply", "--yes", "--duration", "0.1"),
    ("load", "cleanup", "--prefix", "semvec-load-abc-", "--apply", "--yes"),
    ("health",),
]


def _args(command: tuple[str, ...], tmp_path) -> list[str]:
    archive = tmp_path / "in.jsonl"
    archive.write_text("")
    return [a.format(out=tmp_path / "out.jsonl", archive=archive) for a in command]


@pytest.mark.parametrize("command", STORE_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_unnamed_store_is_refused_naming_the_variables_seen(command, tmp_path):
    env = {"REDIS_URL": "redis://127.0.0.1:1/0", "SEMVEC_PGVECTOR_URL": "postgresql://h/db"}
    result = run(*_args(command, tmp_path), env=env, tmp_path=tmp_path)
    assert result.exit_code == 2, result.output
    assert "no backend named" in result.stderr
    assert "REDIS_URL is set: did you mean --backend redis?" in result.stderr
    assert "SEMVEC_PGVECTOR_URL is set: did you mean --backend pgvector?" in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "out.jsonl").exists()


def test_the_refusal_names_mongo_and_database_url(tmp_path):
    env = {"MONGODB_URI": "mongodb://h/", "DATABASE_URL": "postgresql://h/db"}
    result = run("doctor", env=env, tmp_path=tmp_path)
    assert result.exit_code == 2, result.output
    assert "MONGODB_URI is set: did you mean --backend mongo?" in result.stderr
    assert "DATABASE_URL is set: did you mean --backend pgvector or --backend postgres?" \
        in result.stderr


def test_no_variable_set_still_refuses(tmp_path):
    result = run("sessions", "list", tmp_path=tmp_path)
    assert result.exit_code == 2, result.output
    assert "--backend memory" in result.stderr and "is set" not in result.stderr


@pytest.mark.parametrize("how", ["flag", "uri", "env", "profile"])
def test_memory_named_any_way_runs(how, tmp_path):
    args = ["sessions", "list", "-o", "json"]
    env: dict = {"REDIS_URL": "redis://127.0.0.1:1/0"}
    if how == "flag":
        args += ["--backend", "memory"]
    elif how == "uri":
        args += ["--uri", "memory://"]
    elif how == "env":
        env["SEMVEC_SESSION_BACKEND"] = "memory"
    else:
        config = tmp_path / "semvecctl" / "config.yaml"
        config.parent.mkdir()
        config.write_text("current-profile: scratch\nprofiles:\n  scratch:\n    backend: memory\n")
    result = run(*args, env=env, tmp_path=tmp_path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def test_config_view_and_conformance_decide_for_themselves(tmp_path):
    view = run("config", "view", "-o", "json", tmp_path=tmp_path)
    assert view.exit_code == 0, view.output
    assert json.loads(view.stdout)["connection"]["from"] == "default"
    conformance = run("conformance", "run", tmp_path=tmp_path)
    assert conformance.exit_code == 2
    assert "name the backend to certify" in conformance.stderr


@pytest.mark.parametrize("extra", [[], ["--backend", "redis"], ["--backend", "memory"]])
def test_empty_uri_is_a_usage_error(extra, tmp_path):
    result = run("sessions", "list", "--uri", "", *extra, tmp_path=tmp_path)
    assert result.exit_code == 2, result.output
    assert "--uri is empty" in result.stderr


@pytest.mark.redis
def test_only_redis_url_set_exports_nothing_and_says_so(redis_url, tmp_path):
    """The issue's case on the real Redis: a session is there, REDIS_URL points at it,
    and `sessions export` / `doctor` without a backend refuse instead of "0 sessions"."""
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(redis_url) as adapter:
        adapter.state_store().save("named-1", b"blob", expected_version=None)
    out = tmp_path / "out.jsonl"
    export = run("sessions", "export", "--out", str(out), env={"REDIS_URL": redis_url},
                 tmp_path=tmp_path)
    assert export.exit_code == 2, export.output
    assert "did you mean --backend redis?" in export.stderr
    assert "exported 0" not in export.output and not out.exists()
    doctor = run("doctor", env={"REDIS_URL": redis_url}, tmp_path=tmp_path)
    assert doctor.exit_code == 2 and "0 error(s)" not in doctor.output
    named = run("sessions", "export", "--backend", "redis", "--out", str(out),
                env={"REDIS_URL": redis_url}, tmp_path=tmp_path)
    assert named.exit_code == 0, named.output
    assert out.exists()


@pytest.mark.redis
def test_empty_uri_with_backend_redis_never_reaches_localhost(redis_url, tmp_path):
    result = run("sessions", "list", "--backend", "redis", "--uri", "", tmp_path=tmp_path)
    assert result.exit_code == 2, result.output
    assert "localhost" not in result.output and "unreachable" not in result.output
