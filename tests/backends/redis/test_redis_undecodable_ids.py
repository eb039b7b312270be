"""#23 finding 6 on a real redis-server: a session key whose id is not valid UTF-8 is
addressable. It is listed with its id escaped (``\\xHH`` per byte that is not UTF-8, a
backslash doubled), found by ``doctor`` as damaged, shown as damaged by ``sessions
inspect`` and removed by ``sessions delete`` in that escaped form, and a strict load of
it raises the damaged-row error (so an export reports it rather than losing it). An
ordinary id with a backslash still means itself. Never "unexpected UnicodeEncodeError"."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from backends.errors import CorruptState
from backends.redis import RedisBackendAdapter
from backends.contract.session_ids import escape_id, from_key, unescape_id
from semvecctl.app import app
from tests.support.dedicated_redis import throwaway_redis

pytestmark = pytest.mark.redis

runner = CliRunner()
BAD = b"semvec:state:bad\xff\xfeid"
SHOWN = "bad\\xff\\xfeid"


@pytest.fixture(scope="module")
def aof_url():
    with throwaway_redis("semvec-undecodable-", extra=("--appendonly", "yes")) as url:
        yield url


@pytest.fixture
def url(aof_url, monkeypatch):
    monkeypatch.delenv("SEMVEC_REDIS_SESSION_TTL_S", raising=False)
    with RedisBackendAdapter(aof_url) as adapter:
        r = adapter.client
        r.flushall()
        adapter.state_store().save("s-ok", b"blob", expected_version=None)
        adapter.state_store().save("a\\b", b"back", expected_version=None)  # a real backslash
        r.hset(BAD, mapping={"blob": b"\x00foreign", "version": "3", "owner": "",
                             "drift_exempt": "0", "pending": ""})
    return aof_url


def cli(url, *argv):
    return runner.invoke(app, [*argv, "--uri", url])


def test_escape_is_reversible_and_unambiguous():
    for raw in (b"bad\xff\xfeid", b"a\\b", b"a\\xff", b"a\\\\b", b"x\xc3", b"caf\xc3\xa9", b"\\"):
        sid = from_key(raw)
        assert from_key(raw).encode("utf-8", "surrogateescape") == raw
        assert unescape_id(escape_id(sid)) == sid
    assert escape_id(from_key(b"bad\xff\xfeid")) == SHOWN
    assert escape_id("a\\b") == "a\\b"          # an ordinary backslash is shown as it is
    assert escape_id("a\\xff") == "a\\\\xff"    # ... unless it reads as an escape
    assert escape_id(from_key(b"a\\\xff")) == "a\\\\\\xff"


def test_listed_escaped_and_damaged(url):
    result = cli(url, "sessions", "list", "-o", "jsonl")
    rows = {row["session_id"]: row for row in map(json.loads, result.stdout.splitlines())}
    assert set(rows) == {"s-ok", "a\\b", SHOWN}
    assert "not valid UTF-8" in rows[SHOWN]["damaged"]
    assert "damaged" not in rows["a\\b"]
    assert "unexpected" not in result.output


def test_doctor_finds_it_by_its_escaped_id(url):
    result = cli(url, "doctor", "-o", "json")
    findings = json.loads(result.stdout)["findings"]
    assert [(f["check"], f["where"]) for f in findings] == [
        ("state.unreadable", f"key semvec:state:{SHOWN}")]
    assert "not valid UTF-8" in findings[0]["what"] and SHOWN in findings[0]["what"]
    assert result.exit_code == 1


def test_strict_load_raises_the_damaged_row_error(url):
    with RedisBackendAdapter(url) as adapter:
        sid = from_key(BAD[len(b"semvec:state:"):])
        with pytest.raises(CorruptState) as caught:
            adapter.state_store().load_full(sid)
        assert caught.value.session_id == SHOWN and caught.value.field == "session_id"
        assert SHOWN in str(caught.value)
        with pytest.raises(CorruptState):
            adapter.state_store().load_full_many(["s-ok", sid])
        with pytest.raises(ValueError, match="not valid UTF-8"):  # never written anew
            adapter.state_store().save(sid + "x", b"b", expected_version=None)


def test_inspect_shows_it_damaged_and_delete_removes_it(url):
    result = cli(url, "sessions", "inspect", SHOWN, "-o", "json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "damaged" and report["session_id"] == SHOWN
    assert report["field"] == "session_id" and "not valid UTF-8" in report["problem"]
    assert "unexpected" not in result.output and SHOWN in result.stderr

    ok = cli(url, "sessions", "inspect", "a\\b", "-o", "json")  # the ordinary id still works
    assert ok.exit_code == 0 and json.loads(ok.stdout)["session_id"] == "a\\b"

    gone = cli(url, "sessions", "delete", SHOWN, "--apply", "--yes")
    assert gone.exit_code == 0, gone.output
    assert SHOWN in gone.stderr and "unexpected" not in gone.output
    with RedisBackendAdapter(url) as adapter:
        assert not adapter.client.exists(BAD)
        assert adapter.client.exists("semvec:state:s-ok", "semvec:state:a\\b") == 2
    again = cli(url, "sessions", "delete", SHOWN, "--apply", "--yes")
    assert again.exit_code == 1 and "no session" in again.stderr
    clean = cli(url, "doctor")
    assert clean.exit_code == 0, clean.output


def test_an_undecodable_id_on_a_store_of_text_ids_is_no_session():
    result = runner.invoke(app, ["sessions", "inspect", "x\\xff", "--uri", "memory://"])
    assert result.exit_code == 1 and "no session" in result.stderr
    assert "unexpected" not in result.output


@pytest.mark.postgres
def test_an_undecodable_id_on_postgres_is_no_session(pgvector_url, postgres_adapter_factory):
    postgres_adapter_factory().state_store().save("s-pg", b"x", expected_version=None)
    for argv in (["sessions", "inspect", "x\\xff"], ["sessions", "delete", "x\\xff", "--apply", "--yes"]):
        result = runner.invoke(app, [*argv, "--uri", pgvector_url, "--backend", "postgres"])
        assert result.exit_code == 1, result.output
        assert "no session" in result.stderr and "unexpected" not in result.output
