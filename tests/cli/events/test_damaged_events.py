"""#23 finding 8: an event whose ``meta`` is ``'{bad'`` or whose embedding is ``[NaN]``
makes every command that reads it fail cleanly (exit 1) naming the event and the field,
never "unexpected JSONDecodeError"; on the suite's real Redis and PostgreSQL (``postgres``
and ``pgvector``) and on MongoDB through mongomock (a fake: no real MongoDB runs here)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import BACKENDS, make_target, seed


@pytest.fixture(params=BACKENDS)
def target(request):
    return make_target(request, request.param)


def plant(target, event_id: str, field: str, raw) -> None:
    """Overwrite one stored field of one event, the way a hand edit or a foreign writer
    would (the adapters refuse to write such a value themselves)."""
    if target.name == "redis":
        target.adapter.client.hset(f"semvec:events:e:{event_id}", field, raw)
    elif target.name in ("postgres", "pgvector"):
        with target.adapter._db.connection() as conn:
            conn.execute(f"UPDATE semvec_memory_events SET {field} = %s WHERE event_id = %s",
                         (raw, event_id))
    else:
        value = json.loads(raw, parse_constant=float) if field == "embedding" else raw
        target.adapter.database["compliance_events"].update_one(
            {"_id": event_id}, {"$set": {field: value}})


@pytest.mark.parametrize("field, raw, problem", [
    ("meta", "{bad", "is not valid JSON"),
    ("embedding", "[NaN]", "holds a non-finite number"),
])
def test_events_list_and_export_name_the_damaged_event(target, field, raw, problem, tmp_path):
    s = seed(target.adapter)
    if target.name == "mongo" and field == "meta":
        raw = "{bad"  # a string where a document belongs
        problem = "is not a document (a str)"
    bad = s.alice_ids[1]
    plant(target, bad, field, raw)
    runner = CliRunner()
    for argv in (["events", "list", "--user", s.alice, "-o", "jsonl"],
                 ["events", "export", "--user", s.alice, "--out", str(tmp_path / "a.jsonl")]):
        result = runner.invoke(app, [*argv, *target.args], env=target.env)
        assert result.exit_code == 1, result.output
        assert "unexpected" not in result.output
        assert bad in result.stderr and f"field {field!r}" in result.stderr, result.stderr
        assert problem in result.stderr
        assert not (tmp_path / "a.jsonl").exists()  # nothing half-written
    # the other user is readable as before
    result = runner.invoke(app, ["events", "list", "--user", s.bob, "-o", "jsonl",
                                 *target.args], env=target.env)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 2
