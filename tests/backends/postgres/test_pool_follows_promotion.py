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
    """Set it and wait until a new session has it (the reload is asynchronous)."""
    with psycopg.connect(url, autocommit=True) as conn:
        if on:
            conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        else:
            conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 30
    while True:
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SHOW default_transaction_read_only").fetchone()[0] == \
                    ("on" if on else "off"):
                return
        assert time.monotonic() < deadline, "the reload did not take"
        time.sleep(0.05)


def test_a_multi_host_uri_follows_the_promotion_and_never_writes_read_only(tmp_path):
    with postgres_with_standby(False) as deployment:
        standby = deployment.topology.after_uri
        uri = multi_host(deployment.uri, standby)
        adapter = PostgresAdapter(uri)
        try:
            assert adapter.commit_turn("pg-follow", b"1", expected_version=None) == 1
            _set_read_only(deployment.uri, True)
            # the pooled connection's server takes the setting at its next command; a
            # read does not mind it
            assert adapter.state_store().current_version("pg-follow") == 1
            # the write is refused: on that connection (25006, transient: the connection
            # is discarded) or before it (the server reported itself read-only: the pool
            # hands that connection out for no write, and libpq finds no other server
            # that takes writes); never a success
            with pytest.raises((BackendTransient, BackendUnreachable), match="read-only"):
                adapter.commit_turn("pg-follow", b"2", expected_version=1)
            with pytest.raises(BackendUnreachable, match="read-only"):
                adapter.commit_turn("pg-follow", b"2", expected_version=1)
            _set_read_only(deployment.uri, False)
            assert _retried(lambda: adapter.commit_turn("pg-follow", b"2",
                                                        expected_version=1)) == 2
            assert _retried(lambda: adapter.commit_turn("pg-follow", b"3",
                                                        expected_version=2)) == 3
            deployment.topology.fail_primary()
            deployment.topology.promote()
            assert _retried(lambda: adapter.commit_turn("pg-follow", b"4",
                                                        expected_version=3)) == 4
        finally:
            adapter.close()
        assert deployment.stored_version("pg-follow") == 4

