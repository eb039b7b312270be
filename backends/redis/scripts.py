"""The Lua scripts, read once from package data and called by SHA through redis-py.

Calls go through the client's public script support: ``evalsha``, and when the server
does not know the SHA yet (first call, a restart, SCRIPT FLUSH, a failover) one
``script_load`` and the call again, as redis-py's own ``Script`` does: at most one extra
round trip per script and server. Packing, the pool's checkout (its health check, fork
handling, observability) and the parser (hiredis when installed: the ``redis`` extra
brings it) are the driver's.

No write is ever resent blindly: redis-py's retry policy resends a command whose reply
was lost to a broken connection or a timeout, and a resent script that had landed would
answer "already exists" or a conflict instead of the outcome. So the adapter gives the
scripts a client of their own with no command retry (:func:`use_for_scripts`); a
connection the server closed while idle is still replaced at checkout, before anything
is sent, and a reply lost mid-call surfaces as BackendUnreachable.

On a Redis Cluster client (``?cluster=true``) a script goes through RedisCluster's
EVALSHA, which routes it to the node owning its keys' slot; only single-slot scripts are
sent there (see :mod:`backends.redis.adapter`).
"""

from __future__ import annotations

import hashlib
import inspect
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
    """One command in RESP: an array of bulk strings (for pipelined batches of a fixed
    shape, see :mod:`backends.redis.enumeration`)."""
    return b"*%d\r\n" % len(parts) + b"".join(bulk(part) for part in parts)


#: script-call client of each adapter's client (weak keys: a dropped client frees both)
_script_clients: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


#: (replicas, milliseconds) each script client WAITs for after every script it runs
_waits: "weakref.WeakKeyDictionary[Any, tuple[int, int]]" = weakref.WeakKeyDictionary()


def use_for_scripts(client: Any, script_client: Any, wait: tuple[int, int] | None = None) -> None:
    """Send the scripts called with ``client`` through ``script_client`` (same server,
    no command retry), each followed by ``WAIT replicas milliseconds`` when ``wait`` is
    given (see :meth:`LuaScript.run_waiting`). Holds no reference back to ``client``."""
    _script_clients[client] = script_client
    if wait is not None and wait[0] > 0:
        _waits[script_client] = wait


def script_client(client: Any) -> Any:
    """The client script calls made with ``client`` go through (itself when none was set)."""
    try:
        return _script_clients.get(client, client)
    except TypeError:  # an unhashable stand-in
        return client


_NAMELESS_CHECKOUT: dict[type, bool] = {}


def checkout(pool: Any) -> Any:
    """A connection from a redis-py ConnectionPool, checked by the pool (connected,
    nothing unread, this process's). The caller gives it back with ``pool.release``.

    redis-py 5.0-5.2 require a command name (``get_connection(command_name, *keys)``);
    5.3 made it optional and warns when one is passed. Checked against redis-py 5.0.0,
    5.2.1, 5.3.0, 6.4.0 and 8.1.0."""
    kind = type(pool)
    nameless = _NAMELESS_CHECKOUT.get(kind)
    if nameless is None:
        try:
            parameter = inspect.signature(kind.get_connection).parameters.get("command_name")
        except (TypeError, ValueError):
            parameter = None
        nameless = parameter is None or parameter.default is not inspect.Parameter.empty
        _NAMELESS_CHECKOUT[kind] = nameless
    return pool.get_connection() if nameless else pool.get_connection("EVALSHA")


_NO_SCRIPT: list[type[BaseException]] = []


def no_script_error() -> type[BaseException]:
    """redis-py's NoScriptError, imported on first use (an import statement on every
    call costs a measurable share of a loopback round trip). Called only in ``except``
    clauses, which Python evaluates only once an exception is raised."""
    if not _NO_SCRIPT:
        from redis.exceptions import NoScriptError

        _NO_SCRIPT.append(NoScriptError)
    return _NO_SCRIPT[0]


