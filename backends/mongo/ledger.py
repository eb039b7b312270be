"""The erasure ledger in MongoDB: one collection of our own
(:data:`backends.mongo.schema.LEDGER_COLLECTION`), which the engine never reads: a
document per secret (``key:<key id>``) and per erased subject (``entry:<key id>:<hmac>``),
the store's identity (``identity``) and the counter of the entries' positions (``seq``).
The store's clock is ``$$NOW``, read through an aggregation on this collection."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Sequence

from backends.contract import LedgerEntry, LedgerKey, StoreIdentity, as_utc
from backends.mongo.errors import driver_errors
from backends.mongo.schema import COUNTERS_COLLECTION, EVENTS_COLLECTION, LEDGER_COLLECTION

_OWN = "own"  # the _id of the document naming the store's own key
_IDENTITY = "identity"
_SEQ = "seq"


class MongoLedger:
    def __init__(self, db: Any) -> None:
        self._db = db
        self._coll = db[LEDGER_COLLECTION]

    def keys(self) -> list[LedgerKey]:
        with driver_errors("ledger.keys"):
            docs = list(self._coll.find({"kind": {"$in": ["key", _OWN]}}))
        own = next((d["key_id"] for d in docs if d["kind"] == _OWN), None)
        return [LedgerKey(d["key_id"], bytes(d["secret"]), d["key_id"] == own)
                for d in docs if d["kind"] == "key"]

    def add_key(self, key: LedgerKey) -> LedgerKey:
        with driver_errors("ledger.add_key"):
            self._coll.update_one({"_id": f"key:{key.key_id}"}, {"$setOnInsert": {
                "kind": "key", "key_id": key.key_id, "secret": key.secret}}, upsert=True)
            if key.own:
                self._coll.update_one({"_id": _OWN}, {"$setOnInsert": {
                    "kind": _OWN, "key_id": key.key_id}}, upsert=True)
        if not key.own:
            return key
        return next(k for k in self.keys() if k.own)  # ours, or the first erasure's

    def entries(self) -> list[LedgerEntry]:
        with driver_errors("ledger.entries"):
            docs = list(self._coll.find({"kind": "entry"}))
        return [LedgerEntry(d["key_id"], d["digest"], as_utc(d["erased_at"]), d.get("receipt"),
                            tuple(d.get("sessions", ())), int(d.get("seq", 0))) for d in docs]

    def add_entries(self, entries: Sequence[LedgerEntry]) -> None:
        from pymongo import ReturnDocument

        from backends.contract.ledger import merged

        held = {(e.key_id, e.digest): e for e in self.entries()}
        with driver_errors("ledger.add_entries"):
            for e in entries:
                e = e._replace(erased_at=_bson_time(e.erased_at))  # what a BSON date keeps
                old = held.get((e.key_id, e.digest))
                kept = merged(old, e)
                if kept is None:
                    continue
                if old is None:
                    counter = self._coll.find_one_and_update(
                        {"_id": _SEQ}, {"$inc": {"value": 1}, "$set": {"kind": _SEQ}},
                        upsert=True, return_document=ReturnDocument.AFTER)
                    kept = kept._replace(seq=int(counter["value"]))
                held[(e.key_id, e.digest)] = kept
                self._coll.replace_one({"_id": f"entry:{e.key_id}:{e.digest}"}, {
                    "kind": "entry", "key_id": e.key_id, "digest": e.digest,
                    "erased_at": kept.erased_at, "receipt": kept.receipt,
                    "sessions": list(kept.sessions), "seq": kept.seq}, upsert=True)

    def identity(self, *, create: bool = True) -> StoreIdentity | None:
        from backends.contract.ledger import new_identity

        with driver_errors("ledger.identity"):
            doc = self._coll.find_one({"_id": _IDENTITY})
            if doc is None and create:
                made = new_identity(self.now())
                self._coll.update_one({"_id": _IDENTITY}, {"$setOnInsert": {
                    "kind": _IDENTITY, "identity": made.identity,
                    "created_at": made.created_at}}, upsert=True)
                doc = self._coll.find_one({"_id": _IDENTITY})  # ours, or the first one
        if doc is None:
            return None
        return StoreIdentity(doc["identity"], as_utc(doc["created_at"]))

    def now(self) -> datetime:
        """``$$NOW`` projected onto one document of the collection (or, when it holds
        none yet, onto a ``$documents`` stage). The suite's double (mongomock) evaluates
        no ``$$NOW``: there, and only there, the process clock answers."""
        with driver_errors("ledger.now"):
            rows = list(self._coll.aggregate([{"$limit": 1},
                                              {"$project": {"_id": 0, "now": "$$NOW"}}]))
            if not rows:
                try:
                    rows = list(self._coll.database.aggregate(
                        [{"$documents": [{}]}, {"$project": {"now": "$$NOW"}}]))
                except Exception:  # noqa: BLE001 - a server or double without $documents
                    rows = []
        found = rows[0].get("now") if rows else None
        if isinstance(found, datetime):
            return as_utc(found)
        return _bson_time(datetime.now(timezone.utc))

    def emptied_logs(self) -> list[tuple[str, int]]:
        """Users whose counter document says events were written but who have no event
        left (what an erasure by id leaves: the counter is kept)."""
        from backends.mongo.events import counter_value

        found: list[tuple[str, int]] = []
        with driver_errors("ledger.emptied_logs"):
            for doc in self._db[COUNTERS_COLLECTION].find({}):
                value = counter_value(doc)
                if value > 0 and self._db[EVENTS_COLLECTION].find_one(
                        {"user_id": doc["_id"]}, {"_id": 1}) is None:
                    found.append((str(doc["_id"]), value))
        return found


def _bson_time(at: datetime) -> datetime:
    """``at`` as a BSON date keeps it: milliseconds (so a time read back compares equal
    to the one written)."""
    at = as_utc(at)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)
