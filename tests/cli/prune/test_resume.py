"""`sessions prune` keeps its evidence (issue #23 findings 1 and 5), on the suite's real
Redis and PostgreSQL and on MongoDB through mongomock (a fake: no real MongoDB runs here).

- An interrupted `--archive FILE --apply` is continued by the same command; the archive
  is never replaced, so it holds every session the whole operation deleted; the journal
  beside it goes only when the run finishes.
- An existing archive is replaced only with `--overwrite`, never because of `--yes`.
- Redis keeps no write time: the operator's ambient SEMVEC_REDIS_SESSION_TTL_S is not
  one; `--assume-ttl` is, and a key with more TTL left than assumed stops the run first.
"""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

import backends.ops.prune as prune_module
from backends.archive import ArchiveReader
from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.cli.prune.test_prune import TTL, age
from tests.support.maintenance import make_target

BACKENDS = [pytest.param("redis", marks=pytest.mark.redis),
            pytest.param("pgvector", marks=pytest.mark.postgres),
            "mongo"]


def run(target, *args: str):
    extra = ["--assume-ttl", f"{TTL}s"] if target.name == "redis" else []
    return CliRunner().invoke(app, [*args, *target.args, *extra], env=target.env)


@pytest.fixture(params=BACKENDS)
def target(request):
    options = {"ttl_seconds": TTL} if request.param == "redis" else {}
    return make_target(request, request.param, **options)


def _idle_sessions(target, n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    store = target.adapter.state_store()
    names = [f"{tag}-idle-{i:02d}" for i in range(n)]
    for sid in names:
        store.save(sid, f"blob {sid}".encode(), expected_version=None)
        age(target, sid, 2 * 86400)
    return names


def _archived(path) -> dict[str, bytes]:
    with ArchiveReader(path) as reader:
        return {r.session_id: r.blob for r in reader.sessions()}


def _interrupted(target, deletes: int, *args: str):
    """Run a prune whose delete stream stops (as a signal would) after ``deletes``."""
    real = prune_module.delete_idle

    def stopping(*a, **kw):
        for n, item in enumerate(real(*a, **kw)):
            yield item
            if n + 1 >= deletes:
                raise KeyboardInterrupt
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prune_module, "delete_idle", stopping)
        return run(target, *args)


def test_a_rerun_continues_and_the_archive_covers_every_deleted_session(target, tmp_path):
    names = _idle_sessions(target, 6)
    path = tmp_path / "idle.jsonl.gz"
    args = ("sessions", "prune", "--idle-for", "1d", "--archive", str(path), "--apply", "--yes",
            "-o", "jsonl")
    first = _interrupted(target, 2, *args)
    assert first.exit_code != 0
    journal = tmp_path / "idle.jsonl.gz.journal"
    assert journal.exists()
    store = target.adapter.state_store()
    gone_first = {sid for sid in names if store.load(sid) is None}
    assert len(gone_first) == 2
    second = run(target, *args)
    assert second.exit_code == 0, second.output
    assert "continuing the interrupted prune" in second.stderr
    assert all(store.load(sid) is None for sid in names)
    archived = _archived(path)
    assert set(archived) == set(names)  # the first part's sessions too
    assert archived[sorted(gone_first)[0]] == f"blob {sorted(gone_first)[0]}".encode()
    assert not journal.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idle.jsonl.gz"]
    rows = [json.loads(line) for line in second.stdout.splitlines()]
    assert sorted(r["session_id"] for r in rows if r["action"] == "deleted") == sorted(
        set(names) - gone_first)


