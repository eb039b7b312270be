"""`semvecctl doctor` on a real redis-server: damage planted by hand is found exactly,
`--fix --apply` repairs only the safe findings, and a clean store gives no finding.

A private server with AOF on is used, so the store's deployment is sound and every
finding comes from the data (the durability finding is planted on purpose by turning AOF
off for one test)."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryEvent
from backends.redis import RedisBackendAdapter
from semvecctl.app import app
from tests.support.dedicated_redis import throwaway_redis

pytestmark = pytest.mark.redis

runner = CliRunner()


@pytest.fixture(scope="module")
def aof_url():
    with throwaway_redis("semvec-doctor-", extra=("--appendonly", "yes")) as url:
        yield url


@pytest.fixture
def url(aof_url, monkeypatch):
    monkeypatch.delenv("SEMVEC_REDIS_SESSION_TTL_S", raising=False)
    with RedisBackendAdapter(aof_url) as adapter:
        adapter.client.flushall()
    return aof_url


def doctor(url: str, *extra: str):
    result = runner.invoke(app, ["doctor", "--uri", url, "-o", "json", *extra])
    body = json.loads(result.stdout) if result.stdout.strip() else {"findings": []}
    return result.exit_code, body["findings"]


def found(findings) -> set[tuple[str, str]]:
    return {(f["check"], f["where"]) for f in findings}


def events_for(adapter, user: str, n: int) -> list[MemoryEvent]:
    store = adapter.event_store()
    return [store.append(MemoryEvent(event_id=str(uuid.uuid4()), user_id=user,
                                     content=f"{user} {i}", embedding=[0.1, 0.2],
                                     session_id="s-clean"))
            for i in range(n)]


def clean_store(url: str, ttl: int = 0) -> None:
    with RedisBackendAdapter(url, ttl_seconds=ttl) as adapter:
        store = adapter.state_store()
        store.save("s-clean", b"blob", expected_version=None, owner_subject="acme")
        store.save("s-two", b"\x00\x01", expected_version=None)
        store.save("s-two", b"\x00\x02", expected_version=1, pending_message="ok?")
        events_for(adapter, "alice", 3)


def test_clean_store_gives_no_finding(url):
    clean_store(url)
    code, findings = doctor(url)
    assert findings == []
    assert code == 0


def plant(url: str) -> dict[str, str]:
    """Every finding the Redis audit knows, each planted once, in its own place."""
    with RedisBackendAdapter(url, ttl_seconds=3600) as adapter:
        r = adapter.client
        store = adapter.state_store()
        for sid in ("s-ok", "s-noversion", "s-badowner", "s-nottl"):
            store.save(sid, b"blob", expected_version=None)
        r.hdel("semvec:state:s-noversion", "version")
        r.hset("semvec:state:s-badowner", "owner", b"\xff\xfe")
        r.persist("semvec:state:s-nottl")
        r.set("semvec:state:s-string", "not a hash")
        r.set("semvec:other:thing", "someone else's")

        events_for(adapter, "clean", 2)
        events_for(adapter, "dangle", 2)
        ghost = str(uuid.uuid4())
        r.zadd("semvec:events:u:dangle", {ghost: 3})
        r.zadd("semvec:events:t:dangle", {ghost: 1.0})
        unindexed = events_for(adapter, "unindexed", 2)[1].event_id
        r.zrem("semvec:events:u:unindexed", unindexed)
        r.zrem("semvec:events:t:unindexed", unindexed)
        dup = events_for(adapter, "dup", 2)[1].event_id
        r.hset(f"semvec:events:e:{dup}", "sequence", "1")
        r.zadd("semvec:events:u:dup", {dup: 1})
        gone = events_for(adapter, "gap", 3)[1].event_id
        r.delete(f"semvec:events:e:{gone}")
        r.zrem("semvec:events:u:gap", gone)
        r.zrem("semvec:events:t:gap", gone)
        events_for(adapter, "behind", 3)
        r.set("semvec:events:seq:behind", 1)
        bad_id = events_for(adapter, "badid", 1)[0].event_id
        r.rename(f"semvec:events:e:{bad_id}", "semvec:events:e:not-a-uuid")
        r.hset("semvec:events:e:not-a-uuid", "event_id", "not-a-uuid")
        r.zrem("semvec:events:u:badid", bad_id)
        r.zadd("semvec:events:u:badid", {"not-a-uuid": 1})
        r.zrem("semvec:events:t:badid", bad_id)
        r.zadd("semvec:events:t:badid", {"not-a-uuid": 1.0})
        null = events_for(adapter, "nullemb", 1)[0].event_id
        r.hset(f"semvec:events:e:{null}", "embedding", "null")
    return {"ghost": ghost, "unindexed": unindexed, "dup": dup, "null": null}


def expected(ids: dict[str, str]) -> set[tuple[str, str]]:
    return {
        ("state.unreadable", "key semvec:state:s-noversion"),
        ("state.unreadable", "key semvec:state:s-badowner"),
        ("state.wrong-type", "key semvec:state:s-string"),
        ("state.no-ttl", "key semvec:state:s-nottl"),
        ("namespace.unknown-key", "key semvec:other:thing"),
        ("index.dangling", f"key semvec:events:u:dangle member {ids['ghost']}"),
        ("index.dangling", f"key semvec:events:t:dangle member {ids['ghost']}"),
        ("event.unindexed", f"key semvec:events:e:{ids['unindexed']} (user 'unindexed')"),
        ("events.duplicate-sequence", "key semvec:events:u:dup sequence 1"),
        ("events.sequence-gap", "key semvec:events:u:gap"),
        ("counter.behind", "key semvec:events:seq:behind"),
        ("event.unreadable", "key semvec:events:e:not-a-uuid"),
        ("event.unreadable", f"key semvec:events:e:{ids['null']}"),
    }


def test_finds_exactly_the_planted_problems(url, monkeypatch):
    ids = plant(url)
    monkeypatch.setenv("SEMVEC_REDIS_SESSION_TTL_S", "3600")
    code, findings = doctor(url)
    assert found(findings) == expected(ids)
    assert code == 1
    by_check = {f["check"]: f for f in findings}
    assert by_check["state.no-ttl"]["severity"] == "warning"
    assert by_check["namespace.unknown-key"]["severity"] == "info"
    assert "null" in by_check["event.unreadable"]["what"] or any(
        "embedding is null" in f["what"] for f in findings)
    assert all(f["section"] == "data" for f in findings)


def test_fix_plans_then_apply_repairs_only_the_safe_ones(url, monkeypatch):
    ids = plant(url)
    monkeypatch.setenv("SEMVEC_REDIS_SESSION_TTL_S", "3600")
    with RedisBackendAdapter(url) as adapter:
        before = {k: adapter.client.dump(k) for k in adapter.client.scan_iter("*")}

    code, planned = doctor(url, "--fix")
    assert code == 1
    safe = {("index.dangling", "u"), ("index.dangling", "t"), ("event.unindexed", ""),
            ("counter.behind", "")}
    assert {f["check"] for f in planned if f["outcome"] == "would repair"} == \
        {c for c, _ in safe}
    with RedisBackendAdapter(url) as adapter:  # the plan wrote nothing
        assert {k: adapter.client.dump(k) for k in adapter.client.scan_iter("*")} == before

    code, applied = doctor(url, "--fix", "--apply", "--yes")
    repaired = {(f["check"], f["where"]) for f in applied if f["outcome"] == "repaired"}
    assert repaired == {
        ("index.dangling", f"key semvec:events:u:dangle member {ids['ghost']}"),
        ("index.dangling", f"key semvec:events:t:dangle member {ids['ghost']}"),
        ("event.unindexed", f"key semvec:events:e:{ids['unindexed']} (user 'unindexed')"),
        ("counter.behind", "key semvec:events:seq:behind"),
    }
    assert code == 1  # the unsafe errors are left for a human

    code, after = doctor(url)
    assert found(after) == expected(ids) - repaired
    with RedisBackendAdapter(url) as adapter:
        events = adapter.event_store().list_by_user("unindexed")
        assert [e.sequence for e in events] == [1, 2]
        assert int(adapter.client.get("semvec:events:seq:behind")) == 3
        # the damaged rows are untouched
        assert adapter.client.get("semvec:other:thing") == b"someone else's"
        assert adapter.client.hget("semvec:state:s-badowner", "owner") == b"\xff\xfe"


def test_engine_requirements_are_reported_apart(url):
    clean_store(url)
    with RedisBackendAdapter(url) as adapter:
        adapter.client.config_set("appendonly", "no")
        adapter.client.config_set("appendfsync", "no")
    try:
        code, findings = doctor(url)
    finally:
        with RedisBackendAdapter(url) as adapter:
            adapter.client.config_set("appendonly", "yes")
            adapter.client.config_set("appendfsync", "everysec")
    assert {(f["check"], f["section"], f["severity"]) for f in findings} == {
        ("deploy.durability", "engine requirements", "error"),
        ("advice.appendfsync", "semvecctl recommendations", "info"),
    }
    assert code == 1


def test_streams_jsonl_and_table(url):
    clean_store(url)
    with RedisBackendAdapter(url) as adapter:
        adapter.client.set("semvec:mystery", "x")
    result = runner.invoke(app, ["doctor", "--uri", url, "-o", "jsonl"])
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [f["check"] for f in lines] == ["namespace.unknown-key"]
    assert result.exit_code == 0  # info only
    table = runner.invoke(app, ["doctor", "--uri", url])
    assert "semvec:mystery" in table.stdout and table.exit_code == 0


def test_apply_without_fix_is_a_usage_error(url):
    result = runner.invoke(app, ["doctor", "--uri", url, "--apply", "--yes"])
    assert result.exit_code == 2


def test_large_indexes_are_walked_in_chunks(url, monkeypatch):
    """An index over the screen's limit is walked from Python in rank-ordered chunks:
    a duplicate and a gap that straddle chunk boundaries are still found."""
    import backends.redis.audit as audit_module

    monkeypatch.setattr(audit_module, "_SCREEN_LIMIT", 2)
    monkeypatch.setattr(audit_module, "_CHUNK", 2)
    with RedisBackendAdapter(url) as adapter:
        r = adapter.client
        big = events_for(adapter, "big", 7)
        events_for(adapter, "sound", 5)
        # sequence 2 duplicated at the chunk edge (ranks 1|2), sequence 5 missing
        r.hset(f"semvec:events:e:{big[2].event_id}", "sequence", "2")
        r.zadd("semvec:events:u:big", {big[2].event_id: 2})
        r.delete(f"semvec:events:e:{big[4].event_id}")
        r.zrem("semvec:events:u:big", big[4].event_id)
        r.zrem("semvec:events:t:big", big[4].event_id)
    code, findings = doctor(url)
    assert found(findings) == {
        ("events.duplicate-sequence", "key semvec:events:u:big sequence 2"),
        ("events.sequence-gap", "key semvec:events:u:big"),
    }
    gap = next(f for f in findings if f["check"] == "events.sequence-gap")
    assert "missing 2 sequence number(s): 3, 5" in gap["what"]
    assert code == 1


def test_apply_converges_on_thousands_of_dangling_entries(url, monkeypatch):
    """#23 finding 2: the repairs remove index entries while the walk pages through the
    index. Paged by rank, every removal shifted the pages behind it and whole pages were
    skipped ("N repaired", exit 0, the next audit still found half). Paged by (score,
    member) it reaches every entry; the re-audit proves it and the count is exact."""
    import backends.redis.audit as audit_module

    monkeypatch.setattr(audit_module, "_CHUNK", 50)
    ghosts = 2000
    with RedisBackendAdapter(url) as adapter:
        r = adapter.client
        kept = events_for(adapter, "many", 3)
        pipe = r.pipeline(transaction=False)
        for i in range(ghosts):
            member = str(uuid.uuid4())
            pipe.zadd("semvec:events:u:many", {member: 10 + i})
            pipe.zadd("semvec:events:t:many", {member: 1_000.0 + (i // 7)})  # ties too
        pipe.set("semvec:events:seq:many", 10 + ghosts)
        pipe.execute()

    result = runner.invoke(app, ["doctor", "--uri", url, "-o", "json", "--fix", "--apply", "--yes"])
    body = json.loads(result.stdout)
    repaired = [f for f in body["findings"] if f["outcome"] == "repaired"]
    assert len(repaired) == 2 * ghosts
    assert body["summary"]["repaired"] == 2 * ghosts
    assert body["reaudit"]["remaining"] == 0 and body["reaudit"]["error"] == 0
    assert result.exit_code == 0, result.output

    code, after = doctor(url)
    assert [f for f in after if f["severity"] != "info"] == []
    assert code == 0
    with RedisBackendAdapter(url) as adapter:
        assert adapter.client.zcard("semvec:events:u:many") == 3
        assert adapter.client.zcard("semvec:events:t:many") == 3
        assert [e.event_id for e in adapter.event_store().list_by_user("many")] == \
            [e.event_id for e in kept]


def test_reaudit_reports_a_repair_that_did_not_hold(url, monkeypatch):
    """A repair whose own check passes but whose problem is back when the whole store is
    audited again is not counted as repaired, and the run fails (exit 1)."""
    import backends.redis.audit as audit_module

    with RedisBackendAdapter(url) as adapter:
        events_for(adapter, "undo", 3)
        adapter.client.set("semvec:events:seq:undo", 1)
    real_counter = audit_module.RedisAudit._counter

    def counter_then_undo(self, user, top):
        for finding in real_counter(self, user, top):
            if finding.fix is not None:
                fix = finding.fix

                def fix_and_undo(fix=fix):
                    fix()
                    finding.verify()  # the place checks out ...
                    finding.verify = lambda: True
                    self.client.set("semvec:events:seq:undo", 1)  # ... then someone undoes it
                finding.fix = fix_and_undo
            yield finding

    monkeypatch.setattr(audit_module.RedisAudit, "_counter", counter_then_undo)
    result = runner.invoke(app, ["doctor", "--uri", url, "-o", "json", "--fix", "--apply", "--yes"])
    body = json.loads(result.stdout)
    assert body["summary"]["repaired"] == 0
    assert body["reaudit"]["false_claims"] == 1
    assert [f["outcome"] for f in body["findings"] if f["check"] == "counter.behind"] == [
        "repaired", "remains after the re-audit"]
    assert result.exit_code == 1


def test_strict_audit_parses_every_json_field(url):
    """#23 finding 8: meta and embedding are parsed whole, numbers must be finite: a
    stored ``[NaN]`` (the engine accepts it and then breaks strict JSON), ``[1e999]``, a
    string in the array, hex, and a meta that is an array or broken JSON are found, each
    naming the field."""
    planted = {"[NaN]": ("embedding", "non-finite"), "[1e999]": ("embedding", "non-finite"),
               '[0.1, "a"]': ("embedding", "non-number"), "[0x10]": ("embedding", "not valid JSON"),
               "[[0.1]]": ("embedding", "non-number")}
    metas = {"{bad": "not valid JSON", "[1]": "not a JSON object"}
    with RedisBackendAdapter(url) as adapter:
        events = events_for(adapter, "strict", len(planted) + len(metas) + 1)
        where = {}
        for event, raw in zip(events, list(planted) + list(metas)):
            field = planted[raw][0] if raw in planted else "meta"
            adapter.client.hset(f"semvec:events:e:{event.event_id}", field, raw)
            where[f"key semvec:events:e:{event.event_id}"] = (
                field, planted[raw][1] if raw in planted else metas[raw])
    code, findings = doctor(url)
    got = {f["where"]: f["what"] for f in findings if f["check"] == "event.unreadable"}
    assert set(got) == set(where)
    for place, (field, words) in where.items():
        assert f"{field} " in got[place] and words in got[place], got[place]
    assert code == 1


def test_engine_key_families_and_sequence_gaps_are_not_damage(url):
    """#24: the engine's other key families (ENGINE-WIRE 6b) are its own, not "unknown";
    the gap its single-event delete leaves is a note, not a warning: clean, exit 0."""
    with RedisBackendAdapter(url) as adapter:
        r = adapter.client
        clean_store(url)
        gone = events_for(adapter, "gapped", 3)[1].event_id
        adapter.event_store().delete_event(gone)  # what the engine's delete(event_id) does
        for key in ("semvec:cortex:global:state", "semvec:drift:s-clean", "semvec:ratelimit:k1",
                    "semvec:proxykey:abc", "semvec:observer:o1", "semvec:observer_by_owner:acme",
                    "semvec:cluster:c1", "semvec:region:r1", "semvec:debug:events:1"):
            r.set(key, "x")
        for key in ("semvec:observers", "semvec:clusters", "semvec:regions"):
            r.sadd(key, "x")
    code, findings = doctor(url)
    assert [(f["check"], f["severity"]) for f in findings] == [("events.sequence-gap", "info")]
    assert code == 0


def test_leftover_load_and_conformance_data_is_flagged(url):
    """#23: data left under a load run's or a conformance run's prefix is a warning naming
    the prefix and the command that removes it (for a load run, with its --sessions)."""
    with RedisBackendAdapter(url) as adapter:
        store = adapter.state_store()
        for j in (0, 3):
            store.save(f"semvec-load-0a1b2c3d4e-s{j}", b"x", expected_version=None)
        adapter.event_store().append(MemoryEvent(
            event_id=str(uuid.uuid4()), user_id="semvec-load-0a1b2c3d4e-u1", content="c"))
        store.save("semvec-conf-deadbeef-state-s1-x", b"x", expected_version=None)
        clean_store(url)
    code, findings = doctor(url)
    left = {f["where"]: f for f in findings if f["check"] == "leftover.run-data"}
    assert set(left) == {"keys prefix semvec-load-0a1b2c3d4e-", "keys prefix semvec-conf-deadbeef-"}
    load = left["keys prefix semvec-load-0a1b2c3d4e-"]
    assert load["severity"] == "warning"
    assert ("semvecctl load cleanup --prefix semvec-load-0a1b2c3d4e- --sessions 4"
            in load["repair"])
    assert "semvec-conf-deadbeef-" in left["keys prefix semvec-conf-deadbeef-"]["repair"]
    assert [f for f in findings if f["check"] != "leftover.run-data"] == []
    assert code == 0  # a warning


def test_apply_interrupted_then_rerun_converges(url, monkeypatch):
    """Each repair is one atomic script, so an interrupted --fix --apply (exit 130) leaves
    some entries repaired and the rest as they were; the rerun repairs exactly the rest,
    its re-audit is clean and it exits 0."""
    import backends.ops.doctor.checkup as doctor_pkg  # where the checkup looks the repair up
    import backends.redis.audit as audit_module

    monkeypatch.setattr(audit_module, "_CHUNK", 40)
    ghosts = 300
    with RedisBackendAdapter(url) as adapter:
        events_for(adapter, "cut", 2)
        pipe = adapter.client.pipeline(transaction=False)
        for i in range(ghosts):
            pipe.zadd("semvec:events:u:cut", {str(uuid.uuid4()): 10 + i})
        pipe.execute()
    real = doctor_pkg.apply_repair
    calls = {"n": 0}

    def interrupted(finding):
        calls["n"] += 1
        if calls["n"] > 120:
            raise KeyboardInterrupt
        return real(finding)

    monkeypatch.setattr(doctor_pkg, "apply_repair", interrupted)
    first = runner.invoke(app, ["doctor", "--uri", url, "--fix", "--apply", "--yes"])
    assert first.exit_code == 130, first.output
    with RedisBackendAdapter(url) as adapter:
        assert adapter.client.zcard("semvec:events:u:cut") == 2 + ghosts - 120
    monkeypatch.setattr(doctor_pkg, "apply_repair", real)
    result = runner.invoke(app, ["doctor", "--uri", url, "-o", "json", "--fix", "--apply", "--yes"])
    body = json.loads(result.stdout)
    assert body["summary"]["repaired"] == ghosts - 120
    assert body["reaudit"]["error"] == 0 and result.exit_code == 0
    with RedisBackendAdapter(url) as adapter:
        assert adapter.client.zcard("semvec:events:u:cut") == 2
