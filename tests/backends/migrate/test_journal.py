"""The state file's journal: sessions the file has no row for are announced per batch
and folded into rows once per pass (``backends.migrate.state``). What must hold is
what held with a row per session: a key the scan returns twice is copied once, at its
newest version, never a conflict; a run killed between the target's writes and their
record resumes with nothing lost, duplicated or miscounted; a reader folding the journal
while a batch is in flight loses no record.

Redis (source) and PostgreSQL (target) are the suite's real servers.
"""

from __future__ import annotations

import contextlib

import pytest

from backends.migrate import (
    LiveMigration,
    MigrationState,
    fingerprint,
    migration_status,
    run_migration,
    verify_live,
)
from backends.migrate import passes

OWNER = "tenant-j"


@pytest.fixture
def pair(redis_url, postgres_server):
    from backends.postgres import PostgresAdapter
    from backends.redis import RedisBackendAdapter

    base = redis_url.rsplit("/", 1)[0] if redis_url.count("/") > 2 else redis_url.rstrip("/")
    source = RedisBackendAdapter(f"{base}/3")
    source._client.flushdb()
    name = postgres_server.take_database()
    target = PostgresAdapter(postgres_server.url(name))
    try:
        yield source, target
    finally:
        for adapter in (source, target):
            with contextlib.suppress(Exception):
                adapter.close()
        with contextlib.suppress(Exception):
            postgres_server.drop_database(name)


@pytest.fixture
def small_steps(monkeypatch):
    """Steps and batches of 4 sessions, so a few sessions make many batches."""
    monkeypatch.setattr(passes, "STEP", 4)
    monkeypatch.setattr(passes, "WRITE_BATCH", 4)


def seed(source, n):
    for i in range(n):
        source.commit_turn(f"j-{i:02d}", b"v1 of %d" % i, expected_version=None,
                           owner_subject=OWNER)


def open_state(path):
    return MigrationState.open(str(path), source=fingerprint("redis", "src"),
                               target=fingerprint("postgres", "dst"))


def test_a_key_the_scan_returns_twice_is_copied_once_at_its_newest_version(
        pair, tmp_path, small_steps):
    source, target = pair
    seed(source, 10)
    listing = source.iter_session_states

    def twice(**kwargs):
        yield from listing(**kwargs)
        # the scan hands out j-01 again, after a writer moved it (as SCAN may while the
        # keyspace rehashes): its first copy is still in this pass's journal
        source.commit_turn("j-01", b"v2", expected_version=1, owner_subject=OWNER)
        yield from (p for p in listing(**kwargs) if p[0].session_id == "j-01")

    source.iter_session_states = twice
    state = open_state(tmp_path / "m.state")
    (result,) = run_migration(LiveMigration(source, target, state))
    assert result.conflicts == 0, result.new_conflicts
    again = target.state_store().load_full("j-01")
    assert (again.blob, again.version) == (b"v2", 2)
    row = state.sessions(["j-01"])["j-01"]
    assert (row.state, row.src_version, row.tgt_version) == ("copied", 2, 2)
    assert state.count("copied") == 10 and state.count("intent") == 0
    del source.iter_session_states
    assert verify_live(source, target, state).ok


class Killed(BaseException):
    """Stands for a SIGKILL: nothing after it runs in the process."""


def test_a_run_killed_before_recording_its_writes_resumes_whole(
        pair, tmp_path, small_steps, monkeypatch):
    source, target = pair
    seed(source, 10)
    path = tmp_path / "m.state"
    record = MigrationState.journal_copied
    calls = []

    def dies_on_the_second_batch(self, db, batch):
        calls.append(batch)
        if len(calls) == 2:
            raise Killed
        return record(self, db, batch)

    monkeypatch.setattr(MigrationState, "journal_copied", dies_on_the_second_batch)
    state = open_state(path)
    with pytest.raises(Killed):
        run_migration(LiveMigration(source, target, state))
    state.close()
    # 4 sessions recorded; 4 more written but only announced; the last 2 announced (the
    # next batch is announced while the one before is written) and not written: the
    # status counts all 6 as pending
    seen = MigrationState.read(str(path), fold=False)
    status = migration_status(seen)
    assert (status.sessions_copied, status.sessions_pending) == (4, 6)
    assert not status.cutover_possible
    seen.close()
    assert len(list(target.iter_sessions())) == 8

    monkeypatch.setattr(MigrationState, "journal_copied", record)
    state = open_state(path)  # the resume folds the announcements into intent rows
    assert state.count("intent") == 6
    (result,) = run_migration(LiveMigration(source, target, state))
    assert result.conflicts == 0, result.new_conflicts
    assert state.count("copied") == 10 and state.count("intent") == 0
    assert verify_live(source, target, state).ok
    assert migration_status(state).sessions_copied == 10


def test_a_reader_folding_while_a_batch_is_written_loses_no_record(
        pair, tmp_path, small_steps, monkeypatch):
    source, target = pair
    seed(source, 9)
    path = tmp_path / "m.state"
    state = open_state(path)
    mig = LiveMigration(source, target, state)
    write = mig._restore_all
    folds = []

    def with_a_reader(fresh):
        existed = write(fresh)
        other = MigrationState.read(str(path))  # migrate verify, say: folds what it finds
        folds.append(other.count("intent"))
        other.close()
        return existed

    mig._restore_all = with_a_reader
    (result,) = run_migration(mig)
    assert folds and all(n > 0 for n in folds)  # each reader found the batch in flight
    assert result.copied == 9 and result.conflicts == 0
    assert state.count("copied") == 9 and state.count("intent") == 0
    assert verify_live(source, target, state).ok


def test_fold_keeps_what_was_copied_lets_later_entries_win_and_never_replaces_a_conflict(
        tmp_path):
    state = open_state(tmp_path / "m.state")
    with state.transaction() as db:
        first = state.journal_intent(db, [("a", 1, "d1"), ("b", 1, "e1")])
        assert state.journal_copied(db, first)
    with state.transaction() as db:
        state.journal_intent(db, [("a", 2, "d2"), ("c", 1, "f1")])  # announced, not recorded
        state.mark_conflict(db, "b", "theirs")
    with state.transaction() as db:
        last = state.journal_intent(db, [("b", 2, "e2")])
        assert state.journal_copied(db, last)
    assert (state.count("copied"), state.count("intent")) == (3, 2)  # counted unfolded
    state.fold()
    rows = state.sessions(["a", "b", "c"])
    assert (rows["a"].state, rows["a"].tgt_version, rows["a"].digest,
            rows["a"].want_version, rows["a"].want_digest) == ("intent", 1, "d1", 2, "d2")
    assert (rows["b"].state, rows["b"].note) == ("conflict", "theirs")
    assert (rows["c"].state, rows["c"].tgt_version, rows["c"].want_version) == ("intent", None, 1)
    assert (state.count("copied"), state.count("intent"), state.count("conflict")) == (0, 2, 1)
    with state.transaction() as db:
        assert state.journal_intent(db, []) is None
    state.close()
