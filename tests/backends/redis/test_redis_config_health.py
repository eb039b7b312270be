"""Redis configuration, connection schemes, health and durability, error categories.

Uses the suite's private redis-server; the TLS test starts its own TLS-only server with a
throw-away self-signed certificate (skipped when openssl is missing).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from backends.contract import HealthDetails
from backends.errors import (
    BackendAuthError,
    BackendConfigError,
    BackendTransient,
    BackendUnreachable,
    MissingDriver,
)
from backends.redis import RedisBackendAdapter
from backends.redis.health import durability_verdict
from backends.redis.config import RedisSettings
from tests.support.fixtures.redis_server import closed_port, free_port
from tests.support.bounds import bounded_by

pytestmark = pytest.mark.redis


def sid() -> str:
    return f"s-{uuid.uuid4().hex}"


# -- configuration (no server needed) ------------------------------------------------


def test_uri_argument_beats_environment_which_beats_default(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("SEMVEC_REDIS_SESSION_TTL_S", raising=False)
    assert RedisSettings.resolve(None, {}).url == "redis://localhost:6379/0"
    monkeypatch.setenv("REDIS_URL", "redis://env-host:6380/2")
    assert RedisSettings.resolve(None, {}).url == "redis://env-host:6380/2"
    assert RedisSettings.resolve("redis://arg:1/0", {}).url == "redis://arg:1/0"


def test_timeouts_are_bounded_by_default_and_configurable():
    default = RedisSettings.resolve("redis://h/0", {})
    assert 0 < default.connect_timeout <= 5 and 0 < default.socket_timeout <= 10
    both = RedisSettings.resolve("redis://h/0", {"timeout": 1.5})
    assert (both.connect_timeout, both.socket_timeout) == (1.5, 1.5)
    split = RedisSettings.resolve("redis://h/0", {"timeout": 2, "connect_timeout": 0.5})
    assert (split.connect_timeout, split.socket_timeout) == (0.5, 2.0)


@pytest.mark.parametrize(
    "uri, options",
    [
        ("http://user:hunter2@host/0", {}),
        ("mongodb://user:hunter2@host", {}),
        ("redis://user:hunter2@host/0", {"connect_timeout": 0}),
        ("redis://user:hunter2@host/0", {"ttl_seconds": -1}),
        ("redis://user:hunter2@host/0", {"colour": "red"}),
        ("redis://user:hunter2@host:notaport/0", {}),
    ],
)
def test_bad_configuration_is_a_config_error_without_credentials(uri, options):
    with pytest.raises(BackendConfigError) as info:
        RedisBackendAdapter(uri, **options)
    assert "hunter2" not in str(info.value)


def test_bad_ttl_environment(monkeypatch):
    monkeypatch.setenv("SEMVEC_REDIS_SESSION_TTL_S", "soon")
    with pytest.raises(BackendConfigError, match="SEMVEC_REDIS_SESSION_TTL_S"):
        RedisBackendAdapter("redis://localhost/0")


def test_constructor_does_no_io(monkeypatch):
    import socket

    connects: list = []

    def refuse(self, address, *args, **kwargs):
        connects.append(address)
        raise AssertionError(f"the constructor connected to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: refuse(None, address))
    adapter = RedisBackendAdapter(f"redis://10.255.255.1:{free_port()}/0", timeout=5)
    adapter.close()
    assert connects == []


def test_missing_driver_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingDriver, match=r"semvecctl\[redis\]"):
        RedisBackendAdapter("redis://localhost/0")


def test_importing_the_package_does_not_import_the_driver():
    code = ("import sys, backends.redis as r; "
            "assert r.RedisBackendAdapter.is_persistent is True; "
            "assert 'redis' not in sys.modules, 'driver imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[3])


def test_password_never_appears_in_repr_or_errors():
    adapter = RedisBackendAdapter(f"redis://admin:hunter2@127.0.0.1:{closed_port()}/0", timeout=0.5,
                                  retries=0)
    assert "hunter2" not in repr(adapter)
    with pytest.raises(BackendUnreachable) as info:
        adapter.state_store().load("x")
    assert "hunter2" not in str(info.value)
    details = adapter.health_details(0.5)
    assert "hunter2" not in repr(details)


# -- the real server -----------------------------------------------------------------


def test_unix_socket_scheme(redis_server, redis_url):
    if not redis_server.unix_socket:
        pytest.skip("external server: no unix socket known")
    with RedisBackendAdapter(f"unix://{redis_server.unix_socket}?db=0") as adapter:
        assert adapter.check_health() is True
        s = sid()
        adapter.state_store().save(s, b"via socket", expected_version=None)
    with RedisBackendAdapter(redis_url) as tcp:
        assert tcp.state_store().load(s)[0] == b"via socket"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    from tests.support.fixtures.redis_server import find_redis_binary

    binary, openssl = find_redis_binary(), shutil.which("openssl")
    if not binary or not openssl:
        pytest.skip("redis-server or openssl missing")
    workdir = tmp_path_factory.mktemp("redis-tls")
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-auth-clients", "no",
         "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={cert}"
    try:
        deadline = time.monotonic() + 10
        with RedisBackendAdapter(url, timeout=0.5) as probe:
            while not probe.check_health():
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("this redis-server cannot serve TLS")
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(5)


def test_rediss_scheme_against_a_tls_server(tls_server):
    with RedisBackendAdapter(tls_server) as adapter:
        s = sid()
        assert adapter.state_store().save(s, b"over tls", expected_version=None) == 1
        assert adapter.state_store().load(s)[0] == b"over tls"
        assert adapter.health_details(2)["reachable"] is True
    plain = tls_server.replace("rediss://", "redis://").split("?")[0]
    with RedisBackendAdapter(plain, timeout=0.5) as not_tls:
        assert not_tls.check_health() is False


def test_check_health_true_on_a_live_server(redis_url):
    with RedisBackendAdapter(redis_url) as adapter:
        assert adapter.check_health() is True


def test_check_health_is_false_fast_on_a_closed_port():
    adapter = RedisBackendAdapter(f"redis://127.0.0.1:{closed_port()}/0", timeout=1)
    started = time.monotonic()
    assert adapter.check_health() is False
    assert time.monotonic() - started < bounded_by(1)


def test_check_health_is_bounded_on_a_blackholed_address():
    # 10.255.255.1 is a non-routable address: SYNs go unanswered (or fail at once offline)
    adapter = RedisBackendAdapter("redis://10.255.255.1:6379/0", timeout=0.5)
    started = time.monotonic()
    assert adapter.check_health() is False
    assert time.monotonic() - started < bounded_by(0.5)  # unbounded: the kernel's ~2 min
    details = adapter.health_details(0.5)
    assert details["reachable"] is False and details["durable"] is False
    assert time.monotonic() - started < bounded_by(0.5 + 0.5)


def test_operations_on_a_closed_port_raise_unreachable_within_the_timeout():
    adapter = RedisBackendAdapter(f"redis://127.0.0.1:{closed_port()}/0", timeout=0.5, retries=0)
    started = time.monotonic()
    with pytest.raises(BackendUnreachable) as info:
        adapter.commit_turn("s", b"x", expected_version=None)
    assert info.value.__cause__ is not None
    assert time.monotonic() - started < bounded_by(0.5)


def test_wrong_credentials_are_an_auth_error(redis_server, redis_url):
    url = redis_url.replace("redis://", "redis://nobody:hunter2@")
    with RedisBackendAdapter(url, timeout=1, retries=0) as adapter:
        with pytest.raises(BackendAuthError) as info:
            adapter.state_store().load("x")
        assert "hunter2" not in str(info.value)
        assert adapter.check_health() is False
        details = adapter.health_details(1)
        assert details["error"] == "BackendAuthError" and details["category"] == "auth"
        assert details["reason"].startswith("credentials refused")
        assert "unreachable" not in details["reason"] and "hunter2" not in str(details)


def test_health_follows_a_server_restart(redis_server, redis_url):
    if not redis_server.managed:
        pytest.skip("external server cannot be stopped")
    adapter = RedisBackendAdapter(redis_url, timeout=0.5)
    s = sid()
    adapter.state_store().save(s, b"a", expected_version=None)
    redis_server.stop()
    try:
        assert adapter.check_health() is False
        with pytest.raises(BackendUnreachable):
            adapter.state_store().load(s)
    finally:
        redis_server.start()
    assert adapter.check_health() is True
    # the pooled client reconnects by itself; the server had no persistence
    assert adapter.state_store().load(s) is None
    assert adapter.state_store().save(s, b"b", expected_version=None) == 1


# -- durability --------------------------------------------------------------------


def test_details_report_the_test_server_as_not_durable(redis_url):
    with RedisBackendAdapter(redis_url) as adapter:
        assert isinstance(adapter, HealthDetails)
        details = adapter.health_details(2)
    assert details["reachable"] is True
    assert details["aof_enabled"] is False
    assert details["durable"] is False
    assert "AOF" in details["reason"]
    assert details["maxmemory_policy"]
    assert details["server_version"]


@pytest.fixture
def server_config(redis_server, redis_url):
    """CONFIG SET on the private server, restored afterwards."""
    if not redis_server.managed:
        pytest.skip("will not reconfigure an external server")
    client = redis_server.client()
    saved = {k: client.config_get(k)[k] for k in ("appendonly", "maxmemory", "maxmemory-policy")}

    def apply(**settings):
        for name, value in settings.items():
            client.config_set(name.replace("_", "-"), value)

    yield apply
    for name, value in saved.items():
        client.config_set(name, value)
    client.close()


def test_durable_with_aof_and_noeviction(redis_url, server_config):
    server_config(appendonly="yes", maxmemory="0", maxmemory_policy="noeviction")
    with RedisBackendAdapter(redis_url) as adapter:
        details = adapter.health_details(2)
    assert details["aof_enabled"] is True
    assert details["can_evict_keys"] is False
    assert details["durable"] is True, details["reason"]


def test_not_durable_when_any_key_can_be_evicted(redis_url, server_config):
    server_config(appendonly="yes", maxmemory="1gb", maxmemory_policy="allkeys-lru")
    with RedisBackendAdapter(redis_url) as adapter:
        details = adapter.health_details(2)
    assert details["can_evict_keys"] is True
    assert details["durable"] is False
    assert "allkeys-lru" in details["reason"]


@pytest.mark.parametrize(
    "info, ttl, durable, evicts",
    [
        ({"aof_enabled": 1, "maxmemory": 0, "maxmemory_policy": "allkeys-lru"}, 0, True, "none"),
        ({"aof_enabled": 1, "maxmemory": 10, "maxmemory_policy": "noeviction"}, 0, True, "none"),
        ({"aof_enabled": 1, "maxmemory": 10, "maxmemory_policy": "allkeys-random"}, 0, False, "any"),
        ({"aof_enabled": 1, "maxmemory": 10, "maxmemory_policy": "volatile-lru"}, 0, True, "volatile"),
        ({"aof_enabled": 1, "maxmemory": 10, "maxmemory_policy": "volatile-ttl"}, 60, False, "volatile"),
        ({"aof_enabled": 0, "maxmemory": 0, "maxmemory_policy": "noeviction"}, 0, False, "none"),
        ({"aof_enabled": 1, "aof_last_write_status": "err", "maxmemory": 0,
          "maxmemory_policy": "noeviction"}, 0, False, "none"),
    ],
)
def test_durability_verdict(info, ttl, durable, evicts):
    verdict = durability_verdict(info, ttl)
    assert verdict["durable"] is durable
    assert verdict["evicts"] == evicts
    assert verdict["can_evict_keys"] is (evicts != "none")
    assert verdict["reason"]


# -- the fixture itself --------------------------------------------------------------


@pytest.mark.parametrize("require, outcome", [("", "skipped"), ("postgres,redis", "failed")])
def test_fixture_skips_or_fails_without_a_server(tmp_path, require, outcome):
    probe = tmp_path / "test_probe.py"
    probe.write_text("def test_needs_redis(redis_server):\n    pass\n")
    conftest = tmp_path / "conftest.py"
    conftest.write_text("pytest_plugins = ['tests.support.fixtures.redis_server']\n")
    env = {k: v for k, v in os.environ.items() if k != "SEMVEC_TEST_REDIS_URL"}
    env.update(PATH=str(tmp_path), SEMVEC_TEST_REQUIRE=require,
               PYTHONPATH=str(Path(__file__).parents[3]))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         str(probe)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )
    assert f"1 {outcome}" in result.stdout or (outcome == "failed" and "1 error" in result.stdout), \
        result.stdout[-2000:]


@pytest.mark.parametrize(
    "error, category",
    [
        ("redis.exceptions:ConnectionError", BackendUnreachable),
        ("redis.exceptions:TimeoutError", BackendUnreachable),
        ("redis.exceptions:AuthenticationError", BackendAuthError),
        ("redis.exceptions:NoPermissionError", BackendAuthError),
    ],
)
def test_driver_errors_map_to_categories(error, category):
    import importlib

    from backends.redis.errors import translate_error

    module, name = error.split(":")
    exc = getattr(importlib.import_module(module), name)("boom")
    assert isinstance(translate_error(exc, "redis://h"), category)


@pytest.mark.parametrize(
    "error, category",
    [
        ("BusyLoadingError", BackendTransient),
        ("TryAgainError", BackendTransient),
        ("ReadOnlyError", BackendTransient),
        ("ClusterDownError", BackendTransient),
        ("MasterDownError", BackendTransient),
        ("AuthorizationError", BackendAuthError),
    ],
)
def test_retry_now_is_told_apart_from_host_down(error, category):
    import redis.exceptions as rx

    from backends.redis.errors import redis_errors

    driver_error = getattr(rx, error)("boom")
    with pytest.raises(category) as raised:
        with redis_errors("redis://h"):
            raise driver_error
    assert raised.value.__cause__ is driver_error  # the driver's cause is kept


def test_tls_failures_are_configuration_errors():
    import ssl

    import redis.exceptions as rx

    from backends.redis.errors import translate_error

    wrapped = rx.ConnectionError("Error 1 connecting to h:6380. [SSL: CERTIFICATE_VERIFY_FAILED]")
    wrapped.__cause__ = ssl.SSLCertVerificationError("certificate verify failed")
    assert isinstance(translate_error(wrapped, "rediss://h"), BackendConfigError)
    assert isinstance(translate_error(rx.ConnectionError("Error 111 connecting to h:6379. "
                                                   "Connection refused."), "redis://h"),
                      BackendUnreachable)
    assert isinstance(translate_error(rx.ConnectionError("Error -2 connecting to nohost:6379. "
                                                   "Name or service not known."), "redis://h"),
                      BackendUnreachable)


def test_wrongtype_on_a_session_key_is_corrupt_state_naming_it():
    from redis.exceptions import ResponseError

    from backends.errors import CorruptState
    from backends.redis.errors import redis_errors

    with pytest.raises(CorruptState) as raised:
        with redis_errors("redis://h", "sess-1"):
            raise ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    assert raised.value.session_id == "sess-1" and raised.value.__cause__ is not None


@pytest.mark.parametrize(
    "text, category",
    [
        ("LOADING Redis is loading the dataset in memory", "BackendTransient"),
        ("READONLY You can't write against a read only replica.", "BackendTransient"),
        ("MASTERDOWN Link with MASTER is down", "BackendTransient"),
        ("CLUSTERDOWN The cluster is down", "BackendTransient"),
        ("TRYAGAIN Multiple keys request during rehashing of slot", "BackendTransient"),
        ("NOAUTH Authentication required.", "BackendAuthError"),
        ("WRONGPASS invalid username-password pair", "BackendAuthError"),
        ("WRONGTYPE Operation against a key holding the wrong kind of value", "IntegrityError"),
        ("CROSSSLOT Keys in request don't hash to the same slot", "UnsupportedOperation"),
        ("ERR semvec commit_turn: malformed ttl", "IntegrityError"),
        ("ERR something else", "BackendError"),
    ],
)
def test_error_replies_map_to_categories(text, category):
    from redis.exceptions import ResponseError

    from backends.redis.errors import translate_error

    assert type(translate_error(ResponseError(text), "redis://h")).__name__ == category
