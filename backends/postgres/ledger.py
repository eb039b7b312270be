"""The erasure ledger of a SQL deployment: tables of our own (their names in
:mod:`backends.postgres.schema`), which the engine never reads, made on the first write:
the secrets, the entries, the store's identity (one row), and a sequence giving each entry
its position. The store's clock is the primary's ``now()``.

They live on the PRIMARY only (``DATABASE_URL``), never on the shards: the primary is the
one database every deployment of the same store shares (the engine's metadata is there,
and a reshard keeps it while the shard list changes), so an erasure is recorded once and
every reader (import, copy, migrate, ``shards run``, doctor) consults one place with no
fan-out and no shard that could lag behind; the deployment has one identity. A flavour
inherits it.

Entries are read as ``to_jsonb`` rows, so a table made before the ``sessions`` and ``seq``
columns existed reads without being altered (a read never changes anything); the first
write adds them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Sequence

from backends.contract import LedgerEntry, LedgerKey, StoreIdentity, as_utc
from backends.postgres.schema import (LEDGER_KEYS_TABLE, LEDGER_SEQUENCE, LEDGER_STORE_TABLE,
                                      LEDGER_TABLE)


def _time(value: Any) -> datetime:
    return as_utc(value if isinstance(value, datetime) else datetime.fromisoformat(value))


class SqlLedger:
    def __init__(self, db: Any) -> None:
        self._db = db
        self._keys = db.tables.of(LEDGER_KEYS_TABLE)
        self._entries = db.tables.of(LEDGER_TABLE)
        self._store = db.tables.of(LEDGER_STORE_TABLE)
        self._seq = db.tables.of(LEDGER_SEQUENCE)
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
        conn.execute(f"ALTER TABLE {self._entries} ADD COLUMN IF NOT EXISTS sessions TEXT"
                     " NOT NULL DEFAULT '[]', ADD COLUMN IF NOT EXISTS seq BIGINT NOT NULL"
                     " DEFAULT 0")
        conn.execute(f"CREATE SEQUENCE IF NOT EXISTS {self._seq}")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self._store} (one BOOLEAN PRIMARY KEY"
                     " DEFAULT TRUE CHECK (one), identity TEXT NOT NULL,"
                     " created_at TIMESTAMPTZ NOT NULL)")
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
            rows = conn.execute(f"SELECT to_jsonb(l) FROM {self._entries} l").fetchall()
            return [_entry(r[0] if isinstance(r[0], dict) else json.loads(r[0])) for r in rows]

        return self._db.read(work, list)

    def add_entries(self, entries: Sequence[LedgerEntry]) -> None:
        """Merge ``entries`` in with one statement for the whole batch (the rule of
        ``merged``: the later time and its receipt win, session hashes are unioned and
        sorted, a held entry keeps its position; a new one takes the next value of the
        sequence in the same statement). The row lock of ON CONFLICT makes two
        concurrent merges of one subject serialise, so neither union is lost."""
        from backends.contract.ledger import merged

        batch: dict[tuple[str, str], LedgerEntry] = {}
        for e in entries:  # ON CONFLICT may touch a row once: the batch's repeats folded
            kept = merged(batch.get((e.key_id, e.digest)), e)
            if kept is not None:
                batch[(e.key_id, e.digest)] = kept
        if not batch:
            return
        rows = sorted(batch.values(), key=lambda e: (e.key_id, e.digest))
        with self._db.connection() as conn:
            self._ensure(conn)
            conn.execute(self._merge_sql(), (
                [e.key_id for e in rows], [e.digest for e in rows],
                [as_utc(e.erased_at) for e in rows], [e.receipt for e in rows],
                [json.dumps(sorted(set(e.sessions))) for e in rows]))
            conn.commit()

    def _merge_sql(self) -> str:
        union = ("(SELECT COALESCE(json_agg(s ORDER BY s COLLATE \"C\"), '[]')::text FROM"
                 " (SELECT json_array_elements_text(l.sessions::json) AS s UNION"
                 " SELECT json_array_elements_text(EXCLUDED.sessions::json)) u)")
        later = "EXCLUDED.erased_at > l.erased_at"
        return (
            f"INSERT INTO {self._entries} AS l (key_id, digest, erased_at, receipt, sessions,"
            f" seq) SELECT k, d, t, r, s, nextval('{self._seq}') FROM"
            " unnest(%s::text[], %s::text[], %s::timestamptz[], %s::text[], %s::text[])"
            " AS i(k, d, t, r, s) ORDER BY k, d"
            f" ON CONFLICT (key_id, digest) DO UPDATE SET"
            f" erased_at = CASE WHEN {later} THEN EXCLUDED.erased_at ELSE l.erased_at END,"
            f" receipt = CASE WHEN {later} THEN EXCLUDED.receipt ELSE l.receipt END,"
            f" sessions = {union}"
            f" WHERE {later} OR NOT (EXCLUDED.sessions::jsonb <@ l.sessions::jsonb)")

    def identity(self, *, create: bool = True) -> StoreIdentity | None:
        def work(conn: Any) -> StoreIdentity | None:
            row = conn.execute(f"SELECT identity, created_at FROM {self._store}").fetchone()
            return StoreIdentity(row[0], _time(row[1])) if row else None

        found = self._db.read(work, lambda: None)
        if found is not None or not create:
            return found
        from backends.contract.ledger import new_identity

        with self._db.connection() as conn:
            self._ensure(conn)
            made = new_identity(conn.execute("SELECT now()").fetchone()[0])
            conn.execute(f"INSERT INTO {self._store} (one, identity, created_at) VALUES"
                         " (TRUE, %s, %s) ON CONFLICT DO NOTHING",
                         (made.identity, made.created_at))
            conn.commit()
        return self._db.read(work, lambda: None)  # ours, or the first one

    def now(self) -> datetime:
        with self._db.connection() as conn:
            return as_utc(conn.execute("SELECT now()").fetchone()[0])

    def emptied_logs(self) -> None:
        """None: the engine's SQL events keep no counter, so a log emptied by an erasure
        looks exactly like a log that never was."""
        return None


def _entry(data: dict[str, Any]) -> LedgerEntry:
    sessions = data.get("sessions") or "[]"
    return LedgerEntry(data["key_id"], data["digest"], _time(data["erased_at"]),
                       data.get("receipt"), tuple(json.loads(sessions)),
                       int(data.get("seq") or 0))
