"""The erasure ledger in Redis: keys of our own under ``semvec:ctl:ledger:``
(:mod:`backends.redis.schema`), which the engine never reads: the secrets, the store's own
key, the entries, the store's identity and the counter of the entries' positions. Secrets
are kept hex-encoded; nothing here hashes (:mod:`backends.transfer.withhold` does). The
store's clock is ``TIME``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Sequence

from backends.contract import LedgerEntry, LedgerKey, StoreIdentity, as_utc
from backends.redis import schema
from backends.redis.errors import redis_errors


#: entries per script call (a call blocks the server while it runs)
_MERGE_CHUNK = 500


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
        """Merge ``entries`` in by the one rule (``merged``), each entry read and written
        inside one script on the entries hash (atomic per entry, a single key, so a
        cluster runs it too). Positions for entries that turn out new are reserved first
        with one INCRBY on the counter; the unused ones are gaps, which a ledger state
        allows (it compares the entries at or below a position)."""
        from backends.contract.ledger import merged
        from backends.redis.scripts import script

        batch: dict[tuple[str, str], LedgerEntry] = {}
        for e in entries:  # the batch's own repeats folded first
            kept = merged(batch.get((e.key_id, e.digest)), e)
            if kept is not None:
                batch[(e.key_id, e.digest)] = kept
        if not batch:
            return
        merge = script("ledger_merge")
        items = list(batch.values())
        with redis_errors(self._where):
            top = int(self._client.incrby(schema.LEDGER_SEQ_KEY, len(items)))
            first = top - len(items) + 1
            for start in range(0, len(items), _MERGE_CHUNK):
                args: list[Any] = []
                for n, e in enumerate(items[start:start + _MERGE_CHUNK], first + start):
                    args += [f"{e.key_id}:{e.digest}", as_utc(e.erased_at).isoformat(),
                             e.receipt or "", "0" if e.receipt is None else "1",
                             json.dumps(sorted(set(e.sessions))), n]
                merge(self._client, [schema.LEDGER_ENTRIES_KEY], args)

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

