"""A loopback TCP proxy the fault cases put between an adapter and its server.

It listens on 127.0.0.1 only and forwards bytes both ways, one thread per direction.
The case can then, at a moment it chooses:

* ``lose_reply(n, how)``: let the n-th request (client bytes) from now on through to the
  server, swallow the server's answer, then end the client's connection -- ``"reset"``
  (RST) or ``"close"`` (FIN). The server did the work; the client never heard: what a
  blind retry turns into a duplicate;
* ``cut()``: end every connection and refuse new ones (accepted, then closed at once)
  until ``restore()``;
* ``stall()``: keep connections open but move no byte (new ones too) until ``restore()``;
* ``cut_matching(*markers)``: end every connection whose first request bytes hold one
  of ``markers``, and each new one as soon as they do, until ``restore()``; the others
  go on (Redis sentinels name their connections ``sentinel-…`` first, a replica says
  ``REPLCONF`` in its handshake: a primary cut off from its sentinels and replicas while
  its clients still reach it).

Nothing here knows a protocol; it counts reads, not commands.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

_CHUNK = 65536
#: How many of a connection's first request bytes ``cut_matching`` looks at.
_FIRST_BYTES = 512
#: How long a lost-reply fault waits for the server's answer before ending the
#: connection (a request that gets none, e.g. a pipelined half, ends it after this).
_REPLY_WAIT = 0.5


def _reset(sock: socket.socket) -> None:
    """Close with RST (linger 0), so the peer sees ECONNRESET rather than EOF."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    _close(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: "FaultProxy", client: socket.socket, upstream: socket.socket):
        self.proxy, self.client, self.upstream = proxy, client, upstream
        self.drop_replies = False
        self.reply_dropped = threading.Event()
        self.closed = False
        #: the first request bytes (what ``cut_matching`` looks for)
        self.first = b""

    def start(self) -> None:
        for target in (self._requests, self._replies):
            threading.Thread(target=target, daemon=True, name="semvec-fault-proxy").start()

    def end(self, how: str = "close") -> None:
        if self.closed:
            return
        self.closed = True
        (_reset if how == "reset" else _close)(self.client)
        _close(self.upstream)
        self.proxy._forget(self)

    def _requests(self) -> None:
        try:
            while True:
                data = self.client.recv(_CHUNK)
                if not data:
                    break
                self.proxy._gate.wait()
                if len(self.first) < _FIRST_BYTES:
                    self.first += data[:_FIRST_BYTES]
                if self.closed or self.proxy._matches(self):
                    break
                fault = self.proxy._next_request()
                if fault is not None:
                    # before the request leaves: a fast reply must not slip through
                    self.drop_replies = True
                self.upstream.sendall(data)
                if fault is not None:
                    self.reply_dropped.wait(_REPLY_WAIT)
                    self.end(fault)
                    return
        except OSError:
            pass
        self.end()

    def _replies(self) -> None:
        try:
            while True:
                data = self.upstream.recv(_CHUNK)
                if not data:
                    break
                if self.drop_replies:
                    self.reply_dropped.set()
                    continue
                self.proxy._gate.wait()
                if self.closed:
                    break
                self.client.sendall(data)
        except OSError:
            pass
        self.end()


class FaultProxy:
    """``FaultProxy(host, port)``; ``.port`` is where to point the adapter."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._gate = threading.Event()
        self._gate.set()
        self._refusing = False
        self._markers: tuple[bytes, ...] = ()
        self._countdown: int | None = None
        self._fault_how = "reset"
        self.fired = threading.Event()
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True, name="semvec-fault-proxy").start()

    # -- what the case does --------------------------------------------------------------

    def lose_reply(self, nth: int, how: str = "reset") -> None:
        with self._lock:
            self._countdown, self._fault_how = nth, how
            self.fired.clear()

    def disarm(self) -> None:
        with self._lock:
            self._countdown = None

    def cut(self) -> None:
        with self._lock:
            self._refusing = True
            links = list(self._links)
        for link in links:
            link.end("reset")

    def cut_matching(self, *markers: bytes) -> None:
        with self._lock:
            self._markers = markers
            links = [link for link in self._links if self._matches(link)]
        for link in links:
            link.end("reset")

    def stall(self) -> None:
        self._gate.clear()

    def restore(self) -> None:
        with self._lock:
            self._refusing = False
            self._markers = ()
        self._gate.set()

    def close(self) -> None:
        self._stopped = True
        self._gate.set()
        _close(self._server)
        with self._lock:
            links = list(self._links)
        for link in links:
            link.end()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- inside ---------------------------------------------------------------------------

    def _next_request(self) -> str | None:
        """The fault to apply after forwarding this request, if it is the armed one."""
        with self._lock:
            if self._countdown is None:
                return None
            self._countdown -= 1
            if self._countdown > 0:
                return None
            self._countdown = None
            self.fired.set()
            return self._fault_how

    def _matches(self, link: _Link) -> bool:
        return any(marker in link.first for marker in self._markers)

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _addr = self._server.accept()
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, upstream)
            with self._lock:
                self._links.add(link)
            link.start()
