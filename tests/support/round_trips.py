"""Round trips counted on the wire, for the tests that bound a transfer's round trips.

What counts as a round trip: a client sending a request while it has no answer
outstanding, i.e. it waited for everything it asked before asking again. A pipeline of a
thousand commands is one; a loop of a thousand single commands is a thousand; a COPY is
two (the statement, answered by CopyInResponse, then the data, answered by
ReadyForQuery). That is the latency a transfer pays per batch, so it is what the budget
("one round trip per 50 sessions") bounds.

Why a proxy, not a counting client class: the work under test runs in more than one
process (the PostgreSQL export reads its events in a child interpreter) and through two
drivers (redis-py in Python, psycopg over libpq in C, whose socket Python never sees). A
loopback TCP proxy in front of each server sees every process's bytes. It reads each
protocol's framing (never the payloads) both ways: requests sent (+1: a Redis command; a
PostgreSQL Query, Sync, startup or CopyDone) and answers completed (-1: a top-level
Redis reply, not a push; a PostgreSQL ReadyForQuery, CopyInResponse, or the one-byte
answer to an SSL/GSS request). A client's bytes that arrive while nothing is outstanding
start a round trip. Counting flips of direction instead would overcount: Redis answers
the first commands of a big pipeline while the rest are still arriving.

The request side adds before it forwards and the answer side subtracts before it
forwards, so a client's next request (sent only after it read the answer) always finds
the count already lowered: no race between the two threads of a connection.

On Redis the wire overcounts a big pipeline now and then: the server answers its first
commands before the kernel hands the proxy the rest, which then arrives with nothing
outstanding. So where every command the proxy saw came from the test's own process,
``counting()`` takes redis-py's own round trips instead (:class:`_RedisClientTurns`).

Also here: ``commandstats`` (Redis ``INFO commandstats``, calls per command, every
client of the server included) for saying WHICH commands a pass sends, and ``Tally``,
the counts between two moments.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import struct
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit

_CHUNK = 262144


# -- protocol framers: each counts requests (client side) or answers (server side) -------


class _RespRequests:
    """Redis commands in a client's stream: RESP arrays of bulk strings (an inline
    command, a line, counts one too). A command counts from its first byte: a big
    pipeline arrives in many reads, and the server may answer its first commands before
    the last arrive, so a command still arriving must already be outstanding."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.partial = False  # the buffer's unfinished command was counted already

    def feed(self, data: bytes) -> int:
        buf = self.buf
        buf += data
        pos, done = 0, 0
        while pos < len(buf):
            end = _command_end(buf, pos)
            if end is None:
                break
            pos, done = end, done + 1
        del buf[:pos]
        started = done + bool(buf) - self.partial
        self.partial = bool(buf)
        return started


def _command_end(buf: bytearray, pos: int) -> int | None:
    line = buf.find(b"\r\n", pos)
    if line < 0:
        return None
    if buf[pos] != 0x2A:  # '*'; an inline command is one line
        return line + 2
    count = int(buf[pos + 1:line])
    pos = line + 2
    for _ in range(max(count, 0)):
        line = buf.find(b"\r\n", pos)
        if line < 0:
            return None
        size = int(buf[pos + 1:line])
        pos = line + 2 + size + 2
        if pos > len(buf):
            return None
    return pos