def test_an_existing_archive_is_never_replaced_because_of_yes(target, tmp_path):
    names = _idle_sessions(target, 2)
    path = tmp_path / "idle.jsonl"
    path.write_bytes(b"an older archive")
    refused = run(target, "sessions", "prune", "--idle-for", "1d", "--archive", str(path),
                  "--apply", "--yes")
    assert refused.exit_code == 2, refused.output
    assert "--overwrite" in refused.stderr and "Traceback" not in refused.output
    assert path.read_bytes() == b"an older archive"
    assert all(target.adapter.state_store().load(sid) is not None for sid in names)
    preview = run(target, "sessions", "prune", "--idle-for", "1d", "--archive", str(path))
    assert preview.exit_code == 2 and path.read_bytes() == b"an older archive"
    replaced = run(target, "sessions", "prune", "--idle-for", "1d", "--archive", str(path),
                   "--apply", "--yes", "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert set(_archived(path)) == set(names)


def test_overwrite_cannot_discard_an_interrupted_runs_archive(target, tmp_path):
    names = _idle_sessions(target, 3)
    path = tmp_path / "idle.jsonl"
    args = ("sessions", "prune", "--idle-for", "1d", "--archive", str(path), "--apply", "--yes")
    assert _interrupted(target, 1, *args).exit_code != 0
    refused = run(target, *args, "--overwrite")
    assert refused.exit_code == 2 and "would lose them" in refused.stderr
    other = run(target, "sessions", "prune", "--idle-for", "2h", "--archive", str(path),
                "--apply", "--yes")
    assert other.exit_code == 2 and "other arguments" in other.stderr
    assert set(_archived(path)) == set(names)
    assert run(target, *args).exit_code == 0
    assert set(_archived(path)) == set(names)


# -- Redis: idle time only from stored facts (#23 finding 5) -------------------------------

def _engine_sessions(url: str, tag: str, n: int, ttl: int) -> list[str]:
    """Sessions the engine just wrote with its own idle TTL (the engine's layout)."""
    import redis

    client = redis.Redis.from_url(url)
    names = [f"{tag}-fresh-{i}" for i in range(n)]
    for sid in names:
        client.hset(f"semvec:state:{sid}", mapping={"blob": b"x", "version": "1", "owner": "",
                                                    "drift_exempt": "0", "pending": ""})
        client.expire(f"semvec:state:{sid}", ttl)
    client.close()
    return names


def _exists(url: str, names: list[str]) -> int:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return int(client.exists(*[f"semvec:state:{sid}" for sid in names]))
    finally:
        client.close()


@pytest.mark.redis
def test_the_operators_ttl_variable_never_ages_the_engines_sessions(redis_url):
    """86400 in the operator's shell, 3600 in the engine's keys: five fresh sessions."""
    names = _engine_sessions(redis_url, uuid.uuid4().hex[:8], 5, 3600)
    env = {"SEMVEC_REDIS_SESSION_TTL_S": "86400"}
    result = CliRunner().invoke(app, ["sessions", "prune", "--uri", redis_url, "--idle-for", "1h",
                                      "--apply", "--yes"], env=env)
    assert result.exit_code == 3, result.output
    assert "--assume-ttl" in result.stderr and "Traceback" not in result.output
    assert _exists(redis_url, names) == 5
    stated = CliRunner().invoke(app, ["sessions", "prune", "--uri", redis_url, "--idle-for", "1h",
                                      "--assume-ttl", "1h", "--apply", "--yes", "-o", "jsonl"],
                                env=env)
    assert stated.exit_code == 0, stated.output
    assert stated.stdout == "" and _exists(redis_url, names) == 5


@pytest.mark.redis
@pytest.mark.parametrize("with_archive", [False, True], ids=["streaming", "archive"])
def test_a_key_with_more_ttl_left_than_assumed_stops_the_run_before_any_delete(
        redis_url, tmp_path, with_archive):
    tag = uuid.uuid4().hex[:8]
    old = _engine_sessions(redis_url, tag + "a", 4, 60)  # written ~1h ago under a 1h TTL?
    fresh = _engine_sessions(redis_url, tag + "b", 1, 3600)
    archive = ["--archive", str(tmp_path / "a.jsonl")] if with_archive else []
    result = CliRunner().invoke(app, ["sessions", "prune", "--uri", redis_url, "--idle-for", "1m",
                                      "--assume-ttl", "30m", "--match", f"{tag}*", *archive,
                                      "--apply", "--yes"])
    assert result.exit_code == 3, result.output
    assert "more than the assumed idle TTL" in result.stderr and "nothing was deleted" in result.stderr
    assert _exists(redis_url, old + fresh) == 5
    assert list(tmp_path.iterdir()) == []  # no archive, no partial, no journal left behind


def test_a_resumed_prune_whose_archive_went_missing_deletes_nothing_more(target, tmp_path):
    names = _idle_sessions(target, 3)
    path = tmp_path / "idle.jsonl"
    args = ("sessions", "prune", "--idle-for", "1d", "--archive", str(path), "--apply", "--yes")
    assert _interrupted(target, 1, *args).exit_code != 0
    path.rename(tmp_path / "moved.jsonl")
    refused = run(target, *args)
    assert refused.exit_code == 3 and "is gone: put it back" in refused.stderr
    store = target.adapter.state_store()
    assert sum(store.load(sid) is not None for sid in names) == 2
    (tmp_path / "moved.jsonl").rename(path)
    assert run(target, *args).exit_code == 0
    assert set(_archived(path)) == set(names)


def _summary(result) -> str:
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("examined ")]
    return line


