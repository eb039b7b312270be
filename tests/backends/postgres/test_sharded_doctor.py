"""``doctor`` over a sharded SQL deployment (#38): every database audited, each finding
naming its database; rows the routing never reads (misplaced state, a duplicate of the
copy the engine reads, a conflict with it, events and items away from their session's
shard) found by name; ``--fix --apply`` moves or removes a misplaced row without ever
touching the copy the engine reads, and finishes after an interruption. On the suite's
real PostgreSQL, one database per shard (the ``sharded_sql`` fixture)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime

import psycopg
import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent, MemoryItem
from backends.postgres.placement import shard_index
from semvecctl.app import app

pytestmark = pytest.mark.postgres

runner = CliRunner()
STATE = '"public"."semvec_session_state"'
EVENTS = '"public"."semvec_memory_events"'
ITEMS = '"public"."semvec_memory_items"'


def routed(prefix: str, shard: int, count: int = 3) -> str:
    """The first id ``prefix-N`` the engine routes to ``shard``."""
    return next(f"{prefix}-{n}" for n in range(1000) if shard_index(f"{prefix}-{n}", count) == shard)


def put_state(url: str, session_id: str, blob: bytes, version: int, owner: str | None = None) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO semvec_session_state (session_id, state_blob, version, drift_exempt,"
                     " owner_subject, pending_message, updated_at) VALUES (%s, %s, %s, false, %s, NULL,"
                     " %s)", (session_id, blob, version, owner, datetime(2026, 3, 1, 12)))


def put_event(url: str, session_id: str, user: str = "alice") -> str:
    event_id = str(uuid.uuid4())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO semvec_memory_events (event_id, user_id, owner_subject, session_id,"
                     " created_at, content, embedding, meta, source_event_id) VALUES (%s, %s, '', %s,"
                     " %s, 'turn', '[1.0, 0.0]', '{}', NULL)",
                     (event_id, user, session_id, datetime(2026, 3, 1, 12)))
    return event_id


def put_item(url: str, session_id: str, item_id: str = "i1") -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO semvec_memory_items (session_id, item_id, text, embedding)"
                     " VALUES (%s, %s, 'remember', '[0.5, 0.5]')", (session_id, item_id))


def rows(url: str, sql: str, *args) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def state_on(url: str, session_id: str) -> tuple | None:
    found = rows(url, "SELECT state_blob, version FROM semvec_session_state WHERE session_id = %s",
                 session_id)
    return (bytes(found[0][0]), found[0][1]) if found else None


@pytest.fixture
def deployment(sharded_sql):
    """A 3-shard pgvector deployment with every table and index in place, a sound session
    with a turn's events and items on its shard, and an out-of-turn event on the primary."""
    from backends.registry import Registry

    adapter = Registry().load_adapter("pgvector", uri=sharded_sql.primary,
                                      shards=sharded_sql.shard_list, dimensions=2)
    adapter.ensure_schema()
    adapter.ensure_indexes()
    sound = routed("sound", 1)
    adapter.commit_turn(sound, b"sound", expected_version=None, owner_subject="acme", events=[
        MemoryEvent(event_id=str(uuid.uuid4()), user_id="alice", session_id=sound, content="hi",
                    embedding=[1.0, 0.0], owner_subject="acme")])
    adapter.sync_items(sound, [MemoryItem("i1", "hello", embedding=(0.1, 0.2))], owner_subject="acme")
    adapter.event_store().append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="alice",
                                             session_id=sound, content="outside a turn",
                                             embedding=[0.0, 1.0]))
    adapter.event_store().append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="bob",
                                             content="no session", embedding=[0.0, 1.0]))
    try:
        yield adapter, sharded_sql
    finally:
        adapter.close()


def audit(adapter) -> list:
    from backends.ops.doctor import audit as run

    return [f for f in run(adapter, batch=2) if f.check != "advice.durability"]


def test_a_sound_sharded_store_gives_no_finding_and_advice_names_each_database(deployment):
    from backends.ops.doctor import audit as run

    adapter, _ = deployment
    found = list(run(adapter))
    assert [f for f in found if f.check != "advice.durability"] == []
    advice = sorted(f.where for f in found if f.check == "advice.durability")
    assert advice in ([], ["primary: server", "shard 0: server", "shard 1: server", "shard 2: server"])


