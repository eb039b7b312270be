"""Connection resolution (flag > environment > profile), profiles and redaction."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from backends.redaction import redact_uri, scrub
from backends.selection import InvalidURI, backend_for_uri
from semvecctl.app import app


def run(*args, env=None):
    return CliRunner().invoke(app, list(args), env=env)


@pytest.mark.parametrize("uri,backend", [
    ("redis://localhost:6379/0", "redis"),
    ("rediss://h:6380", "redis"),
    ("unix:///tmp/redis.sock", "redis"),
    ("mongodb://h/", "mongo"),
    ("mongodb+srv://cluster0.example.net/", "mongo"),
    ("postgresql://u@h/db", "pgvector"),
    ("memory://", "memory"),
])
def test_scheme_implies_backend(uri, backend):
    assert backend_for_uri(uri) == backend


@pytest.mark.parametrize("bad", ["", "localhost:6379", "http://x", "redis://h:99999999", "redis://"])
def test_bad_uris_are_refused(bad):
    with pytest.raises(InvalidURI):
        backend_for_uri(bad)


@pytest.mark.parametrize("uri,secret", [
    ("redis://:s3cret@h:6379/0", "s3cret"),
    ("redis://user:s3cret@h:6379/0", "s3cret"),
    ("redis://s3cret@h:6379/0", "s3cret"),
    ("mongodb+srv://app:s3cret@cluster0.example.net/?retryWrites=true", "s3cret"),
    ("postgresql://app:s3cret@h/db?sslpassword=k3y", "s3cret"),
    ("postgresql://h/db?password=s3cret", "s3cret"),
])
def test_redaction_removes_secrets(uri, secret):
    shown = redact_uri(uri)
    assert secret not in shown and "***" in shown
    assert secret not in scrub(f"failed to connect to {uri}: {secret} rejected", uri)


def write_config(tmp_path, body: str):
    path = tmp_path / "config.yaml"
    path.write_text(body)
    return path


def health_json(*args, env=None):
    result = run(*args, "-o", "json", env=env)
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def test_profile_supplies_the_connection(tmp_path):
    cfg = write_config(tmp_path, "profiles:\n  cache:\n    uri: redis://:pw0rd@127.0.0.1:1/0\n")
    result, report = health_json("health", "--timeout", "0.5", "--config", str(cfg), "-P", "cache",
                                 env={"REDIS_URL": "", "SEMVEC_SESSION_BACKEND": ""})
    assert report["backend"] == "redis"
    assert "pw0rd" not in result.stdout + result.stderr


def test_env_beats_profile_and_flag_beats_env(tmp_path):
    cfg = write_config(tmp_path, "current-profile: cache\nprofiles:\n  cache:\n    uri: redis://127.0.0.1:1/0\n")
    env = {"SEMVECCTL_CONFIG": str(cfg), "SEMVEC_SESSION_BACKEND": "memory"}
    _, report = health_json("health", "--timeout", "0.5", env=env)
    assert report["backend"] == "memory"  # environment beats the profile
    _, report = health_json("health", "--timeout", "0.5", "--uri", "memory://", env=env)
    assert report["backend"] == "memory"
    env["SEMVEC_SESSION_BACKEND"] = ""
    _, report = health_json("health", "--timeout", "0.5", env=env)
    assert report["backend"] == "redis"  # only the profile left
    _, report = health_json("health", "--timeout", "0.5", "--backend", "memory", env=env)
    assert report["backend"] == "memory"  # flag beats everything


def test_env_uri_beats_a_current_profile_uri_but_not_a_named_one(tmp_path):
    """#28: a profile named with -P beats the environment (kubectl's --context); one
    selected by current-profile or $SEMVECCTL_PROFILE does not."""
    cfg = write_config(tmp_path, "current-profile: p\nprofiles:\n  p:\n    backend: redis\n"
                                 "    uri: redis://:profilepw@127.0.0.1:1/0\n")
    env = {"REDIS_URL": "redis://:envpw@127.0.0.1:2/0", "SEMVEC_SESSION_BACKEND": ""}
    result, report = health_json("health", "--timeout", "0.5", "--config", str(cfg), env=env)
    assert report["uri"] == "redis://:***@127.0.0.1:2/0"
    assert "envpw" not in result.stdout + result.stderr
    result, report = health_json("health", "--timeout", "0.5", "-P", "p", "--config", str(cfg),
                                 env=env)
    assert report["uri"] == "redis://:***@127.0.0.1:1/0"
    assert "profilepw" not in result.stdout + result.stderr
    _, report = health_json("health", "--timeout", "0.5", "--config", str(cfg),
                            env={**env, "SEMVECCTL_PROFILE": "p"})
    assert report["uri"] == "redis://:***@127.0.0.1:2/0"  # the variable is environment


def test_a_named_profile_beats_semvec_session_backend_and_flags_beat_it(tmp_path):
    cfg = write_config(tmp_path, "profiles:\n  cache:\n    uri: redis://127.0.0.1:1/0\n")
    env = {"SEMVEC_SESSION_BACKEND": "memory", "REDIS_URL": ""}
    _, report = health_json("health", "--timeout", "0.5", "--config", str(cfg), "-P", "cache",
                            env=env)
    assert report["backend"] == "redis"  # -P beats the ambient variable
    _, report = health_json("health", "--timeout", "0.5", "--config", str(cfg), "-P", "cache",
                            "--backend", "memory", env=env)
    assert report["backend"] == "memory"  # a flag beats the named profile
    _, report = health_json("health", "--timeout", "0.5", "--config", str(cfg), "-P", "cache",
                            "--uri", "memory://", env=env)
    assert report["backend"] == "memory"


@pytest.mark.parametrize("body,needle", [
    ("profiles: [1, 2]\n", "mapping of names"),
    ("profiles:\n  p:\n    urii: x\n", "unknown keys urii"),
    ("current-profile: nope\nprofiles: {}\n", "current-profile 'nope'"),
    ("profiles: {a: [\n", "not valid YAML"),
])
def test_bad_config_is_an_environment_error(tmp_path, body, needle):
    cfg = write_config(tmp_path, body)
    result = run("health", "--config", str(cfg))
    assert result.exit_code == 3
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_profile_names_the_known_ones(tmp_path):
    cfg = write_config(tmp_path, "profiles:\n  prod: {backend: memory}\n  dev: {backend: memory}\n")
    result = run("health", "--config", str(cfg), "--profile", "stage")
    assert result.exit_code == 3
    assert "profile 'stage' not found" in result.stderr and "dev, prod" in result.stderr


def test_missing_explicit_config_file(tmp_path):
    result = run("health", "--config", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 3 and "does not exist" in result.stderr