@dataclass(frozen=True)
class LuaScript:
    name: str
    source: str
    sha: str
    _sha_bulk: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_sha_bulk", b"$7\r\nEVALSHA\r\n" + bulk(self.sha))

    def pack(self, keys: Sequence[Any], args: Sequence[Any]) -> bytes:
        """EVALSHA sha numkeys keys... args... in RESP, for a pipelined batch that packs
        its own commands (see :mod:`backends.redis.enumeration`)."""
        out = [b"*%d\r\n" % (3 + len(keys) + len(args)), self._sha_bulk, bulk(len(keys))]
        for part in (*keys, *args):
            part = as_bytes(part)
            out += (b"$%d\r\n" % len(part), part, b"\r\n")
        return b"".join(out)

    def __call__(self, client: Any, keys: Sequence[Any], args: Sequence[Any], *,
                 cut_connection: bool = False) -> Any:
        """Run the script; ``cut_connection`` (the conformance fault seam only) drops the
        connection right after the call is sent, so the caller sees a connection error
        while the server runs the script whole or not at all."""
        if getattr(client, "is_cluster", False):
            try:
                return client.evalsha(self.sha, len(keys), *keys, *args)
            except no_script_error():  # EVAL runs it and caches it on that node
                return client.eval(self.source, len(keys), *keys, *args)
        target = script_client(client)
        if cut_connection:
            return self._send_and_cut(target, keys, args)
        return self.run(target, len(keys), *keys, *args)

    def run(self, target: Any, numkeys: int, *keys_and_args: Any) -> Any:
        """Run the script on ``target``, a standalone client used as given (a caller that
        holds the script client already skips the lookups of ``__call__``), with
        redis-py's ``evalsha`` arguments: EVALSHA, and when the server does not know the
        SHA, :meth:`load_and_run`; on a client that waits for replicas,
        :meth:`run_waiting`."""
        wait = _waits.get(target) if _waits else None
        if wait is not None:
            return self.run_waiting(target, wait, numkeys, *keys_and_args)
        try:
            return target.evalsha(self.sha, numkeys, *keys_and_args)
        except no_script_error():  # first call on this server, a restart, a SCRIPT FLUSH
            return self.load_and_run(target, numkeys, *keys_and_args)

    def run_waiting(self, target: Any, wait: tuple[int, int], numkeys: int,
                    *keys_and_args: Any) -> Any:
        """The script, then ``WAIT replicas milliseconds``, in one pipelined round trip.
        Fewer replicas than asked is :class:`~backends.errors.NotReplicated` (the write
        stands on the primary; a failover may lose it), never the script's reply."""
        from backends.errors import NotReplicated

        replicas, timeout_ms = wait
        for attempt in (0, 1):
            pipe = target.pipeline(transaction=False)
            pipe.evalsha(self.sha, numkeys, *keys_and_args)
            pipe.execute_command("WAIT", replicas, timeout_ms)
            reply, acked = pipe.execute(raise_on_error=False)
            if isinstance(reply, no_script_error()) and attempt == 0:
                target.script_load(self.source)
                continue
            break
        for outcome in (reply, acked):
            if isinstance(outcome, BaseException):
                raise outcome
        if int(acked) < replicas:
            raise NotReplicated(f"the write reached {int(acked)} of the {replicas} replica(s) "
                                f"asked for within {timeout_ms} ms")
        return reply

    def load_and_run(self, target: Any, numkeys: int, *keys_and_args: Any) -> Any:
        """After a NOSCRIPT reply: SCRIPT LOAD, then the call again (one extra round trip
        per script and server, as redis-py's own ``Script`` does)."""
        target.script_load(self.source)
        return target.evalsha(self.sha, numkeys, *keys_and_args)

    def _send_and_cut(self, client: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """The fault seam: load the script, send the call on a pooled connection with the
        documented ``Connection.send_command``, and disconnect before reading the reply
        (checked against redis-py 5.0.0 and 8.1.0)."""
        from redis.exceptions import ConnectionError as DriverConnectionError

        client.script_load(self.source)
        pool = client.connection_pool
        connection = checkout(pool)
        try:
            connection.send_command("EVALSHA", self.sha, len(keys), *keys, *args)
        finally:
            connection.disconnect()
            pool.release(connection)
        raise DriverConnectionError("connection cut after sending the script "
                                    "(fault injected on purpose)")


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
