"""`semvecctl health`: a CI gate. Exit 0 healthy, 1 gate failed, 3 environment, 4 unreachable."""

from __future__ import annotations

import json
import socket
import sys
import time

from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.bounds import bounded_by


def run(*args, env=None):
    return CliRunner().invoke(app, list(args), env=env)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_memory_is_healthy_when_named():
    """(Unnamed, health refuses: tests/cli/connection/test_named_store.py.)"""
    result = run("health", "--backend", "memory", "-o", "json", env={"SEMVEC_SESSION_BACKEND": ""})
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["backend"] == "memory"
    assert report["healthy"] is True and report["status"] == "healthy"
    assert report["persistent"] is False


def test_require_persistent_fails_on_memory():
    result = run("health", "--backend", "memory", "--require-persistent", "-o", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["gates"][0] == {"gate": "persistent", "passed": False,
                                  "reason": "backend 'memory' keeps state only in this process"}
    assert "gate persistent failed" in result.stderr


def test_require_durable_fails_on_memory():
    assert run("health", "--uri", "memory://", "--require-durable").exit_code == 1


def test_unreachable_redis_exits_4_quickly_and_redacts():
    started = time.monotonic()
    result = run("health", "--uri", f"redis://admin:hunter2@127.0.0.1:{closed_port()}/0",
                 "--timeout", "1", "-o", "json")
    elapsed = time.monotonic() - started
    assert result.exit_code == 4, result.stderr
    assert elapsed < bounded_by(1)
    report = json.loads(result.stdout)
    assert report["healthy"] is False
    assert "hunter2" not in result.stdout + result.stderr
    assert report["uri"].startswith("redis://admin:***@127.0.0.1")


def test_missing_driver_exits_3(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)
    result = run("health", "--backend", "redis")
    assert result.exit_code == 3
    assert "pip install 'semvecctl[redis]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_uri_is_a_usage_error():
    for bad in ("redis://host:notaport", "not-a-uri", "ftp://x/y", "redis://"):
        result = run("health", "--uri", bad)
        assert result.exit_code == 2, (bad, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
        assert "Traceback" not in result.stderr


def test_backend_contradicting_uri_is_a_usage_error():
    result = run("health", "--backend", "mongo", "--uri", "redis://127.0.0.1:1")
    assert result.exit_code == 2
    assert "contradicts" in result.stderr


def test_unknown_backend_is_a_usage_error_not_a_memory_probe():
    """#15.1: a typo must never make a readiness gate probe memory and go green (this test
    used to assert the engine's degrade-to-memory rule for the CLI)."""
    result = run("health", "--backend", "reddis", "-o", "json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "unknown backend 'reddis'" in result.stderr and "did you mean 'redis'" in result.stderr


def test_adapter_factory_flag(tmp_path, monkeypatch):
    (tmp_path / "sick_adapter_mod.py").write_text(
        "from backends.memory import MemoryBackendAdapter\n"
        "class Sick(MemoryBackendAdapter):\n"
        "    name = 'sick'\n"
        "    is_persistent = True\n"
        "    def check_health(self):\n"
        "        raise RuntimeError('probe exploded')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run("health", "--adapter", "sick_adapter_mod:Sick", "-o", "json")
    assert result.exit_code == 3  # unclassified: 3 in every command (issue 33)
    report = json.loads(result.stdout)
    assert report["status"] == "error" and "probe exploded" in report["error"]
    bad = run("health", "--adapter", "no_such_module_xyz:Thing")
    assert bad.exit_code == 3 and "no_such_module_xyz" in bad.stderr


def test_hung_probe_is_bounded_by_the_timeout(tmp_path, monkeypatch):
    (tmp_path / "hung_adapter_mod.py").write_text(
        "import time\n"
        "from backends.memory import MemoryBackendAdapter\n"
        "class Hung(MemoryBackendAdapter):\n"
        "    name = 'hung'\n"
        "    def check_health(self):\n"
        "        time.sleep(600)\n"
        "        return True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    started = time.monotonic()
    result = run("health", "--adapter", "hung_adapter_mod:Hung", "--timeout", "0.5", "-o", "json")
    assert time.monotonic() - started < bounded_by(0.5)  # unbounded: 600 s
    assert result.exit_code == 4
    assert json.loads(result.stdout)["status"] == "timed out"


# -- #15.2: the timeout passed is the one used and reported; the cause is categorised ----

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def secured_redis(tmp_path_factory):
    from tests.support.dedicated_redis import DedicatedRedis

    server = DedicatedRedis(tmp_path_factory.mktemp("health-secured"), password="s3cret-pw",
                            extra=["--requirepass", "s3cret-pw"])
    server.start()
    yield server
    server.kill()


def test_wrong_password_is_credentials_refused_exit_3_not_unreachable(secured_redis):
    uri = f"redis://:wrong-pw@127.0.0.1:{secured_redis.port}/0"
    for extra in ([], ["-v"]):
        result = run(*extra, "health", "--uri", uri, "--timeout", "3", "-o", "json")
        assert result.exit_code == 3, result.stderr
        report = json.loads(result.stdout)
        assert report["cause"] == "credentials refused"
        assert report["status"] == "credentials refused"
        lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and "credentials refused" in lines[0]
        assert "wrong-pw" not in result.stdout + result.stderr


def test_right_password_is_healthy(secured_redis):
    uri = f"redis://:s3cret-pw@127.0.0.1:{secured_redis.port}/0"
    result = run("health", "--uri", uri, "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert "s3cret-pw" not in result.stdout + result.stderr


def test_the_timeout_passed_reaches_the_adapter_and_is_reported(tmp_path, monkeypatch):
    (tmp_path / "timeout_adapter_mod.py").write_text(
        "from backends.memory import MemoryBackendAdapter\n"
        "SEEN = []\n"
        "class Timed(MemoryBackendAdapter):\n"
        "    name = 'timed'\n"
        "    def check_health(self, timeout=2.0):\n"
        "        SEEN.append(timeout)\n"
        "        return True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run("health", "--adapter", "timeout_adapter_mod:Timed", "--timeout", "8", "-o", "json")
    assert result.exit_code == 0, result.stderr
    import timeout_adapter_mod

    assert timeout_adapter_mod.SEEN == [8.0]
    report = json.loads(result.stdout)
    assert report["timeout_s"] == 8.0 and report["timeout_passed_to_adapter"] is True


def test_categorise_tls_and_config_are_environment():
    import ssl

    from backends.errors import BackendConfigError, BackendTransient, BackendUnreachable
    from semvecctl.commands.health import categorise

    try:
        try:
            raise ssl.SSLCertVerificationError("certificate verify failed")
        except ssl.SSLError as inner:
            raise BackendUnreachable("cannot reach redis") from inner
    except BackendUnreachable as exc:
        assert categorise(exc)["exit"] == 3 and categorise(exc)["category"] == "tls error"
    assert categorise(BackendConfigError("bad option"))["exit"] == 3
    assert categorise(BackendUnreachable("refused"))["exit"] == 4
    transient = categorise(BackendTransient("failover"))
    assert transient["exit"] == 4 and "retry" in transient["message"]
