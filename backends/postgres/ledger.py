"""The erasure ledger of a SQL deployment: two tables of our own (their names in
:mod:`backends.postgres.schema`), which the engine never reads, made on the first write.

They live on the PRIMARY only (``DATABASE_URL``), never on the shards: the primary is the
one database every deployment of the same store shares (the engine's metadata is there,
and a reshard keeps it while the shard list changes), so an erasure is recorded once and
every reader (import, copy, migrate, ``shards run``, doctor) consults one place with no
fan-out and no shard that could lag behind. A flavour inherits it."""

from __future__ import annotations

from typing import Any, Sequence

from backends.contract import LedgerEntry, LedgerKey, as_utc
from backends.postgres.schema import LEDGER_KEYS_TABLE, LEDGER_TABLE


class SqlLedger:
    def __init__(self, db: Any) -> None:
        self._db = db
        self._keys = db.tables.of(LEDGER_KEYS_TABLE)
        self._entries = db.tables.of(LEDGER_TABLE)
        self._made = False

    def _ensure(self, conn: Any) -> None:
        if self._made:
            return
        from backends.postgres.schema import qident

        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {qident(self._db.config.schema)}")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self._keys} (key_id TEXT PRIMARY KEY,"
                     " secret BYTEA NOT NULL, own BOOLEAN NOT NULL DEFAULT FALSE)")
        conn.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS semvecctl_erasure_keys_one_own"
                     f" ON {self._keys} (own) WHERE own")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self._entries} (key_id TEXT NOT NULL,"
                     " digest TEXT NOT NULL, erased_at TIMESTAMPTZ NOT NULL, receipt TEXT,"
                     " PRIMARY KEY (key_id, digest))")
        self._made = True

    def keys(self) -> list[LedgerKey]:
        def work(conn: Any) -> list[LedgerKey]:
            rows = conn.execute(f"SELECT key_id, secret, own FROM {self._keys}").fetchall()
            return [LedgerKey(r[0], bytes(r[1]), bool(r[2])) for r in rows]

        return self._db.read(work, list)

    def add_key(self, key: LedgerKey) -> LedgerKey:
        def work(conn: Any) -> None:
            self._ensure(conn)
            conn.execute(f"INSERT INTO {self._keys} (key_id, secret, own) VALUES (%s, %s, %s)"
                         " ON CONFLICT DO NOTHING", (key.key_id, key.secret, key.own))

        with self._db.connection() as conn:
            work(conn)
        if not key.own:
            return key
        return next(k for k in self.keys() if k.own)  # ours, or the first erasure's

    def entries(self) -> list[LedgerEntry]:
        def work(conn: Any) -> list[LedgerEntry]:
            rows = conn.execute(
                f"SELECT key_id, digest, erased_at, receipt FROM {self._entries}").fetchall()
            return [LedgerEntry(r[0], r[1], as_utc(r[2]), r[3]) for r in rows]

        return self._db.read(work, list)

    def add_entries(self, entries: Sequence[LedgerEntry]) -> None:
        if not entries:
            return
        with self._db.connection() as conn:
            self._ensure(conn)
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {self._entries} AS l (key_id, digest, erased_at, receipt)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (key_id, digest) DO UPDATE SET"
                    " erased_at = EXCLUDED.erased_at, receipt = EXCLUDED.receipt"
                    " WHERE EXCLUDED.erased_at > l.erased_at",
                    [(e.key_id, e.digest, e.erased_at, e.receipt) for e in entries])
