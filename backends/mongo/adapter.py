"""``MongoBackendAdapter``: the contract plus every operator seam MongoDB can honour.

Construction does no I/O: the driver client connects lazily, so the registry and the
CLI can build an adapter (and read ``is_persistent``) cheaply. An injected ``client``
(e.g. ``mongomock.MongoClient``) is the caller's to close.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from backends.contract import (
    ClosesOnce,
    speaks_both_conventions,
    StateStoreSeams,
    validate_save_args,
    UNSCOPED,
    IndexAction,
    IndexReport,
    IndexSpec,
    ItemSyncResult,
    MemoryEvent,
    MemoryItem,
    OwnerFilter,
    validate_turn_events,
)
from backends.errors import (BackendConfigError, InjectedFault,
                             UnsupportedOperation)
from backends.info import declared
from backends.mongo.config import MongoSettings, resolve_settings
from backends.mongo.errors import translate_error, driver_errors
from backends.mongo.topology import TRANSACTIONS_ADVICE, Topology, probe_topology
from backends.redaction import redact_uri


def _import_pymongo() -> Any:
    try:
        import pymongo
    except ImportError as exc:
        raise declared("mongo").missing_driver() from exc
    return pymongo


@speaks_both_conventions
class MongoBackendAdapter(ClosesOnce, StateStoreSeams):
    """State, events, item mirror, indexes and server-side retrieval on MongoDB."""

    name = "mongo"
    is_persistent = True

    def __init__(
        self,
        uri: str | None = None,
        *,
        client: Any = None,
        database: str | None = None,
        session_ttl_s: int | None = None,
        item_sync: bool | None = None,
        dimensions: int | None = None,
        server_selection_timeout_ms: int | None = None,
        connect_timeout_ms: int | None = None,
        health_timeout_s: float = 2.0,
        force_client_rrf: bool = False,
    ) -> None:
        pymongo = _import_pymongo()
        self.settings: MongoSettings = resolve_settings(
            uri,
            database=database,
            session_ttl_s=session_ttl_s,
            item_sync=item_sync,
            dimensions=dimensions,
            server_selection_timeout_ms=server_selection_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            have_client=client is not None,
        )
        self._owns_client = client is None
        if client is None:
            try:
                client = pymongo.MongoClient(
                    self.settings.uri,
                    **_timeouts_not_in_uri(self.settings, server_selection_timeout_ms,
                                           connect_timeout_ms),
                    tz_aware=True,
                    connect=False,
                    appname="semvecctl",
                )
            except Exception as exc:  # noqa: BLE001
                mapped = translate_error(exc, "")
                if mapped is exc:
                    mapped = BackendConfigError("invalid MongoDB settings")
                raise type(mapped)(f"{mapped} for {redact_uri(self.settings.uri or '')}") from exc
        self._client = client
        self._db = client[self.settings.database]
        self._health_timeout_s = float(health_timeout_s)
        self._force_client_rrf = bool(force_client_rrf)
        self._closed = False
        self._lock = threading.Lock()
        self._topology: Topology | None = None
        self._retrieval: Any = None
        self._armed_fault: str | None = None

        from backends.mongo.events import MongoEventStore
        from backends.mongo.indexes import MongoIndexManager
        from backends.mongo.items import MongoItemMirror
        from backends.mongo.state import MongoStateStore

        self._state = MongoStateStore(self._db, session_ttl_s=self.settings.session_ttl_s)
        self._events = MongoEventStore(self._db, self._transaction_runner)
        self._items = MongoItemMirror(self._db)
        self._indexes = MongoIndexManager(
            self._db,
            session_ttl_s=self.settings.session_ttl_s,
            item_sync=self.settings.item_sync,
            dimensions=self.settings.dimensions,
        )

    def __repr__(self) -> str:
        where = redact_uri(self.settings.uri) if self.settings.uri else "injected client"
        return f"MongoBackendAdapter({where}, database={self.settings.database!r})"

    # -- contract -------------------------------------------------------------------

    @property
    def client(self) -> Any:
        return self._client

    @property
    def database(self) -> Any:
        return self._db

    def state_store(self) -> Any:
        return self._state

    def event_store(self) -> Any:
        return self._events

    def erasure_ledger(self) -> Any:
        from backends.mongo.ledger import MongoLedger

        return MongoLedger(self._db)

    def item_mirror(self) -> Any:
        return self._items

    def retrieval_backend(self) -> None:
        """None: the engine builds its own Mongo retriever per session (and only with
        item-sync on); one handed out here would get the engine's context, which names no
        session or owner (ENGINE-WIRE section 6). Ours is :meth:`server_retriever`."""
        return None

    def server_retriever(self) -> Any:
        """Our server-side retriever (the :class:`backends.contract.ServerRetrieval` seam),
        ranking as the engine's ``MongoRetrievalBackend`` does; only when the item mirror
        is on (else None: retrieval is in-process)."""
        if not self.settings.item_sync:
            return None
        with self._lock:
            if self._retrieval is None:
                from backends.mongo.retrieval import MongoRetrievalBackend

                self._retrieval = MongoRetrievalBackend(
                    self._items, force_client_rrf=self._force_client_rrf
                )
            return self._retrieval

    def topology(self) -> Topology:
        """The deployment kind, asked once (``hello``) and cached."""
        with self._lock:
            if self._topology is None:
                with driver_errors("topology"):
                    self._topology = probe_topology(self._client)
            return self._topology

    def change_feed(self) -> Any:
        """Change streams as a change feed (``backends.mongo.feed``) on a replica set or
        mongos, or None: a standalone (mongomock answers as one) has no change streams,
        and a server that refuses to open one has the feed off."""
        try:
            if not self.topology().change_streams:
                return None
        except Exception:  # noqa: BLE001 - unanswered: the feed is off, the scan reports it
            return None
        from backends.mongo.feed import change_stream_feed

        return change_stream_feed(self._db)

    def _transaction_runner(self) -> Callable[[Callable[[Any], Any]], Any] | None:
        if not self.topology().transactions:
            return None
        return self._run_in_transaction

    def _run_in_transaction(self, body: Callable[[Any], Any]) -> Any:
        from pymongo import WriteConcern
        from pymongo.read_concern import ReadConcern

        with driver_errors("transaction", inside_transaction=False):
            with self._client.start_session() as session:
                return session.with_transaction(
                    body,
                    read_concern=ReadConcern("snapshot"),
                    write_concern=WriteConcern("majority"),
                )

    def commit_turn(
        self,
        session_id: str,
        blob: bytes,
        *,
        expected_version: int | None,
        owner_subject: str | None = None,
        pending_message: str | None = None,
        events: Sequence[MemoryEvent] | None = None,
    ) -> int:
        """Without events: one compare-and-set. With events: ONE multi-document
        transaction (state, counters, events), refused up front on a standalone."""
        fault = self._take_fault()
        if not events and fault is None:
            return self._state.save(session_id, blob, expected_version=expected_version,
                                    owner_subject=owner_subject, pending_message=pending_message)

        checked = validate_turn_events(events)
        validate_save_args(session_id, blob, expected_version, owner_subject)
        runner = self._transaction_runner()
        if runner is None:
            raise UnsupportedOperation(TRANSACTIONS_ADVICE)

        def body(session: Any) -> int:
            version = self._state.save(session_id, blob, expected_version=expected_version,
                                       owner_subject=owner_subject,
                                       pending_message=pending_message, session=session)
            if fault == "turn.after_state":
                raise InjectedFault("injected fault after the state write (turn.after_state)")
            self._events.append_many(checked, session=session)
            return version

        return runner(body)

    # -- fault seam (conformance only) -------------------------------------------------

    #: ``turn.after_state`` is raised inside the turn's transaction, after the state
    #: write, so the transaction aborts. A standalone refuses turns with events (and an
    #: armed turn) up front with UnsupportedOperation, before writing anything.
    #: ``turn.cut_connection`` is not offered: the client cannot drop a MongoDB
    #: connection mid-transaction on purpose. A plain attribute, so that checking the
    #: FaultSeam protocol never probes the server.
    fault_points = frozenset({"turn.after_state"})

    @contextmanager
    def inject_fault(self, point: str) -> Iterator[None]:
        if point not in self.fault_points:
            raise UnsupportedOperation(f"fault point {point!r} is not offered by this adapter")
        self._armed_fault = point
        try:
            yield
        finally:
            self._armed_fault = None

    def _take_fault(self) -> str | None:
        with self._lock:
            fault, self._armed_fault = self._armed_fault, None
        return fault

    def check_health(self, timeout: float | None = None) -> bool:
        """A ping bounded by ``timeout`` (default ``health_timeout_s``); never raises."""
        from backends.mongo.health import answers

        return answers(self._client, self._health_timeout_s if timeout is None else timeout)

    def health_details(self, timeout: float) -> dict[str, Any]:
        """Reachability, topology and durability within ``timeout``; never raises (see
        :func:`backends.mongo.health.details`)."""
        from backends.mongo.health import details

        return details(self, timeout)

    def _release(self) -> None:
        """Close the client, only if this adapter created it (once: see ClosesOnce)."""
        if self._owns_client:
            self._client.close()

    # -- seams: items ---------------------------------------------------------------

    def sync_items(self, session_id: str, items: Sequence[MemoryItem], *,
                   owner_subject: str | None = None) -> ItemSyncResult:
        return self._items.sync_items(session_id, items, owner_subject=owner_subject)

    def purge_items(self, session_id: str) -> int:
        """Remove a session's mirrored items outright (cleanup, not eviction)."""
        return self._items.delete_session_items(session_id)

    def item_mirror_size(self) -> dict[str, int | None]:
        return self._items.mirror_size()

    def iter_live_items(self, session_id: str, *,
                        owner_subject: OwnerFilter = UNSCOPED) -> Iterator[MemoryItem]:
        return self._items.iter_live_items(session_id, owner_subject=owner_subject)

    def erasure_backend(self) -> Any:
        """The engine's optional erasure seam (ENGINE-WIRE §6): an object whose
        ``erase_sessions(session_ids, *, user_id, scope) -> int`` removes those sessions'
        item documents (under the scope's owner; ``scope=None``: every owner's). Offered
        whether item-sync is on or not: documents written while it was on are still
        personal data."""
        from backends.mongo.erasure import item_eraser

        return item_eraser(self._items.collection)

    # -- seams: indexes -------------------------------------------------------------

    def index_plan(self, *, dimensions: int | None = None) -> list[IndexSpec]:
        return self._indexes.index_plan(dimensions=dimensions)

    def ensure_indexes(self, *, dimensions: int | None = None, recreate: bool = False,
                       apply: bool = True) -> list[IndexAction]:
        return self._indexes.ensure_indexes(dimensions=dimensions, recreate=recreate, apply=apply)

    def validate_indexes(self, *, dimensions: int | None = None) -> list[IndexReport]:
        return self._indexes.validate_indexes(dimensions=dimensions)

    def wait_for_search_indexes(self, timeout: float = 600.0, poll: float = 5.0,
                                progress_cb: Callable[[dict[str, str]], None] | None = None,
                                **kwargs: Any) -> Any:
        return self._indexes.wait_for_search_indexes(timeout, poll, progress_cb, **kwargs)


def _timeouts_not_in_uri(settings: MongoSettings, explicit_selection: int | None,
                         explicit_connect: int | None) -> dict[str, int]:
    """Bounded timeouts by default, but a timeout the operator put in the URI wins over
    our default (keyword arguments would silently override it)."""
    from urllib.parse import parse_qsl, urlsplit

    in_uri = {k.lower() for k, _ in parse_qsl(urlsplit(settings.uri or "").query)}
    out: dict[str, int] = {}
    if explicit_selection is not None or "serverselectiontimeoutms" not in in_uri:
        out["serverSelectionTimeoutMS"] = settings.server_selection_timeout_ms
    if explicit_connect is not None or "connecttimeoutms" not in in_uri:
        out["connectTimeoutMS"] = settings.connect_timeout_ms
    return out
