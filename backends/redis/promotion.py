"""Promoting a Redis replica to primary (the ``failover`` conformance group's default).

Through the sentinels a ``redis+sentinel://`` URI names: ``SENTINEL FAILOVER``, then wait
until they name another primary and that server says it is one (what a deployment's own
clients then follow). A plain URI names the replica itself: ``REPLICAOF NO ONE``, then
wait until it reports the master role.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from backends.redis.config import RedisSettings, make_client, sentinel_of

#: Seconds between two looks at a promotion under way.
_POLL_S = 0.1


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - a server still changing role answers errors
            pass
        time.sleep(_POLL_S)
    raise TimeoutError(f"{what} within {timeout:g}s")


def _role(client: Any) -> str:
    return str(client.info("replication").get("role", ""))


def promote(uri: str, timeout: float = 30.0) -> None:
    """Promote the replica ``uri`` names (or let its sentinels fail over); return once
    the new primary says it is one."""
    target = sentinel_of(uri)
    if target is not None:
        _sentinel_failover(target, timeout)
        return
    client = make_client(RedisSettings.resolve(uri, {}), retries=0)
    try:
        client.execute_command("REPLICAOF", "NO", "ONE")
        _until(lambda: _role(client) == "master", timeout,
               "the replica did not take the master role")
    finally:
        client.close()


def _sentinel_failover(target: Any, timeout: float) -> None:
    import redis
    from redis.sentinel import Sentinel

    watcher = Sentinel(list(target.sentinels), sentinel_kwargs={
        "password": target.sentinel_password, "socket_timeout": 5.0})
    old = watcher.discover_master(target.service)
    deadline = time.monotonic() + timeout

    def ask() -> bool:  # refused ("no good replica") until a sentinel has seen one
        watcher.sentinels[0].execute_command("SENTINEL", "FAILOVER", target.service)
        return True

    _until(ask, timeout, f"no sentinel would start a failover of {target.service!r}")

    def promoted() -> bool:
        now = watcher.discover_master(target.service)
        if now == old:
            return False
        primary = redis.Redis(host=now[0], port=now[1], db=target.db,
                              username=target.username, password=target.password,
                              ssl=target.tls, socket_timeout=5.0, socket_connect_timeout=5.0)
        try:
            return _role(primary) == "master"
        finally:
            primary.close()

    _until(promoted, max(deadline - time.monotonic(), _POLL_S), "the sentinels did not name "
           f"a promoted primary for {target.service!r}")
