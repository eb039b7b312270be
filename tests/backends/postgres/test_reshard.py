"""Resharding a live SQL deployment (``backends.migrate.shards``) on the suite's real
PostgreSQL, one database per shard: the plan's moves are the HRW routing's, a run and a
cutover leave every session readable on its new-routing shard identical to before (its
events once, its items), shrink and reorder work, abort removes only its copies, and the
old shards are never written."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from backends.contract import MemoryEvent, MemoryItem
from backends.postgres.placement import shard_index

pytestmark = pytest.mark.postgres

OWNER = "acme"


def deployment(backend, primary, shards, **options):
    from backends.registry import Registry

    if backend == "pgvector":
        options.setdefault("dimensions", 2)
    return Registry().load_adapter(backend, uri=primary, shards=list(shards), **options)


def _event(user, sid, n, owner=OWNER):
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, session_id=sid,
                       owner_subject=owner, content=f"turn {n} of {sid}", embedding=[1.0, 0.5],
                       meta={"n": n},
                       created_at=datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=n))


def seed(adapter, n, *, prefix="s", items=False):
    """``n`` sessions written as the engine writes them: a turn with an event each (five
    users), a second turn on every third, a pending message on some; one out-of-turn
    event on the primary; (pgvector) two items on every fourth session."""
    sids = [f"{prefix}-{i:04d}" for i in range(n)]
    for i, sid in enumerate(sids):
        adapter.commit_turn(sid, b"blob-%d-" % i + bytes(range(256)) * 2, expected_version=None,
                            owner_subject=OWNER, events=[_event(f"u-{i % 5}", sid, i)])
        if i % 3 == 0:
            adapter.commit_turn(sid, b"second-%d" % i, expected_version=1, owner_subject=OWNER,
                                pending_message="later" if i % 2 else None,
                                events=[_event(f"u-{i % 5}", sid, 1000 + i)])
        if items and i % 4 == 0:
            adapter.sync_items(sid, [
                MemoryItem(item_id=f"it-{i}-{k}", text=f"item {k} of {sid}", embedding=(1.0, float(k)),
                           tier="short_term", tiers=("short_term",)) for k in range(2)],
                owner_subject=OWNER)
    adapter.event_store().append(_event("u-0", "", 5000))  # outside a turn: the primary
    return sids


def snapshot(adapter, sids):
    """Every session's state, its events (by id, each once) and live items."""
    store, events = adapter.state_store(), adapter.event_store()
    per_session: dict[str, list] = {sid: [] for sid in sids}
    loose = []
    for user in sorted({f"u-{i}" for i in range(5)}):
        for e in events.list_events(user):
            (per_session[e.session_id] if e.session_id else loose).append(
                (e.event_id, e.user_id, e.content, e.owner_subject, e.meta, tuple(e.embedding)))
    state = {sid: store.load_full(sid) for sid in sids}
    items = {}
    if hasattr(adapter, "iter_live_items"):
        items = {sid: sorted((i.item_id, i.text, i.embedding) for i in adapter.iter_live_items(sid))
                 for sid in sids}
    return state, {sid: sorted(v) for sid, v in per_session.items()}, sorted(loose), items


def _rows(url, table="semvec_session_state", column="session_id"):
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
            return []
        return [r[0] for r in conn.execute(f"SELECT {column} FROM {table}").fetchall()]


def _reshard(backend, primary, old, new):
    from backends.migrate.shards import Reshard

    return Reshard(deployment(backend, primary, old), deployment(backend, primary, new))


def _close(rs):
    rs.old.close()
    rs.new.close()


