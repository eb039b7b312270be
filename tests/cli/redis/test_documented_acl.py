"""The Redis ACL docs/security.md documents, run as written (the ``ACL SETUSER`` line read
from the page) on the suite's server: semvecctl works as that user on database 1, and
the same rights without ``+select`` fail there with exit 3 (what the page warns of)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semvecctl.app import app

PAGE = Path(__file__).resolve().parents[3] / "docs" / "security.md"


def _documented_acl() -> list[str]:
    lines = [ln for ln in PAGE.read_text(encoding="utf-8").splitlines()
             if ln.startswith("ACL SETUSER semvecctl ")]
    assert len(lines) == 1, "security.md shows the ACL as one 'ACL SETUSER semvecctl' line"
    return lines[0].split()


@pytest.fixture
def acl_user(redis_server):
    if not redis_server.managed:
        pytest.skip("creates ACL users: only on the suite's own redis-server")
    client = redis_server.client()
    made: list[str] = []

    def make(drop: str | None = None) -> str:
        name, password = f"acl-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        words = [w for w in _documented_acl() if w != drop]
        words[2] = name
        words = [f">{password}" if w == ">PASSWORD" else w for w in words]
        client.execute_command(*words)
        made.append(name)
        return f"redis://{name}:{password}@{redis_server.host}:{redis_server.port}/1"

    yield make
    for name in made:
        client.execute_command("ACL", "DELUSER", name)
    client.close()


def _run(*args: str):
    return CliRunner().invoke(app, list(args), env={"SEMVEC_SESSION_BACKEND": ""})


def test_the_documented_acl_works_on_database_1(acl_user):
    from backends.contract import MemoryEvent
    from backends.redis import RedisBackendAdapter

    url = acl_user()
    sid, user = f"acl-{uuid.uuid4().hex}", f"u-{uuid.uuid4().hex[:6]}"
    adapter = RedisBackendAdapter(uri=url)
    try:
        adapter.commit_turn(sid, b"blob", expected_version=None, owner_subject="acme",
                            events=[MemoryEvent(event_id=str(uuid.uuid4()), user_id=user,
                                                content="hello", session_id=sid,
                                                owner_subject="acme")])
    finally:
        adapter.close()
    health = _run("health", "--uri", url, "-o", "json")
    assert health.exit_code in (0, 1) and json.loads(health.stdout)["healthy"], health.output
    listed = _run("sessions", "list", "--uri", url, "--match", sid, "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert [r["session_id"] for r in json.loads(listed.stdout)] == [sid]
    inspected = _run("sessions", "inspect", sid, "--uri", url, "-o", "json")
    assert inspected.exit_code == 0 and json.loads(inspected.stdout)["owner_subject"] == "acme"
    events = _run("events", "list", "--uri", url, "--user", user, "-o", "json")
    assert events.exit_code == 0 and len(json.loads(events.stdout)) == 1, events.output
    deleted = _run("sessions", "delete", sid, "--uri", url, "--apply", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert _run("sessions", "inspect", sid, "--uri", url).exit_code == 1


def test_without_select_database_1_is_refused_with_exit_3(acl_user):
    url = acl_user(drop="+select")
    listed = _run("sessions", "list", "--uri", url)
    assert listed.exit_code == 3, listed.output
    assert "refused our credentials or privileges" in listed.stderr and "Traceback" not in listed.output
    assert url.split("@")[0].split(":")[-1] not in listed.output  # the password stays hidden
