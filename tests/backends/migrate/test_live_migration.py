"""Live migration (``backends.migrate``) for every pair of session stores we run:
bulk + follow while a writer thread commits turns with events to the source, then
cutover: identical by content, checked by the migration's own verify AND by reading both
stores here. Also: a session someone else wrote on the target is a conflict (reported,
never overwritten), abort removes only what the migration wrote, a state file refuses
another pair.

Redis and PostgreSQL (the ``postgres`` layout and ``pgvector``) are real servers from the
suite's fixtures, each side on its own database; MongoDB is ``mongomock`` (behind the
suite's locked client: mongomock is not thread-safe), which has no change streams, so
every pair finds changes with the version scan.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid

import pytest

from backends.contract import MemoryEvent
from backends.transfer import LossyTransfer
from backends.migrate import (
    LiveMigration,
    MigrationState,
    StateMismatch,
    abort_plan,
    apply_abort,
    check_losses,
    cutover,
    fingerprint,
    run_migration,
    verify_live,
)

mongomock = pytest.importorskip("mongomock")
from tests.support.fixtures.mongo import LockedClient  # noqa: E402

KINDS = ("redis", "postgres", "pgvector", "mongo")
PAIRS = [(a, b) for a in KINDS for b in KINDS]
OWNER = "tenant-a"


@pytest.fixture
def stores(request, redis_url, postgres_server, pgvector_url):
    """make(kind, side) -> (adapter, writer_adapter) on that side's own store."""
    made, dbs = [], []

    def redis_db(side):
        base = redis_url.rsplit("/", 1)[0] if redis_url.count("/") > 2 else redis_url.rstrip("/")
        return f"{base}/{ {'a': 1, 'b': 2}[side] }"

    def sql_url(side):
        if side == "a":
            return pgvector_url
        name = postgres_server.take_database()
        dbs.append(name)
        return postgres_server.url(name)

    mongo_clients = {}

    def make(kind, side):
        if kind == "redis":
            from backends.redis import RedisBackendAdapter

            url = redis_db(side)
            pair = RedisBackendAdapter(url), RedisBackendAdapter(url)
            pair[0]._client.flushdb()
        elif kind in ("postgres", "pgvector"):
            url = sql_url(side)
            if kind == "postgres":
                from backends.postgres import PostgresAdapter

                pair = PostgresAdapter(url), PostgresAdapter(url)
            else:
                from backends.pgvector import PgVectorAdapter

                pair = PgVectorAdapter(url, dimensions=8), PgVectorAdapter(url, dimensions=8)
        else:
            from backends.mongo import MongoBackendAdapter

            client = mongo_clients.setdefault(side, LockedClient())
            db = f"live_{side}_{uuid.uuid4().hex[:8]}"
            pair = (MongoBackendAdapter(client=client, database=db),
                    MongoBackendAdapter(client=client, database=db))
        made.extend(pair)
        return pair

    yield make
    for adapter in made:
        with contextlib.suppress(Exception):
            adapter.close()
    for name in dbs:
        with contextlib.suppress(Exception):
            postgres_server.drop_database(name)


def event(user, sid, text):
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content=text,
                       session_id=sid, owner_subject=OWNER, meta={"n": text})


def turn(adapter, sid, blob, expected_version, events=()):
    """A turn: ``commit_turn`` where the store can write state and events together;
    mongomock is a standalone server (no multi-document transactions), so there the
    state is saved and the events appended one after the other."""
    if adapter.name != "mongo":
        return adapter.commit_turn(sid, blob, expected_version=expected_version,
                                   owner_subject=OWNER, events=list(events) or None)
    version = adapter.state_store().save(sid, blob, expected_version=expected_version,
                                         owner_subject=OWNER)
    for e in events:
        adapter.event_store().append(e)
    return version


def seed(adapter, n=12):
    versions = {}
    for i in range(n):
        sid = f"live-{i}"
        turn(adapter, sid, b"turn 1 of %d" % i, None, [event(f"user-{i % 4}", sid, f"seed {i}")])
        versions[sid] = 1
    return versions