@pytest.mark.parametrize("shape", ["grow", "grow-two", "shrink", "reorder", "from-one"])
def test_each_shards_moves_are_the_routings(sharded_sql, shape):
    """What a pass streams from a shard is tested per id (``destination_on``, with its
    shortcut for a grow): a move placed there, with the new routing's index, for the
    same ids :meth:`routes` and the engine's ``shard_index`` say."""
    five = sharded_sql.make(5)
    dbs = five.shards
    old, new = {"grow": (dbs[:3], dbs[:4]), "grow-two": (dbs[:3], dbs),
                "shrink": (dbs[:3], dbs[:2]), "reorder": (dbs[:3], [dbs[2], dbs[0], dbs[1]]),
                "from-one": (dbs[:1], dbs[:3])}[shape]
    rs = _reshard("postgres", five.primary, old, new)
    try:
        ids = [str(uuid.uuid4()) for _ in range(3000)] + ["", "é/ü", "a" * 128]
        for side, shards in (("old", rs.old.placement.shards), ("new", rs.new.placement.shards)):
            for db in shards:
                test = rs.destination_on(side, db)
                for sid in ids:
                    i, j = shard_index(sid, len(old)), shard_index(sid, len(new))
                    placed = (rs.old.placement.shards[i] if side == "old"
                              else rs.new.placement.shards[j]) is db
                    assert test(sid) == (j if placed and rs.moves(sid) else None), (side, sid)
    finally:
        _close(rs)


def test_plan_moves_are_the_routings_three_to_four(sharded_sql):
    from backends.migrate.shards import plan_reshard

    four = sharded_sql.make(4)
    old, new = four.shards[:3], four.shards
    writer = deployment("postgres", four.primary, old)
    sids = seed(writer, 300)
    writer.close()
    rs = _reshard("postgres", four.primary, old, new)
    try:
        report = plan_reshard(rs)
        others = [str(uuid.uuid4()) for _ in range(2000)] + ["", "é/ü", "a" * 128]
        assert [rs.routes(s) for s in sids + others] == [
            (shard_index(s, 3), shard_index(s, 4)) for s in sids + others]
        shrink = _reshard("postgres", four.primary, old, old[:2])
        assert [shrink.routes(s) for s in others] == [(shard_index(s, 3), shard_index(s, 2))
                                                       for s in others]
        _close(shrink)
    finally:
        _close(rs)
    expected = sum(shard_index(sid, 3) != shard_index(sid, 4) for sid in sids)
    assert report["moves"] == expected and 0 < expected < 300
    assert report["sessions"] == 300
    assert [r["sessions"] for r in report["now"]] == [
        sum(shard_index(s, 3) == i for s in sids) for i in range(3)]
    assert [r["sessions"] for r in report["after"]] == [
        sum(shard_index(s, 4) == i for s in sids) for i in range(4)]
    moved = [s for s in sids if shard_index(s, 3) != shard_index(s, 4)]
    assert report["events_to_move"] == sum(2 if int(s[2:]) % 3 == 0 else 1 for s in moved)
    assert report["bytes_to_move"] > 0
    joined = [d for d in report["new_databases"] if d["joins"]]
    assert len(joined) == 1 and joined[0]["reachable"] and joined[0]["missing_tables"]
    assert "password" not in str(report)


def test_a_move_someone_else_wrote_on_the_new_shard_is_a_conflict_and_kept(sharded_sql, tmp_path):
    """The full pass writes the moved rows as fetched (insert-if-absent, a batch at a
    time): a batch where one moved session already exists on its new shard keeps that
    row, reports it once as a conflict, and still writes the rest of the batch; a row
    there identical to the source's is recognised as copied."""
    from backends.migrate.shards import open_state, reshard_migration, run_reshard

    four = sharded_sql.make(4)
    old, new = four.shards[:3], four.shards
    writer = deployment("postgres", four.primary, old)
    sids = seed(writer, 60)
    writer.close()
    moved = [s for s in sids if shard_index(s, 3) != shard_index(s, 4)]
    foreign, identical = moved[0], moved[1]
    rs = _reshard("postgres", four.primary, old, new)
    state = open_state(str(tmp_path / "grow.state"), rs)
    try:
        source = rs.old.state_store().load_full(identical)
        target = rs.new.state_store()
        target.restore_session(foreign, b"someone else's", version=9, owner_subject=OWNER)
        target.restore_session(identical, source.blob, version=source.version,
                               owner_subject=source.owner_subject,
                               pending_message=source.pending_message)
        mig = reshard_migration(rs, state)
        assert mig.copier.usable()  # the rows go as fetched (the engine's column types)
        (result,) = run_reshard(mig)
        assert [sid for sid, _ in result.new_conflicts] == [foreign]
        assert result.copied == len(moved) - 1
        kept = target.load_full(foreign)
        assert (kept.blob, kept.version) == (b"someone else's", 9)
        for sid in moved[1:]:
            assert target.load_full(sid) == rs.old.state_store().load_full(sid)
    finally:
        state.close()
        _close(rs)


