"""The erasure ledger in MongoDB: one collection of our own
(:data:`backends.mongo.schema.LEDGER_COLLECTION`), which the engine never reads: a
document per secret (``key:<key id>``) and per erased subject (``entry:<key id>:<hmac>``)."""

from __future__ import annotations

from typing import Any, Sequence

from backends.contract import LedgerEntry, LedgerKey, as_utc
from backends.mongo.errors import driver_errors
from backends.mongo.schema import LEDGER_COLLECTION

_OWN = "own"  # the _id of the document naming the store's own key


class MongoLedger:
    def __init__(self, db: Any) -> None:
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
        return [LedgerEntry(d["key_id"], d["digest"], as_utc(d["erased_at"]), d.get("receipt"))
                for d in docs]

    def add_entries(self, entries: Sequence[LedgerEntry]) -> None:
        held = {(e.key_id, e.digest): e for e in self.entries()}
        with driver_errors("ledger.add_entries"):
            for e in entries:
                old = held.get((e.key_id, e.digest))
                if old is not None and e.erased_at <= old.erased_at:
                    continue
                self._coll.replace_one({"_id": f"entry:{e.key_id}:{e.digest}"}, {
                    "kind": "entry", "key_id": e.key_id, "digest": e.digest,
                    "erased_at": e.erased_at, "receipt": e.receipt}, upsert=True)
