"""Export then import between every backend pair we can run here, through the library
(``backends.transfer``) and through ``semvecctl sessions copy``.

Redis and PostgreSQL+pgvector are real servers started by the suite's fixtures; MongoDB
is ``mongomock`` (no real MongoDB on our machines), injected with the Mongo adapter's
``client=`` and, for the CLI, through ``--from-adapter/--to-adapter``.
"""

from __future__ import annotations

import uuid

import pytest
from typer.testing import CliRunner

from backends.contract import ItemMirror, LiveItemSource, MemoryItem
from backends.memory import MemoryBackendAdapter
from backends.transfer import ArchiveFile, SessionImporter, export_to_path
from semvecctl.app import app
from tests.support import transfer_doubles

mongomock = pytest.importorskip("mongomock")
import tests.support.fixtures.mongo  # noqa: E402,F401 - mongomock compatibility shims

DIMS = 8
runner = CliRunner()


# -- adapters ------------------------------------------------------------------------------


@pytest.fixture
def memory():
    return MemoryBackendAdapter()


@pytest.fixture
def redis(redis_url):
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(redis_url)
    yield adapter
    adapter.close()


@pytest.fixture
def pgvector(pgvector_adapter_factory):
    return pgvector_adapter_factory(dimensions=DIMS)


@pytest.fixture
def mongo():
    from backends.mongo import MongoBackendAdapter

    client = mongomock.MongoClient()
    adapter = MongoBackendAdapter(client=client, database=f"t_{uuid.uuid4().hex[:10]}", item_sync=True)
    yield adapter
    adapter.close()
    client.close()


@pytest.fixture
def mongo2():
    from backends.mongo import MongoBackendAdapter

    client = mongomock.MongoClient()
    adapter = MongoBackendAdapter(client=client, database=f"t_{uuid.uuid4().hex[:10]}", item_sync=True)
    yield adapter
    adapter.close()
    client.close()


# -- data ----------------------------------------------------------------------------------


def item(i: int, tag: str) -> MemoryItem:
    return MemoryItem(item_id=f"{tag}-item-{i}", text=f"remember fact {i} ✓",
                      embedding=tuple((i + d) / 4 for d in range(DIMS)), tier="working",
                      tiers=("working", "episodic"), unit={"turn": i, "kind": "fact"})


def seed(adapter, tag: str) -> dict[str, list[MemoryItem] | None]:
    """Sessions covering owners (none, tenant, tenant/agent, the anonymous sentinel),
    pending messages, versions above 1, every byte value and an empty blob."""
    store = adapter.state_store()
    rows = [
        (f"{tag}-a", bytes(range(256)) * 8, None, None, 1),
        (f"{tag}-b", b'{"turns": [1, 2, 3]}', "acme", "confirm the transfer?", 3),
        (f"{tag}-c", b"\x00" * 2048, "acme/agent-7", None, 2),
        (f"{tag}-d", b"", "__anonymous__", "pending ünïcode ✓", 1),
        (f"{tag}-e", b"SVB\x02" + bytes(range(255, -1, -1)), "other", None, 5),
    ]
    items: dict[str, list[MemoryItem] | None] = {}
    for sid, blob, owner, pending, version in rows:
        store.save(sid, b"first", expected_version=None, owner_subject=owner)
        for v in range(1, version):
            store.save(sid, b"step %d" % v, expected_version=v, owner_subject=owner)
        # the last write carries the final blob and pending message at `version`
        if version == 1:
            store.delete(sid)
            store.save(sid, blob, expected_version=None, owner_subject=owner, pending_message=pending)
        else:
            store.delete(sid)
            if hasattr(adapter, "restore_session"):
                adapter.restore_session(sid, blob, version=version, owner_subject=owner,
                                        pending_message=pending)
            else:
                store.save(sid, blob, expected_version=None, owner_subject=owner,
                           pending_message=pending)
        items[sid] = None
    if isinstance(adapter, ItemMirror):
        for n, sid in enumerate(sorted(items)[:3]):
            owner = store.load_owner(sid)
            wanted = [item(n * 10 + k, sid) for k in range(n + 1)]
            adapter.sync_items(sid, wanted, owner_subject=owner)
            items[sid] = wanted
        # an evicted item must not travel
        sid = sorted(items)[0]
        adapter.sync_items(sid, [], owner_subject=store.load_owner(sid))
        items[sid] = []
    return items