class _RespAnswers:
    """Top-level Redis replies (RESP2 and RESP3; push messages and attributes are not
    answers to a request)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> int:
        buf = self.buf
        buf += data
        pos, done = 0, 0
        while pos < len(buf):
            kind = buf[pos]
            end = _value_end(buf, pos)
            if end is None:
                break
            pos = end
            if kind not in (0x3E, 0x7C):  # '>' push, '|' attribute
                done += 1
        del buf[:pos]
        return done


def _value_end(buf: bytearray, pos: int) -> int | None:
    line = buf.find(b"\r\n", pos)
    if line < 0:
        return None
    kind = buf[pos]
    if kind in b"$!=":  # bulk string, bulk error, verbatim string
        size = int(buf[pos + 1:line])
        if size < 0:
            return line + 2
        end = line + 2 + size + 2
        return end if end <= len(buf) else None
    if kind in b"*~>%|":  # array, set, push; map and attribute hold pairs
        count = int(buf[pos + 1:line])
        if kind in b"%|":
            count *= 2
        pos = line + 2
        for _ in range(max(count, 0)):
            pos = _value_end(buf, pos) if pos < len(buf) else None
            if pos is None:
                return None
        if kind == 0x7C:  # an attribute is followed by the value it describes
            return _value_end(buf, pos) if pos < len(buf) else None
        return pos
    return line + 2  # + - : _ , # (


class _PgRequests:
    """PostgreSQL frontend messages that ask for an answer, each counted from its first
    byte: startup and SSL/GSS requests (untyped), Query, an extended-protocol batch (its
    first Parse/Bind/Describe/Execute/Close/Flush up to its Sync, which ReadyForQuery
    answers; psycopg's pipeline mode sends many statements in one), and a COPY's data
    (its first CopyData, or a CopyDone/CopyFail with none before it: the data goes after
    the CopyInResponse and is answered by ReadyForQuery)."""

    _SPECIAL = (80877103, 80877104)  # SSLRequest, GSSENCRequest

    def __init__(self) -> None:
        self.buf = bytearray()
        self.started = False
        self.asked_encryption = 0  # how many one-byte answers the server owes
        self.judged = False  # the message at the buffer's head was counted already
        self.in_copy = False
        self.in_extended = False

    def _judge(self, kind: int | None) -> int:
        if kind is None:  # untyped: startup, SSLRequest, GSSENCRequest
            return 1
        if kind == 0x51:  # 'Q' Query
            return 1
        if kind in b"PBDEC":  # the extended protocol: a batch up to its Sync (Flush: none)
            if self.in_extended:
                return 0
            self.in_extended = True
            return 1
        if kind == 0x53:  # 'S' Sync ends the batch (or asks alone)
            was, self.in_extended = self.in_extended, False
            return 0 if was else 1
        if kind == 0x64:  # 'd' CopyData
            if self.in_copy:
                return 0
            self.in_copy = True
            return 1
        if kind in b"cf":  # CopyDone, CopyFail
            was, self.in_copy = self.in_copy, False
            return 0 if was else 1
        return 0

    def feed(self, data: bytes) -> int:
        buf = self.buf
        buf += data
        pos, done = 0, 0
        while pos < len(buf):
            if not self.judged:
                done += self._judge(None if not self.started else buf[pos])
                self.judged = True
            if not self.started:
                if len(buf) - pos < 8:
                    break
                length, code = struct.unpack_from("!ii", buf, pos)
                if len(buf) - pos < length:
                    break
                if code in self._SPECIAL:
                    self.asked_encryption += 1
                elif code != 80877102:  # a CancelRequest's connection just closes
                    self.started = True
                pos += length
                self.judged = False
                continue
            if len(buf) - pos < 5:
                break
            (length,) = struct.unpack_from("!i", buf, pos + 1)
            if len(buf) - pos < 1 + length:
                break
            pos += 1 + length
            self.judged = False
        del buf[:pos]
        return done


class _PgAnswers:
    """PostgreSQL backend messages that end a request: ReadyForQuery, CopyInResponse
    (the client then sends its data: a COPY FROM is two round trips), and the one-byte
    answer to an SSL/GSS request."""

    def __init__(self, requests: _PgRequests) -> None:
        self.requests = requests
        self.buf = bytearray()

    def feed(self, data: bytes) -> int:
        buf = self.buf
        buf += data
        pos, done = 0, 0
        while pos < len(buf):
            if self.requests.asked_encryption:
                self.requests.asked_encryption -= 1
                pos += 1
                done += 1
                continue
            if len(buf) - pos < 5:
                break
            kind = buf[pos]
            (length,) = struct.unpack_from("!i", buf, pos + 1)
            if len(buf) - pos < 1 + length:
                break
            pos += 1 + length
            if kind in b"ZG":
                done += 1
        del buf[:pos]
        return done


# -- the proxy -----------------------------------------------------------------------------


@dataclass
class Tally:
    """Counts on one server between two moments."""

    round_trips: int = 0
    requests: int = 0  # commands (Redis) / Query + Sync messages (PostgreSQL)
    connections: int = 0

    def __sub__(self, other: "Tally") -> "Tally":
        return Tally(self.round_trips - other.round_trips, self.requests - other.requests,
                     self.connections - other.connections)


class _RedisClientTurns:
    """Round trips as redis-py makes them, in this process: a connection that sends while
    it has read no answer since its last send is still in the same round trip (a
    pipeline is sent in several writes, then read). On the wire, the server may answer a
    big pipeline's first commands before the kernel hands the proxy the rest, and the
    rest then looks like a new round trip, more often the busier the machine is; here it
    cannot. ``commands`` (read from the bytes this process sent, with the proxy's own
    framing) lets the caller check that no other process talked to the server meanwhile."""

    def __init__(self) -> None:
        self.round_trips = 0
        self.commands = 0
        self._lock = threading.Lock()
        self._saved: dict[str, object] = {}

    def __enter__(self) -> "_RedisClientTurns":
        from redis.connection import AbstractConnection as Conn

        turns = self
        send, read = Conn.send_packed_command, Conn.read_response
        self._saved = {"send_packed_command": send, "read_response": read}

        def send_packed_command(c, command, *args, **kwargs):
            parts = [command] if isinstance(command, (bytes, bytearray, str)) else command
            framer = _RespRequests()
            sent = sum(framer.feed(p.encode() if isinstance(p, str) else bytes(p))
                       for p in parts)
            with turns._lock:
                turns.commands += sent
                if not getattr(c, "_rt_sent", False):
                    turns.round_trips += 1
            c._rt_sent = True
            return send(c, command, *args, **kwargs)

        def read_response(c, *args, **kwargs):
            c._rt_sent = False
            return read(c, *args, **kwargs)

        Conn.send_packed_command = send_packed_command
        Conn.read_response = read_response
        return self

    def __exit__(self, *exc: object) -> None:
        from redis.connection import AbstractConnection as Conn

        for name, fn in self._saved.items():
            setattr(Conn, name, fn)


@dataclass
class _Link:
    outstanding: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class RoundTripProxy:
    """A loopback proxy in front of one Redis or PostgreSQL server that counts the round
    trips of every connection made through it (see the module's docstring).

    ``url(server_url)`` is the same URL pointing at the proxy. ``tally()`` is the running
    total; ``counting()`` yields a ``Tally`` filled in when the block ends."""

    def __init__(self, upstream: str, protocol: str) -> None:
        if protocol not in ("redis", "postgres"):
            raise ValueError(protocol)
        parts = urlsplit(upstream)
        self.protocol = protocol
        self.upstream = (parts.hostname or "127.0.0.1",
                         parts.port or (6379 if protocol == "redis" else 5432))
        self._total = Tally()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="round-trip-proxy").start()

    # -- public ------------------------------------------------------------------------

    def url(self, server_url: str) -> str:
        """``server_url`` with its host and port replaced by the proxy's (a PostgreSQL
        URL's ``host=`` query, a socket directory, is dropped: the proxy is TCP)."""
        parts = urlsplit(server_url)
        user = parts.netloc.rpartition("@")[0]
        netloc = (user + "@" if user else "") + f"127.0.0.1:{self.port}"
        query = "&".join(q for q in parts.query.split("&") if q and not q.startswith("host="))
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))

    def tally(self) -> Tally:
        with self._lock:
            return Tally(self._total.round_trips, self._total.requests, self._total.connections)

    @contextlib.contextmanager
    def counting(self) -> Iterator[Tally]:
        """The counts made while the block runs. On Redis, when every command the proxy
        saw was sent by this process, the round trips are redis-py's own (see
        :class:`_RedisClientTurns`: exact, whatever the machine's load); otherwise the
        wire's, which may count a big pipeline split by the kernel more than once."""
        result = Tally()
        before = self.tally()
        turns = _RedisClientTurns() if self.protocol == "redis" else contextlib.nullcontext()
        try:
            with turns:
                yield result
        finally:
            delta = self.tally() - before
            result.round_trips, result.requests = delta.round_trips, delta.requests
            result.connections = delta.connections
            if isinstance(turns, _RedisClientTurns) and turns.commands == delta.requests:
                result.round_trips = turns.round_trips

    def close(self) -> None:
        self._closed = True
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> "RoundTripProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- relaying ----------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, upstream]
                self._total.connections += 1
            link = _Link()
            if self.protocol == "redis":
                asks, answers = _RespRequests(), _RespAnswers()
            else:
                asks = _PgRequests()
                answers = _PgAnswers(asks)
            threading.Thread(target=self._requests, args=(client, upstream, link, asks),
                             daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client, link, answers),
                             daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket, link: _Link, framer) -> None:
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                sent = framer.feed(data)
                with link.lock:
                    new_trip = link.outstanding == 0
                    link.outstanding += sent
                with self._lock:
                    self._total.round_trips += new_trip
                    self._total.requests += sent
                dst.sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            self._end(src, dst)

    def _answers(self, src: socket.socket, dst: socket.socket, link: _Link, framer) -> None:
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                done = framer.feed(data)
                if done:
                    with link.lock:
                        link.outstanding = max(0, link.outstanding - done)
                dst.sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            self._end(src, dst)

    def _end(self, *socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            for sock in socks:
                if sock in self._sockets:
                    self._sockets.remove(sock)
                    with contextlib.suppress(OSError):
                        sock.close()


# -- server-side command counts --------------------------------------------------------------


def commandstats(client) -> dict[str, int]:
    """Calls per command since the server started (``INFO commandstats``), every client
    of the server included: which commands a pass sends, not how many round trips."""
    info = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in info.items()}


