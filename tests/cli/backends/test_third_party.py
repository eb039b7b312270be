"""A third-party adapter states its facts as class attributes (URI scheme, URI variable,
secret variable); the CLI selects it by scheme and scrubs its secret with no edit of its
own. The plugin is a real ``*.dist-info`` distribution on ``sys.path``."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.plugins import forget_modules, make_distribution

TOKEN = "tok-" + uuid.uuid4().hex
PASSWORD = "pw-" + uuid.uuid4().hex[:12]

ACME_ADAPTER = '''
import os

from backends.memory import MemoryStateStore


class _LeakyStore(MemoryStateStore):
    """Every read fails with a message carrying the credentials, as a careless driver's
    error might."""

    def __init__(self, uri):
        super().__init__()
        self.uri = uri

    def current_version(self, session_id, **kwargs):
        raise ConnectionError(
            f"acme refused token {os.environ.get('ACME_TOKEN')} at {self.uri}")


class AcmeAdapter:
    name = "{name}"
    is_persistent = True
    uri_schemes = ("{scheme}",)
    uri_env = "ACME_URL"
    secret_env = ("ACME_TOKEN",)

    def __init__(self, uri=None):
        self.uri = uri or os.environ.get("ACME_URL")
        self._store = _LeakyStore(self.uri)

    def state_store(self):
        return self._store

    def event_store(self):
        return None

    def retrieval_backend(self):
        return None

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        return self._store.save(session_id, blob, expected_version=expected_version)

    def check_health(self):
        return False
'''


@pytest.fixture
def acme(tmp_path, monkeypatch):
    """An installed plugin named acme_<hex> claiming the scheme acme<hex>://."""
    suffix = uuid.uuid4().hex[:8]
    name, scheme, module = f"acme_{suffix}", f"acme{suffix}", f"acme_plugin_{suffix}"
    site = tmp_path / "site"
    make_distribution(site, "acme-backend", "1.0", {name: f"{module}:AcmeAdapter"},
                      {module: ACME_ADAPTER.replace("{name}", name).replace("{scheme}", scheme)})
    monkeypatch.syspath_prepend(str(site))
    yield name, scheme
    forget_modules(module)


def run(*args, env=None):
    return CliRunner().invoke(app, list(args), env=env)


def test_the_plugin_scheme_selects_the_plugin(acme):
    name, scheme = acme
    result = run("backends", "resolve", "--uri", f"{scheme}://ops@db.example/x", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["resolved"] == name


def test_an_unclaimed_scheme_is_still_refused(acme):
    result = run("backends", "resolve", "--uri", "nosuchscheme://db.example/x")
    assert result.exit_code == 2
    assert "unknown URI scheme 'nosuchscheme://'" in result.stderr
    assert f"{acme[1]}://" in result.stderr  # the plugin's claim is offered


def test_the_plugin_secret_variable_is_scrubbed_everywhere(acme):
    name, scheme = acme
    uri = f"{scheme}://ops:{PASSWORD}@db.example/x"
    for fmt in ("json", "table"):
        result = run("health", "--uri", uri, "--timeout", "5", "-o", fmt,
                     env={"ACME_TOKEN": TOKEN})
        text = result.stdout + result.stderr
        assert result.exit_code == 4, text
        assert name in text
        assert "acme refused token" in text  # the message is shown ...
        assert TOKEN not in text and PASSWORD not in text  # ... without the secrets


def test_the_plugin_uri_variable_is_read_by_the_cli(acme):
    name, scheme = acme
    result = run("health", "--backend", name, "--timeout", "5", "-o", "json",
                 env={"ACME_URL": f"{scheme}://ops:{PASSWORD}@db.example/x",
                      "ACME_TOKEN": TOKEN})
    text = result.stdout + result.stderr
    assert result.exit_code == 4, text
    assert f"{scheme}://ops:***@db.example/x" in text
    assert TOKEN not in text and PASSWORD not in text
