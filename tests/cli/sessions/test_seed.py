"""``sessions seed`` (the Try it page's first command): three sessions, each written by one
turn with its events, on the suite's Redis; insert-only on a rerun; a preview without
--apply; refused (exit 2, nothing written) where the store keeps no events."""

from __future__ import annotations

import json
import uuid

from typer.testing import CliRunner

from semvecctl.app import app


def _run(*args: str):
    return CliRunner().invoke(app, ["sessions", "seed", *args], env={"SEMVEC_SESSION_BACKEND": ""})


def test_seed_writes_sessions_with_their_events_and_only_inserts(redis_url):
    from backends.redis import RedisBackendAdapter

    prefix = f"seed-{uuid.uuid4().hex[:6]}-"
    preview = _run("--uri", redis_url, "--prefix", prefix)
    assert preview.exit_code == 0 and "nothing was written" in preview.stderr
    done = _run("--uri", redis_url, "--prefix", prefix, "--apply", "--yes", "-o", "json")
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["created"] == [f"{prefix}{i}" for i in range(3)] and data["events"] == 6
    adapter = RedisBackendAdapter(uri=redis_url)
    try:
        for i in range(3):
            blob, version = adapter.state_store().load(f"{prefix}{i}", owner_subject="demo")
            assert version == 1 and blob == f"example state of {prefix}{i}".encode()
        logged = adapter.event_store().list_events(f"{prefix}user")
        assert [e.sequence for e in logged] == list(range(1, 7))
        assert {e.session_id for e in logged} == {f"{prefix}{i}" for i in range(3)}
        adapter.state_store().save(f"{prefix}3", b"mine", expected_version=None)
    finally:
        adapter.close()
    again = _run("--uri", redis_url, "--prefix", prefix, "--sessions", "4", "--apply", "--yes",
                 "-o", "json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["existing"] == [f"{prefix}{i}" for i in range(4)]


def test_seed_on_a_store_without_events_is_refused():
    refused = _run("--uri", "memory://", "--apply", "--yes")
    assert refused.exit_code == 2 and "--events 0" in refused.stderr
    assert _run("--uri", "memory://", "--events", "0", "--apply", "--yes").exit_code == 0
