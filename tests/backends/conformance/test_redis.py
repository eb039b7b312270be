"""The conformance suite against a real redis-server (started by tests/support/fixtures;
the FULL runs use a private one with AOF on, tests/backends/conformance/conftest.py, because a
Redis without AOF is not durable and fails ``durability.server_is_durable``).

Besides "the shipped Redis adapter conforms", this pins the suite's own promise to an
operator: run against a Redis that holds other data, it leaves every other key
byte-for-byte unchanged (DUMP before and after), never names another key in any command
it sends (MONITOR), and leaves no key of its own behind.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from backends.conformance import ConformanceOptions, Level, Status, run_conformance

pytestmark = pytest.mark.redis


@pytest.fixture
def adapter_factory(durable_redis_url):
    from backends.redis import RedisBackendAdapter

    return lambda: RedisBackendAdapter(durable_redis_url)


@pytest.fixture
def raw(durable_redis):
    client = durable_redis.client()
    yield client
    client.close()


def _seed_foreign_data(raw) -> list[bytes]:
    """Keys of every type, including semvec's own layout for other sessions and users."""
    tag = f"foreign-{uuid.uuid4().hex[:6]}"
    other_session, other_user, other_event = f"{tag}-session", f"{tag}-user", f"{tag}-evt"
    raw.set(f"{tag}:string", b"\x00binary\xff")
    raw.set(f"{tag}:expiring", b"ttl", ex=3600)
    raw.hset(f"{tag}:hash", mapping={"a": "1", "b": b"\x01\x02"})
    raw.rpush(f"{tag}:list", "x", "y", "z")
    raw.sadd(f"{tag}:set", "m1", "m2")
    raw.zadd(f"{tag}:zset", {"p": 1.5, "q": 2.5})
    raw.xadd(f"{tag}:stream", {"field": "value"})
    raw.pfadd(f"{tag}:hll", "a", "b", "c")
    raw.setbit(f"{tag}:bits", 7, 1)
    raw.set("{semvec}:hash-tagged", "kept")
    raw.set(b"\xff\xfe raw key bytes", b"kept")
    # semvec's layout, for sessions and users the run must not touch
    raw.hset(f"semvec:state:{other_session}", mapping={
        "blob": b"\x00other blob", "version": "7", "owner": "tenant-x",
        "drift_exempt": "1", "pending": "hold"})
    raw.hset("semvec:state:semvec-conf-00000000-lookalike", mapping={
        "blob": b"looks like a run key", "version": "1", "owner": "", "drift_exempt": "0",
        "pending": ""})
    raw.hset(f"semvec:events:e:{other_event}", mapping={
        "event_id": other_event, "user_id": other_user, "owner_subject": "tenant-x",
        "session_id": other_session, "created_at": "2020-01-01T00:00:00+00:00",
        "content": "old", "embedding": "[0.5]", "meta": "{}", "source_event_id": "",
        "sequence": "1"})
    raw.zadd(f"semvec:events:u:{other_user}", {other_event: 1})
    raw.zadd(f"semvec:events:t:{other_user}", {other_event: 1577836800})
    raw.set(f"semvec:events:seq:{other_user}", 1)
    return [k for k in raw.scan_iter(count=1000)
            if tag.encode() in k or k.startswith((b"{semvec}", b"\xff\xfe"))
            or b"lookalike" in k]


def _dump(raw, keys) -> dict[bytes, bytes | None]:
    """DUMP of the given keys (the seeded ones only: on a shared SEMVEC_TEST_REDIS_URL
    server other tests' keys come and go)."""
    return {key: raw.dump(key) for key in keys}


class _Monitor:
    """Every command the server receives while the run is going (MONITOR)."""

    def __init__(self, client) -> None:
        self.commands: list[str] = []
        self._client = client
        self._sentinel = f"semvec-conformance-stop-{uuid.uuid4().hex}"
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)

    def _listen(self) -> None:
        with self._client.monitor() as monitor:
            self._ready.set()
            for entry in monitor.listen():
                command = entry.get("command", "")
                if self._sentinel in command:
                    return
                self.commands.append(command)

    def __enter__(self) -> "_Monitor":
        self._thread.start()
        self._ready.wait(5)
        time.sleep(0.1)
        return self

    def __exit__(self, *exc) -> None:
        self._client.echo(self._sentinel)
        self._thread.join(10)