def test_a_shard_of_other_column_types_moves_its_rows_the_parsed_way(sharded_sql, tmp_path):
    """Rows go as fetched only between tables of the engine's column types (binary COPY
    needs them); a shard whose ``version`` column is bigint makes the pass parse and
    write each row instead, with the same result."""
    from backends.migrate.shards import open_state, reshard_migration, run_reshard

    four = sharded_sql.make(4)
    old, new = four.shards[:3], four.shards
    writer = deployment("postgres", four.primary, old)
    sids = seed(writer, 40)
    writer.close()
    with psycopg.connect(old[1], autocommit=True) as conn:
        conn.execute("ALTER TABLE semvec_session_state ALTER COLUMN version TYPE bigint")
    moved = [s for s in sids if shard_index(s, 3) != shard_index(s, 4)]
    rs = _reshard("postgres", four.primary, old, new)
    state = open_state(str(tmp_path / "grow.state"), rs)
    try:
        mig = reshard_migration(rs, state)
        assert not mig.copier.usable()
        (result,) = run_reshard(mig)
        assert result.copied == len(moved) and not result.conflicts
        for sid in moved:
            assert rs.new.state_store().load_full(sid) == rs.old.state_store().load_full(sid)
    finally:
        state.close()
        _close(rs)


@pytest.mark.parametrize("backend", ["postgres", "pgvector"])
def test_grow_three_to_four_copies_only_the_moves_and_cutover_passes(sharded_sql, tmp_path, backend):
    from backends.migrate.shards import (
        cutover_reshard, open_state, reshard_migration, run_reshard, verify_reshard)

    four = sharded_sql.make(4)
    old, new = four.shards[:3], four.shards
    writer = deployment(backend, four.primary, old)
    sids = seed(writer, 120, items=backend == "pgvector")
    before = snapshot(writer, sids)
    old_rows = {url: sorted(_rows(url)) for url in old}
    writer.close()
    rs = _reshard(backend, four.primary, old, new)
    state = open_state(str(tmp_path / "grow.state"), rs)
    try:
        mig = reshard_migration(rs, state, write_batch=7)
        results = run_reshard(mig)
        moved = [s for s in sids if shard_index(s, 3) != shard_index(s, 4)]
        assert results[0].copied == len(moved) and not results[0].conflicts
        assert results[0].events == sum(2 if int(s[2:]) % 3 == 0 else 1 for s in moved)
        report = verify_reshard(mig, rs)
        assert report.ok, report.differences
        assert report.sessions_matched == len(moved)
        result = cutover_reshard(reshard_migration(rs, state), rs, quiet_seconds=0)
        assert result.ok, result.reason
        assert result.receipt["moves"] == len(moved)
        assert "doctor --fix --apply" in result.receipt["old_copies"]
    finally:
        state.close()
        _close(rs)
    # the old shards were never written: the same rows as before
    assert {url: sorted(_rows(url)) for url in old} == old_rows
    # every moved session is on its new-routing shard, exactly once there
    for i, url in enumerate(new):
        assert sorted(s for s in _rows(url) if shard_index(s, 4) == i) == sorted(
            s for s in sids if shard_index(s, 4) == i)
    events_new = _rows(new[3], "semvec_memory_events", "session_id")
    assert sorted(set(events_new)) == sorted(s for s in sids if shard_index(s, 4) == 3)
    assert len(events_new) == len(set(_rows(new[3], "semvec_memory_events", "event_id")))
    # the new list reads every session identical to before, its events once
    after = deployment(backend, four.primary, new)
    try:
        assert snapshot(after, sids) == before
        assert after.state_store().count_sessions() == 120
        events = after.event_store()
        for user in (f"u-{i}" for i in range(5)):  # the old copies are not counted either
            assert events.count_for_user(user) == len(events.list_events(user)) == len(
                list(events.iter_events(user, page=7)))
    finally:
        after.close()


