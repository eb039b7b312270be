"""#28 item 7 (output nits): the health table says each fact once and its failure reads as
English; ``events inspect`` shows meta as JSON; a store without sequence numbers shows
SEQ ``-`` (json keeps the engine's 0); Redis ``sessions list`` comes in session id order,
like every other store. Real Redis and PostgreSQL; MongoDB on mongomock (a fake)."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import BACKENDS, make_target


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


@pytest.mark.redis
def test_health_table_says_backend_uri_and_latency_once(redis_url):
    result = invoke("health", "--uri", redis_url)
    assert result.exit_code == 0, result.output
    fields = [line.split()[0] for line in result.stdout.splitlines()[1:] if line.strip()]
    assert fields.count("backend") == 1 and fields.count("uri") == 1
    assert fields.count("latency_ms") == 1
    assert "server" in fields  # the server's own ping, named as such
    data = json.loads(invoke("health", "--uri", redis_url, "-o", "json").stdout)
    assert data["details"]["backend"] == "redis"  # json keeps the details whole


def test_health_failure_reads_as_english():
    result = invoke("health", "--uri", "redis://127.0.0.1:1/0", "--timeout", "1")
    assert result.exit_code == 4
    line = result.stderr.strip().splitlines()[-1]
    assert "is unhealthy (unreachable)" in line
    assert not re.search(r"\bis (error|credentials refused|timed out|tls error)\b", line)


@pytest.fixture(params=BACKENDS)
def target(request):
    return make_target(request, request.param)


def test_inspect_renders_meta_as_json_and_seq_dash_without_sequences(target):
    from backends.contract import MemoryEvent, event_defaults

    user = f"nit-{uuid.uuid4().hex[:8]}"
    meta = {"kind": "turn", "n": 2, "tags": ["a", "b"]}
    appended = target.adapter.event_store().append(MemoryEvent(
        event_id=str(uuid.uuid4()), user_id=user, content="hello", meta=meta,
        session_id="s-nit", owner_subject="acme"))
    shown = CliRunner().invoke(app, ["events", "inspect", appended.event_id, *target.args],
                               env=target.env)
    assert shown.exit_code == 0, shown.output
    meta_line = next(ln for ln in shown.stdout.splitlines() if ln.startswith("meta"))
    assert json.loads(meta_line.split(None, 1)[1]) == meta  # JSON, not {'kind': ...}
    listed = CliRunner().invoke(app, ["events", "list", "--user", user, *target.args],
                                env=target.env)
    assert listed.exit_code == 0, listed.output
    row = listed.stdout.splitlines()[1].split()
    sequenced = event_defaults(target.adapter.event_store()).assigns_sequences
    assert row[1] == ("1" if sequenced else "-")
    as_json = CliRunner().invoke(app, ["events", "list", "--user", user, *target.args,
                                       "-o", "jsonl"], env=target.env)
    assert json.loads(as_json.stdout.splitlines()[0])["sequence"] == (1 if sequenced else 0)


@pytest.mark.redis
def test_redis_sessions_list_is_in_session_id_order(redis_url):
    from backends.redis import RedisBackendAdapter

    ids = [f"ord-{uuid.uuid4().hex}" for _ in range(300)]
    with RedisBackendAdapter(redis_url) as adapter:
        store = adapter.state_store()
        for sid in ids:
            store.save(sid, b"{}", expected_version=None)
    result = invoke("sessions", "list", "--uri", redis_url, "--match", "ord-*",
                    "--batch-size", "7", "-o", "jsonl")
    assert result.exit_code == 0, result.output
    listed = [json.loads(line)["session_id"] for line in result.stdout.splitlines()]
    assert listed == sorted(ids)
    limited = invoke("sessions", "list", "--uri", redis_url, "--match", "ord-*", "-n", "5",
                     "-o", "jsonl")
    assert [json.loads(ln)["session_id"] for ln in limited.stdout.splitlines()] == sorted(ids)[:5]