def plant(sharded) -> dict[str, str]:
    """One of each placement problem, on real databases; returns the ids."""
    primary, shards = sharded.primary, sharded.shards
    lost = routed("lost", 2)        # only a misplaced copy, on shard 0, with an event and an item
    put_state(shards[0], lost, b"lost-state", 4, owner="acme")
    lost_event = put_event(shards[0], lost)
    put_item(shards[0], lost)
    dup = routed("dup", 0)          # the engine reads version 3 on shard 0; a stale 2 on shard 1
    put_state(shards[0], dup, b"dup-current", 3)
    put_state(shards[1], dup, b"dup-stale", 2)
    newer = routed("newer", 1)      # the engine reads version 1; a newer 5 sits on shard 2
    put_state(shards[1], newer, b"newer-read", 1)
    put_state(shards[2], newer, b"newer-unread", 5)
    stray = routed("stray", 0)      # on the primary, which holds no state when sharded
    put_state(primary, stray, b"stray", 1)
    away = routed("away", 1)        # an event on shard 2 of a session routed to shard 1
    away_event = put_event(shards[2], away)
    gone = routed("gone", 0)        # item rows on shard 2 of a session stored nowhere
    put_item(shards[2], gone)
    return {"lost": lost, "lost_event": lost_event, "dup": dup, "newer": newer, "stray": stray,
            "away": away, "away_event": away_event, "gone": gone}


def test_doctor_finds_every_planted_placement_problem_by_name_and_database(deployment):
    adapter, sharded = deployment
    ids = plant(sharded)
    found = audit(adapter)
    got = {(f.check, f.severity.value, f.where) for f in found}
    assert got == {
        ("placement.misplaced", "error", f"shard 0: row {STATE} {ids['lost']!r}"),
        ("events.misplaced", "warning", f"shard 0: rows {EVENTS} session {ids['lost']!r}"),
        ("items.misplaced", "warning", f"shard 0: rows {ITEMS} session {ids['lost']!r}"),
        ("placement.duplicate", "warning", f"shard 1: row {STATE} {ids['dup']!r}"),
        ("placement.conflict", "error", f"shard 2: row {STATE} {ids['newer']!r}"),
        ("placement.misplaced", "error", f"primary: row {STATE} {ids['stray']!r}"),
        ("events.misplaced", "warning", f"shard 2: rows {EVENTS} session {ids['away']!r}"),
        ("items.misplaced", "warning", f"shard 2: rows {ITEMS} session {ids['gone']!r}"),
    }
    what = {f.where: f.what for f in found}
    assert "its shard shard 2 holds no copy" in what[f"shard 0: row {STATE} {ids['lost']!r}"]
    duplicate = what[f"shard 1: row {STATE} {ids['dup']!r}"]
    assert "version 2" in duplicate and "shard 0 (version 3), the copy the engine reads" in duplicate
    assert "newer than the copy the engine reads on its shard shard 1 (version 1)" in what[
        f"shard 2: row {STATE} {ids['newer']!r}"]
    assert {f.check: f.safe for f in found}["placement.conflict"] is False


def test_fix_apply_moves_removes_and_leaves_the_conflict_never_touching_what_the_engine_reads(deployment):
    from backends.ops.doctor import apply_repair

    adapter, sharded = deployment
    ids = plant(sharded)
    shards = sharded.shards
    outcomes = {(f.check, f.where.split(":")[0]): apply_repair(f).outcome for f in audit(adapter)}
    assert outcomes[("placement.conflict", "shard 2")] == "left (needs a human)"
    assert {o for k, o in outcomes.items() if k[0] != "placement.conflict"} == {"repaired"}

    # moved: the row, its event and its item are on its shard, gone from shard 0
    assert state_on(shards[2], ids["lost"]) == (b"lost-state", 4)
    assert rows(shards[2], "SELECT owner_subject FROM semvec_session_state WHERE session_id = %s",
                ids["lost"]) == [("acme",)]
    assert state_on(shards[0], ids["lost"]) is None
    assert rows(shards[2], "SELECT event_id FROM semvec_memory_events WHERE session_id = %s",
                ids["lost"]) == [(ids["lost_event"],)]
    assert rows(shards[0], "SELECT 1 FROM semvec_memory_events WHERE session_id = %s", ids["lost"]) == []
    assert rows(shards[2], "SELECT item_id, embedding::text FROM semvec_memory_items WHERE session_id = %s",
                ids["lost"]) == [("i1", "[0.5,0.5]")]
    assert adapter.state_store().load(ids["lost"]) == (b"lost-state", 4)
    # removed: the stale copy only; the copy the engine reads is untouched
    assert state_on(shards[1], ids["dup"]) is None
    assert state_on(shards[0], ids["dup"]) == (b"dup-current", 3)
    # the conflict: both copies untouched
    assert state_on(shards[1], ids["newer"]) == (b"newer-read", 1)
    assert state_on(shards[2], ids["newer"]) == (b"newer-unread", 5)
    # the primary's stray row moved to its shard; the event followed its session's shard
    assert state_on(shards[0], ids["stray"]) == (b"stray", 1)
    assert state_on(sharded.primary, ids["stray"]) is None
    assert rows(shards[1], "SELECT event_id FROM semvec_memory_events WHERE session_id = %s",
                ids["away"]) == [(ids["away_event"],)]
    # the engine's placed data and the primary's events are as they were
    assert rows(sharded.primary, "SELECT count(*) FROM semvec_memory_events") == [(2,)]

    again = audit(adapter)
    assert [(f.check, f.where) for f in again] == [
        ("placement.conflict", f"shard 2: row {STATE} {ids['newer']!r}")]


