"""The SQL backends' pool (psycopg_pool) survives the server dropping its connections.

``pg_terminate_backend`` ends every server connection of this test's own database (the
suite's PostgreSQL gives each test one, so no other test is touched) between two
operations of one adapter: the second succeeds, because a connection is checked when it
is handed out. With ``?pool_check=off`` the dead connection is handed out and the call
fails as unreachable (then the pool has discarded it). On the suite's real PostgreSQL.
"""

from __future__ import annotations

import json
import time

import psycopg
import pytest
from typer.testing import CliRunner

from backends.errors import BackendConfigError, BackendError, BackendTransient, BackendUnreachable
from backends.postgres.config import SqlConfig
from backends.postgres.pool import ConnectionPool, split_pool_parameters
from semvecctl.app import app

pytestmark = pytest.mark.postgres


def terminate_all(url: str) -> int:
    """End every other server connection of this database and wait until they are gone
    (pg_terminate_backend only signals them); returns how many were ended."""
    with psycopg.connect(url, autocommit=True) as killer:
        pids = [pid for (pid, ok) in killer.execute(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchall() if ok]
        deadline = time.monotonic() + 5
        while pids and time.monotonic() < deadline:
            left = killer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                                  (pids,)).fetchone()[0]
            if not left:
                break
            time.sleep(0.005)
    return len(pids)


def make_adapter(backend: str, url: str):
    if backend == "pgvector":
        from backends.pgvector import PgVectorAdapter

        return PgVectorAdapter(url, dimensions=8)
    from backends.postgres import PostgresAdapter

    return PostgresAdapter(url)


@pytest.mark.parametrize("backend", ["postgres", "pgvector"])
@pytest.mark.parametrize("check", ["", "?pool_check=always"])
def test_an_adapter_works_across_terminated_connections(pgvector_url, backend, check):
    adapter = make_adapter(backend, pgvector_url + check)
    try:
        store = adapter.state_store()
        assert store.save("s", b"one", expected_version=None) == 1
        assert terminate_all(pgvector_url) >= 1  # the adapter's pooled connection
        assert store.save("s", b"two", expected_version=1) == 2  # a write first
        assert terminate_all(pgvector_url) >= 1
        assert store.load("s")[0] == b"two"  # and a read
        for _ in range(3):  # again and again, within one adapter
            terminate_all(pgvector_url)
            assert store.current_version("s") == 2
    finally:
        adapter.close()


def test_without_the_checkout_check_the_dead_connection_fails_once(pgvector_adapter_factory,
                                                                   pgvector_url):
    """What ``pool_check`` buys: off, the terminated connection is handed out once."""
    from backends.pgvector import PgVectorAdapter

    adapter = PgVectorAdapter(pgvector_url + "?pool_check=off", dimensions=8)
    try:
        store = adapter.state_store()
        store.save("s", b"one", expected_version=None)
        assert terminate_all(pgvector_url) >= 1
        with pytest.raises((BackendTransient, BackendUnreachable)):  # 57P01: admin shutdown
            store.load("s")
        assert store.load("s")[0] == b"one"  # the broken one was discarded, not reused
    finally:
        adapter.close()


def test_health_twice_in_one_process_across_terminated_connections(pgvector_url):
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(app, ["health", "--uri", pgvector_url, "-o", "json"])
        assert result.exit_code == 0, result.output
        terminate_all(pgvector_url)
    assert json.loads(result.stdout)


def test_pool_parameters_come_from_the_uri_and_never_reach_libpq(pgvector_url):
    conninfo, settings = split_pool_parameters(
        pgvector_url + "?application_name=h7&pool_max_lifetime=120&pool_max_idle=30"
        "&pool_timeout=2.5&pool_check=off", "redacted")
    assert "pool_" not in conninfo and "application_name=h7" in conninfo
    assert settings == {"pool_max_lifetime": 120.0, "pool_max_idle": 30.0,
                        "pool_timeout": 2.5, "pool_check": "off"}
    assert split_pool_parameters(pgvector_url + "?pool_check=ALWAYS", "r")[1]["pool_check"] == "always"
    assert split_pool_parameters(pgvector_url, "r")[1]["pool_check"] == "on"
    config = SqlConfig.resolve(pgvector_url + "?pool_max_lifetime=120", {})
    pool = ConnectionPool(config)
    try:
        with pool.connection() as conn:  # libpq would refuse an unknown URI parameter
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert pool.settings["pool_max_lifetime"] == 120.0
    finally:
        pool.close()


@pytest.mark.parametrize("query, named", [
    ("pool_max_lifetime=0", "pool_max_lifetime"), ("pool_timeout=soon", "pool_timeout"),
    ("pool_max_idle=nan", "pool_max_idle"), ("pool_check=maybe", "pool_check"),
])
def test_a_bad_pool_parameter_is_a_config_error_naming_it(query, named):
    config = SqlConfig.resolve(f"postgresql://u:topsecret@127.0.0.1:1/db?{query}", {})
    with pytest.raises(BackendConfigError, match=named) as caught:
        ConnectionPool(config)
    assert "topsecret" not in str(caught.value)


def test_a_refusing_server_fails_at_once_with_its_reason(pgvector_url):
    """First use connects directly once: a wrong database name fails now with the
    server's words, not after the pool's wait (300 s here) with a timeout."""
    from backends.pgvector import PgVectorAdapter

    wrong = pgvector_url.rsplit("/", 1)[0] + "/no_such_database_h7"
    adapter = PgVectorAdapter(wrong + "?pool_timeout=300", dimensions=8)
    started = time.monotonic()
    try:
        with pytest.raises(BackendError, match="does not exist"):
            adapter.state_store().load("s")
    finally:
        adapter.close()
    assert time.monotonic() - started < 150  # half the pool's wait: no loaded machine misses it


@pytest.mark.parametrize("check", ["on", "always"])
def test_a_pool_full_of_dead_connections_recovers_at_once(pgvector_url, check, monkeypatch):
    """After a restart every idle connection is dead: the first checkout discards them all
    and connects anew, without psycopg_pool's backoff sleep (1 s, doubling) per dead one."""
    import contextlib

    config = SqlConfig.resolve(f"{pgvector_url}?pool_check={check}", {"pool_size": 4})
    pool = ConnectionPool(config)
    try:
        with contextlib.ExitStack() as stack:
            held = [stack.enter_context(pool.connection()) for _ in range(4)]
            assert len({conn.info.backend_pid for conn in held}) == 4
        assert terminate_all(pgvector_url) == 4
        import psycopg_pool.pool

        backoffs: list[float] = []  # psycopg_pool's check-loop sleeps: what "at once" rules out
        # (psycopg_pool 3.2.0, the declared floor, has no such loop and no module-level sleep)
        real_sleep = getattr(psycopg_pool.pool, "sleep", time.sleep)
        monkeypatch.setattr(psycopg_pool.pool, "sleep",
                            lambda s: (backoffs.append(s), real_sleep(s))[1], raising=False)
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert backoffs == []
    finally:
        pool.close()