def test_redis_adapter_conforms_and_leaves_other_data_untouched(adapter_factory, raw,
                                                               durable_redis,
                                                               durable_redis_url):
    foreign = _seed_foreign_data(raw)
    ttl_before = raw.ttl(next(k for k in foreign if k.endswith(b":expiring")))
    before = _dump(raw, foreign)
    assert len(foreign) == 17 and all(before.values())

    from backends.conformance.children import registry_recipe

    started = time.perf_counter()
    with _Monitor(durable_redis.client()) as monitor:
        report = run_conformance(adapter_factory, selected_name="redis",
                                 options=ConformanceOptions(redis_url=durable_redis_url),
                                 recipe=registry_recipe("redis", durable_redis_url))
    wall = time.perf_counter() - started
    print(f"\nconformance wall time against local Redis: {wall:.2f}s "
          f"({len(report.cases)} cases, level {report.level})")

    assert report.level == Level.FULL, "\n".join(
        f"{c.case_id}: {c.message}" for c in report.failures)
    assert report.group("events").status == Status.PASSED
    assert report.group("commit_turn").status == Status.PASSED
    assert report.group("concurrency").status == Status.PASSED
    # the engine's layout lets the suite plant a wrong-typed key for its own user; our
    # script validates before its first write, so nothing of that turn lands
    assert report.case("commit_turn.atomic_on_server_error").status == Status.PASSED
    assert report.case("durability.survives_reopen").status == Status.PASSED
    assert report.case("durability.connection_cut_mid_turn").status == Status.PASSED
    assert report.case("durability.server_is_durable").status == Status.PASSED
    # issue 25: processes, SIGKILLs, a proxied connection and owner probes, all applied
    for case_id in ("concurrency.processes", "durability.sigkill", "faults.connection",
                    "isolation.empty_values", "isolation.owner_variants"):
        assert report.case(case_id).status == Status.PASSED, report.case(case_id)

    after = _dump(raw, foreign)
    changed = sorted(k for k in before if after[k] != before[k])
    assert changed == [], f"foreign keys changed or deleted: {changed}"
    assert raw.ttl(next(k for k in foreign if k.endswith(b":expiring"))) <= ttl_before

    # the run never named a foreign key in any command it sent
    foreign_names = [k.decode("utf-8", "replace") for k in foreign]
    touching = [c for c in monitor.commands
                if any(name in c for name in foreign_names) and report.prefix not in c]
    assert touching == [], touching[:5]
    assert any(report.prefix in c for c in monitor.commands)
    assert not any(c.startswith(('"KEYS"', '"FLUSHDB"', '"FLUSHALL"')) for c in monitor.commands)

    leftover = sorted(raw.scan_iter(match=f"*{report.prefix}*", count=1000))
    assert leftover == [], f"keys of the run left behind: {leftover[:10]}"


def test_redis_run_reports_every_group(adapter_factory):
    report = run_conformance(adapter_factory, selected_name="Redis")
    statuses = {g.name: g.status for g in report.groups}
    assert statuses["retrieval"] == Status.NOT_APPLICABLE
    assert statuses["indexes"] in (Status.NOT_APPLICABLE, Status.PASSED)
    assert statuses["events"] == Status.PASSED
    assert report.case("commit_turn.refuses_events_without_event_store").status == \
        Status.NOT_APPLICABLE


def test_unreachable_redis_fails_health_without_raising():
    from backends.redis import RedisBackendAdapter
    from tests.support.fixtures.redis_server import closed_port

    url = f"redis://127.0.0.1:{closed_port()}/0"
    report = run_conformance(lambda: RedisBackendAdapter(url, timeout=0.5),
                             only="health")
    assert report.case("health.answers_bool_promptly").status == Status.PASSED
    reports_up = report.case("health.reports_up")
    assert reports_up.status == Status.FAILED
    assert reports_up.expected == "True" and reports_up.actual == "False"
    assert report.level == Level.FAILED



@pytest.mark.parametrize("extra, found", [
    pytest.param(["--appendonly", "no"], "AOF is off (appendonly no)", id="aof-off"),
    pytest.param(["--appendonly", "yes", "--maxmemory", "64mb",
                  "--maxmemory-policy", "allkeys-lru"],
                 "maxmemory-policy allkeys-lru", id="evicting-policy"),
])
def test_a_redis_that_is_not_durable_is_not_certified(tmp_path, extra, found):
    """The durability group reads the server's own durability (the verdict health and
    doctor use): a Redis without AOF, or with an evicting policy, fails the case saying
    what was found and what to set, and the run is not FULL."""
    from backends.redis import RedisBackendAdapter
    from tests.support.dedicated_redis import DedicatedRedis

    server = DedicatedRedis(tmp_path / "redis", extra=extra)
    server.start()
    try:
        report = run_conformance(lambda: RedisBackendAdapter(server.url), selected_name="redis",
                                 only="durability")
        case = report.case("durability.server_is_durable")
        assert case.status == Status.FAILED
        assert found in case.message
        assert "set appendonly yes and maxmemory-policy noeviction" in case.message
        assert report.group("durability").status == Status.FAILED
        assert report.level == Level.FAILED and not report.ok
        with server.client() as client:
            assert list(client.scan_iter(match=f"*{report.prefix}*")) == []
    finally:
        server.kill()


def test_an_unreachable_redis_is_not_certified_durable():
    from backends.redis import RedisBackendAdapter
    from tests.support.fixtures.redis_server import closed_port

    url = f"redis://127.0.0.1:{closed_port()}/0"
    report = run_conformance(lambda: RedisBackendAdapter(url, timeout=0.5),
                             only="durability.server_is_durable",
                             options=ConformanceOptions(health_timeout=0.5))
    case = report.cases[0]
    assert case.status == Status.FAILED
    assert "could not be verified" in case.message
