"""Following a Sentinel-watched primary the moment it moves.

redis-py's Sentinel client asks the sentinels for the primary when it connects, and again
after a connection fails. An old primary that is still up keeps accepting writes until
the sentinels demote it (seconds later; never, while it is cut off from them), and every
pooled connection keeps writing there: turns acknowledged and then lost. So, through a
``redis+sentinel://`` URI, the adapter's pools are :class:`FollowingPool`:

* a :class:`Follower` subscribes to every sentinel's ``+switch-master`` (and the earlier
  ``+promoted-slave`` of the same failover) and takes the announced address as the primary;
* a connection to any other address is dropped before its next command and reconnects to
  the announced one; a reply read from the old primary after the announcement is not
  returned (ConnectionError: the caller is told nothing was acknowledged, and an identical
  retry is idempotent);
* a ``READONLY`` reply is a switch too: the announcement is forgotten, the connection
  dropped, and the next connection asks the sentinels again;
* a service the sentinels do not monitor is :class:`UnknownSentinelService`, a usage error
  naming it and the services they know (not "unreachable, retry").

The subscription runs in daemon threads started on the first connection (again after a
fork), one per sentinel, each ending within :data:`_POLL_S` of :meth:`Follower.stop`; the
first connection waits until one of them listens.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from backends.selection import InvalidURI

#: the sentinel events that announce a new primary of a service
SWITCH_CHANNELS = ("+switch-master", "+promoted-slave")
#: how long a listener blocks on its subscription before it looks at the stop flag
_POLL_S = 0.5


class UnknownSentinelService(InvalidURI):
    """The sentinels answered and none of them monitors the service the URI names."""


def announced_address(channel: str, data: str, service: str) -> tuple[str, int] | None:
    """The new primary of ``service`` a sentinel event announces, or None.

    ``+switch-master``: ``<service> <old ip> <old port> <new ip> <new port>``;
    ``+promoted-slave``: ``slave <name> <ip> <port> @ <service> <old ip> <old port>``."""
    parts = data.split()
    if channel == "+switch-master" and len(parts) == 5 and parts[0] == service:
        host, port = parts[3], parts[4]
    elif (channel == "+promoted-slave" and len(parts) >= 6 and parts[0] == "slave"
          and parts[4] == "@" and parts[5] == service):
        host, port = parts[2], parts[3]
    else:
        return None
    return (host, int(port)) if port.isdigit() else None


class Follower:
    """The primary the sentinels last announced for one service, shared by an adapter's
    pools (its client's and its scripts')."""

    def __init__(self, sentinels: list[tuple[str, int]], service: str,
                 sentinel_kwargs: dict[str, Any], *, listen: bool = True) -> None:
        self.sentinels = list(sentinels)
        #: False for a one-shot probe: no subscription, only the unknown-service check
        self.listen = listen
        self.service = service
        self._kwargs = dict(sentinel_kwargs)
        #: the announced primary (None: none announced, ask the sentinels)
        self.current: tuple[str, int] | None = None
        #: how many switches were seen (a test reads it; so can an operator's probe)
        self.switches = 0
        self._lock = threading.Lock()
        self._pools: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._stop = threading.Event()
        self._started_pid: int | None = None
        self._subscribed = threading.Semaphore(0)

    def attach(self, pool: Any) -> None:
        self._pools.add(pool)

    # -- the subscription ----------------------------------------------------------------

    def ensure_started(self) -> None:
        """Start one listener per sentinel (once per process: threads do not survive a
        fork), and wait, at most the connect timeout, until one of them has subscribed
        (every sentinel announces a switch, so one listening is enough to hear it; a
        sentinel that is down is not waited for)."""
        pid = os.getpid()
        if self._started_pid == pid or self._stop.is_set() or not self.listen:
            return
        with self._lock:
            if self._started_pid == pid:
                return
            self._started_pid = pid
            self._subscribed = threading.Semaphore(0)
            for host, port in self.sentinels:
                threading.Thread(target=self._listen, args=(host, port), daemon=True,
                                 name=f"semvec-sentinel-{self.service}").start()
        self._subscribed.acquire(timeout=float(self._kwargs.get("socket_connect_timeout") or 1.0))

    def stop(self) -> None:
        self._stop.set()

    def _listen(self, host: str, port: int) -> None:
        import redis

        pid = os.getpid()
        while not self._stop.is_set() and os.getpid() == pid:
            client = redis.Redis(host=host, port=port, **self._kwargs)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(*SWITCH_CHANNELS)  # sent now; its confirmation is skipped
                self._subscribed.release()
                while not self._stop.is_set():
                    message = pubsub.get_message(ignore_subscribe_messages=True, timeout=_POLL_S)
                    if message and message.get("type") == "message":
                        self._heard(message["channel"], message["data"])
            except Exception:  # noqa: BLE001 - a sentinel down: subscribe again later
                self._stop.wait(_POLL_S)
            finally:
                try:
                    pubsub.close()
                    client.close()
                except Exception:  # noqa: BLE001 - closing must not fail
                    pass

    def _heard(self, channel: Any, data: Any) -> None:
        text = lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)  # noqa: E731
        address = announced_address(text(channel), text(data), self.service)
        if address is not None:
            self.announce(address)

    # -- what the pools ask --------------------------------------------------------------

    def announce(self, address: tuple[str, int]) -> None:
        """``address`` is the primary now: idle connections elsewhere are dropped at once,
        busy ones before their next command (:class:`FollowingConnection`)."""
        with self._lock:
            if self.current == address:
                return
            self.current = address
            self.switches += 1
            pools = list(self._pools)
        for pool in pools:
            pool.proxy.master_address = address
            try:
                pool.disconnect(inuse_connections=False)
            except Exception:  # noqa: BLE001 - a busy pool: its connections check themselves
                pass

    def forget(self, address: tuple[str, int]) -> None:
        """``address`` answered READONLY: it is no primary; ask the sentinels next time."""
        with self._lock:
            if self.current == address:
                self.current = None
            self.switches += 1
            pools = list(self._pools)
        for pool in pools:
            pool.proxy.master_address = None

    def primary(self, proxy: Any) -> tuple[str, int]:
        """Where a new connection goes: the announced primary, else the sentinels' answer
        (an unknown service is :class:`UnknownSentinelService`)."""
        from redis.sentinel import MasterNotFoundError

        self.ensure_started()
        announced = self.current
        if announced is not None:
            return announced
        try:
            return proxy.get_master_address()
        except MasterNotFoundError:
            self._refuse_unknown_service(proxy.sentinel_manager)
            raise

    def _refuse_unknown_service(self, manager: Any) -> None:
        """Raise UnknownSentinelService when a sentinel answers and none that answers
        monitors the service; return when none answers (then it is unreachable)."""
        known: set[str] = set()
        answered = False
        for sentinel in manager.sentinels:
            try:
                masters = sentinel.sentinel_masters()
            except Exception:  # noqa: BLE001 - a sentinel down says nothing
                continue
            answered = True
            known.update(m.decode() if isinstance(m, bytes) else str(m) for m in masters)
        if answered and self.service not in known:
            names = ", ".join(sorted(known)) or "none"
            raise UnknownSentinelService(
                f"the sentinels monitor no service {self.service!r} (they know: {names}); "
                "fix SERVICE in redis+sentinel://HOST:PORT/SERVICE")


def _connection_classes() -> tuple[type, type]:
    """The connection classes, made on first use (redis-py is imported only then)."""
    if _CLASSES:
        return _CLASSES[0]
    from redis.connection import Connection
    from redis.exceptions import ConnectionError as DriverConnectionError
    from redis.exceptions import ReadOnlyError
    from redis.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection

    class FollowingConnection(SentinelManagedConnection):
        """A primary's connection that goes where the :class:`Follower` says."""

        def __init__(self, **kwargs: Any) -> None:
            self.follower: Follower = kwargs.pop("follower")
            super().__init__(**kwargs)

        def _connect_retry(self) -> None:
            if self._sock:
                return
            self.connect_to(self.follower.primary(self.connection_pool))

        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            current = self.follower.current
            if current is not None and self._sock is not None \
                    and (self.host, self.port) != current:
                self.disconnect()  # the old primary: reconnect to the announced one
            super().send_packed_command(command, check_health)

        def read_response(self, *args: Any, **kwargs: Any) -> Any:
            try:
                reply = Connection.read_response(self, *args, **kwargs)
            except ReadOnlyError:
                where = (self.host, self.port)
                self.disconnect()
                self.follower.forget(where)
                raise DriverConnectionError(f"{where[0]}:{where[1]} is no longer the primary "
                                            "(READONLY); nothing was written") from None
            current = self.follower.current
            if current is not None and (self.host, self.port) != current:
                self.disconnect()
                raise DriverConnectionError(
                    f"the primary moved to {current[0]}:{current[1]} while the old one "
                    "answered this call: not acknowledged (an identical retry is safe)")
            return reply

    class FollowingSSLConnection(FollowingConnection, SentinelManagedSSLConnection):
        pass

    _CLASSES.append((FollowingConnection, FollowingSSLConnection))
    return _CLASSES[0]


_CLASSES: list[tuple[type, type]] = []


def following_pool_class(follower: Follower) -> type:
    """A SentinelConnectionPool whose connections follow ``follower`` (the class
    ``Sentinel.master_for`` takes as ``connection_pool_class``)."""
    from redis.sentinel import SentinelConnectionPool

    plain, tls = _connection_classes()

    class FollowingPool(SentinelConnectionPool):
        def __init__(self, service_name: str, sentinel_manager: Any, **kwargs: Any) -> None:
            kwargs["connection_class"] = tls if kwargs.pop("ssl", False) else plain
            super().__init__(service_name, sentinel_manager, **kwargs)
            self.connection_kwargs["follower"] = follower
            self.follower = follower
            follower.attach(self)

        def owns_connection(self, connection: Any) -> bool:
            # a connection made to the announced primary is the pool's, as one made to the
            # address discovered is in the base class
            return connection.pid == self.pid

    return FollowingPool