def assert_same_sessions(source, target, tag: str, *, versions: bool = True, with_items: bool = False):
    src, dst = source.state_store(), target.state_store()
    ids = sorted(s.session_id for s in source.iter_sessions(match=f"{tag}-*"))
    assert len(ids) == 5
    assert sorted(s.session_id for s in target.iter_sessions(match=f"{tag}-*")) == ids
    for sid in ids:
        a, b = src.load_full(sid), dst.load_full(sid)
        assert b.blob == a.blob, sid  # byte-identical
        assert b.owner_subject == a.owner_subject, sid
        assert b.pending_message == a.pending_message, sid
        if versions:
            assert b.version == a.version, sid
        else:
            assert b.version == 1, sid
        if with_items:
            want = sorted(source.iter_live_items(sid), key=lambda i: i.item_id)
            have = sorted(target.iter_live_items(sid), key=lambda i: i.item_id)
            key = lambda i: (i.item_id, i.text, i.embedding, i.tier, tuple(i.tiers), dict(i.unit),  # noqa: E731
                             i.owner_subject)
            assert [key(i) for i in have] == [key(i) for i in want], sid


PAIRS = [
    ("memory", "redis"),
    ("redis", "pgvector"),
    ("mongo", "redis"),
    ("redis", "mongo"),
    ("pgvector", "mongo"),
    ("mongo", "pgvector"),
    ("memory", "mongo"),
    ("pgvector", "memory"),
    ("mongo", "mongo2"),
]