class Writer(threading.Thread):
    """Commits turns (state + one event) to the source, adds sessions, deletes one."""

    def __init__(self, adapter, versions, turns=30):
        super().__init__(daemon=True)
        self.adapter, self.versions, self.turns = adapter, dict(versions), turns
        self.error = None
        self.rng = random.Random(7)

    def run(self):
        try:
            for t in range(self.turns):
                if t % 10 == 5:
                    sid = f"live-new-{t}"
                    turn(self.adapter, sid, b"new %d" % t, None, [event("user-9", sid, f"n{t}")])
                    self.versions[sid] = 1
                    continue
                if t == 17:
                    sid = sorted(self.versions)[0]
                    self.adapter.state_store().delete(sid)
                    del self.versions[sid]
                    continue
                sid = self.rng.choice(sorted(self.versions))
                v = self.versions[sid]
                turn(self.adapter, sid, b"turn %d %s" % (v + 1, sid.encode()), v,
                     [event(f"user-{t % 4}", sid, f"t{t}")])
                self.versions[sid] = v + 1
        except Exception as exc:  # noqa: BLE001 - the test reports it
            self.error = exc


def assert_identical(source, target):
    """Read both stores here (not through the migration): same sessions, same events."""
    src_ids = sorted(s.session_id for s in source.iter_sessions())
    dst_ids = sorted(s.session_id for s in target.iter_sessions())
    assert src_ids == dst_ids
    for sid in src_ids:
        a = source.state_store().load_full(sid)
        b = target.state_store().load_full(sid)
        assert (a.blob, a.version, a.owner_subject) == (b.blob, b.version, b.owner_subject), sid
    users = {f"user-{i}" for i in range(4)} | {"user-9"}
    for user in sorted(users):
        a = source.event_store().list_events(user)
        b = target.event_store().list_events(user)
        assert sorted(e.event_id for e in a) == sorted(e.event_id for e in b), user
        assert len({e.event_id for e in b}) == len(b)  # no duplicates
        by_id = {e.event_id: e for e in b}
        for e in a:
            assert (e.content, e.session_id, dict(e.meta)) == (
                by_id[e.event_id].content, by_id[e.event_id].session_id, dict(by_id[e.event_id].meta))


def follow_until_quiet(mig, writer):
    """Follow until one whole pass started after the writer had stopped."""
    passes_after = []

    def counted(result):
        if passes_after or not writer.is_alive():
            passes_after.append(result)

    results = run_migration(mig, follow=True, interval=0.02, on_pass=counted,
                            should_stop=lambda: len(passes_after) >= 2)
    writer.join(30)
    return results


def open_state(tmp_path, source, target, name="m.state"):
    return MigrationState.open(str(tmp_path / name), source=fingerprint(source.name, "src"),
                               target=fingerprint(target.name, "dst"),
                               labels={"source": "src", "target": "dst"})


