"""The ``redis`` adapter: state store, event store, commit_turn and operator seams.

Importing this module does not import redis-py; constructing the adapter does (and raises
MissingDriver when it is absent). The constructor does no I/O: the client connects on
first use.

Redis Cluster (``redis://node:port/0?cluster=true`` or ``cluster=True``): what one
hash slot can hold works — health (every primary must answer), session state (each
script touches one key), commit_turn WITHOUT events, and session enumeration over every
primary. A turn's events live in other keys (event hash, the user's indexes and counter)
that hash to other slots, and no script can write several slots atomically, so
``event_store()`` is None there and commit_turn with events is refused up front with
UnsupportedOperation — before anything is written, never half-way.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from backends.contract import ClosesOnce, owner_of_scope, speaks_both_conventions, UNSCOPED, LoadedState, OwnerFilter, SessionSummary, StateStoreSeams
from backends.errors import UnsupportedOperation
from backends.info import declared
from backends.redis.config import RedisSettings


#: "the caller named no owner" (``None`` is an owner value: unowned), as ``takes_scope`` tells it
_NOT_GIVEN: Any = object()


@speaks_both_conventions
class RedisBackendAdapter(ClosesOnce, StateStoreSeams):
    """Sessions and events in Redis, in the layout deployed semvec stores use.

    ``uri`` (``redis://``, ``rediss://`` or ``unix://``) defaults to ``REDIS_URL``, then to
    ``redis://localhost:6379/0``. Options: ``connect_timeout``, ``socket_timeout`` (or
    ``timeout`` for both), ``ttl_seconds`` (default ``SEMVEC_REDIS_SESSION_TTL_S``, 0 = no
    expiry), ``retries`` (connection retries, default 1; they apply to reads, never to
    the Lua scripts that write, see :mod:`backends.redis.scripts`), ``max_connections``
    (per pool, redis-py's default is 100: the scripts have a client and pool of their
    own, so up to twice that many connections), ``cluster`` (default: the URI's
    ``?cluster=`` flag, else False; see the module doc), ``wait_replicas`` and
    ``wait_timeout_ms`` (default: the URI's, else 0 and 1000: every write is followed by
    WAIT, and too few replicas is NotReplicated). Through ``redis+sentinel://`` both
    clients follow every switch the sentinels announce (:mod:`backends.redis.sentinel`).
    """

    name = "redis"
    is_persistent = True
    #: sessions can carry their own expiry (restore_session honours ttl_seconds)
    keeps_session_ttl = True

    def __init__(self, uri: str | None = None, **options: Any) -> None:
        try:
            import redis  # noqa: F401 - presence check only
        except ImportError as exc:
            raise declared(self.name).missing_driver() from exc
        from backends.redis.events import RedisEventStore
        from backends.redis.state import RedisStateStore
        from backends.redis.scripts import use_for_scripts
        from backends.redis.turns import TurnWriter
        from backends.redis.config import make_client, new_follower

        self.settings = RedisSettings.resolve(uri, options)
        self._where = self.settings.redacted_url
        # through Sentinel both clients follow every switch the sentinels announce
        self._follower = new_follower(self.settings)
        self._client = make_client(self.settings, follower=self._follower)
        # the scripts' own client: same server and options, no command retry (a resent
        # write whose reply was lost would answer for the first one); a cluster client
        # routes its scripts itself
        self._script_client = None if self.settings.cluster else make_client(
            self.settings, retries=0, follower=self._follower)
        waits = self.settings.wait_replicas > 0
        if self._script_client is not None:
            use_for_scripts(self._client, self._script_client,
                            (self.settings.wait_replicas, self.settings.wait_timeout_ms)
                            if waits else None)
        self._state = RedisStateStore(self._client, ttl_seconds=self.settings.ttl_seconds,
                                      where=self._where, cluster=self.settings.cluster)
        self._events = RedisEventStore(self._client, where=self._where)
        self._closed = False
        self._armed_fault: str | None = None
        self._commit_turn = TurnWriter(self._client, self._script_client, self._where,
                                       self.settings.ttl_seconds, waits).commit

    def __repr__(self) -> str:
        return f"RedisBackendAdapter({self._where!r})"

    @property
    def is_cluster(self) -> bool:
        return self.settings.cluster

    @property
    def client(self) -> Any:
        """The underlying redis-py client (binary responses), for operator tooling."""
        return self._client

    # -- the contract ----------------------------------------------------------------

    def state_store(self):
        return self._state

    def event_store(self):
        return None if self.settings.cluster else self._events

    def erasure_ledger(self) -> Any:
        from backends.redis.ledger import RedisLedger

        return RedisLedger(self._client, self._where)

    def retrieval_backend(self) -> None:
        return None  # in-process retrieval

    def commit_turn(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: Any = _NOT_GIVEN,
        pending_message: str | None = None,
        events: Sequence[Any] | None = None,
        scope: Any = _NOT_GIVEN,
    ) -> int:
        """State and events in one Lua script (events: ours or the engine's objects,
        validated before anything is sent); the owner check of ``save`` applies.

        ``scope=`` is the engine's spelling of ``owner_subject=`` (either, not both), read
        here as ``takes_scope`` reads it for the other methods: this is the hot path, and
        that wrapper's extra call is a measurable share of a turn on loopback."""
        if scope is not _NOT_GIVEN:
            if owner_subject is not _NOT_GIVEN:
                raise TypeError("commit_turn() takes owner_subject= or scope=, not both")
            owner_subject = owner_of_scope(scope)
        elif owner_subject is _NOT_GIVEN:
            owner_subject = None
        if self.settings.cluster and events:
            raise UnsupportedOperation(
                f"Redis at {self._where} is a cluster: a turn's events hash to other slots "
                "than its session, and no script can write several slots atomically; "
                "nothing was written (commit without events here, or use a standalone "
                "or replicated Redis for the event log)"
            )
        cut = False
        if self._armed_fault is not None:
            cut, self._armed_fault = self._armed_fault == "turn.cut_connection", None
        return self._commit_turn(session_id, blob, expected_version, owner_subject,
                                 pending_message, events, cut)

    @property
    def fault_points(self) -> frozenset[str]:
        """FaultSeam (conformance only). A turn is one Lua script: there is no point
        between its state write and its events where it can fail (everything is checked
        before the first write), so ``turn.after_state`` is not offered;
        ``turn.cut_connection`` drops the connection right after the script is sent.
        None on a cluster, whose turns carry no events."""
        return frozenset() if self.settings.cluster else frozenset({"turn.cut_connection"})

    @contextmanager
    def inject_fault(self, point: str) -> Iterator[None]:
        """Arm ``point`` for the next commit_turn inside the block (conformance only)."""
        if point not in self.fault_points:
            raise ValueError(f"redis offers the fault points {sorted(self.fault_points)}, "
                             f"not {point!r}")
        self._armed_fault = point
        try:
            yield
        finally:
            self._armed_fault = None

    def check_health(self, timeout: float | None = None) -> bool:
        """PING on a fresh connection within ``timeout`` (default: the connect timeout)."""
        from backends.redis.health import ping

        return ping(self.settings, timeout or self.settings.connect_timeout)

    # -- operator seams (restore_session comes from StateStoreSeams; enumeration is
    # overridden because a cluster is scanned primary by primary) ----------------------

    def health_details(self, timeout: float) -> dict[str, Any]:
        from backends.redis.health import details

        return details(self.settings, timeout)

    def iter_sessions(
        self,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        match: str | None = None,
        batch_size: int = 500,
        ordered: bool = False,
    ) -> Iterator[SessionSummary]:
        """Sessions in SCAN order with flat memory; ``ordered``: in session id order, as
        the other stores always list them (the key names are collected first)."""
        from backends.redis.enumeration import iter_cluster_sessions, iter_sessions

        if self.settings.cluster:
            return iter_cluster_sessions(self._client, self._where,
                                         owner_subject=owner_subject, match=match,
                                         batch_size=batch_size, ordered=ordered)
        return iter_sessions(self._client, self._where, owner_subject=owner_subject,
                             match=match, batch_size=batch_size, ordered=ordered)

    def iter_session_states(self, *, owner_subject: OwnerFilter = UNSCOPED,
                            match: str | None = None, batch_size: int = 500
                            ) -> Iterator[tuple[SessionSummary, LoadedState]]:
        """Each session's summary with its row, from the listing's one read of it."""
        from backends.redis.enumeration import iter_cluster_sessions, iter_session_states

        if self.settings.cluster:
            return iter_cluster_sessions(self._client, self._where, owner_subject=owner_subject,
                                         match=match, batch_size=batch_size, states=True)
        return iter_session_states(self._client, self._where, owner_subject=owner_subject,
                                   match=match, batch_size=batch_size)

    def iter_versions(self, *, owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                      batch_size: int = 500) -> Iterator[tuple[str, int]]:
        """``(session id, version)`` of every session without reading blobs."""
        from backends.redis.enumeration import iter_versions

        if self.settings.cluster:
            return ((s.session_id, s.version) for s in self.iter_sessions(
                owner_subject=owner_subject, match=match, batch_size=batch_size))
        return iter_versions(self._client, self._where, owner_subject=owner_subject,
                             match=match, batch_size=batch_size)

    def change_feed(self) -> Any:
        """Keyspace notifications as a change feed (``backends.redis.feed``), or None
        when the server does not publish them (or on a cluster, where each node
        publishes its own keys)."""
        if self.settings.cluster:
            return None
        from backends.redis.feed import keyspace_feed

        db = int(self._client.connection_pool.connection_kwargs.get("db", 0) or 0)
        return keyspace_feed(self._client, db)

    def describe_session(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> SessionSummary | None:
        from backends.redis.enumeration import describe_session, node_client_for

        if self.settings.cluster:
            node = node_client_for(self._client, self._where, session_id)
            return describe_session(node, self._where, session_id,
                                    owner_subject=owner_subject)
        return describe_session(self._client, self._where, session_id,
                                owner_subject=owner_subject)

    def _release(self) -> None:
        """Release the connection pools (once: see ClosesOnce)."""
        if self._follower is not None:
            self._follower.stop()
        for client in (self._client, self._script_client):
            if client is None:
                continue
            try:
                client.close()
                if not self.settings.cluster:
                    # redis-py 5.0.0's close() releases only a single-connection client's
                    # connection and leaves the pool's sockets open (5.0.1+ disconnect
                    # them): the documented ConnectionPool.disconnect, on every version
                    client.connection_pool.disconnect()
            except Exception:  # noqa: BLE001 - closing must not fail
                pass
