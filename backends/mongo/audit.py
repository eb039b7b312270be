"""The MongoDB audit: cursors in ``batch`` documents, every check streaming.

Events are read in ``(user_id, sequence)`` order (the engine's unique index serves it),
so each user's duplicates, gaps and highest sequence are seen in one pass holding one
user at a time. MongoDB maintains its own indexes, so "index entry without its event"
cannot happen here; a missing or drifted index is reported from ``indexes validate``.
The safe repairs are raising a counter (``$max``: it can only go up) and purging the
item-mirror documents of a session that is gone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Iterator

from backends.contract.index_findings import engine_index_names, index_findings
from backends.contract.findings import (Finding, Leftovers, Section, SequenceWalk, Severity, topology_findings,
                                   unknown_name, unreadable_event, unreadable_state)
from backends.contract.event_check import MISSING, StoredEvent, describe_problems, event_problems

_WHY_DUPLICATE = ("order and deletion by sequence are ambiguous; the unique index "
                  "ix_evt_user_seq cannot be built")


class MongoAudit:
    def __init__(self, adapter: Any, *, batch: int = 500, timeout: float = 5.0,
                 progress: Callable[[int], None] | None = None) -> None:
        from backends.mongo import schema as names

        self.adapter = adapter
        self.db = adapter.database
        self.names = names
        self.batch = batch
        self.progress = progress
        self.seen = 0

    def _tick(self) -> None:
        self.seen += 1
        if self.progress is not None and self.seen % self.batch == 0:
            self.progress(self.seen)

    def run(self) -> Iterator[Finding]:
        """Every finding; driver errors leave as categorised backend errors."""
        from backends.mongo.errors import driver_errors

        with driver_errors("doctor", inside_transaction=False):
            yield from self._run()
        if self.progress is not None:
            self.progress(self.seen)  # the whole count, not the last full batch

    def _run(self) -> Iterator[Finding]:
        n = self.names
        present = set(self.db.list_collection_names())
        yield from self.deployment(present)
        if n.STATE_COLLECTION in present:
            yield from self.states()
        if n.EVENTS_COLLECTION in present:
            yield from self.events()
        if n.ITEMS_COLLECTION in present:
            yield from self.orphan_items()
        yield from self.leftovers(present)
        known = {n.STATE_COLLECTION, n.EVENTS_COLLECTION, n.COUNTERS_COLLECTION,
                 n.ITEMS_COLLECTION, n.LEDGER_COLLECTION}
        for name in sorted(present - known):
            if name.startswith(("semvec_", "compliance_")):
                yield unknown_name(
                    "namespace.unknown-collection", f"collection {self.db.name}.{name}",
                    "a collection in the engine's namespace that semvecctl does not know")

    # -- state -------------------------------------------------------------------------

    def states(self) -> Iterator[Finding]:
        from backends.errors import CorruptState
        from backends.mongo.state import strict_state

        coll = self.db[self.names.STATE_COLLECTION]
        ttl = self.adapter.state_store().ttl_seconds()
        for doc in coll.find({}, batch_size=self.batch):
            self._tick()
            session_id = doc.get("_id")
            where = f"document {coll.name} {session_id!r}"
            try:
                strict_state(str(session_id), doc)
            except CorruptState as exc:
                yield unreadable_state(where, session_id, f"field {exc.field!r} {exc.problem}")
            if ttl and not isinstance(doc.get("updated_at"), datetime):
                yield Finding(
                    "state.no-ttl", Severity.warning, where,
                    f"session {session_id!r} has no updated_at date though an idle TTL of "
                    f"{ttl}s is configured",
                    "the TTL index only expires documents whose updated_at is a date: this "
                    "one is never reclaimed",
                    "let the next write set updated_at, or set it by hand after checking")

    # -- events ------------------------------------------------------------------------

    def events(self) -> Iterator[Finding]:
        coll = self.db[self.names.EVENTS_COLLECTION]
        cursor = coll.find({}, {"content": 0}, batch_size=self.batch).sort(
            [("user_id", 1), ("sequence", 1)])
        walk: SequenceWalk | None = None
        for doc in cursor:
            self._tick()
            if walk is None or doc.get("user_id") != walk.user:
                if walk is not None:
                    yield from self._user_done(walk)
                walk = SequenceWalk(doc.get("user_id"), f"collection {coll.name} user "
                                    f"{doc.get('user_id')!r}", _WHY_DUPLICATE)
            yield from self._event(coll.name, doc)
            seq = doc.get("sequence")
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
                continue
            duplicate = walk.feed(seq, doc.get("_id"))
            if duplicate is not None:
                yield duplicate
        if walk is not None:
            yield from self._user_done(walk)

    def _event(self, coll: str, doc: dict[str, Any]) -> Iterator[Finding]:
        def field(name: str) -> Any:
            return doc.get(name, MISSING)

        problems = event_problems(StoredEvent(
            key=doc.get("_id"), event_id=field("event_id"), user_id=field("user_id"),
            created_at=field("created_at"), embedding=field("embedding"), meta=field("meta"),
            source_event_id=field("source_event_id"), sequence=field("sequence"), text=False))
        if problems:
            yield unreadable_event(f"document {coll} {doc.get('_id')!r} (user {doc.get('user_id')!r})",
                                   describe_problems(problems))

    def _user_done(self, walk: SequenceWalk) -> Iterator[Finding]:
        gap = walk.gap_finding()
        if gap is not None:
            yield gap
        user, top = walk.user, walk.top
        if not top or not isinstance(user, str):
            return
        store = self.adapter.event_store()
        value = store.read_counter(user)
        if value >= top:
            return
        counters = self.names.COUNTERS_COLLECTION
        finding = Finding(
            "counter.behind", Severity.error, f"document {counters} {user!r}",
            f"counter {value} is below the highest sequence {top} of user {user!r}",
            "the next append would reuse a sequence number that is taken",
            f"raise the counter to {top} (safe: $max only ever raises it)")
        finding.fix = lambda: store.raise_counter(user, top)
        finding.verify = lambda: store.read_counter(user) >= top
        yield finding

    # -- item mirror -------------------------------------------------------------------

    def orphan_items(self) -> Iterator[Finding]:
        """Item-mirror documents of sessions that are gone, one finding per session;
        collected before any is reported, so a purge never runs under this cursor."""
        items = self.db[self.names.ITEMS_COLLECTION]
        state = self.db[self.names.STATE_COLLECTION]
        orphans: list[tuple[Any, int]] = []
        current: Any = None
        count = 0
        cursor = items.find({}, {"session_id": 1}, batch_size=self.batch).sort("session_id", 1)
        for doc in list_then_sentinel(cursor):
            session_id = doc.get("session_id") if doc is not None else object()
            if session_id != current:
                if current is not None and count and state.find_one({"_id": current}, {"_id": 1}) is None:
                    orphans.append((current, count))
                current, count = session_id, 0
            count += 1
        for session_id, count in orphans:
            finding = Finding(
                "items.orphaned", Severity.warning,
                f"collection {items.name} session {session_id!r}",
                f"{count} item-mirror document(s) of session {session_id!r}, which no "
                "longer exists",
                "server-side retrieval can still serve them, and an erasure of the "
                "session missed them",
                "purge the session's items (safe: only while the session is absent; "
                "--fix --apply does it)")
            finding.fix = self._purge(session_id)
            finding.verify = self._purged(session_id)
            yield finding

    def _purge(self, session_id: Any) -> Callable[[], None]:
        items = self.db[self.names.ITEMS_COLLECTION]
        state = self.db[self.names.STATE_COLLECTION]

        def purge() -> None:
            if state.find_one({"_id": session_id}, {"_id": 1}) is None:  # checked just before
                items.delete_many({"session_id": session_id})
        return purge

    def _purged(self, session_id: Any) -> Callable[[], bool]:
        items = self.db[self.names.ITEMS_COLLECTION]
        state = self.db[self.names.STATE_COLLECTION]

        def purged() -> bool:
            return (items.find_one({"session_id": session_id}, {"_id": 1}) is None
                    or state.find_one({"_id": session_id}, {"_id": 1}) is not None)
        return purged

    def leftovers(self, present: set[str]) -> Iterator[Finding]:
        """Data a load or conformance run left (its cleanup never finished)."""
        n = self.names
        found = Leftovers("documents", lambda prefix: (
            f"list them with semvecctl sessions list --match '{prefix}*' and delete each "
            f"(semvecctl sessions delete ID --yes); events: delete_many({{user_id: "
            f"/^{prefix}/}}) on {n.EVENTS_COLLECTION}"))
        pattern = {"$regex": "^semvec-(load|conf)-"}
        for coll, field in ((n.STATE_COLLECTION, "_id"), (n.EVENTS_COLLECTION, "user_id"),
                            (n.ITEMS_COLLECTION, "session_id")):
            if coll not in present:
                continue
            seen: set[Any] = set()
            for doc in self.db[coll].find({field: pattern}, {field: 1}, batch_size=self.batch):
                value = doc.get(field)
                if value not in seen:
                    seen.add(value)
                    found.see(str(value))
        yield from found.findings()

    # -- the deployment ----------------------------------------------------------------

    def deployment(self, present: set[str]) -> Iterator[Finding]:
        topology = self.adapter.topology()
        if not topology.transactions:
            has_events = (self.names.EVENTS_COLLECTION in present and
                          self.db[self.names.EVENTS_COLLECTION].find_one({}, {"_id": 1}) is not None)
            yield Finding(
                "deploy.transactions", Severity.error if has_events else Severity.warning,
                "server",
                f"the deployment ({topology.kind}) cannot run multi-document transactions"
                + (f" ({topology.detail})" if topology.detail else ""),
                "the engine writes a turn's state and events in one transaction: turns "
                "with events are refused here",
                "run MongoDB as a replica set (a one-node set is enough) or through mongos",
                Section.engine)
        if topology.set_name:
            from backends.mongo.health import replica_set_facts

            facts = replica_set_facts(topology, self.adapter._client.write_concern.document)
            yield from topology_findings(facts, "server", "connect to the replica set (no "
                                         "directConnection=true) so the driver finds the primary")
        yield from index_findings(self.adapter, engine=engine_index_names(self.adapter))


def list_then_sentinel(cursor: Any) -> Iterator[Any]:
    """The cursor's documents, then one ``None`` so the last group is closed too."""
    yield from cursor
    yield None


def audit(adapter: Any, **options: Any) -> Iterator[Finding]:
    return MongoAudit(adapter, **options).run()