@pytest.mark.parametrize("source_kind,target_kind", PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_bulk_follow_then_cutover_is_identical(stores, tmp_path, source_kind, target_kind):
    source, writer_side = stores(source_kind, "a")
    target, _ = stores(target_kind, "b")
    versions = seed(source)
    try:
        check_losses(source, target, allow_loss=False)
        lossy = False
    except LossyTransfer:
        lossy = True  # e.g. sequences into the SQL layout, which keeps none: accepted here
        assert check_losses(source, target, allow_loss=True)
    state = open_state(tmp_path, source, target)
    mig = LiveMigration(source, target, state)
    writer = Writer(writer_side, versions)
    first = run_migration(mig)[0]
    assert first.kind == "bulk" and first.copied == len(versions)
    writer.start()
    results = follow_until_quiet(mig, writer)
    assert writer.error is None
    assert all(r.kind == "catch-up" for r in results) and not any(r.conflicts for r in results)
    assert sum(r.deleted for r in results) == 1
    result = cutover(mig, quiet_seconds=0.05)
    assert result.ok, (result.reason, result.report.differences)
    assert result.report.sessions_matched == len(writer.versions)
    assert result.receipt["sessions_digest"] and result.receipt["events"] == 12 + 30 - 1
    assert_identical(source, target)
    # the SQL layout keeps no event sequence numbers: the one loss these pairs have
    assert lossy == (target_kind in ("postgres", "pgvector") and source_kind in ("redis", "mongo"))


def test_a_session_written_on_the_target_by_someone_else_is_kept(stores, tmp_path):
    source, _ = stores("redis", "a")
    target, _ = stores("pgvector", "b")
    seed(source, 4)
    target.state_store().save("live-2", b"theirs", expected_version=None, owner_subject=OWNER)
    mig = LiveMigration(source, target, open_state(tmp_path, source, target))
    first = run_migration(mig)[0]
    assert first.conflicts == 1 and first.new_conflicts[0][0] == "live-2"
    assert target.state_store().load_full("live-2").blob == b"theirs"
    # the source moves on: still never overwritten, and the cutover refuses
    source.commit_turn("live-2", b"ours v2", expected_version=1, owner_subject=OWNER)
    mig.run_pass()
    assert target.state_store().load_full("live-2").blob == b"theirs"
    result = cutover(mig, quiet_seconds=0)
    assert not result.ok and "differ" in result.reason
    assert [c[0] for c in result.report.conflicts] == ["live-2"]
    # a session we wrote, then someone else changed on the target: a conflict on the next move
    target.state_store().save("live-1", b"edited", expected_version=1, owner_subject=OWNER)
    source.commit_turn("live-1", b"source v2", expected_version=1, owner_subject=OWNER)
    again = mig.run_pass()
    assert [c[0] for c in again.new_conflicts] == ["live-1"]
    assert target.state_store().load_full("live-1").blob == b"edited"


def test_writers_still_active_refuse_the_cutover(stores, tmp_path):
    source, writer_side = stores("redis", "a")
    target, _ = stores("redis", "b")
    versions = seed(source, 3)
    mig = LiveMigration(source, target, open_state(tmp_path, source, target))
    run_migration(mig)
    stop = threading.Event()

    def write():
        v = versions["live-0"]
        while not stop.is_set():
            writer_side.commit_turn("live-0", b"busy %d" % v, expected_version=v, owner_subject=OWNER)
            v += 1
            stop.wait(0.01)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        result = cutover(mig, quiet_seconds=0.2)
    finally:
        stop.set()
        thread.join(5)
    assert not result.ok and "writers are still active" in result.reason
    assert mig.state.phase != "cut-over"


def test_abort_removes_only_what_the_migration_wrote(stores, tmp_path):
    source, _ = stores("mongo", "a")
    target, _ = stores("redis", "b")
    seed(source, 5)
    target.state_store().save("theirs", b"keep me", expected_version=None)
    state = open_state(tmp_path, source, target)
    mig = LiveMigration(source, target, state)
    run_migration(mig)
    target.state_store().save("live-3", b"edited after us", expected_version=1,
                              owner_subject=OWNER)
    plan = abort_plan(target, state)
    assert len(plan.sessions) == 4 and len(plan.events) == 5
    assert any("live-3" in what for what, _ in plan.kept)
    apply_abort(target, state, plan)
    left = sorted(s.session_id for s in target.iter_sessions())
    assert left == ["live-3", "theirs"]
    assert all(not target.event_store().list_events(f"user-{i}") for i in range(4))
    assert state.phase == "aborted"


def test_verify_names_differences_and_a_sample_checks_fewer(stores, tmp_path):
    source, _ = stores("postgres", "a")
    target, _ = stores("mongo", "b")
    seed(source, 6)
    state = open_state(tmp_path, source, target)
    mig = LiveMigration(source, target, state)
    run_migration(mig)
    assert verify_live(source, target, state).ok
    assert verify_live(source, target, state, sample=2).sessions_compared == 2
    turn(source, "live-4", b"moved", 1)
    report = verify_live(source, target, state)
    assert not report.ok and report.source_moved == 1 and "live-4" in report.differences[0]


def test_a_state_file_refuses_another_pair(stores, tmp_path):
    source, _ = stores("redis", "a")
    target, _ = stores("redis", "b")
    open_state(tmp_path, source, target).close()
    with pytest.raises(StateMismatch, match="another pair"):
        MigrationState.open(str(tmp_path / "m.state"), source=fingerprint("redis", "elsewhere"),
                            target=fingerprint("redis", "dst"))
    (tmp_path / "junk").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(StateMismatch, match="not a migration state"):
        MigrationState.read(str(tmp_path / "junk"))


@pytest.fixture
def keyspace_notifications(redis_server):
    """The suite's Redis with keyspace notifications on for this test (then off again)."""
    with redis_server.client() as client:
        before = client.config_get("notify-keyspace-events")["notify-keyspace-events"]
        client.config_set("notify-keyspace-events", "KA")
        try:
            yield
        finally:
            client.config_set("notify-keyspace-events", before)


def test_notifications_cover_only_full_settings():
    from backends.redis.feed import notifications_on

    assert notifications_on("KA") and notifications_on("Khgx$") and notifications_on("AKE")
    assert not notifications_on("") and not notifications_on("EA") and not notifications_on("Kh")


def test_follow_uses_keyspace_notifications_when_on(stores, tmp_path, keyspace_notifications):
    source, writer_side = stores("redis", "a")
    target, _ = stores("postgres", "b")
    versions = seed(source)
    mig = LiveMigration(source, target, open_state(tmp_path, source, target))
    writer = Writer(writer_side, versions)
    started = []

    def go(result):
        if not started:
            started.append(1)
            writer.start()  # after the full pass: what it writes reaches us through the feed

    passes_after = []

    def counted(result):
        go(result)
        if passes_after or (started and not writer.is_alive()):
            passes_after.append(result)

    results = run_migration(mig, follow=True, interval=0.02, on_pass=counted,
                            should_stop=lambda: len(passes_after) >= 2)
    writer.join(30)
    assert writer.error is None
    assert results[0].method == "version scan"  # the first pass is always a full one
    fed = [r for r in results[1:] if r.method == "keyspace notifications"]
    assert fed and sum(r.copied for r in fed) > 0 and sum(r.deleted for r in fed) == 1
    assert all(r.scanned < len(writer.versions) for r in fed if r.copied == 0)
    result = cutover(mig, quiet_seconds=0.05)
    assert result.ok, (result.reason, result.report.differences)
    assert_identical(source, target)


def test_a_dropped_subscription_falls_back_to_the_scan(stores, tmp_path, keyspace_notifications):
    source, _ = stores("redis", "a")
    target, _ = stores("redis", "b")
    seed(source, 3)
    mig = LiveMigration(source, target, open_state(tmp_path, source, target))
    assert mig.start_feed() == "keyspace notifications"
    mig.run_pass("bulk", all_users=True)
    mig.feed._pubsub.connection.disconnect()  # messages published now are lost
    turn(source, "live-1", b"while we were away", 1)
    fell_back = mig.run_pass(use_feed=True)
    assert fell_back.method.startswith("version scan") and fell_back.copied == 1
    turn(source, "live-2", b"back on the feed", 1)
    time.sleep(0.05)
    fed = mig.run_pass(use_feed=True)
    assert fed.method == "keyspace notifications" and fed.copied == 1 and fed.scanned == 1
    mig.close()


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    """Three masters on loopback ports (cluster-enabled redis-server + redis-cli
    --cluster create), stopped afterwards; skipped where either binary is missing."""
    import shutil
    import subprocess

    from tests.support.fixtures.redis_server import find_redis_binary, free_port

    server, cli = find_redis_binary(), shutil.which("redis-cli")
    if server is None or cli is None:
        pytest.skip("redis-server and redis-cli are needed for a Redis Cluster")
    root = tmp_path_factory.mktemp("cluster")
    ports = [free_port() for _ in range(3)]
    procs = []
    try:
        for port in ports:
            workdir = root / str(port)
            workdir.mkdir()
            procs.append(subprocess.Popen(
                [server, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 # the bus port, named: port + 10000 may not exist for a high free port
                 "--cluster-port", str(free_port()),
                 "--cluster-config-file", "nodes.conf", "--save", "", "--appendonly", "no"],
                cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in ports:
            deadline = time.monotonic() + 10
            while subprocess.run([cli, "-p", str(port), "ping"], capture_output=True,
                                 text=True).stdout.strip() != "PONG":
                assert time.monotonic() < deadline, f"redis-server on {port} did not start"
                time.sleep(0.05)
        subprocess.run([cli, "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                        "--cluster-replicas", "0", "--cluster-yes"], check=True,
                       capture_output=True, timeout=30)
        deadline = time.monotonic() + 10
        while "cluster_state:ok" not in subprocess.run(
                [cli, "-p", str(ports[0]), "cluster", "info"], capture_output=True,
                text=True).stdout:
            assert time.monotonic() < deadline, "the cluster did not become ready"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{ports[0]}/0?cluster=true"
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(10)


def test_the_loss_check_lists_the_source_only_where_it_could_lose_something(stores, monkeypatch):
    """A SQL source keeps no per-session expiry (``lists_expiry = False``): into a store
    that keeps none either nothing can be lost, so no session is listed; a Redis source
    is listed, and its expiring session is a loss the check names."""
    sql_source, _ = stores("postgres", "a")
    redis_source, _ = stores("redis", "a")
    target, _ = stores("postgres", "b")
    listed = []
    for source in (sql_source, redis_source):
        source.restore_session("expiring", b"x", version=1, ttl_seconds=600)
        inner = source.iter_sessions
        monkeypatch.setattr(source, "iter_sessions",
                            lambda *a, inner=inner, name=source.name, **k: listed.append(name)
                            or inner(*a, **k))
    assert check_losses(sql_source, target, allow_loss=False) == [] and listed == []
    with pytest.raises(LossyTransfer, match="expiry"):
        check_losses(redis_source, target, allow_loss=False)
    assert listed == ["redis"]


def test_a_redis_cluster_source_is_scanned_on_every_primary(redis_cluster, stores, tmp_path):
    """A Redis Cluster keeps no events (each would span hash slots), so state only."""
    from backends.redis import RedisBackendAdapter

    source = RedisBackendAdapter(redis_cluster)
    target, _ = stores("pgvector", "b")
    try:
        assert source.event_store() is None
        for i in range(40):  # spread over the three primaries' slots
            source.state_store().save(f"cl-{i}", b"state %d" % i, expected_version=None,
                                      owner_subject=OWNER)
        assert check_losses(source, target, allow_loss=False) == []
        mig = LiveMigration(source, target, open_state(tmp_path, source, target))
        assert mig.start_feed() == "version scan"  # no keyspace feed across nodes
        (first,) = run_migration(mig)
        assert first.copied == 40
        source.state_store().save("cl-3", b"moved", expected_version=1, owner_subject=OWNER)
        source.state_store().delete("cl-4")
        again = mig.run_pass()
        assert (again.copied, again.deleted) == (1, 1)
        result = cutover(mig, quiet_seconds=0)
        assert result.ok and result.report.sessions_matched == 39
        assert target.state_store().load_full("cl-3").blob == b"moved"
    finally:
        for i in range(40):
            source.state_store().delete(f"cl-{i}")
        source.close()


def test_plan_counts_what_moves_and_names_what_the_target_needs(stores):
    from backends.migrate import plan

    source, _ = stores("redis", "a")
    target, _ = stores("redis", "b")
    seed(source, 6)
    report = plan(source, target)
    assert report["sessions"] == 6 and report["owners"] == {OWNER: 6}
    assert report["events"] == 6 and report["users"]["user-1"] == {"events": 2, "counter": 2}
    assert report["losses"] == [] and report["sample_sessions"] == 6
    durable = report["target"]["details"].get("durable")
    assert any("not durable" in r for r in report["target_requirements"]) == (durable is False)
    assert target.state_store().current_version("live-0") is None  # wrote nothing
    lossy = plan(source, stores("postgres", "b")[0])
    assert any("sequence" in loss for loss in lossy["losses"])


def test_catch_up_compares_versions_and_the_final_pass_digests(stores, tmp_path):
    """On Redis a catch-up pass reads versions only: a session re-created at the same
    version is not seen there, and the cutover's final pass (digests) copies it."""
    source, _ = stores("redis", "a")
    target, _ = stores("mongo", "b")
    seed(source, 3)
    mig = LiveMigration(source, target, open_state(tmp_path, source, target))
    run_migration(mig)
    source.state_store().delete("live-1")
    source.state_store().save("live-1", b"same version, new content", expected_version=None,
                              owner_subject=OWNER)
    catch_up = mig.run_pass()
    assert catch_up.method.startswith("version scan (versions only") and catch_up.copied == 0
    result = cutover(mig, quiet_seconds=0)
    assert result.ok and result.final_pass.copied == 1
    assert target.state_store().load_full("live-1").blob == b"same version, new content"


@pytest.mark.parametrize("kind", ["postgres", "pgvector"])
def test_a_batch_restore_keeps_the_rows_that_exist_and_writes_the_rest(stores, kind):
    """The bulk pass's batch restore: straight COPY when every id is new; when one id
    exists, nothing of that COPY stays, the rest is written and the existing row kept."""
    from backends.contract import RestoreRow

    target, _ = stores(kind, "b")
    store = target.state_store()
    assert store.restore_sessions([RestoreRow("fresh-1", b"a", 3, OWNER),
                                   RestoreRow("fresh-2", b"b", 1, None, "q?")]) == set()
    store.save("theirs", b"someone else's", expected_version=None, owner_subject=OWNER)
    existed = store.restore_sessions([RestoreRow("fresh-3", b"c", 2, OWNER),
                                      RestoreRow("theirs", b"ours", 7, OWNER),
                                      RestoreRow("fresh-4", b"d", 5, OWNER)])
    assert existed == {"theirs"}
    assert store.load_full("theirs").blob == b"someone else's"
    got = {sid: store.load_full(sid) for sid in ("fresh-1", "fresh-2", "fresh-3", "fresh-4")}
    assert {sid: (st.blob, st.version) for sid, st in got.items()} == {
        "fresh-1": (b"a", 3), "fresh-2": (b"b", 1), "fresh-3": (b"c", 2), "fresh-4": (b"d", 5)}
    assert got["fresh-2"].pending_message == "q?" and got["fresh-2"].owner_subject is None
    assert all(s.updated_at is not None for s in target.iter_sessions())


def test_a_redis_listing_with_rows_matches_the_strict_reads(stores):
    """``iter_session_states`` (the full pass reads each blob once): the same summaries
    as ``iter_sessions``, each with the row ``load_full`` reads, digest of those bytes;
    a damaged row raises as ``load_full`` does instead of being copied."""
    from backends.archive.format import sha256_hex
    from backends.errors import CorruptState

    source, _ = stores("redis", "a")
    seed(source, 5)
    pairs = sorted(source.iter_session_states(), key=lambda p: p[0].session_id)
    assert [s for s, _ in pairs] == sorted(source.iter_sessions(), key=lambda s: s.session_id)
    for summary, st in pairs:
        assert st == source.state_store().load_full(summary.session_id)
        assert summary.blob_sha256 == sha256_hex(st.blob)
    assert [s.session_id for s, _ in source.iter_session_states(match="live-3")] == ["live-3"]
    source._client.hset("semvec:state:live-2", "version", "not a number")
    with pytest.raises(CorruptState):
        list(source.iter_session_states())


@pytest.mark.parametrize("target_kind", ["postgres", "mongo"])
def test_a_row_already_identical_on_the_target_counts_as_copied(stores, tmp_path, target_kind):
    """A session the state file never recorded is written insert-if-absent without
    reading the target first; when the target turns out to hold it already, it is
    decided as before: identical (an interrupted write whose record was lost) is copied,
    anything else a conflict, and neither is overwritten."""
    source, _ = stores("redis", "a")
    target, _ = stores(target_kind, "b")
    seed(source, 4)
    same = source.state_store().load_full("live-1")
    target.restore_session("live-1", same.blob, version=same.version,
                           owner_subject=same.owner_subject)
    target.state_store().save("live-3", b"theirs", expected_version=None, owner_subject=OWNER)
    mig = LiveMigration(source, target, open_state(tmp_path, source, target))
    first = run_migration(mig)[0]
    assert [c[0] for c in first.new_conflicts] == ["live-3"]
    assert "someone else" in first.new_conflicts[0][1]
    assert first.copied == 3 and target.state_store().load_full("live-3").blob == b"theirs"
    assert target.state_store().load_full("live-1").blob == same.blob


def test_read_ahead_hands_over_every_step_its_error_and_stops_when_left():
    """The full pass's read-ahead: the steps in order; a read's error at its place; a
    caller that stops early leaves no reading thread behind (and closes the source)."""
    from backends.transfer.readahead import read_ahead

    assert list(read_ahead(iter(range(50)))) == list(range(50))

    def failing():
        yield 1
        yield 2
        raise ValueError("damaged row")

    got = []
    with pytest.raises(ValueError, match="damaged row"):
        for step in read_ahead(failing()):
            got.append(step)
    assert got == [1, 2]

    closed = threading.Event()

    def endless():
        try:
            n = 0
            while True:
                n += 1
                yield n
        finally:
            closed.set()

    steps = read_ahead(endless())
    assert next(steps) == 1
    steps.close()
    assert closed.is_set()
    assert not [t for t in threading.enumerate() if t.name == "migrate-read-ahead"]


def test_a_batch_restore_into_columns_of_other_types_is_written_as_text(postgres_server):
    """The batch restore COPYs binary, which must name each column's type exactly; a
    table whose column an operator widened (version BIGINT) would refuse binary data
    (the server reads a 4-byte version where 8 are sent), so the store asks the table's
    column types and writes such a table's rows as text, whole."""
    import psycopg

    from backends.contract import RestoreRow
    from backends.postgres import PostgresAdapter

    name = postgres_server.take_database()
    url = postgres_server.url(name)
    try:
        with PostgresAdapter(url) as maker:  # the tables, then the operator's change
            assert maker.state_store().restore_sessions(
                [RestoreRow("wide-0", b"blob 0", 3, OWNER)]) == set()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE semvec_session_state ALTER COLUMN version TYPE BIGINT")
        with PostgresAdapter(url) as target:
            store = target.state_store()
            rows = [RestoreRow(f"wide-{i}", b"blob %d" % i, 3 + i, OWNER) for i in (1, 2)]
            assert store.restore_sessions(rows) == set()
            assert store.restore_sessions([RestoreRow("wide-1", b"again", 9, OWNER),
                                           RestoreRow("wide-9", b"new", 2, None)]) == {"wide-1"}
            got = {s.session_id: s.version for s in target.iter_sessions()}
            assert got == {"wide-0": 3, "wide-1": 4, "wide-2": 5, "wide-9": 2}
            assert store.load_full("wide-1").blob == b"blob 1"
    finally:
        postgres_server.drop_database(name)
