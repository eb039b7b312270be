"""The item mirror: a session's memory items as queryable documents in
``semvec_memory_items``, for server-side retrieval.

The engine exposes no mutation feed, so the mirror is kept by DIFF: the caller hands
over the current items, we compare with what is stored and send only the adds,
updates and soft evictions, in one unordered bulk write. Re-sending the same items
changes nothing, so a retried sync is harmless. Evictions are soft (``evicted: true``)
so a search index that lags behind never resurrects a row the consistent read drops.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from typing import Any, Iterator, Mapping, Sequence

from backends.contract import UNSCOPED, ItemSyncResult, MemoryItem, OwnerFilter
from backends.mongo.errors import driver_errors
from backends.mongo.schema import ITEMS_COLLECTION
from backends.mongo.state import bson_utc, bson_time, owner_clause, utcnow
from backends.retrieval.items import tier_order_key, with_tier_positions


#: sha256 of an item's content (everything but timestamps and eviction), recorded for
#: readers; a sync never trusts it for "unchanged" (another writer leaves it stale).
CONTENT_DIGEST_FIELD = "content_sha256"
#: each item's position in every tier it sits in (``{"short_term": 3}``)
POSITIONS_FIELD = "tier_positions"
DIGEST_PROJECTION = {"_id": 1, "item_id": 1, CONTENT_DIGEST_FIELD: 1, "evicted": 1, "updated_at": 1}


def content_digest(content: Mapping[str, Any]) -> str:
    """Canonical JSON of the scalar fields plus the raw float64 bytes of the embedding
    (formatting 384 floats as text would cost more than the read it saves)."""
    body = {k: v for k, v in content.items() if k not in ("evicted", "embedding")}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str, allow_nan=True)
    digest = hashlib.sha256(text.encode("utf-8"))
    embedding = content.get("embedding")
    digest.update(b"\x00none" if embedding is None else b"\x00" + array("d", embedding).tobytes())
    return digest.hexdigest()


def item_doc_id(session_id: str, item_id: str) -> str:
    """The engine's ``_id`` for a mirrored item."""
    return f"{session_id}:{item_id}"


#: The engine's memory tiers, lowest first.
TIER_ORDER = ("short_term", "medium_term", "long_term")


def _tier_rank(tier: str | None) -> int:
    return TIER_ORDER.index(tier) if tier in TIER_ORDER else -1


def merge_tiers(items: Sequence[MemoryItem]) -> MemoryItem:
    """One item seen in several tiers (the engine walks them lowest first) becomes one
    document: ``tiers`` is every tier it sits in, ``tier`` the highest of them (the
    engine's rule); the content is the last one seen."""
    from dataclasses import replace

    last = items[-1]
    tiers: list[str] = []
    positions: dict[str, int] = {}
    for item in items:
        for tier in (*item.tiers, item.tier):
            if tier and tier not in tiers:
                tiers.append(tier)
        for tier, pos in (item.positions or {}).items():
            positions.setdefault(tier, pos)  # each sighting's position in its own tier
    ranked = [t for t in tiers if _tier_rank(t) >= 0]
    top = max(ranked, key=_tier_rank) if ranked else last.tier
    if len(items) == 1 and top == last.tier:
        return last
    return replace(last, tier=top, tiers=tuple(tiers) if len(items) > 1 else last.tiers,
                   positions=positions)


def item_content(item: MemoryItem, owner_subject: str | None) -> dict[str, Any]:
    return {
        "owner_subject": owner_subject,
        "item_id": item.item_id,
        "embedding": [float(x) for x in item.embedding] if item.embedding is not None else None,
        "text": item.text,
        "tier": item.tier,
        "tiers": list(item.tiers),
        "unit": dict(item.unit),
        # the item's position in each tier it sits in: the engine's document order
        POSITIONS_FIELD: dict(item.positions or {}),
        "evicted": False,
    }


def item_from_document(doc: Mapping[str, Any]) -> MemoryItem:
    embedding = doc.get("embedding")
    return MemoryItem(
        item_id=str(doc["item_id"]),
        text=doc.get("text") or "",
        embedding=tuple(float(x) for x in embedding) if embedding is not None else None,
        tier=doc.get("tier"),
        tiers=tuple(doc.get("tiers") or ()),
        unit=dict(doc.get("unit") or {}),
        evicted=bool(doc.get("evicted")),
        created_at=bson_utc(doc.get("created_at")),
        updated_at=bson_utc(doc.get("updated_at")),
        owner_subject=doc.get("owner_subject"),
        session_id=doc.get("session_id"),
        positions={str(k): int(v) for k, v in (doc.get(POSITIONS_FIELD) or {}).items()},
    )


