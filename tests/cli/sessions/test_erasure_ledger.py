"""The erasure ledger end to end, through the CLI, on the suite's real Redis and PostgreSQL
(``postgres``, ``pgvector``, and a sharded ``postgres``: a primary and 3 shards) and on
MongoDB through mongomock (a fake; no real MongoDB runs here).

A store is seeded (tests/support/maintenance.py: alice-of-acme in s1, shared with bob;
alice-unowned in s2), exported WITH its events (the backup), and "restored" from that
backup into a second store of the same kind; then alice-of-acme is erased on the first.
Every restore path into it (import of the backup, copy and migrate --follow from the
restored store) withholds s1 and alice-of-acme's three old events, naming them, while a
session she started after the erasure flows; bob's and alice-unowned's data flow. Copy
and migrate carry the ledger to a fresh store, which then withholds them too. The ledger
never holds a plain id (the raw store is searched), and doctor flags data written back
around it."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent
from semvecctl.app import app
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import BACKENDS, make_target, seed

#: the databases of the second and third Mongo stores (on the test's fake client)
MONGO_STATE: dict[str, Any] = {}


@dataclass
class Store:
    """One store as the copy and migrate commands name it (``--from``/``--to``)."""

    name: str
    adapter: Any
    #: the side's arguments without their prefix: (uri, shards, adapter factory)
    uri: str | None = None
    shards: str | None = None
    factory: str | None = None
    dump: Callable[[], dict] | None = None

    def side(self, prefix: str) -> list[str]:
        if self.factory:
            return [f"--{prefix}-adapter", self.factory]
        args = [f"--{prefix}", self.uri or ""]
        return args + ([f"--{prefix}-shards", self.shards] if self.shards else [])

    def target_args(self) -> list[str]:
        if self.factory:
            return ["--adapter", self.factory]
        args = ["--uri", self.uri or ""]
        if self.shards:
            args += ["--backend", "postgres", "--shards", self.shards]
        return args


def mongo_second(**_options: Any) -> Any:
    from backends.mongo import MongoBackendAdapter

    return MongoBackendAdapter(client=MONGO_STATE["client"], database=MONGO_STATE["second"])


def mongo_third(**_options: Any) -> Any:
    from backends.mongo import MongoBackendAdapter

    return MongoBackendAdapter(client=MONGO_STATE["client"], database=MONGO_STATE["third"])


def _fresh(request: Any, kind: str, n: int) -> Store:
    """An empty store of the kind ``kind`` (n: 1 or 2, its place among the extra ones)."""
    if kind == "redis":
        import redis

        from backends.redis import RedisBackendAdapter

        base = urlsplit(request.getfixturevalue("redis_url"))
        url = urlunsplit(base._replace(path=f"/{10 + n}"))
        client = redis.Redis.from_url(url)
        client.flushdb()
        client.close()
        adapter = RedisBackendAdapter(url)
        request.addfinalizer(adapter.close)
        return Store(kind, adapter, uri=url)
    if kind == "mongo":
        state = request.getfixturevalue("cli_mongo")
        MONGO_STATE.update(client=state["client"], second=state["database"] + "_b",
                           third=state["database"] + "_c")
        maker = mongo_second if n == 1 else mongo_third
        adapter = maker()
        request.addfinalizer(adapter.close)
        return Store(kind, adapter, factory=f"{__name__}:{maker.__name__}")
    server = request.getfixturevalue("postgres_server")
    if kind == "postgres-sharded":
        from backends.postgres import PostgresAdapter

        deployment = request.getfixturevalue("sharded_sql").make(2)
        adapter = PostgresAdapter(deployment.primary, shards=deployment.shard_list)
        adapter.ensure_schema()
        request.addfinalizer(adapter.close)
        return Store(kind, adapter, uri=deployment.primary, shards=deployment.shard_list)
    name = server.take_database()
    request.addfinalizer(lambda: server.drop_database(name))
    url = server.url(name)
    from backends.postgres import PostgresAdapter
    from backends.pgvector import PgVectorAdapter

    adapter = (PgVectorAdapter if kind == "pgvector" else PostgresAdapter)(url)
    adapter.ensure_schema()
    request.addfinalizer(adapter.close)
    return Store(kind, adapter, uri=url)


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def _main(request: Any, kind: str) -> tuple[Any, Store]:
    target = make_target(request, kind)
    args = target.args
    uri = args[1] if args[0] == "--uri" else None
    shards = args[args.index("--shards") + 1] if "--shards" in args else None
    factory = args[1] if args[0] == "--adapter" else None
    return target, Store(kind, target.adapter, uri=uri, shards=shards, factory=factory,
                         dump=target.dump)


def _came_back(adapter: Any, user: str) -> tuple[str, str]:
    """alice-of-acme starts a session after her erasure: (session, event)."""
    sid = f"{user}-after-{uuid.uuid4().hex[:6]}"
    adapter.state_store().save(sid, b"blob-after", expected_version=None, owner_subject="acme")
    event = MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content="back again",
                        created_at=datetime.now(timezone.utc), embedding=[0.5] * 8,
                        owner_subject="acme", session_id=sid)
    adapter.event_store().append(event)
    return sid, event.event_id


def _owned_events(adapter: Any, user: str) -> set[str]:
    return {e.event_id for e in adapter.event_store().list_events(user, owner_subject="acme")}


def _withheld(doc: dict) -> tuple[list[str], list[str]]:
    return doc["withheld"]["session_ids"], sorted(doc["withheld"]["event_ids"])


def _migrate(source: Store, target: Store, state: str, *extra: str):
    return invoke("migrate", "run", *source.side("from"), *target.side("to"), "--state", state,
                  "--apply", "--yes", "--allow-loss", "-o", "json", *extra)


def _pass_withheld(stdout: str) -> tuple[set[str], set[str]]:
    passes = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return ({s for p in passes for s in p["withheld"]},
            {e for p in passes for e in p["withheld_events"]})


@pytest.fixture(params=BACKENDS)
def kind(request):
    return request.param


def test_every_restore_path_withholds_the_erased_subjects_older_data(kind, request, tmp_path):
    target, main = _main(request, kind)
    s = seed(main.adapter)
    backup = tmp_path / "before.jsonl.gz"
    exported = invoke("sessions", "export", *main.target_args(), "--with-events",
                      "--out", str(backup))
    assert exported.exit_code == 0, exported.output
    restored = _fresh(request, kind, 1)
    into = invoke("sessions", "import", str(backup), *restored.target_args(), "--apply", "--yes")
    assert into.exit_code == 0, into.output  # no ledger there: everything flows
    erased = invoke("erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                    "--receipt", str(tmp_path / "r.json"), *main.target_args())
    assert erased.exit_code == 0, erased.output
    old = sorted(s.alice_ids[:3])

    # 1. the backup imported again into the erased store
    result = invoke("sessions", "import", str(backup), *main.target_args(), "--on-conflict",
                    "skip", "--apply", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert _withheld(json.loads(result.stdout)) == ([s.s1], old)
    assert s.s1 in result.stderr and "withheld 1 session(s)" in result.stderr
    assert main.adapter.state_store().load_full(s.s1) is None
    assert _owned_events(main.adapter, s.alice) == set()
    assert len(main.adapter.event_store().list_events(s.bob)) == 2

    # 2. a copy from the restored store; her session after the erasure flows
    after, after_event = _came_back(restored.adapter, s.alice)
    copied = invoke("sessions", "copy", *restored.side("from"), *main.side("to"),
                    "--with-events", "--on-conflict", "skip", "--apply", "--yes", "-o", "json")
    assert copied.exit_code == 0, copied.output
    assert _withheld(json.loads(copied.stdout)) == ([s.s1], old)
    assert main.adapter.state_store().load_full(after) is not None
    assert _owned_events(main.adapter, s.alice) == {after_event}

    # 3. a migration (bulk, then a followed pass) from the restored store
    migrated = _migrate(restored, main, str(tmp_path / "m.state"), "--follow",
                        "--max-passes", "2", "--interval", "0")
    assert migrated.exit_code == 0, migrated.output
    sessions, events = _pass_withheld(migrated.stdout)
    assert sessions == {s.s1} and sorted(events) == old
    assert main.adapter.state_store().load_full(s.s1) is None
    assert _owned_events(main.adapter, s.alice) == {after_event}
    # verify counts what was withheld apart (never as missing), and the cutover passes
    pair = [*restored.side("from"), *main.side("to"), "--state", str(tmp_path / "m.state")]
    verified = invoke("migrate", "verify", *pair, "-o", "json")
    assert verified.exit_code == 0, verified.output
    report = json.loads(verified.stdout)
    assert (report["withheld"], report["withheld_events"]) == (1, 3)
    cut = invoke("migrate", "cutover", *pair, "--quiet-window", "0", "--apply", "--yes")
    assert cut.exit_code == 0, cut.output
    assert main.adapter.state_store().load_full(s.s1) is None

    # the ledger holds no plain id: the whole raw store is searched
    raw = json.dumps({k: repr(v) for k, v in main.dump().items()
                      if "ledger" in k or "erasure" in k})
    assert raw != "{}" and s.alice not in raw and "acme" not in raw


def test_copy_and_migrate_carry_the_ledger_and_doctor_flags_a_bypass(kind, request, tmp_path):
    target, main = _main(request, kind)
    s = seed(main.adapter)
    backup = tmp_path / "before.jsonl.gz"
    assert invoke("sessions", "export", *main.target_args(), "--with-events",
                  "--out", str(backup)).exit_code == 0
    assert invoke("erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                  "--receipt", str(tmp_path / "r.json"), *main.target_args()).exit_code == 0
    copy_target, mig_target = _fresh(request, kind, 1), _fresh(request, kind, 2)
    copied = invoke("sessions", "copy", *main.side("from"), *copy_target.side("to"),
                    "--with-events", "--apply", "--yes")
    assert copied.exit_code == 0, copied.output
    migrated = _migrate(main, mig_target, str(tmp_path / "m.state"))
    assert migrated.exit_code == 0, migrated.output
    for store in (copy_target, mig_target):
        listed = invoke("erasures", "list", *store.target_args(), "-o", "json")
        assert listed.exit_code == 0, listed.output
        assert len(json.loads(listed.stdout)) == 1
        checked = invoke("erasures", "check", "--user", s.alice, "--owner", "acme",
                         *store.target_args())
        assert checked.exit_code == 0, checked.output
        again = invoke("sessions", "import", str(backup), *store.target_args(),
                       "--on-conflict", "skip", "--apply", "--yes", "-o", "json")
        assert again.exit_code == 0, again.output
        assert _withheld(json.loads(again.stdout)) == ([s.s1], sorted(s.alice_ids[:3]))

    # a restore that bypassed the ledger (written straight into the store): doctor says so
    import dataclasses

    old = next(e for e in _archived_events(backup) if e.event_id == s.alice_ids[0])
    main.adapter.event_store().append(dataclasses.replace(old, sequence=0))
    doctor = invoke("doctor", *main.target_args(), "-o", "json")
    codes = [f["check"] for f in json.loads(doctor.stdout)["findings"]]
    assert "erasure.restored-data" in codes, doctor.output
    assert s.alice not in doctor.stdout


def _archived_events(path: Any) -> list[Any]:
    from backends.archive import ArchiveReader

    with ArchiveReader(open(path, "rb"), close_source=True) as reader:
        return [e for record in reader.records() for e in (record.events or ())]


def test_an_archive_carries_the_ledger_to_the_store_restored_from_it(kind, request, tmp_path):
    """A store restored from a backup taken after the erasure withholds the subject from an
    older backup too: the archive's header carries the ledger (format 4), inside the
    trailer's digest, so a header stripped of it is damage."""
    target, main = _main(request, kind)
    s = seed(main.adapter)
    before, after = tmp_path / "before.jsonl.gz", tmp_path / "after.jsonl"
    assert invoke("sessions", "export", *main.target_args(), "--with-events",
                  "--out", str(before)).exit_code == 0
    assert invoke("erase", "--user", s.alice, "--owner", "acme", "--apply", "--yes",
                  "--receipt", str(tmp_path / "r.json"), *main.target_args()).exit_code == 0
    assert invoke("sessions", "export", *main.target_args(), "--with-events",
                  "--out", str(after)).exit_code == 0
    header = json.loads(after.read_text().splitlines()[0])
    assert len(header["ledger"]["entries"]) == 1
    assert s.alice not in json.dumps(header["ledger"]) and "acme" not in json.dumps(header["ledger"])
    verified = invoke("archive", "verify", str(after), "-o", "json")
    assert json.loads(verified.stdout)["erasure_ledger_entries"] == 1
    fresh = _fresh(request, kind, 1)
    into = invoke("sessions", "import", str(after), *fresh.target_args(), "--apply", "--yes")
    assert into.exit_code == 0, into.output
    checked = invoke("erasures", "check", "--user", s.alice, "--owner", "acme",
                     *fresh.target_args())
    assert checked.exit_code == 0, checked.output
    older = invoke("sessions", "import", str(before), *fresh.target_args(), "--on-conflict",
                   "skip", "--apply", "--yes", "-o", "json")
    assert older.exit_code == 0, older.output
    assert _withheld(json.loads(older.stdout)) == ([s.s1], sorted(s.alice_ids[:3]))
    assert fresh.adapter.state_store().load_full(s.s1) is None

    lines = after.read_text().splitlines(keepends=True)
    stripped = dict(header)
    del stripped["ledger"]
    lines[0] = json.dumps(stripped, sort_keys=True, separators=(",", ":")) + "\n"
    (tmp_path / "stripped.jsonl").write_text("".join(lines))
    assert invoke("archive", "verify", str(tmp_path / "stripped.jsonl")).exit_code == 1
