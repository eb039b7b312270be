"""`semvecctl events list|inspect|count|export` on every backend with an event store:
the suite's real Redis and PostgreSQL (`postgres` and `pgvector`), and MongoDB on
mongomock (a fake; no real MongoDB runs here). Memory keeps no events: exit 3."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from backends.archive import ArchiveReader, UserRecord
from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import BACKENDS, make_target, seed


def run(target, *args: str):
    return CliRunner().invoke(app, [*args, *target.args], env=target.env)


@pytest.fixture(params=BACKENDS)
def target(request):
    return make_target(request, request.param)


def _sequenced(target) -> bool:
    return target.name in ("redis", "mongo")


def ids_of(result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [json.loads(line)["event_id"] for line in result.stdout.splitlines()]


def test_list_is_in_sequence_order_or_newest_first_where_there_are_no_sequences(target):
    s = seed(target.adapter)
    listed = ids_of(run(target, "events", "list", "--user", s.alice, "-o", "jsonl"))
    expected = s.alice_ids if _sequenced(target) else list(reversed(s.alice_ids))
    assert listed == expected
    result = run(target, "events", "list", "--user", s.alice)
    assert ("sequence order" if _sequenced(target) else "newest first") in result.stderr


def test_filters_apply_before_the_limit(target):
    s = seed(target.adapter)
    unowned = ids_of(run(target, "events", "list", "--user", s.alice, "--unowned", "--limit", "1",
                         "-o", "jsonl"))
    assert len(unowned) == 1 and unowned[0] in s.alice_ids[3:]
    in_s2 = ids_of(run(target, "events", "list", "--user", s.alice, "--session", s.s2,
                       "-n", "5", "-o", "jsonl"))
    assert sorted(in_s2) == sorted(s.alice_ids[3:])
    acme = ids_of(run(target, "events", "list", "--user", s.alice, "--owner", "acme", "-n", "2",
                      "-o", "jsonl"))
    assert len(acme) == 2 and set(acme) <= set(s.alice_ids[:3])


def test_count_with_and_without_filters(target):
    s = seed(target.adapter)
    for extra, n in (([], 5), (["--session", s.s1], 3), (["--unowned"], 2), (["--owner", "zz"], 0)):
        result = run(target, "events", "count", "--user", s.alice, *extra, "-o", "json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["events"] == n, extra


def test_inspect_honours_the_owner_filter(target):
    s = seed(target.adapter)
    event_id = s.alice_ids[0]
    shown = run(target, "events", "inspect", event_id, "-o", "json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["user_id"] == s.alice and len(data["embedding"]) == 8
    assert run(target, "events", "inspect", event_id, "--owner", "acme").exit_code == 0
    hidden = run(target, "events", "inspect", event_id, "--owner", "other")
    assert hidden.exit_code == 1 and "with that owner" in hidden.output
    assert run(target, "events", "inspect", event_id, "--user", s.bob).exit_code == 1


def test_export_writes_an_archive_that_sessions_import_reads_back(target, tmp_path):
    s = seed(target.adapter)
    path = tmp_path / "alice.jsonl.gz"
    result = run(target, "events", "export", "--user", s.alice, "--session", s.s1, "--out", str(path))
    assert result.exit_code == 0, result.output
    assert (path.stat().st_mode & 0o777) == 0o600
    with ArchiveReader(path) as reader:
        records = list(reader.records())
    assert len(records) == 1 and isinstance(records[0], UserRecord)
    assert sorted(e.event_id for e in records[0].events) == sorted(s.alice_ids[:3])
    assert reader.header.filters["session_id"] == s.s1
    target.adapter.event_store().purge_user(s.alice)
    imported = run(target, "sessions", "import", str(path), "--apply", "--yes", "--allow-loss")
    assert imported.exit_code == 0, imported.output
    back = ids_of(run(target, "events", "list", "--user", s.alice, "-o", "jsonl"))
    assert sorted(back) == sorted(s.alice_ids[:3])


def test_an_interrupted_export_leaves_no_file(target, tmp_path, monkeypatch):
    import backends.ops.eventlog as eventlog

    s = seed(target.adapter)
    path = tmp_path / "x.jsonl"

    def boom(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(eventlog, "counter_reader", boom)
    result = run(target, "events", "export", "--user", s.alice, "--out", str(path))
    assert result.exit_code != 0
    assert list(tmp_path.iterdir()) == []


def test_memory_has_no_event_store():
    result = CliRunner().invoke(app, ["events", "list", "--user", "u", "--backend", "memory"])
    assert result.exit_code == 3
    assert "keeps no compliance events" in result.output