@pytest.mark.parametrize("source_name,target_name", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_export_then_import_round_trip(request, tmp_path, source_name, target_name):
    source = request.getfixturevalue(source_name)
    target = request.getfixturevalue(target_name)
    tag = uuid.uuid4().hex[:8]
    seeded = seed(source, tag)
    with_items = isinstance(source, LiveItemSource)
    path = tmp_path / "sessions.jsonl.gz"

    exported = export_to_path(source, path, source_uri="test", match=f"{tag}-*", with_items=with_items)
    assert exported.count == 5
    assert exported.items == sum(len(v or ()) for v in seeded.values())

    carries_items = with_items and isinstance(target, ItemMirror)
    loses_items = with_items and not carries_items and exported.items > 0
    importer = SessionImporter(target, ArchiveFile(path), allow_loss=loses_items)
    assert importer.verify().count == 5
    assert {r.action for r in importer.plan()} == {"create"}
    if loses_items:  # the one loss rule: refused before any write unless accepted
        from backends.transfer import LossyTransfer

        with pytest.raises(LossyTransfer, match=f"{exported.items} item\\(s\\)"):
            SessionImporter(target, ArchiveFile(path)).apply()
        assert list(target.iter_sessions(match=f"{tag}-*")) == []
    result = importer.apply()
    assert result.created == 5 and result.skipped == 0 and result.versions_preserved
    report = importer.verify_target()
    assert report.ok and report.matched == 5, report.examples
    assert_same_sessions(source, target, tag, with_items=carries_items)
    if with_items and not isinstance(target, ItemMirror):
        assert result.items_not_imported == exported.items


def test_import_twice_with_skip_changes_nothing(memory, redis, tmp_path):
    tag = uuid.uuid4().hex[:8]
    seed(memory, tag)
    path = tmp_path / "a.jsonl"
    export_to_path(memory, path, source_uri="memory://")
    SessionImporter(redis, ArchiveFile(path)).apply()
    before = {s.session_id: (s.version, s.blob_sha256) for s in redis.iter_sessions()}
    again = SessionImporter(redis, ArchiveFile(path), on_conflict="skip")
    result = again.apply()
    assert result.created == 0 and result.skipped == 5
    assert again.verify_target().skipped == 5
    assert {s.session_id: (s.version, s.blob_sha256) for s in redis.iter_sessions()} == before


def test_redis_ttl_travels_between_redis_databases(redis_server, redis_url, tmp_path):
    from backends.redis import RedisBackendAdapter

    other_db = redis_url.rsplit("/", 1)[0] + "/3"
    with redis_server.client(db=3) as c:
        c.flushdb()
    tag = uuid.uuid4().hex[:8]
    with RedisBackendAdapter(redis_url, ttl_seconds=3600) as src, RedisBackendAdapter(other_db) as dst:
        src.state_store().save(f"{tag}-ttl", b"blob", expected_version=None)
        path = tmp_path / "a.jsonl"
        export_to_path(src, path, source_uri="redis")
        SessionImporter(dst, ArchiveFile(path)).apply()
        ttl = dst.describe_session(f"{tag}-ttl").ttl_seconds
        assert ttl is not None and 3500 < ttl <= 3600
        assert not any("time to live" in n for n in SessionImporter(dst, ArchiveFile(path)).notes())


def test_a_ttl_the_target_cannot_keep_is_refused_unless_the_loss_is_accepted(redis_url, tmp_path):
    from backends.transfer import LossyTransfer

    from backends.redis import RedisBackendAdapter

    tag = uuid.uuid4().hex[:8]
    with RedisBackendAdapter(redis_url, ttl_seconds=600) as src:
        src.state_store().save(f"{tag}-ttl", b"blob", expected_version=None)
        path = tmp_path / "a.jsonl"
        export_to_path(src, path, source_uri="redis", match=f"{tag}-*")
    target = MemoryBackendAdapter()
    with pytest.raises(LossyTransfer, match=r"1 session expiry time\(s\) \(backend 'memory' keeps no"):
        SessionImporter(target, ArchiveFile(path)).apply()
    assert list(target.iter_sessions()) == []
    accepted = SessionImporter(target, ArchiveFile(path), allow_loss=True)
    assert accepted.check_losses() == [
        "accepted loss: 1 session expiry time(s) (backend 'memory' keeps no per-session expiry; "
        "they would not expire) not transferred"]
    assert accepted.apply().created == 1
    assert any("not persistent" in n for n in accepted.notes())


# -- the same through the CLI's copy -----------------------------------------------------------


def invoke(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture
def shared_memory():
    transfer_doubles.MEMORY["current"] = MemoryBackendAdapter()
    return transfer_doubles.MEMORY["current"]


@pytest.fixture
def shared_mongo():
    from backends.mongo import MongoBackendAdapter

    client = mongomock.MongoClient()
    transfer_doubles.MONGO.update(client=client, database=f"t_{uuid.uuid4().hex[:10]}")
    adapter = MongoBackendAdapter(client=client, database=transfer_doubles.MONGO["database"],
                                  item_sync=True)
    yield adapter
    client.close()


def test_cli_copy_memory_to_redis(shared_memory, redis, redis_url):
    tag = uuid.uuid4().hex[:8]
    seed(shared_memory, tag)
    preview = invoke("sessions", "copy", "--from-adapter", "tests.support.transfer_doubles:memory_shared",
                     "--to", redis_url, "-o", "json")
    assert preview.exit_code == 0, preview.output
    assert '"create": 5' in preview.stdout and "nothing was written" in preview.stderr
    assert list(redis.iter_sessions()) == []
    result = invoke("sessions", "copy", "--from-adapter", "tests.support.transfer_doubles:memory_shared",
                    "--to", redis_url, "--apply", "--yes", "--keep-versions")
    assert result.exit_code == 0, result.output
    assert "wrote 5 session(s)" in result.stderr and "read back 5 session(s)" in result.stderr
    assert_same_sessions(shared_memory, redis, tag)


def test_cli_copy_redis_to_pgvector(redis, redis_url, pgvector, pgvector_url, monkeypatch):
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", str(DIMS))
    tag = uuid.uuid4().hex[:8]
    seed(redis, tag)
    result = invoke("sessions", "copy", "--from", redis_url, "--to", pgvector_url, "--apply", "--yes",
                    "--match", f"{tag}-*", "-o", "json")
    assert result.exit_code == 0, result.output
    assert '"matched": 5' in result.stdout and '"source_count": 5' in result.stdout
    assert_same_sessions(redis, pgvector, tag)


def test_cli_copy_mongomock_to_redis_and_back(shared_mongo, redis, redis_url):
    tag = uuid.uuid4().hex[:8]
    seed(shared_mongo, tag)
    args = ("sessions", "copy", "--from-adapter", "tests.support.transfer_doubles:mongo_shared",
            "--to", redis_url, "--apply", "--yes", "--with-items")
    refused = invoke(*args)
    assert refused.exit_code == 1 and "5 item(s) (backend 'redis' has no item mirror)" in refused.stderr
    assert "--allow-loss" in refused.stderr and list(redis.iter_sessions()) == []
    result = invoke(*args, "--allow-loss")
    assert result.exit_code == 0, result.output
    assert "accepted loss: 5 item(s)" in result.stderr
    assert "item(s) not imported: the target has no item mirror" in result.stderr
    assert_same_sessions(shared_mongo, redis, tag)
    # and back into a fresh mongomock database
    from backends.mongo import MongoBackendAdapter

    transfer_doubles.MONGO["database"] = f"t_{uuid.uuid4().hex[:10]}"
    back = invoke("sessions", "copy", "--from", redis_url,
                  "--to-adapter", "tests.support.transfer_doubles:mongo_shared", "--apply", "--yes")
    assert back.exit_code == 0, back.output
    target = MongoBackendAdapter(client=transfer_doubles.MONGO["client"],
                                 database=transfer_doubles.MONGO["database"])
    assert_same_sessions(redis, target, tag)


def test_cli_copy_pgvector_to_mongomock_with_items(pgvector, pgvector_url, shared_mongo, monkeypatch):
    monkeypatch.setenv("SEMVEC_PGVECTOR_DIMENSIONS", str(DIMS))
    tag = uuid.uuid4().hex[:8]
    seed(pgvector, tag)
    result = invoke("sessions", "copy", "--from", pgvector_url,
                    "--to-adapter", "tests.support.transfer_doubles:mongo_shared", "--with-items", "--apply", "--yes")
    assert result.exit_code == 0, result.output
    assert "item(s) synced" in result.stderr
    assert_same_sessions(pgvector, shared_mongo, tag, with_items=True)


def test_redis_batched_reads_agree_with_load_full_in_every_scope(redis):
    from backends.contract import UNSCOPED
    from backends.transfer.batch_reads import batch_loader

    tag = uuid.uuid4().hex[:8]
    seed(redis, tag)
    ids = sorted(s.session_id for s in redis.iter_sessions(match=f"{tag}-*")) + [f"{tag}-missing"]
    load_many = batch_loader(redis)
    store = redis.state_store()
    for scope in (UNSCOPED, None, "acme", "__anonymous__", "nobody"):
        assert load_many(ids, scope) == [store.load_full(i, owner_subject=scope) for i in ids]


def test_cli_copy_refuses_keep_versions_before_reading_the_source(shared_memory, redis_url):
    seed(shared_memory, uuid.uuid4().hex[:8])
    result = invoke("sessions", "copy", "--from", redis_url,
                    "--to-adapter", "tests.support.transfer_doubles:norestore_shared", "--keep-versions", "--apply", "--yes")
    assert result.exit_code == 3 and "--keep-versions" in result.stderr
    same = invoke("sessions", "copy", "--from", redis_url, "--to", redis_url)
    assert same.exit_code == 2 and "same store" in same.stderr


def test_cli_copy_owner_filter_and_conflicts(shared_memory, redis, redis_url):
    tag = uuid.uuid4().hex[:8]
    seed(shared_memory, tag)
    redis.state_store().save(f"{tag}-b", b"already here", expected_version=None, owner_subject="acme")
    args = ("sessions", "copy", "--from-adapter", "tests.support.transfer_doubles:memory_shared", "--to", redis_url,
            "--owner", "acme")
    preview = invoke(*args)
    assert preview.exit_code == 1 and f"'{tag}-b'" in preview.stderr
    refused = invoke(*args, "--apply", "--yes")
    assert refused.exit_code == 1 and "nothing was written" in refused.stderr
    # skip leaves the target's row as it is; it differs from the source, so the copy is
    # not a match (#23 finding 3: a skipped session is compared too)
    applied = invoke(*args, "--apply", "--yes", "--on-conflict", "skip", "-o", "json")
    assert applied.exit_code == 1, applied.output
    assert '"created": 0' in applied.stdout and '"skipped": 1' in applied.stdout
    assert f"'{tag}-b': blob sha256 differs (skipped as already there" in applied.stderr
    assert redis.state_store().load(f"{tag}-b")[0] == b"already here"
    assert [s.session_id for s in redis.iter_sessions()] == [f"{tag}-b"]


def test_archive_changed_between_verify_and_apply_is_refused(memory, tmp_path):
    from backends.archive import ArchiveDamaged

    tag = uuid.uuid4().hex[:8]
    seed(memory, tag)
    path = tmp_path / "a.jsonl"
    export_to_path(memory, path, source_uri="memory://")
    target = MemoryBackendAdapter()
    importer = SessionImporter(target, ArchiveFile(path))
    importer.verify()
    with open(path, "ab") as f:
        f.write(b"\n")
    with pytest.raises(ArchiveDamaged, match="changed after it was verified"):
        importer.apply()
    assert list(target.iter_sessions()) == []


def test_item_width_the_target_cannot_store_is_refused_before_any_write(mongo, pgvector_adapter_factory,
                                                                       tmp_path):
    from backends.errors import UnsupportedOperation

    tag = uuid.uuid4().hex[:8]
    seed(mongo, tag)
    path = tmp_path / "a.jsonl"
    export_to_path(mongo, path, source_uri="mongo", with_items=True)
    wide = pgvector_adapter_factory(dimensions=16)
    importer = SessionImporter(wide, ArchiveFile(path))
    with pytest.raises(UnsupportedOperation, match="8 dimensions but backend 'pgvector' stores 16"):
        importer.apply()
    assert list(wide.iter_sessions()) == []