def commandstats_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Calls per command between two ``commandstats`` readings (``info`` itself dropped)."""
    delta = {name: after[name] - before.get(name, 0) for name in after}
    delta.pop("info", None)
    return {name: calls for name, calls in sorted(delta.items()) if calls}


# -- workloads: the engine's layouts written at pipeline / COPY speed ----------------------
#
# The same sessions and events in either store (a user per session, its events in turn
# order), so a transfer and its floor move the same data. Used by the round-trip tests
# and the floor benchmarks (bench/_floors.py); never through the code under test.

BLOB_SIZE = 2048
BASE_TIME = datetime(2026, 1, 1, 12, 0, 0)
STATE_COLUMNS = ("session_id", "state_blob", "version", "drift_exempt", "owner_subject",
                 "pending_message", "updated_at")
STATE_TYPES = ("text", "bytea", "int4", "bool", "text", "text", "timestamp")
EVENT_COLUMNS = ("event_id", "user_id", "owner_subject", "session_id", "created_at",
                 "content", "embedding", "meta", "source_event_id")


def session_id(i: int) -> str:
    return f"session-{i:07d}"


def user_id(i: int) -> str:
    return f"user-{i:07d}"


def blob(i: int, size: int = BLOB_SIZE) -> bytes:
    """Incompressible and deterministic (state blobs are opaque, often compressed)."""
    return hashlib.shake_128(i.to_bytes(8, "big")).digest(size)


def state_row(i: int, size: int = BLOB_SIZE) -> tuple:
    return (session_id(i), blob(i, size), 1 + i % 7, False, "tenant/agent" if i % 3 else None,
            "confirm?" if i % 11 == 0 else None, BASE_TIME + timedelta(seconds=i))


def event_row(i: int, k: int) -> tuple:
    """Session ``i``'s event ``k`` (its user's sequence ``k + 1``) in the SQL column order."""
    import uuid

    return (str(uuid.UUID(int=(i << 16) | k | (1 << 127))), user_id(i),
            "tenant/agent" if i % 3 else "", session_id(i),
            BASE_TIME + timedelta(seconds=i, milliseconds=k), f"turn {k} of {session_id(i)}",
            "[0.1, 0.2, 0.3, 0.4]", '{"k": %d}' % k, None)


def seed_redis(client, sessions: int, events: int, *, start: int = 0, size: int = BLOB_SIZE,
               batch: int = 1000) -> None:
    """State hashes and the events family (event hashes, both zsets, the counter) of
    sessions ``start .. start + sessions``, pipelined ``batch`` sessions a round trip."""
    pipe = client.pipeline(transaction=False)
    for n, i in enumerate(range(start, start + sessions), 1):
        sid, data, version, _, owner, pending, _ = state_row(i, size)
        pipe.hset(f"semvec:state:{sid}", mapping={
            "blob": data, "version": str(version), "owner": owner or "", "drift_exempt": "0",
            "pending": pending or ""})
        if events:
            user = user_id(i)
            for k in range(events):
                eid, _, eowner, esid, created, content, emb, meta, _ = event_row(i, k)
                created = created.replace(tzinfo=timezone.utc)
                pipe.hset(f"semvec:events:e:{eid}", mapping={
                    "event_id": eid, "user_id": user, "owner_subject": eowner,
                    "session_id": esid, "created_at": created.isoformat(), "content": content,
                    "embedding": emb, "meta": meta, "source_event_id": "",
                    "sequence": str(k + 1)})
                pipe.zadd(f"semvec:events:u:{user}", {eid: k + 1})
                pipe.zadd(f"semvec:events:t:{user}", {eid: created.timestamp()})
            pipe.set(f"semvec:events:seq:{user}", events)
        if n % batch == 0:
            pipe.execute()
    pipe.execute()


def engine_tables(url: str) -> None:
    """The engine's tables as its own DDL makes them (NOT NULL, no server defaults)."""
    import psycopg

    from tests.support.fixtures.engine_sql_ddl import ENGINE_MODEL_DDL

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in ENGINE_MODEL_DDL:
            conn.execute(statement)


def seed_postgres(url: str, sessions: int, events: int, *, indices=None,
                  size: int = BLOB_SIZE) -> None:
    """The same sessions and events by COPY into the engine's tables (made if absent);
    ``indices``: which sessions (default ``range(sessions)``)."""
    import psycopg

    indices = range(sessions) if indices is None else indices
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('semvec_session_state')").fetchone()[0]
    if exists is None:
        engine_tables(url)
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY semvec_session_state ({', '.join(STATE_COLUMNS)}) FROM STDIN"
                      " (FORMAT BINARY)") as copy:
            copy.set_types(list(STATE_TYPES))
            for i in indices:
                copy.write_row(state_row(i, size))
        if events:
            with cur.copy(f"COPY semvec_memory_events ({', '.join(EVENT_COLUMNS)}) "
                          "FROM STDIN") as copy:
                for i in indices:
                    for k in range(events):
                        copy.write_row(event_row(i, k))
        conn.execute("ANALYZE")
