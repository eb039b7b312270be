"""The Lua scripts, read once from package data and called by SHA.

EVALSHA saves sending the script body on every call. When the server does not know the
SHA yet (first call, a restart, SCRIPT FLUSH, a failover), the script is loaded once and
the call is repeated: at most one extra round trip per script and server.

Calls are packed into RESP here and sent on a pooled connection: the command shape is
fixed, and redis-py's generic per-argument packing cost more than the round trip itself
on the commit_turn path (two dozen arguments per event). Only connections checked the
way the pool checks them are used (connected, nothing unread, this process's), and no
write is ever retried blindly: a reply lost to a broken connection surfaces as
BackendUnreachable.

On a pool of at least ``RESERVE_FROM`` connections (redis-py's default is 100), script
calls keep one of them reserved (:class:`ReservedConnection`) and use it whenever no
other thread does: the pool's checkout and release (a lock, observability counters, a
release event, a socket probe) cost a third of a loopback round trip on every call. A
smaller pool is left whole: every call checks a connection out and back in.

On a Redis Cluster client (``?cluster=true``) a script goes through RedisCluster's
EVALSHA, which routes it to the node owning its keys' slot; only single-slot scripts are
sent there (see :mod:`backends.redis.adapter`).
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Sequence


def as_bytes(value: Any) -> bytes:
    """A command argument as the bytes Redis receives (str as UTF-8, int as decimal)."""
    if value.__class__ is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode("ascii")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"cannot send {type(value).__name__} to Redis")


def bulk(value: Any) -> bytes:
    value = as_bytes(value)
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
        """EVALSHA sha numkeys keys... args... in RESP, joined once (no per-part copies)."""
        out = [b"*%d\r\n" % (3 + len(keys) + len(args)), self._sha_bulk, bulk(len(keys))]
        for part in (*keys, *args):
            if part.__class__ is str:  # the common cases inline: two dozen parts a turn
                part = part.encode("utf-8")
            elif part.__class__ is not bytes:
                part = as_bytes(part)
            out += (b"$%d\r\n" % len(part), part, b"\r\n")
        return b"".join(out)

    def __call__(self, client: Any, keys: Sequence[Any], args: Sequence[Any], *,
                 cut_connection: bool = False) -> Any:
        """Run the script; ``cut_connection`` (the conformance fault seam only) drops the
        connection right after the call is sent, so the caller sees a connection error
        while the server runs the script whole or not at all."""
        if getattr(client, "is_cluster", False):
            return self._call_on_cluster(client, keys, args)
        packed = self.pack(keys, args)
        pool = client.connection_pool
        reserved = ReservedConnection.of(pool)
        if reserved is not None and reserved.lock.acquire(blocking=False):
            try:
                return self._exchange(reserved.checked(pool), packed, cut_connection)
            finally:
                reserved.lock.release()
        connection = pool.get_connection()
        try:
            return self._exchange(connection, packed, cut_connection)
        finally:
            pool.release(connection)

    def _exchange(self, connection: Any, packed: bytes, cut_connection: bool) -> Any:
        """Send the packed call and read its reply, loading the script once if the server
        does not know it. Every send is followed by a whole reply or a disconnect (redis-py
        disconnects on a failed send or read), so a connection never holds a stale reply."""
        if cut_connection:
            from redis.exceptions import ConnectionError as DriverConnectionError

            connection.send_packed_command([pack_command("SCRIPT", "LOAD", self.source)])
            connection.read_response()
            connection.send_packed_command([packed])
            connection.disconnect()
            raise DriverConnectionError("connection cut after sending the script "
                                        "(fault injected on purpose)")
        connection.send_packed_command([packed])
        try:
            return connection.read_response()
        except Exception as exc:  # the driver's names are imported only when needed
            from redis.exceptions import NoScriptError

            if not isinstance(exc, NoScriptError):
                raise
            connection.send_packed_command([pack_command("SCRIPT", "LOAD", self.source)])
            connection.read_response()
            connection.send_packed_command([packed])
            return connection.read_response()

    def _call_on_cluster(self, client: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Through RedisCluster, which routes by the keys' slot (they must share one)."""
        from redis.exceptions import NoScriptError

        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:  # EVAL runs it and caches it on that node
            return client.eval(self.source, len(keys), *keys, *args)


#: the smallest pool that gives one connection up to script calls
RESERVE_FROM = 16


class ReservedConnection:
    """One connection of a large pool, kept checked out for script calls.

    A caller takes it with ``lock.acquire(blocking=False)`` (a busy one sends the caller
    to the pool instead) and gets it through :meth:`checked`, which does what the pool
    does at checkout: connect if needed, and reconnect when the socket has something
    unread or was closed by the server. ``client.close()`` disconnects it with the rest
    of the pool; in a forked child the parent's socket is dropped, never used. Only the
    pool holds the connection (and is held by nothing here), so both die together.
    """

    _by_pool: "weakref.WeakKeyDictionary[Any, ReservedConnection]" = weakref.WeakKeyDictionary()
    _made = threading.Lock()

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._pid = os.getpid()
        self._connection: "weakref.ref[Any] | None" = None

    @classmethod
    def of(cls, pool: Any) -> "ReservedConnection | None":
        """The pool's reserved connection; None for a small pool, which keeps them all."""
        found = cls._by_pool.get(pool)
        if found is not None:
            return found
        if getattr(pool, "max_connections", 0) < RESERVE_FROM:
            return None
        with cls._made:
            return cls._by_pool.setdefault(pool, cls())  # no reference back: the pool can die

    def checked(self, pool: Any) -> Any:
        """The reserved connection, fit to send on (taken from ``pool`` the first time)."""
        if self._pid != os.getpid():  # forked: the parent's socket is not ours to use
            self._pid, self._connection = os.getpid(), None
        connection = self._connection() if self._connection is not None else None
        if connection is None:
            connection = pool.get_connection()  # checked by the pool, and held in use by it
            self._connection = weakref.ref(connection)
            return connection
        try:
            connection.connect()  # a no-op while connected
            fit = not connection.can_read()  # unread data, or the server closed it
        except Exception as exc:
            from redis.exceptions import ConnectionError as DriverConnectionError
            from redis.exceptions import TimeoutError as DriverTimeoutError

            if not isinstance(exc, (DriverConnectionError, DriverTimeoutError, OSError)):
                raise
            fit = False
        if not fit:
            connection.disconnect()
            connection.connect()
        return connection


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