def test_a_resumed_prunes_summary_counts_what_it_settles(target, tmp_path):
    """Issue 42: the summary of a resumed prune said "examined 0 session(s): deleted 453, 1
    written meanwhile and kept, 1346 already gone". It counts the interrupted run's scan
    (journalled), and never fewer than the sessions the resumed journal settles."""
    names = _idle_sessions(target, 6)
    tag = names[0].split("-idle-")[0]
    store = target.adapter.state_store()
    store.save(f"{tag}-fresh", b"written just now", expected_version=None)  # examined, not idle
    path = tmp_path / "idle.jsonl.gz"
    args = ("sessions", "prune", "--idle-for", "1d", "--match", f"{tag}-*", "--archive",
            str(path), "--apply", "--yes", "-o", "jsonl")
    first = _interrupted(target, 2, *args)
    assert first.exit_code != 0
    left = [sid for sid in names if store.load(sid) is not None]
    assert len(left) == 4
    # meanwhile: one archived session is written again (kept), another deleted by someone else
    written, taken = left[0], left[1]
    store.save(written, b"written meanwhile", expected_version=store.current_version(written))
    assert store.delete(taken)
    second = run(target, *args)
    assert second.exit_code == 0, second.output
    assert "continuing the interrupted prune" in second.stderr
    summary = " ".join(_summary(second).split())
    # 7 examined by the scan; of the 6 archived: 2 deleted now, 1 kept, 3 already gone
    # (2 by the interrupted run, 1 meanwhile)
    assert summary.startswith("examined 7 session(s): deleted 2, 1 written meanwhile and kept, "
                              "3 already gone (deleted by the interrupted run or meanwhile)"), summary
    assert store.load(written) is not None and store.load(f"{tag}-fresh") is not None


def test_a_resume_from_a_journal_without_the_scan_counts_still_adds_up(target, tmp_path):
    """A journal written before the scan counts were journalled: examined is what the
    resumed journal settles, never 0."""
    from backends.ops.journal import Journal, journal_path

    names = _idle_sessions(target, 4)
    tag = names[0].split("-idle-")[0]
    path = tmp_path / "idle.jsonl.gz"
    args = ("sessions", "prune", "--idle-for", "1d", "--match", f"{tag}-*", "--archive",
            str(path), "--apply", "--yes")
    assert _interrupted(target, 1, *args).exit_code != 0
    jpath = journal_path(path)
    assert Journal.read(jpath) is not None
    lines = [json.loads(line) for line in jpath.read_text().splitlines()]
    for record in lines:
        for key in ("examined", "idle", "unknown"):
            record.pop(key, None)
    jpath.write_text("".join(json.dumps(r) + "\n" for r in lines))
    second = run(target, *args)
    assert second.exit_code == 0, second.output
    summary = " ".join(_summary(second).split())
    assert summary.startswith("examined 4 session(s): deleted 3, 1 already gone"), summary