class MongoItemMirror:
    """ItemMirror + LiveItemSource over ``semvec_memory_items``."""

    def __init__(self, database: Any) -> None:
        self._collection = database[ITEMS_COLLECTION]

    @property
    def collection(self) -> Any:
        return self._collection

    def plan_sync(self, session_id: str, items: Sequence[MemoryItem], *,
                  owner_subject: str | None = None) -> tuple[list[Any], ItemSyncResult]:
        """The bulk operations a sync would send, and the counts. Reads only."""
        from pymongo import UpdateOne

        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty string")
        items = list(items)
        if any(not isinstance(item, MemoryItem) or not item.item_id for item in items):
            raise ValueError("items must be MemoryItem objects with an item_id")
        seen: dict[str, list[MemoryItem]] = {}
        for item in with_tier_positions(items):
            seen.setdefault(item.item_id, []).append(item)
        wanted = {item_id: merge_tiers(found) for item_id, found in seen.items()}
        stored = self._stored_view(session_id, wanted)
        now = utcnow()
        ops: list[Any] = []
        added = updated = evicted = unchanged = 0
        for item_id, item in wanted.items():
            content = item_content(item, owner_subject)
            digest = content_digest(content)
            touched = bson_time(item.updated_at) or now
            current = stored.get(item_id)
            if current is None:
                # Upserted under the engine's _id, so a sync racing another (or the
                # engine's own mirror) converges instead of failing on a duplicate key.
                fields = {"session_id": session_id, **content, CONTENT_DIGEST_FIELD: digest,
                          "updated_at": touched}
                ops.append(UpdateOne({"_id": item_doc_id(session_id, item_id)},
                                     {"$set": fields, "$setOnInsert": {
                                         "created_at": bson_time(item.created_at) or now}},
                                     upsert=True))
                added += 1
                continue
            selector = {"_id": current["_id"], "session_id": session_id}
            moved = item.updated_at is not None and bson_utc(current.get("updated_at")) != touched
            # The stored content itself is compared, field by field: a digest we recorded
            # goes stale when someone else (the engine) rewrites the row, and would then
            # call a changed item "unchanged". A row without tier positions (the engine
            # records none) is not changed by ours alone: they are backfilled with the
            # digest, which is kept current for readers.
            differs = any(current.get(k) != v for k, v in content.items()
                          if k != POSITIONS_FIELD or k in current)
            # a changed item is written whole again, with a fresh digest
            changed = {**content, CONTENT_DIGEST_FIELD: digest} if differs else {}
            if not differs and not moved and (current.get(CONTENT_DIGEST_FIELD) != digest
                                              or POSITIONS_FIELD not in current):
                ops.append(UpdateOne(selector, {"$set": {
                    CONTENT_DIGEST_FIELD: digest, POSITIONS_FIELD: content[POSITIONS_FIELD]}}))
            if moved:
                changed["updated_at"] = touched
            if not changed:
                unchanged += 1
                continue
            changed.setdefault("updated_at", touched)
            ops.append(UpdateOne(selector, {"$set": changed}))
            updated += 1
        for item_id, current in stored.items():
            if item_id in wanted or current.get("evicted"):
                continue
            ops.append(UpdateOne({"_id": current["_id"], "session_id": session_id},
                                 {"$set": {"evicted": True, "updated_at": now}}))
            evicted += 1
        return ops, ItemSyncResult(added=added, updated=updated, evicted=evicted, unchanged=unchanged)

    def _stored_view(self, session_id: str, wanted: Mapping[str, MemoryItem]) -> dict[str, dict[str, Any]]:
        """What is stored for the session: ids, digests and eviction for every row, and
        the whole document (embedding included) of each row the sync will compare, in a
        second query, because only the stored content tells whether an item changed."""
        with driver_errors("items.read"):
            stored = {doc["item_id"]: doc for doc in self._collection.find(
                {"session_id": session_id}, DIGEST_PROJECTION)}
            compared = [doc["_id"] for item_id, doc in stored.items() if item_id in wanted]
            if compared:
                for doc in self._collection.find({"_id": {"$in": compared}, "session_id": session_id}):
                    stored[doc["item_id"]] = doc
        return stored

    def mirror_size(self) -> dict[str, int | None]:
        """Documents and evicted documents (two counts); bytes from ``collStats`` where
        the server answers it, else None."""
        size: int | None
        try:
            size = int(self._collection.database.command("collStats", self._collection.name)["size"])
        except Exception:  # noqa: BLE001 - an optional figure: not every server answers
            size = None
        return {"items": int(self._collection.count_documents({})),
                "evicted": int(self._collection.count_documents({"evicted": True})),
                "bytes": size}

    def sync_items(self, session_id: str, items: Sequence[MemoryItem], *,
                   owner_subject: str | None = None) -> ItemSyncResult:
        ops, result = self.plan_sync(session_id, items, owner_subject=owner_subject)
        if ops:
            with driver_errors("items.sync"):
                self._collection.bulk_write(ops, ordered=False)
        return result

    def iter_live_items(self, session_id: str, *,
                        owner_subject: OwnerFilter = UNSCOPED) -> Iterator[MemoryItem]:
        flt = {"session_id": session_id, "evicted": False, **owner_clause(owner_subject)}
        with driver_errors("items.live"):
            live = [item_from_document(doc) for doc in self._collection.find(flt).sort("item_id", 1)]
        # the engine's order: by tier, then position in it (item id where the mirror's
        # writer recorded none, as the engine's own mirror does not)
        yield from sorted(live, key=tier_order_key)

    def fetch_live(self, session_id: str, doc_ids: Sequence[str], *,
                   owner_subject: OwnerFilter = UNSCOPED) -> dict[str, MemoryItem]:
        """The consistent read: the named rows that are still live in this session and
        scope right now. Anything a search index returned stale is simply absent."""
        if not doc_ids:
            return {}
        flt = {"_id": {"$in": list(doc_ids)}, "session_id": session_id, "evicted": False,
               **owner_clause(owner_subject)}
        with driver_errors("items.consistent_read"):
            return {str(doc["_id"]): item_from_document(doc) for doc in self._collection.find(flt)}

    def delete_session_items(self, session_id: str) -> int:
        with driver_errors("items.delete"):
            return int(self._collection.delete_many({"session_id": session_id}).deleted_count)
