"""Explicit index provisioning for the Mongo backend.

``ensure_indexes`` is the only path that mutates; ``validate_indexes`` only reads. Both
are driven by :mod:`backends.mongo.manifest` and judged by :mod:`backends.mongo.compare`.
Atlas search indexes are listed/created through the driver's search-index helpers; a
deployment without Atlas Search is reported as such, not as an obscure failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from backends.contract import FieldDiff, IndexAction, IndexReport, IndexSpec
from backends.mongo.compare import (
    same_key_pattern,
    compare_regular,
    compare_search_definition,
    only_ttl_differs,
    search_readiness,
)
from backends.mongo.errors import driver_errors, is_no_atlas_search
from backends.mongo.manifest import (
    MANAGED_COLLECTIONS,
    OWNED_PREFIXES,
    RegularIndex,
    SearchIndex,
    build_manifest,
)
from backends.mongo.schema import ITEMS_COLLECTION

NO_ATLAS_SEARCH = "unsupported: this deployment has no Atlas Search"

@dataclass(frozen=True)
class SearchSupport:
    supported: bool
    reason: str = ""


@dataclass
class SearchIndexWait:
    """Outcome of waiting for search indexes: ``states`` maps name → status text."""

    ready: bool
    states: dict[str, str] = field(default_factory=dict)
    unsupported: bool = False


class _Listing:
    """What the server lists, read at most once per collection for one plan, validation
    or poll (every entry of a collection is judged against the same listing)."""

    def __init__(self, manager: "MongoIndexManager") -> None:
        self._manager = manager
        self._regular: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._search: dict[str, tuple[SearchSupport, dict[str, Mapping[str, Any]]]] = {}

    def regular(self, collection: str) -> dict[str, Mapping[str, Any]]:
        if collection not in self._regular:
            self._regular[collection] = self._manager._regular_indexes(collection)
        return self._regular[collection]

    def search(self, collection: str) -> tuple[SearchSupport, dict[str, Mapping[str, Any]]]:
        if collection not in self._search:
            self._search[collection] = self._manager._list_search(collection)
        return self._search[collection]


class MongoIndexManager:
    """IndexManager for one database, built from the adapter's settings."""

    def __init__(self, database: Any, *, session_ttl_s: int | None, item_sync: bool,
                 dimensions: int | None) -> None:
        self._db = database
        self._session_ttl_s = session_ttl_s
        self._item_sync = item_sync
        self._dimensions = dimensions

    # -- plan -----------------------------------------------------------------------

    def _infer_dimensions(self) -> int | None:
        """The embedder's dimension, read from one mirrored item when not configured."""
        with driver_errors("indexes.infer_dimensions"):
            doc = self._db[ITEMS_COLLECTION].find_one(
                {"embedding": {"$type": "array"}}, {"embedding": 1}
            )
        embedding = (doc or {}).get("embedding") or []
        return len(embedding) or None

    def manifest(self, dimensions: int | None = None) -> list[RegularIndex | SearchIndex]:
        dims = dimensions or self._dimensions
        include_items = self._item_sync or dimensions is not None
        if include_items and dims is None:
            dims = self._infer_dimensions()
        return build_manifest(session_ttl_s=self._session_ttl_s, include_items=include_items,
                              dimensions=dims)

    def index_plan(self, *, dimensions: int | None = None) -> list[IndexSpec]:
        return [entry.to_spec() for entry in self.manifest(dimensions)]

    # -- reading the server ---------------------------------------------------------

    def _regular_indexes(self, collection: str) -> dict[str, Mapping[str, Any]]:
        with driver_errors("indexes.list"):
            return {str(doc["name"]): dict(doc) for doc in self._db[collection].list_indexes()}

    def search_support(self, collection: str = ITEMS_COLLECTION) -> SearchSupport:
        return self._list_search(collection)[0]

    def _list_search(self, collection: str) -> tuple[SearchSupport, dict[str, Mapping[str, Any]]]:
        coll = self._db[collection]
        if not callable(getattr(type(coll), "list_search_indexes", None)):
            return SearchSupport(False, NO_ATLAS_SEARCH + " (the client has no search-index API)"), {}
        from pymongo.errors import OperationFailure

        try:
            docs = list(coll.list_search_indexes())
        except OperationFailure as exc:
            if getattr(exc, "code", None) == 26:  # collection does not exist yet
                return SearchSupport(True), {}
            if is_no_atlas_search(exc):
                return SearchSupport(False, NO_ATLAS_SEARCH), {}
            with driver_errors("indexes.list_search"):
                raise
        except Exception:  # noqa: BLE001
            with driver_errors("indexes.list_search"):
                raise
        return SearchSupport(True), {str(d.get("name")): dict(d) for d in docs}

    # -- validate (read-only) -------------------------------------------------------

    def validate_indexes(self, *, dimensions: int | None = None) -> list[IndexReport]:
        manifest = self.manifest(dimensions)
        reports: list[IndexReport] = []
        listing = _Listing(self)
        for entry in manifest:
            if isinstance(entry, RegularIndex):
                existing = listing.regular(entry.collection)
                reports.append(self._report_regular(entry, existing.get(entry.name)))
            else:
                support, existing = listing.search(entry.collection)
                reports.append(self._report_search(entry, support, existing.get(entry.name)))
        planned = {(e.collection, e.name) for e in manifest}
        for collection in MANAGED_COLLECTIONS:
            for name, _doc in sorted(listing.regular(collection).items()):
                if (collection, name) not in planned and name.startswith(OWNED_PREFIXES):
                    reports.append(IndexReport(name, collection, "regular", "extra",
                                               detail=_extra_detail(name)))
        return reports

    def _report_regular(self, entry: RegularIndex, actual: Mapping[str, Any] | None) -> IndexReport:
        if actual is None:
            return IndexReport(entry.name, entry.collection, entry.kind, "missing")
        diffs = compare_regular(entry, actual)
        if diffs:
            return IndexReport(entry.name, entry.collection, entry.kind, "drift", tuple(diffs))
        return IndexReport(entry.name, entry.collection, entry.kind, "ok")

    def _report_search(self, entry: SearchIndex, support: SearchSupport,
                       actual: Mapping[str, Any] | None) -> IndexReport:
        if not support.supported:
            return IndexReport(entry.name, entry.collection, entry.kind, "unsupported",
                               detail=support.reason)
        if actual is None:
            return IndexReport(entry.name, entry.collection, entry.kind, "missing", detail=entry.note)
        diffs = compare_search_definition(entry, actual.get("type"),
                                          actual.get("latestDefinition") or actual.get("definition"))
        readiness, detail = search_readiness(actual)
        if readiness == "drift":
            diffs.append(FieldDiff("status", "READY", actual.get("status")))
        if diffs:
            return IndexReport(entry.name, entry.collection, entry.kind, "drift", tuple(diffs),
                               detail=detail or entry.note)
        if readiness == "pending":
            return IndexReport(entry.name, entry.collection, entry.kind, "pending",
                               (FieldDiff("queryable", True, bool(actual.get("queryable", False))),),
                               detail=detail)
        return IndexReport(entry.name, entry.collection, entry.kind, "ok", detail=entry.note)

    # -- ensure (the only mutating path) ----------------------------------------------

    def ensure_indexes(self, *, dimensions: int | None = None, recreate: bool = False,
                       apply: bool = True) -> list[IndexAction]:
        actions: list[IndexAction] = []
        listing = _Listing(self)
        for entry in self.manifest(dimensions):
            if isinstance(entry, RegularIndex):
                existing = listing.regular(entry.collection)
                actions.append(self._ensure_regular(entry, existing, recreate, apply))
            else:
                support, existing = listing.search(entry.collection)
                actions.append(self._ensure_search(entry, support, existing.get(entry.name),
                                                   recreate, apply))
        return actions

    def _ensure_regular(self, entry: RegularIndex, existing: Mapping[str, Mapping[str, Any]],
                        recreate: bool, apply: bool) -> IndexAction:
        def act(action: str, detail: str = "", applied: bool = False) -> IndexAction:
            return IndexAction(entry.name, entry.collection, entry.kind, action, detail, applied)

        coll = self._db[entry.collection]
        actual = existing.get(entry.name)
        if actual is None:
            wanted_keys = [[k, d] for k, d in entry.keys]
            same_keys = [name for name, doc in existing.items() if same_key_pattern(doc, wanted_keys)]
            if same_keys:
                return act("mismatch", f"an index with the same keys exists as {same_keys[0]!r}; "
                                       "MongoDB refuses a second one: drop or rename it first")
            if apply:
                with driver_errors("indexes.create"):
                    coll.create_index(list(entry.keys), **entry.create_options())
            return act("create", _describe_regular(entry), apply)
        diffs = compare_regular(entry, actual)
        if not diffs:
            return act("exists")
        listing = ", ".join(d.field for d in diffs)
        if only_ttl_differs(diffs):
            if apply:
                with driver_errors("indexes.coll_mod"):
                    self._db.command(collmod_command(entry))
            return act("update", f"expireAfterSeconds {diffs[0].actual} -> "
                                 f"{entry.expire_after_seconds} in place (collMod)", apply)
        if not recreate:
            return act("mismatch", f"differs in {listing}; left alone (use --recreate to drop "
                                   "and rebuild it)")
        if apply:
            with driver_errors("indexes.recreate"):
                coll.drop_index(entry.name)
                coll.create_index(list(entry.keys), **entry.create_options())
        return act("recreate", f"differs in {listing}; dropped and rebuilt", apply)

    def _ensure_search(self, entry: SearchIndex, support: SearchSupport,
                       actual: Mapping[str, Any] | None, recreate: bool, apply: bool) -> IndexAction:
        def act(action: str, detail: str = "", applied: bool = False) -> IndexAction:
            return IndexAction(entry.name, entry.collection, entry.kind, action, detail, applied)

        if not support.supported:
            return act("unsupported", support.reason)
        coll = self._db[entry.collection]
        if entry.definition is None:
            return act("skip", entry.note)
        if actual is None:
            if apply:
                with driver_errors("indexes.create_search"):
                    self._ensure_collection(entry.collection)
                    coll.create_search_index(search_index_model(entry))
            return act("create", "built asynchronously: use --wait to follow it", apply)
        diffs = compare_search_definition(entry, actual.get("type"),
                                          actual.get("latestDefinition") or actual.get("definition"))
        if not diffs:
            readiness, detail = search_readiness(actual)
            return act("exists", "" if readiness == "ok" else detail)
        listing = ", ".join(d.field for d in diffs)
        if not recreate:
            return act("mismatch", f"differs in {listing}; left alone (use --recreate to rebuild it)")
        type_changed = any(d.field == "type" for d in diffs)
        if apply:
            with driver_errors("indexes.recreate_search"):
                if type_changed:
                    coll.drop_search_index(entry.name)
                    coll.create_search_index(search_index_model(entry))
                else:
                    # In place: Atlas keeps serving the old definition until the new one
                    # is built, so retrieval does not go dark during the rebuild.
                    coll.update_search_index(entry.name, dict(entry.definition))
        how = "dropped and recreated" if type_changed else "definition updated in place"
        return act("recreate", f"differs in {listing}; {how}", apply)

    def _ensure_collection(self, name: str) -> None:
        """createSearchIndexes needs an existing collection (regular indexes do not)."""
        from pymongo.errors import CollectionInvalid

        if name not in self._db.list_collection_names(filter={"name": name}):
            try:
                self._db.create_collection(name)
            except CollectionInvalid:
                pass  # created concurrently: fine

    # -- waiting for asynchronous builds --------------------------------------------

    def wait_for_search_indexes(
        self,
        timeout: float = 600.0,
        poll: float = 5.0,
        progress_cb: Callable[[dict[str, str]], None] | None = None,
        *,
        dimensions: int | None = None,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> SearchIndexWait:
        """Poll until every planned search index is READY and queryable, or ``timeout``."""
        sleep = sleep or time.sleep
        clock = clock or time.monotonic
        wanted = [e for e in self.manifest(dimensions) if isinstance(e, SearchIndex)]
        if not wanted:
            return SearchIndexWait(True, {})
        deadline = clock() + max(0.0, timeout)
        while True:
            states: dict[str, str] = {}
            listing = _Listing(self)
            for entry in wanted:
                support, existing = listing.search(entry.collection)
                if not support.supported:
                    return SearchIndexWait(False, {e.name: "unsupported" for e in wanted}, True)
                actual = existing.get(entry.name)
                if actual is None:
                    states[entry.name] = "missing"
                else:
                    readiness, _ = search_readiness(actual)
                    states[entry.name] = "ready" if readiness == "ok" else (
                        f"{actual.get('status') or 'UNKNOWN'}"
                        f"{'' if actual.get('queryable') else ' (not queryable)'}"
                    )
            if progress_cb is not None:
                progress_cb(dict(states))
            if all(s == "ready" for s in states.values()):
                return SearchIndexWait(True, states)
            if clock() >= deadline:
                return SearchIndexWait(False, states)
            sleep(max(0.01, min(poll, deadline - clock())))


def collmod_command(entry: RegularIndex) -> dict[str, Any]:
    """The exact command that changes a TTL in place."""
    return {"collMod": entry.collection,
            "index": {"name": entry.name, "expireAfterSeconds": int(entry.expire_after_seconds or 0)}}


def search_index_model(entry: SearchIndex) -> Any:
    from pymongo.operations import SearchIndexModel

    return SearchIndexModel(definition=dict(entry.definition or {}), name=entry.name, type=entry.type)


def _describe_regular(entry: RegularIndex) -> str:
    keys = ", ".join(f"{k} {d}" for k, d in entry.keys)
    options = [k for k in entry.create_options() if k != "name"]
    return f"keys ({keys})" + (f" with {', '.join(options)}" if options else "")


def _extra_detail(name: str) -> str:
    from backends.mongo.schema import SESSION_TTL_INDEX

    if name == SESSION_TTL_INDEX:
        return ("idle TTL index present although no TTL is configured: sessions still expire "
                "(set SEMVEC_MONGO_SESSION_TTL_S to manage it)")
    return "present on the server, not in the plan"
