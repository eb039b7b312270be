"""A multi-host URI with ``target_session_attrs=read-write`` follows a promotion, and the
pool hands out no connection to a server that stopped taking writes. Real servers on
loopback: a PostgreSQL primary and a streaming standby (tests/support/failover_topologies).

A write refused as read-only is an error (transient), never a success, and its
connection is discarded; once the old primary is gone and the standby promoted, the same
adapter's next turn lands on the promoted server."""

from __future__ import annotations

import time
import psycopg
import pytest

from backends.errors import BackendError, BackendTransient, BackendUnreachable
from backends.postgres import PostgresAdapter
from tests.support.failover_topologies import multi_host, postgres_with_standby

pytestmark = pytest.mark.postgres


def _retried(write, seconds: float = 30.0):
    """``write`` again while it fails (each failure an error, never a success)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return write()
        except BackendError:
            assert time.monotonic() < deadline, "never succeeded"
            time.sleep(0.2)


def _set_read_only(url: str, on: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        if on:
            conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        else:
            conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
        conn.execute("SELECT pg_reload_conf()")


def test_a_multi_host_uri_follows_the_promotion_and_never_writes_read_only(tmp_path):
    with postgres_with_standby(False) as deployment:
        standby = deployment.topology.after_uri
        uri = multi_host(deployment.uri, standby)
        adapter = PostgresAdapter(uri)
        try:
            assert adapter.commit_turn("pg-follow", b"1", expected_version=None) == 1
            _set_read_only(deployment.uri, True)
            with pytest.raises(BackendTransient, match="read-only"):  # 25006, discarded
                adapter.commit_turn("pg-follow", b"2", expected_version=1)
            _set_read_only(deployment.uri, False)
            assert _retried(lambda: adapter.commit_turn("pg-follow", b"2",
                                                        expected_version=1)) == 2
            _set_read_only(deployment.uri, True)
            # a read on the pooled connection learns that the server became read-only:
            # the pool hands that connection out no more, and libpq finds no other
            # server that takes writes
            assert adapter.state_store().current_version("pg-follow") == 2
            with pytest.raises(BackendUnreachable, match="read-only"):
                adapter.commit_turn("pg-follow", b"3", expected_version=2)
            _set_read_only(deployment.uri, False)
            assert _retried(lambda: adapter.commit_turn("pg-follow", b"3",
                                                        expected_version=2)) == 3
            deployment.topology.fail_primary()
            deployment.topology.promote()
            assert _retried(lambda: adapter.commit_turn("pg-follow", b"4",
                                                        expected_version=3)) == 4
        finally:
            adapter.close()
        assert deployment.stored_version("pg-follow") == 4