@pytest.mark.parametrize("change", ["shrink", "reorder", "from-primary", "to-primary"])
def test_shrink_three_to_two_reorder_and_to_and_from_no_list(sharded_sql, tmp_path, change):
    from backends.migrate.shards import (
        cutover_reshard, open_state, reshard_migration, run_reshard)

    primary, shards = sharded_sql.primary, sharded_sql.shards
    old, new = {"shrink": (shards, shards[:2]), "reorder": (shards, [shards[2], shards[0], shards[1]]),
                "from-primary": ([], shards[:2]), "to-primary": (shards, [])}[change]
    writer = deployment("postgres", primary, old)
    sids = seed(writer, 90)
    before = snapshot(writer, sids)
    writer.close()
    rs = _reshard("postgres", primary, old, new)
    state = open_state(str(tmp_path / "s.state"), rs)
    where_old = {s: old[shard_index(s, len(old))] if old else primary for s in sids}
    where_new = {s: new[shard_index(s, len(new))] if new else primary for s in sids}
    moved = [s for s in sids if where_old[s] != where_new[s]]
    assert moved
    try:
        mig = reshard_migration(rs, state)
        assert run_reshard(mig)[0].copied == len(moved)
        assert cutover_reshard(reshard_migration(rs, state), rs, quiet_seconds=0).ok
    finally:
        state.close()
        _close(rs)
    for sid in moved:
        assert sid in _rows(where_new[sid])
    after = deployment("postgres", primary, new)
    try:
        assert snapshot(after, sids) == before
    finally:
        after.close()


def test_abort_removes_only_its_copies(sharded_sql, tmp_path):
    from backends.migrate.shards import abort_reshard, open_state, reshard_migration, run_reshard

    four = sharded_sql.make(4)
    old, new = four.shards[:3], four.shards
    writer = deployment("pgvector", four.primary, old)
    sids = seed(writer, 60, items=True)
    before = snapshot(writer, sids)
    rs = _reshard("pgvector", four.primary, old, new)
    state = open_state(str(tmp_path / "a.state"), rs)
    try:
        mig = reshard_migration(rs, state)
        run_reshard(mig)
        # a row someone else wrote on the new shard (not a copy of ours): kept
        with psycopg.connect(new[3], autocommit=True) as conn:
            conn.execute("INSERT INTO semvec_session_state (session_id, state_blob, version,"
                         " drift_exempt, owner_subject, pending_message, updated_at) VALUES"
                         " ('stranger', 'x', 1, false, NULL, NULL, now())")
        preview = abort_reshard(mig, apply=False)
        assert len(preview.sessions) == sum(shard_index(s, 3) != shard_index(s, 4) for s in sids)
        assert preview.removed_sessions == 0 and len(_rows(new[3])) == len(preview.sessions) + 1
        done = abort_reshard(reshard_migration(rs, state), apply=True)
        assert done.removed_sessions == len(preview.sessions)
        assert done.removed_events == len(preview.events) > 0
    finally:
        state.close()
        _close(rs)
    assert _rows(new[3]) == ["stranger"] and _rows(new[3], "semvec_memory_events") == []
    assert _rows(new[3], "semvec_memory_items") == []
    # the old list reads everything as before: abort never touched the old shards
    assert snapshot(writer, sids) == before
    writer.close()
