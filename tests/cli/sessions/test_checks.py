"""#14 CLI side: ``sessions delete --if-version`` (a moved session is a conflict, exit 1,
nothing deleted), damaged rows shown as damaged (exit 1), and the exit codes classify()
gives the new error categories. Redis is the suite's real server."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from semvecctl.errors import classify
from semvecctl.exit_codes import ExitCode


def run(*args):
    return CliRunner().invoke(app, list(args), env={"SEMVEC_SESSION_BACKEND": ""})


@pytest.fixture
def redis_session(redis_url):
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(uri=redis_url)
    store = adapter.state_store()
    v = store.save("ifv-1", b"one", expected_version=None, owner_subject="t1")
    store.save("ifv-1", b"two", expected_version=v, owner_subject="t1")  # now at 2
    yield store
    adapter.close()


def test_if_version_conflict_leaves_the_row(redis_session, redis_url):
    result = run("sessions", "delete", "ifv-1", "--uri", redis_url, "--if-version", "1", "--apply", "--yes")
    assert result.exit_code == 1, result.stderr
    assert "conflict" in result.stderr and "nothing was deleted" in result.stderr
    assert redis_session.load("ifv-1") == (b"two", 2)


def test_if_version_match_deletes(redis_session, redis_url):
    result = run("sessions", "delete", "ifv-1", "--uri", redis_url, "--if-version", "2", "--apply", "--yes")
    assert result.exit_code == 0, result.stderr
    assert redis_session.load_full("ifv-1") is None


def test_if_version_on_memory_and_bad_values():
    from tests.support.cli_doubles import SHARED

    store = SHARED.state_store()
    store.save("m-1", b"x", expected_version=None)
    moved = run("sessions", "delete", "m-1", "--adapter", "tests.support.cli_doubles:shared",
                "--if-version", "7", "--apply", "--yes")
    assert moved.exit_code == 1 and store.load_full("m-1") is not None
    for bad in ("0", "-1", "nan", "1.5", "99999999999999999999999"):
        result = run("sessions", "delete", "m-1", "--adapter", "tests.support.cli_doubles:shared",
                     "--if-version", bad, "--apply", "--yes")
        assert result.exit_code == 2 and "--if-version" in result.stderr, (bad, result.stderr)
    assert store.load_full("m-1") is not None
    ok = run("sessions", "delete", "m-1", "--adapter", "tests.support.cli_doubles:shared",
             "--if-version", "1", "--apply", "--yes")
    assert ok.exit_code == 0 and store.load_full("m-1") is None


def test_store_without_checked_delete_refuses_instead_of_deleting():
    from tests.support.cli_doubles import UNCHECKED

    UNCHECKED.state_store().save("u-1", b"x", expected_version=None)
    result = run("sessions", "delete", "u-1", "--adapter", "tests.support.cli_doubles:unchecked",
                 "--if-version", "1", "--apply", "--yes")
    assert result.exit_code == 3 and "not supported" in result.stderr
    assert UNCHECKED.state_store().load_full("u-1") is not None


def test_inspect_shows_a_damaged_row_as_damaged():
    result = run("sessions", "inspect", "bad-1", "--adapter", "tests.support.cli_doubles:damaged",
                 "-o", "json")
    assert result.exit_code == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "damaged" and report["field"] == "version"
    assert "damaged" in result.stderr and "Traceback" not in result.stderr
    table = run("sessions", "inspect", "bad-1", "--adapter", "tests.support.cli_doubles:damaged")
    assert table.exit_code == 1 and "damaged" in table.stdout


def test_classify_new_categories():
    from backends import errors as be

    code, message = classify(be.BackendTransient("primary stepped down"))
    assert code == ExitCode.UNREACHABLE and "retry" in message
    code, message = classify(be.CorruptState("s1", "blob", "is missing"))
    assert code == ExitCode.CHECK_FAILED and "'s1'" in message and "'blob'" in message
    code, message = classify(be.InjectedFault("turn.after_state"))
    assert code == ExitCode.CHECK_FAILED and "injected fault" in message
    assert classify(be.BackendAuthError("no"))[0] == ExitCode.ENVIRONMENT
    assert classify(be.BackendConfigError("no"))[0] == ExitCode.ENVIRONMENT
    assert classify(be.BackendUnreachable("no"))[0] == ExitCode.UNREACHABLE
    assert classify(be.StateVersionConflict("moved"))[0] == ExitCode.CHECK_FAILED
