"""Promoting a PostgreSQL standby to primary (the ``failover`` conformance group's
default): ``pg_promote(wait => true)`` on the standby the URI names, the SQL face of
``pg_ctl promote`` (PostgreSQL 12+), then wait until it leaves recovery and takes a
write. Nothing else about the deployment changes: its clients must be pointed at the
promoted server (or a proxy or DNS name moved) by whoever runs it.
"""

from __future__ import annotations

import time

from backends.postgres.config import SqlConfig

#: Seconds between two looks at a promotion under way.
_POLL_S = 0.1


def promote(uri: str, timeout: float = 30.0) -> None:
    """Promote the standby ``uri`` names; return once it is a primary taking writes."""
    import psycopg

    config = SqlConfig.resolve(uri, {"shards": ()})
    with psycopg.connect(config.conninfo, autocommit=True,
                         connect_timeout=max(1, int(config.connect_timeout))) as conn:

        def in_recovery() -> bool:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            return bool(row and row[0])

        if in_recovery():
            conn.execute("SELECT pg_promote(true, %s)", (max(1, int(timeout)),))
        deadline = time.monotonic() + timeout
        while in_recovery():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{config.display_uri} was still in recovery after "
                                   f"{timeout:g}s")
            time.sleep(_POLL_S)
        conn.execute("SELECT txid_current()")  # takes a write: a transaction id is assigned
