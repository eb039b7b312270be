"""``verify_live`` names each kind of difference exactly, whether the target is read a
batch of digests per round trip (``load_digests_many``: PostgreSQL, Redis) or row by row
and hashed here (the fallback: memory, MongoDB): a missing session, another blob,
version, owner or pending message, a drift flag that differs on either side, a session
deleted on the source, and one only the target holds (found from the ids alone where the
target lists them: PostgreSQL). And the batch read answers what the fallback would,
damaged rows included."""

from __future__ import annotations

import pytest

from backends.contract import Capability, StateStoreDefaults, state_defaults
from backends.errors import CorruptState
from backends.transfer.batch_reads import digest_loader
from backends.migrate import LiveMigration, run_migration, verify_live
from backends.transfer.loss import state_store_member
from tests.backends.migrate.test_live_migration import open_state, stores  # noqa: F401 - the fixture

OWNER = "tenant-a"
PAIRS = [("postgres", "postgres"), ("redis", "redis"), ("memory", "memory"),
         ("postgres", "mongo"), ("mongo", "redis")]


@pytest.fixture
def pair(stores):  # noqa: F811 - the imported fixture
    """make(source kind, target kind) -> (source, target), each on its own store."""

    def make(source_kind, target_kind):
        return tuple(_adapter(stores, kind, side)
                     for kind, side in ((source_kind, "a"), (target_kind, "b")))

    return make


def _adapter(stores, kind, side):  # noqa: F811
    if kind == "memory":
        from backends.memory import MemoryBackendAdapter

        return MemoryBackendAdapter()
    return stores(kind, side)[0]


def _migrated(tmp_path, source, target, n=8):
    for i in range(n):
        source.state_store().save(f"live-{i}", b"blob %d" % i, expected_version=None,
                                  owner_subject=OWNER)
    state = open_state(tmp_path, source, target)
    run_migration(LiveMigration(source, target, state))
    return state


def _rewrite(target, sid, blob, *, version, owner_subject=OWNER, pending_message=None):
    target.state_store().delete(sid)
    target.restore_session(sid, blob, version=version, owner_subject=owner_subject,
                           pending_message=pending_message)


@pytest.mark.parametrize("source_kind,target_kind", PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_each_difference_is_named(pair, tmp_path, source_kind, target_kind):
    source, target = pair(source_kind, target_kind)
    state = _migrated(tmp_path, source, target)
    assert verify_live(source, target, state).ok
    target.state_store().delete("live-0")
    _rewrite(target, "live-1", b"blob 1", version=1, owner_subject="someone-else")
    _rewrite(target, "live-2", b"blob 2", version=1, pending_message="held")
    _rewrite(target, "live-3", b"other bytes", version=1)
    _rewrite(target, "live-4", b"blob 4", version=7)
    expected = {"session 'live-0': missing on the target",
                "session 'live-1': owner differs",
                "session 'live-2': pending message differs",
                "session 'live-3': blob sha256 differs",
                "session 'live-4': version 7 on the target, 1 on the source"}
    both_drift = all(state_store_member(a, Capability.DRIFT_STATUS) is not None
                     for a in (source, target))
    if both_drift:
        state_store_member(target, Capability.DRIFT_EXEMPT)("live-5", True)
        state_store_member(source, Capability.DRIFT_EXEMPT)("live-6", True)
        expected |= {"session 'live-5': drift_exempt differs",
                     "session 'live-6': drift_exempt differs"}
    source.state_store().delete("live-7")
    target.restore_session("theirs", b"not ours", version=1)
    report = verify_live(source, target, state)
    assert set(report.differences) == expected | {
        "session 'live-7': on the target, deleted on the source (moved on the source since "
        "the last pass)"}
    assert report.different == len(expected) and report.source_moved == 1
    assert report.sessions_compared == 7 and report.sessions_matched == 7 - len(expected)
    assert report.foreign == ["theirs"]


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_the_batch_digest_read_answers_what_the_fallback_would(stores, kind):  # noqa: F811
    adapter = stores(kind, "b")[0]
    store = adapter.state_store()
    assert type(store).load_digests_many is not StateStoreDefaults.load_digests_many  # its own
    store.save("d-1", b"one", expected_version=None, owner_subject=OWNER)
    store.save("d-2", b"two", expected_version=None, pending_message="held")
    store.set_drift_exempt("d-2", True)
    ids = ["d-1", "nope", "d-2"]
    fallback = _fallback_loader(adapter)
    for scope in (None, OWNER):
        batch = store.load_digests_many(ids, owner_subject=scope)
        assert batch == fallback(ids, scope)
    every = store.load_digests_many(ids)
    assert [d and (d.version, d.owner_subject, d.pending_message, d.drift_exempt)
            for d in every] == [(1, OWNER, None, False), None, (1, None, "held", True)]


def _fallback_loader(adapter):
    """``digest_loader`` on a view of ``adapter`` whose store has no digest read of its
    own: the default's (rows read, hashed here)."""

    class Plain:
        def __init__(self, inner):
            self._inner = inner

        def load_full(self, *args, **kwargs):
            return self._inner.load_full(*args, **kwargs)

        def load_full_many(self, *args, **kwargs):
            return self._inner.load_full_many(*args, **kwargs)

        def is_drift_exempt(self, session_id):
            return self._inner.is_drift_exempt(session_id)

    class View:
        def state_store(self):
            return Plain(adapter.state_store())

    defaulted = state_defaults(View().state_store()).load_digests_many
    assert defaulted.__func__ is StateStoreDefaults.load_digests_many
    return digest_loader(View())


@pytest.mark.parametrize("damage,field", [("state_blob = NULL", "state_blob"),
                                          ("version = 0", "version")])
def test_a_damaged_postgres_row_raises_in_the_batch_digest_read(stores, postgres_server,  # noqa: F811
                                                                 damage, field):
    import psycopg

    adapter = stores("postgres", "b")[0]
    store = adapter.state_store()
    store.save("d-bad", b"x", expected_version=None)
    with psycopg.connect(adapter.config.conninfo, autocommit=True) as conn:
        # ENGINE-WIRE's literal DDL leaves these columns nullable; ours does not
        conn.execute(f"ALTER TABLE semvec_session_state ALTER COLUMN {field} DROP NOT NULL")
        conn.execute(f"UPDATE semvec_session_state SET {damage} WHERE session_id = 'd-bad'")
    with pytest.raises(CorruptState) as info:
        store.load_digests_many(["d-bad"])
    assert info.value.session_id == "d-bad" and info.value.field == field
