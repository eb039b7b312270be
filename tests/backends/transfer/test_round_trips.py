"""Every pass that moves data goes to each server at most once per 50 sessions.

Counted on the wire (tests/support/round_trips.py: a proxy in front of each server, so
the export's event child and libpq's own socket are counted too) at 20,000 sessions with
3 events each (a user per session), each command run in-process through the CLI as an
operator runs it. A pass that asks per session or per event shows here as tens of
thousands of round trips; a set-based one as a few hundred at most. Each budget is per
server (for shards run, per database: each shard stands for a server of its own).

The first tests check the counter itself on workloads whose round trips are known.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support import round_trips as rt

SESSIONS, EVENTS = 20_000, 3
BUDGET = SESSIONS // 50
SOURCE_DB, TARGET_DB = 7, 8  # the suite's own tests use db 0 of the same server

pytestmark = [pytest.mark.xdist_group("round_trips")]
runner = CliRunner()


def _db(url: str, n: int) -> str:
    return url.rsplit("/", 1)[0] + f"/{n}"


@pytest.fixture
def redis_proxy(redis_server):
    with redis_server.client() as client:
        for n in (SOURCE_DB, TARGET_DB):
            client.execute_command("SELECT", n)
            client.flushdb()
    with rt.RoundTripProxy(redis_server.url, "redis") as proxy:
        yield proxy, redis_server.url
    with redis_server.client() as client:
        for n in (SOURCE_DB, TARGET_DB):
            client.execute_command("SELECT", n)
            client.flushdb()


@pytest.fixture
def pg_proxy(postgres_server):
    made: list[str] = []

    def database() -> str:
        name = postgres_server.take_database()
        made.append(name)
        return postgres_server.url(name)

    with rt.RoundTripProxy(postgres_server.admin_url, "postgres") as proxy:
        yield proxy, database
    for name in made:
        with contextlib.suppress(Exception):
            postgres_server.drop_database(name)


def _seed_redis(url: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        rt.seed_redis(client, SESSIONS, EVENTS)


def _cli(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.stdout[-1500:], result.stderr[-1500:])
    return result


def _over(counts: dict[str, rt.Tally]) -> dict[str, str]:
    """The servers over budget, each with its round trips and requests (and, to read
    beside them, every server's round trips under ``all``)."""
    over = {name: f"{t.round_trips} round trips ({t.requests} requests) > {BUDGET}"
            for name, t in counts.items() if t.round_trips > BUDGET}
    if over:
        over["all"] = ", ".join(f"{name} {t.round_trips}" for name, t in counts.items())
    return over


# -- the counter ---------------------------------------------------------------------------


@pytest.mark.redis
def test_counter_counts_a_pipeline_as_one_round_trip_and_each_single_command_as_one(
        redis_server):
    import redis

    with rt.RoundTripProxy(redis_server.url, "redis") as proxy, \
            redis.Redis.from_url(proxy.url(_db(redis_server.url, SOURCE_DB))) as client:
        client.ping()  # the connection's handshake, outside the counts
        before = rt.commandstats(client)
        with proxy.counting() as piped:
            pipe = client.pipeline(transaction=False)
            for i in range(10):
                pipe.set(f"rt:{i}", b"x" * 100)
            pipe.execute()
        with proxy.counting() as single:
            for i in range(10):
                client.get(f"rt:{i}")
        with proxy.counting() as script:
            client.eval("return 1", 0)
        calls = rt.commandstats_delta(before, rt.commandstats(client))
        client.delete(*[f"rt:{i}" for i in range(10)])
    assert (piped.round_trips, piped.requests) == (1, 10)
    assert (single.round_trips, single.requests) == (10, 10)
    assert (script.round_trips, script.requests) == (1, 1)
    assert calls["set"] == 10 and calls["get"] == 10 and calls["eval"] == 1


@pytest.mark.redis
def test_counter_is_not_fooled_by_a_pipeline_that_arrives_in_many_reads(redis_server):
    """A command counts from its first byte: the server answering the first commands of
    a big pipeline before the rest arrives starts no new round trip."""
    import redis

    with rt.RoundTripProxy(redis_server.url, "redis") as proxy, \
            redis.Redis.from_url(proxy.url(_db(redis_server.url, SOURCE_DB))) as client:
        client.ping()
        with proxy.counting() as piped:
            pipe = client.pipeline(transaction=False)
            for i in range(200):
                pipe.hset(f"rt:big:{i}", mapping={"blob": b"y" * 3000, "v": "1"})
            pipe.execute()
        client.delete(*[f"rt:big:{i}" for i in range(200)])
    assert piped.requests == 200
    assert piped.round_trips <= 2  # 1, or 2 when a read ends exactly between commands


@pytest.mark.postgres
def test_counter_counts_postgres_statements_copy_and_pipelines(postgres_server, pgvector_url):
    import psycopg

    with rt.RoundTripProxy(postgres_server.admin_url, "postgres") as proxy:
        with proxy.counting() as connecting:
            conn = psycopg.connect(proxy.url(pgvector_url), autocommit=True,
                                   prepare_threshold=None)
        with conn:
            conn.execute("CREATE TABLE rt (a int, b bytea)")
            with proxy.counting() as single:
                for i in range(10):
                    conn.execute("SELECT %s", (i,))
            with proxy.counting() as copied, conn.cursor() as cur:
                with cur.copy("COPY rt FROM STDIN") as copy:
                    for i in range(5000):
                        copy.write_row((i, b"z" * 500))
            with proxy.counting() as many, conn.cursor() as cur:
                cur.executemany("INSERT INTO rt VALUES (%s, %s)", [(i, b"z") for i in range(100)])
            with proxy.counting() as read:
                rows = conn.execute("SELECT * FROM rt").fetchall()
            with proxy.counting() as transaction, conn.transaction():
                conn.execute("SELECT 1")
    assert connecting.round_trips == 2 and connecting.connections == 1  # SSL refused, startup
    assert single.round_trips == 10
    assert copied.round_trips == 2  # the statement, then the data
    assert many.round_trips == 1  # psycopg's pipeline mode: one Sync for the hundred
    assert read.round_trips == 1 and len(rows) == 5100
    assert transaction.round_trips == 3  # BEGIN, SELECT, COMMIT


# -- the passes ----------------------------------------------------------------------------


@pytest.mark.redis
def test_export_with_events_from_redis(redis_proxy, tmp_path):
    proxy, url = redis_proxy
    source = _db(url, SOURCE_DB)
    _seed_redis(source)
    with proxy.counting() as redis_side:
        _cli("sessions", "export", "--uri", proxy.url(source), "--with-events",
             "-O", str(tmp_path / "a.jsonl"))
    assert not _over({"redis": redis_side})


@pytest.mark.postgres
def test_export_with_events_from_postgres(pg_proxy, tmp_path):
    proxy, database = pg_proxy
    source = database()
    rt.seed_postgres(source, SESSIONS, EVENTS)
    with proxy.counting() as pg_side:
        _cli("sessions", "export", "--uri", proxy.url(source), "--with-events",
             "-O", str(tmp_path / "a.jsonl"))
    assert not _over({"postgres": pg_side})


def _archive_from_postgres(url: str, out: Path) -> Path:
    rt.seed_postgres(url, SESSIONS, EVENTS)
    _cli("sessions", "export", "--uri", url, "--with-events", "-O", str(out))
    return out


@pytest.mark.redis
@pytest.mark.postgres
def test_import_with_events_into_redis(redis_proxy, pg_proxy, tmp_path):
    proxy, url = redis_proxy
    archive = _archive_from_postgres(pg_proxy[1](), tmp_path / "a.jsonl")
    with proxy.counting() as redis_side:
        _cli("sessions", "import", str(archive), "--uri", proxy.url(_db(url, TARGET_DB)),
             "--apply", "--yes")
    assert not _over({"redis": redis_side})


@pytest.mark.postgres
def test_import_with_events_into_postgres(pg_proxy, tmp_path):
    proxy, database = pg_proxy
    archive = _archive_from_postgres(database(), tmp_path / "a.jsonl")
    target = database()
    rt.engine_tables(target)
    with proxy.counting() as pg_side:
        _cli("sessions", "import", str(archive), "--uri", proxy.url(target), "--apply", "--yes")
    assert not _over({"postgres": pg_side})


def _pair(direction: str, redis_proxy, pg_proxy) -> tuple[str, str]:
    """Seeded source and empty target URLs (through the proxies) for ``direction``."""
    rproxy, rurl = redis_proxy
    pproxy, database = pg_proxy
    pg_url = database()
    if direction == "redis->postgres":
        _seed_redis(_db(rurl, SOURCE_DB))
        rt.engine_tables(pg_url)
        return rproxy.url(_db(rurl, SOURCE_DB)), pproxy.url(pg_url)
    rt.seed_postgres(pg_url, SESSIONS, EVENTS)
    return pproxy.url(pg_url), rproxy.url(_db(rurl, TARGET_DB))


DIRECTIONS = ["redis->postgres", "postgres->redis"]

def _loss(direction: str) -> list[str]:
    """PostgreSQL keeps no sequence column: Redis -> PostgreSQL drops the numbers."""
    return ["--allow-loss"] if direction == "redis->postgres" else []


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_copy_with_events(direction, redis_proxy, pg_proxy):
    source, target = _pair(direction, redis_proxy, pg_proxy)
    with redis_proxy[0].counting() as redis_side, pg_proxy[0].counting() as pg_side:
        _cli("sessions", "copy", "--from", source, "--to", target, "--with-events",
             "--apply", "--yes", *_loss(direction))
    assert not _over({"redis": redis_side, "postgres": pg_side})


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_migrate_run_bulk_pass_and_verify(direction, redis_proxy, pg_proxy, tmp_path):
    source, target = _pair(direction, redis_proxy, pg_proxy)
    state = str(tmp_path / "m.state")
    with redis_proxy[0].counting() as run_redis, pg_proxy[0].counting() as run_pg:
        _cli("migrate", "run", "--state", state, "--from", source, "--to", target,
             "--apply", "--yes", *_loss(direction))
    with redis_proxy[0].counting() as verify_redis, pg_proxy[0].counting() as verify_pg:
        result = _cli("migrate", "verify", "--state", state, "--from", source, "--to", target)
    assert f"identical: {SESSIONS} session(s)" in result.stdout + result.stderr
    counts = {"run redis": run_redis, "run postgres": run_pg,
              "verify redis": verify_redis, "verify postgres": verify_pg}
    assert not _over(counts)


@pytest.mark.postgres
def test_shards_run_bulk_pass(postgres_server, pg_proxy, tmp_path):
    """3 -> 4 shards; each database behind a proxy of its own, so each is counted alone."""
    from backends.postgres.placement import shard_index

    _, database = pg_proxy
    urls = [database() for _ in range(5)]
    primary, shards = urls[0], urls[1:]
    rt.engine_tables(primary)
    for n, url in enumerate(shards[:3]):
        rt.seed_postgres(url, SESSIONS, EVENTS,
                         indices=[i for i in range(SESSIONS)
                                  if shard_index(rt.session_id(i), 3) == n])
    rt.engine_tables(shards[3])
    with contextlib.ExitStack() as stack:
        proxies = [stack.enter_context(rt.RoundTripProxy(postgres_server.admin_url, "postgres"))
                   for _ in urls]
        via = [p.url(u) for p, u in zip(proxies, urls)]
        tallies = [stack.enter_context(p.counting()) for p in proxies]
        _cli("--shards", ",".join(via[1:4]), "shards", "run", "--uri", via[0],
             "--to-shards", ",".join(via[1:]), "--state", str(tmp_path / "s.state"),
             "--apply", "--yes")
    counts = dict(zip(["primary", "shard 0", "shard 1", "shard 2", "shard 3 (new)"], tallies))
    assert not _over(counts)
