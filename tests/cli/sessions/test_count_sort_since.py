"""``sessions count``, ``sessions list --sort idle|size|version`` and ``sessions export
--since DURATION`` (#28 item 5), on the suite's real Redis and PostgreSQL (``postgres``,
``pgvector``) and on MongoDB through mongomock (a fake: no real MongoDB runs here)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from backends.archive import ArchiveReader
from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import BACKENDS, make_target

WRITE_TIME = {"postgres", "pgvector", "mongo"}


def run(target, *args: str):
    return CliRunner().invoke(app, [*args, *target.args], env=target.env)


@pytest.fixture(params=BACKENDS)
def target(request):
    return make_target(request, request.param)


def age(target, session_id: str, seconds: int) -> None:
    """Make a session look last written ``seconds`` ago (stores that record write times)."""
    if target.name == "mongo":
        from tests.support.fixtures.mongo import CLI_STATE

        db = CLI_STATE["client"][CLI_STATE["database"]]
        db["semvec_session_state"].update_one(
            {"_id": session_id},
            {"$set": {"updated_at": datetime.now(timezone.utc) - timedelta(seconds=seconds)}})
    else:
        import psycopg

        for url in target.databases:  # every database of a sharded deployment
            with psycopg.connect(url) as conn:
                conn.execute("UPDATE semvec_session_state SET updated_at = updated_at - "
                             "make_interval(secs => %s) WHERE session_id = %s",
                             (seconds, session_id))


@pytest.fixture
def five(target):
    """Five sessions under one tag: sizes 1..5 bytes, versions 1..5 reversed (s1 at 5),
    owners acme for s1..s3; where write times are kept, s1 the oldest and s5 the newest."""
    tag = uuid.uuid4().hex[:8]
    store = target.adapter.state_store()
    ids = [f"{tag}-s{i}" for i in range(1, 6)]
    for i, sid in enumerate(ids, 1):
        owner = "acme" if i <= 3 else None
        version = store.save(sid, b"x" * i, expected_version=None, owner_subject=owner)
        for _ in range(5 - i):
            version = store.save(sid, b"x" * i, expected_version=version, owner_subject=owner)
    if target.name in WRITE_TIME:
        for i, sid in enumerate(ids, 1):
            age(target, sid, (6 - i) * 3600)
    return tag, ids


def listed(result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [json.loads(line)["session_id"] for line in result.stdout.splitlines()]


def test_count_agrees_with_the_listing_under_each_filter(target, five):
    tag, ids = five
    for extra, expected in (([], 5), (["--owner", "acme"], 3), (["--unowned"], 2),
                            (["--owner", "nobody"], 0)):
        result = run(target, "sessions", "count", "--match", f"{tag}-*", "-o", "json", *extra)
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["sessions"] == expected, extra
        assert len(listed(run(target, "sessions", "list", "--match", f"{tag}-*", "-o", "jsonl",
                              *extra))) == expected
        # PostgreSQL counts in one query, Redis unscoped in a scan of keys that reads no
        # row (an owner lives in the row); the others count the listing
        by_store = target.name in ("postgres", "pgvector") or (target.name == "redis"
                                                               and not extra)
        assert report["counted_by"] == ("store" if by_store else "listing"), extra
    # a glob beyond a literal prefix is still exact
    odd = run(target, "sessions", "count", "--match", f"{tag}-s[135]", "-o", "json")
    assert json.loads(odd.stdout)["sessions"] == 3
    table = run(target, "sessions", "count", "--match", f"{tag}-*")
    assert table.exit_code == 0, table.output
    header, row = table.stdout.splitlines()
    assert header.split()[0] == "SESSIONS" and row.split()[0] == "5"


def test_sort_by_size_and_version_with_and_without_limit(target, five):
    tag, ids = five
    base = ("sessions", "list", "--match", f"{tag}-*", "-o", "jsonl")
    assert listed(run(target, *base, "--sort", "size")) == ids[::-1]
    assert listed(run(target, *base, "--sort", "size", "--limit", "2")) == [ids[4], ids[3]]
    assert listed(run(target, *base, "--sort", "version")) == ids
    assert listed(run(target, *base, "--sort", "version", "-n", "1", "--unowned")) == [ids[3]]


def test_sort_by_idle_needs_a_write_time(target, five):
    tag, ids = five
    result = run(target, "sessions", "list", "--match", f"{tag}-*", "-o", "jsonl", "--sort", "idle")
    if target.name in WRITE_TIME:
        assert listed(result) == ids  # s1 written longest ago
        top = run(target, "sessions", "list", "--match", f"{tag}-*", "-o", "jsonl",
                  "--sort", "idle", "--limit", "2")
        assert listed(top) == ids[:2]
    else:
        assert result.exit_code == 3 and result.stdout == ""
        assert "keeps no time of a session's last write" in result.stderr


def test_export_since_takes_only_the_recently_written(target, five, tmp_path):
    tag, ids = five
    path = tmp_path / "recent.jsonl"
    result = run(target, "sessions", "export", "--match", f"{tag}-*", "--since", "150m",
                 "--out", str(path))
    if target.name not in WRITE_TIME:
        assert result.exit_code == 3 and not path.exists()
        assert "--since" in result.stderr and "nothing was exported" in result.stderr
        return
    assert result.exit_code == 0, result.output
    with ArchiveReader(path) as reader:
        assert sorted(r.session_id for r in reader.sessions()) == ids[3:]  # 2h and 1h ago
        assert "updated_since" in reader.header.filters


def test_since_is_a_duration(target, tmp_path):
    result = run(target, "sessions", "export", "--since", "yesterday",
                 "--out", str(tmp_path / "x.jsonl"))
    assert result.exit_code == 2 and "--since 'yesterday' is not a duration" in result.stderr
    assert not (tmp_path / "x.jsonl").exists()
