"""The Lua scripts, read once from package data and called by SHA.

EVALSHA saves sending the script body on every call. When the server does not know the
SHA yet (first call, a restart, SCRIPT FLUSH, a failover), the script is loaded once and
the call is repeated: at most one extra round trip per script and server.

Calls are packed into RESP here and sent on a pooled connection: the command shape is
fixed, and redis-py's generic per-argument packing cost more than the round trip itself
on the commit_turn path (two dozen arguments per event). The pool still hands out only
connections it has checked (reconnecting stale ones), and no write is ever retried
blindly: a reply lost to a broken connection surfaces as BackendUnreachable.

On a Redis Cluster client (``?cluster=true``) a script goes through RedisCluster's
EVALSHA, which routes it to the node owning its keys' slot; only single-slot scripts are
sent there (see :mod:`backends.redis.adapter`).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Sequence


def bulk(value: Any) -> bytes:
    if isinstance(value, str):
        value = value.encode("utf-8")
    elif isinstance(value, int) and not isinstance(value, bool):
        value = str(value).encode("ascii")
    elif isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    elif not isinstance(value, bytes):
        raise TypeError(f"cannot send {type(value).__name__} to Redis")
    return b"$%d\r\n%b\r\n" % (len(value), value)


def pack_command(*parts: Any) -> bytes:
    """One command in RESP: an array of bulk strings."""
    return b"*%d\r\n" % len(parts) + b"".join(bulk(part) for part in parts)


@dataclass(frozen=True)
class LuaScript:
    name: str
    source: str
    sha: str
    _sha_bulk: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_sha_bulk", b"$7\r\nEVALSHA\r\n" + bulk(self.sha))

    def pack(self, keys: Sequence[Any], args: Sequence[Any]) -> bytes:
        head = b"*%d\r\n" % (3 + len(keys) + len(args)) + self._sha_bulk + bulk(len(keys))
        return head + b"".join(bulk(part) for part in keys) + b"".join(bulk(part) for part in args)

    def __call__(self, client: Any, keys: Sequence[Any], args: Sequence[Any], *,
                 cut_connection: bool = False) -> Any:
        """Run the script; ``cut_connection`` (the conformance fault seam only) drops the
        connection right after the call is sent, so the caller sees a connection error
        while the server runs the script whole or not at all."""
        from redis.exceptions import ConnectionError as DriverConnectionError
        from redis.exceptions import NoScriptError

        if getattr(client, "is_cluster", False):
            return self._call_on_cluster(client, keys, args)
        packed = self.pack(keys, args)
        pool = client.connection_pool
        connection = pool.get_connection()
        try:
            if cut_connection:
                connection.send_packed_command([pack_command("SCRIPT", "LOAD", self.source)])
                connection.read_response()
                connection.send_packed_command([packed])
                connection.disconnect()
                raise DriverConnectionError("connection cut after sending the script "
                                            "(fault injected on purpose)")
            connection.send_packed_command([packed])
            try:
                return connection.read_response()
            except NoScriptError:
                connection.send_packed_command([pack_command("SCRIPT", "LOAD", self.source)])
                connection.read_response()
                connection.send_packed_command([packed])
                return connection.read_response()
        finally:
            pool.release(connection)

    def _call_on_cluster(self, client: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Through RedisCluster, which routes by the keys' slot (they must share one)."""
        from redis.exceptions import NoScriptError

        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:  # EVAL runs it and caches it on that node
            return client.eval(self.source, len(keys), *keys, *args)


_cache: dict[str, LuaScript] = {}
_lock = threading.Lock()


def script(name: str) -> LuaScript:
    """The script ``lua/<name>.lua``, read from the package on first use."""
    found = _cache.get(name)
    if found is not None:
        return found
    with _lock:
        found = _cache.get(name)
        if found is None:
            source = resources.files("backends.redis").joinpath("lua").joinpath(f"{name}.lua").read_text(
                encoding="utf-8"
            )
            found = LuaScript(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())
            _cache[name] = found
        return found