def test_an_interrupted_move_is_finished_by_the_next_run_and_a_third_finds_nothing(deployment, monkeypatch):
    """Interrupted after the shard got its copy and before the misplaced row went: two
    identical copies, the engine reads the moved one; the next run removes the other."""
    from backends.ops.doctor import apply_repair
    from backends.postgres import relocation

    adapter, sharded = deployment
    shards = sharded.shards
    lost = routed("lost", 2)
    put_state(shards[0], lost, b"lost-state", 4)
    event = put_event(shards[0], lost)
    real_drop = relocation._drop

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(relocation, "_drop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        for finding in audit(adapter):
            apply_repair(finding)
    monkeypatch.setattr(relocation, "_drop", real_drop)
    assert state_on(shards[2], lost) == state_on(shards[0], lost) == (b"lost-state", 4)
    assert adapter.state_store().load(lost) == (b"lost-state", 4)  # what the engine reads

    found = audit(adapter)
    assert {(f.check, f.where.split(":")[0]) for f in found} == {
        ("placement.duplicate", "shard 0"), ("events.misplaced", "shard 0")}
    code, second = cli("--shards", sharded.shard_list, "doctor", "--uri", sharded.primary,
                       "-b", "pgvector", "--fix", "--apply", "--yes")
    assert code == 0, second
    assert {f["outcome"] for f in second} == {"repaired"}
    assert state_on(shards[0], lost) is None and state_on(shards[2], lost) == (b"lost-state", 4)
    assert rows(shards[2], "SELECT event_id FROM semvec_memory_events WHERE session_id = %s",
                lost) == [(event,)]
    code, third = cli("--shards", sharded.shard_list, "doctor", "--uri", sharded.primary,
                      "-b", "pgvector", "--fix", "--apply", "--yes")
    assert (code, third) == (0, [])


def test_two_misplaced_copies_without_one_on_the_shard_move_the_newest(deployment):
    from backends.ops.doctor import apply_repair

    adapter, sharded = deployment
    shards = sharded.shards
    sid = routed("twice", 0)
    put_state(shards[1], sid, b"old", 2)
    put_state(shards[2], sid, b"new", 7)
    found = {(f.check, f.where.split(":")[0]): f for f in audit(adapter)}
    assert set(found) == {("placement.duplicate", "shard 1"), ("placement.misplaced", "shard 2")}
    assert "neither its shard shard 0" in found[("placement.duplicate", "shard 1")].what
    for finding in found.values():  # the older copy's repair runs first
        assert apply_repair(finding).outcome == "repaired"
    assert state_on(shards[0], sid) == (b"new", 7)
    assert state_on(shards[1], sid) is None and state_on(shards[2], sid) is None
    assert audit(adapter) == []


# -- through the CLI ------------------------------------------------------------------


def cli(*args: str) -> tuple[int, list[dict]]:
    result = runner.invoke(app, [*args, "-o", "json"])
    assert result.stdout.strip(), result.output
    findings = json.loads(result.stdout)["findings"]
    return result.exit_code, [f for f in findings if f["check"] != "advice.durability"]


def test_cli_with_uri_and_shards_finds_the_misplaced_copy_and_fix_apply_cleans_it(deployment):
    _, sharded = deployment
    lost = routed("lost", 2)
    put_state(sharded.shards[0], lost, b"lost-state", 4)
    base = ("--shards", sharded.shard_list, "doctor", "--uri", sharded.primary, "-b", "postgres")
    code, found = cli(*base)
    assert code == 1
    assert [(f["check"], f["where"]) for f in found] == [
        ("placement.misplaced", f"shard 0: row {STATE} {lost!r}")]
    code, plan = cli(*base, "--fix")
    assert code == 1 and [f["outcome"] for f in plan] == ["would repair"]
    assert state_on(sharded.shards[0], lost) == (b"lost-state", 4)  # a plan writes nothing
    code, fixed = cli(*base, "--fix", "--apply", "--yes")
    assert code == 0 and [f["outcome"] for f in fixed] == ["repaired"]
    assert state_on(sharded.shards[2], lost) == (b"lost-state", 4)
    assert cli(*base) == (0, [])


def test_cli_with_only_the_engines_variables(deployment, monkeypatch):
    _, sharded = deployment
    dup = routed("dup", 0)
    put_state(sharded.shards[0], dup, b"current", 3)
    put_state(sharded.shards[1], dup, b"stale", 3)  # the same version, other content
    monkeypatch.setenv("SEMVEC_SESSION_BACKEND", "postgres")
    for name, value in sharded.environ.items():
        monkeypatch.setenv(name, value)
    code, found = cli("doctor")
    assert code == 1
    assert [(f["check"], f["severity"], f["where"]) for f in found] == [
        ("placement.conflict", "error", f"shard 1: row {STATE} {dup!r}")]
    assert "not the same as the copy the engine reads" in found[0]["what"]
    code, fixed = cli("doctor", "--fix", "--apply", "--yes")
    assert code == 1 and [f["outcome"] for f in fixed] == ["left (needs a human)"]
    assert state_on(sharded.shards[0], dup) == (b"current", 3)
    assert state_on(sharded.shards[1], dup) == (b"stale", 3)


def test_a_moved_session_replaces_orphan_items_on_its_shard(deployment):
    from backends.ops.doctor import apply_repair

    adapter, sharded = deployment
    shards = sharded.shards
    sid = routed("orphaned", 1)
    put_state(shards[0], sid, b"state", 2)
    put_item(shards[0], sid, "current")
    put_item(shards[1], sid, "stale")  # on its shard, without a state row there: an orphan
    for finding in audit(adapter):
        apply_repair(finding)
    assert rows(shards[1], "SELECT item_id FROM semvec_memory_items WHERE session_id = %s",
                sid) == [("current",)]
    assert audit(adapter) == []


def test_a_missing_index_on_one_shard_is_named_by_it(deployment):
    adapter, sharded = deployment
    with psycopg.connect(sharded.shards[1], autocommit=True) as conn:
        conn.execute("DROP INDEX ix_semvec_memory_events_user_id")
    assert [(f.check, f.where, f.severity.value) for f in audit(adapter)] == [
        ("index.missing", "shard 1: index ix_semvec_memory_events_user_id on public.semvec_memory_events",
         "error")]


def test_an_unreachable_shard_fails_doctor_by_name(sharded_sql):
    dead = "postgresql://postgres@127.0.0.1:1/nowhere"
    result = runner.invoke(app, ["--shards", f"{sharded_sql.shards[0]},{dead}", "doctor",
                                 "--uri", sharded_sql.primary, "-b", "postgres", "--timeout", "2"])
    assert result.exit_code == 4, result.output
    assert "127.0.0.1:1" in result.output


def test_cli_a_stale_duplicate_alone_is_a_warning_exit_0_and_apply_removes_only_it(deployment):
    _, sharded = deployment
    dup = routed("dup", 2)
    put_state(sharded.shards[2], dup, b"read", 6)
    put_state(sharded.shards[0], dup, b"stale", 6 - 1)
    base = ("--shards", sharded.shard_list, "doctor", "--uri", sharded.primary, "-b", "pgvector")
    code, found = cli(*base)
    assert code == 0
    assert [(f["check"], f["severity"], f["where"], f["safe_repair"]) for f in found] == [
        ("placement.duplicate", "warning", f"shard 0: row {STATE} {dup!r}", True)]
    code, fixed = cli(*base, "--fix", "--apply", "--yes")
    assert code == 0 and [f["outcome"] for f in fixed] == ["repaired"]
    assert state_on(sharded.shards[0], dup) is None
    assert state_on(sharded.shards[2], dup) == (b"read", 6)


def test_the_postgres_layout_alone_no_item_tables(sharded_sql):
    from backends.ops.doctor import apply_repair
    from backends.postgres import PostgresAdapter

    adapter = PostgresAdapter(sharded_sql.primary, shards=sharded_sql.shard_list)
    try:
        adapter.ensure_schema()
        adapter.ensure_indexes()
        lost = routed("lost", 1)
        put_state(sharded_sql.shards[2], lost, b"engine-less", 3)
        event = put_event(sharded_sql.shards[2], lost)
        found = audit(adapter)
        assert [(f.check, f.where) for f in found] == [
            ("placement.misplaced", f"shard 2: row {STATE} {lost!r}"),
            ("events.misplaced", f"shard 2: rows {EVENTS} session {lost!r}")]
        assert [apply_repair(f).outcome for f in found] == ["repaired", "repaired"]
        assert adapter.state_store().load(lost) == (b"engine-less", 3)
        assert [e.event_id for e in adapter.event_store().list_events("alice")] == [event]
        assert rows(sharded_sql.shards[1], "SELECT event_id FROM semvec_memory_events") == [(event,)]
        assert audit(adapter) == []
    finally:
        adapter.close()
