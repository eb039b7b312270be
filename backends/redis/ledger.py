"""The erasure ledger in Redis: keys of our own under ``semvec:ctl:ledger:``
(:mod:`backends.redis.schema`), which the engine never reads: the secrets, the store's own
key, the entries, the store's identity and the counter of the entries' positions. Secrets
are kept hex-encoded; nothing here hashes (:mod:`backends.transfer.withhold` does). The
store's clock is ``TIME``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Sequence

from backends.contract import LedgerEntry, LedgerKey, StoreIdentity
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
                                     data.get("receipt"), tuple(data.get("sessions", ())),
                                     int(data.get("seq", 0))))
        return found

    def add_entries(self, entries: Sequence[LedgerEntry]) -> None:
        from backends.contract.ledger import merged

        held = {(e.key_id, e.digest): e for e in self.entries()}
        fresh = {}
        for e in entries:
            old = held.get((e.key_id, e.digest))
            kept = merged(old, e)
            if kept is None:
                continue
            if old is None:
                with redis_errors(self._where):
                    kept = kept._replace(seq=int(self._client.incr(schema.LEDGER_SEQ_KEY)))
            held[(e.key_id, e.digest)] = kept
            fresh[f"{e.key_id}:{e.digest}"] = json.dumps(
                {"erased_at": kept.erased_at.isoformat(), "receipt": kept.receipt,
                 "sessions": list(kept.sessions), "seq": kept.seq})
        if fresh:
            with redis_errors(self._where):
                self._client.hset(schema.LEDGER_ENTRIES_KEY, mapping=fresh)

    def identity(self, *, create: bool = True) -> StoreIdentity | None:
        from backends.contract.ledger import new_identity

        with redis_errors(self._where):
            raw = self._client.get(schema.LEDGER_IDENTITY_KEY)
            if raw is None and create:
                made = new_identity(self.now())
                self._client.set(schema.LEDGER_IDENTITY_KEY, json.dumps(
                    {"identity": made.identity, "created_at": made.created_at.isoformat()}),
                    nx=True)
                raw = self._client.get(schema.LEDGER_IDENTITY_KEY)  # ours, or the first one
        if raw is None:
            return None
        data = json.loads(_text(raw))
        return StoreIdentity(data["identity"], datetime.fromisoformat(data["created_at"]))

    def now(self) -> datetime:
        with redis_errors(self._where):
            seconds, micros = self._client.time()
        return datetime.fromtimestamp(int(seconds), timezone.utc).replace(microsecond=int(micros))

    def emptied_logs(self) -> list[tuple[str, int]]:
        """Users whose counter says events were written but whose two indexes are empty
        (what an erasure by id leaves: the counter is kept)."""
        prefix = schema.USER_COUNTER_PREFIX
        found: list[tuple[str, int]] = []
        with redis_errors(self._where):
            names = list(self._client.scan_iter(match=schema.escape_glob(prefix) + "*",
                                                count=500))
            for start in range(0, len(names), 500):
                chunk = names[start:start + 500]
                pipe = self._client.pipeline(transaction=False)
                for name in chunk:
                    user = _text(name)[len(prefix):]
                    pipe.get(name)
                    pipe.zcard(schema.user_seq_index_key(user))
                    pipe.zcard(schema.user_time_index_key(user))
                replies = pipe.execute(raise_on_error=False)
                for i, name in enumerate(chunk):
                    value, by_seq, by_time = replies[3 * i:3 * i + 3]
                    if isinstance(value, (bytes, str)) and _text(value).isdigit() \
                            and int(value) > 0 and by_seq == 0 and by_time == 0:
                        found.append((_text(name)[len(prefix):], int(value)))
        return found

