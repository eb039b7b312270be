"""The erasure ledger in Redis: three keys of our own under ``semvec:ctl:ledger:``
(:mod:`backends.redis.schema`), which the engine never reads. Secrets are kept hex-encoded;
nothing here hashes (:mod:`backends.transfer.withhold` does)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Sequence

from backends.contract import LedgerEntry, LedgerKey
from backends.redis import schema
from backends.redis.errors import redis_errors


def _text(raw: Any) -> str:
    return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)


class RedisLedger:
    def __init__(self, client: Any, where: str) -> None:
        self._client, self._where = client, where

    def keys(self) -> list[LedgerKey]:
        with redis_errors(self._where):
            raw = self._client.hgetall(schema.LEDGER_KEYS_KEY)
            own = self._client.get(schema.LEDGER_OWN_KEY)
        own_id = _text(own) if own is not None else None
        return [LedgerKey(_text(kid), bytes.fromhex(json.loads(_text(v))["secret"]),
                          _text(kid) == own_id) for kid, v in raw.items()]

    def add_key(self, key: LedgerKey) -> LedgerKey:
        value = json.dumps({"secret": key.secret.hex()})
        with redis_errors(self._where):
            self._client.hsetnx(schema.LEDGER_KEYS_KEY, key.key_id, value)
            if not key.own or self._client.set(schema.LEDGER_OWN_KEY, key.key_id, nx=True):
                return key
        return next(k for k in self.keys() if k.own)  # another erasure made it first

    def entries(self) -> list[LedgerEntry]:
        with redis_errors(self._where):
            raw = self._client.hgetall(schema.LEDGER_ENTRIES_KEY)
        found = []
        for name, value in raw.items():
            kid, _, digest = _text(name).partition(":")
            data = json.loads(_text(value))
            found.append(LedgerEntry(kid, digest, datetime.fromisoformat(data["erased_at"]),
                                     data.get("receipt")))
        return found

    def add_entries(self, entries: Sequence[LedgerEntry]) -> None:
        held = {(e.key_id, e.digest): e for e in self.entries()}
        fresh = {}
        for e in entries:
            old = held.get((e.key_id, e.digest))
            if old is None or e.erased_at > old.erased_at:
                fresh[f"{e.key_id}:{e.digest}"] = json.dumps(
                    {"erased_at": e.erased_at.isoformat(), "receipt": e.receipt})
        if fresh:
            with redis_errors(self._where):
                self._client.hset(schema.LEDGER_ENTRIES_KEY, mapping=fresh)
