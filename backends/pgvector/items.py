"""The memory-item mirror (``semvec_memory_items``): write path by diff, and live reads.

The engine exposes no item-mutation feed, so a sync compares the session's current items
with what is stored and applies the difference: new ids are added, changed ones updated,
stored ids that are no longer live are soft-evicted (``evicted = true``; rows are kept so
a late reader never sees a vanished id). A second sync of the same items changes nothing.

Each item's position in every tier it sits in (``tier_positions``: the order the sync
hands the items over, unless an item carries its own ``positions``) is recorded, and
live items are listed in that order (the engine's; see ``backends.retrieval.items``). A
table from before that column is read and written without it, in item-id order, until
the items group is provisioned again (``semvecctl indexes ensure``, or the next write
with ``create_tables`` on), which adds the column.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from backends.contract import (
    as_utc,
    UNSCOPED,
    ItemSyncResult,
    MemoryItem,
    OwnerFilter,
)
from backends.postgres.database import Database
from backends.postgres.placement import Placement
from backends.pgvector.schema import ITEMS_GROUP, ITEMS_TABLE, missing_item_columns
from backends.postgres.state import owner_clause
from backends.retrieval.items import tier_order_key, with_tier_positions

ITEM_COLUMNS = (
    "item_id, text, embedding, tier, tiers, unit, evicted, created_at, updated_at,"
    " owner_subject, session_id"
)
POSITIONS_COLUMN = "tier_positions"


def as_vector(values: Sequence[float] | None) -> Any:
    if values is None:
        return None
    from pgvector import Vector

    return Vector([float(x) for x in values])


def vector_tuple(value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    if hasattr(value, "to_list"):
        value = value.to_list()
    elif isinstance(value, str):  # vector type not registered on this connection
        value = json.loads(value)
    return tuple(float(x) for x in value)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else as_utc(value)


def item_from_row(row: Any) -> MemoryItem:
    """A row of ``ITEM_COLUMNS`` (plus ``tier_positions`` as a 12th column, when read)."""
    return MemoryItem(
        item_id=row[0],
        text=row[1],
        embedding=vector_tuple(row[2]),
        tier=row[3],
        tiers=tuple(row[4] or ()),
        unit=dict(row[5] or {}),
        evicted=bool(row[6]),
        created_at=_utc(row[7]),
        updated_at=_utc(row[8]),
        owner_subject=row[9],
        session_id=row[10],
        positions={str(k): int(v) for k, v in (row[11] or {}).items()} if len(row) > 11 else {},
    )


def _float32(values: Sequence[float] | None) -> tuple[float, ...] | None:
    """Round through float32 the way the vector column stores values, so a diff
    compares what would be stored with what is stored."""
    if values is None:
        return None
    import numpy as np

    return tuple(float(x) for x in np.asarray(values, dtype=np.float32))


def _check_items(items: Sequence[MemoryItem], dimensions: int) -> None:
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, MemoryItem):
            raise TypeError(f"expected MemoryItem, got {type(item).__name__}")
        if not isinstance(item.item_id, str) or not item.item_id:
            raise ValueError("item_id must be a non-empty string")
        if item.item_id in seen:
            raise ValueError(f"item id {item.item_id!r} appears twice in one sync")
        seen.add(item.item_id)
        if not isinstance(item.text, str):
            raise ValueError(f"item {item.item_id!r}: text must be a string")
        if item.embedding is not None:
            if len(item.embedding) != dimensions:
                raise ValueError(
                    f"item {item.item_id!r} has a {len(item.embedding)}-dimensional embedding;"
                    f" this store holds vector({dimensions}) (option dimensions=)"
                )
            if any(not math.isfinite(float(x)) for x in item.embedding):
                raise ValueError(f"item {item.item_id!r}: embedding must be finite numbers")


class PgVectorItemMirror:
    """ItemMirror + LiveItemSource over ``semvec_memory_items``."""

    def __init__(self, placement: Placement | Database) -> None:
        if not isinstance(placement, Placement):
            placement = Placement(placement, ())
        self._placement = placement
        self._table = placement.primary.tables.of(ITEMS_TABLE)
        #: per database: does its table have tier_positions?
        self._positions: dict[Database, bool] = {}

    def _has_positions(self, conn: Any, db: Database) -> bool:
        if db not in self._positions:
            self._positions[db] = not missing_item_columns(conn, db.config.schema)
        return self._positions[db]

    def _columns(self, conn: Any, db: Database) -> str:
        return ITEM_COLUMNS + (f", {POSITIONS_COLUMN}" if self._has_positions(conn, db) else "")

    def sync_items(
        self, session_id: str, items: Sequence[MemoryItem], *, owner_subject: str | None = None
    ) -> ItemSyncResult:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty string")
        if owner_subject is not None and (not isinstance(owner_subject, str) or not owner_subject):
            raise ValueError("owner_subject must be None or a non-empty string")
        items = with_tier_positions(list(items))
        db = self._placement.for_session(session_id)  # items live on their session's shard
        _check_items(items, db.dimensions)
        self._positions.pop(db, None)  # provisioning may just have added the column

        def work(conn: Any) -> ItemSyncResult:
            columns = self._columns(conn, db)
            with conn.transaction():
                # one sync per session at a time; other sessions proceed in parallel
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (session_id,))
                stored = {
                    row[0]: item_from_row(row)
                    for row in conn.execute(
                        f"SELECT {columns} FROM {self._table} WHERE session_id = %s",
                        (session_id,),
                    ).fetchall()
                }
                return self._apply(conn, session_id, items, stored, owner_subject,
                                   positions=columns != ITEM_COLUMNS)

        return db.write(ITEMS_GROUP, work)

    def _apply(self, conn: Any, session_id: str, items: list[MemoryItem],
               stored: dict[str, MemoryItem], owner: str | None, *,
               positions: bool = True) -> ItemSyncResult:
        now = datetime.now(timezone.utc)
        inserts, updates = [], []
        unchanged = 0
        for item in items:
            embedding = _float32(item.embedding)
            wanted = (item.text, embedding, item.tier, tuple(item.tiers), dict(item.unit),
                      bool(item.evicted), owner, dict(item.positions) if positions else {})
            old = stored.get(item.item_id)
            if old is not None:
                have = (old.text, old.embedding, old.tier, tuple(old.tiers), dict(old.unit),
                        old.evicted, old.owner_subject, dict(old.positions))
                if have == wanted and (item.updated_at is None or _utc(item.updated_at) == old.updated_at):
                    unchanged += 1
                    continue
            row = (
                item.text, as_vector(embedding), item.tier, list(item.tiers),
                json.dumps(dict(item.unit)), bool(item.evicted), owner,
                _utc(item.updated_at) or now,
            ) + ((json.dumps(dict(item.positions)),) if positions else ())
            if old is None:
                inserts.append((session_id, item.item_id, *row, _utc(item.created_at) or now))
            else:
                updates.append((*row, session_id, item.item_id))
        extra_col = f", {POSITIONS_COLUMN}" if positions else ""
        extra_val = ", %s::jsonb" if positions else ""
        extra_set = f", {POSITIONS_COLUMN} = %s::jsonb" if positions else ""
        if inserts:
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {self._table} (session_id, item_id, text, embedding, tier, tiers,"
                    f" unit, evicted, owner_subject, updated_at{extra_col}, created_at)"
                    f" VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s{extra_val}, %s)",
                    inserts,
                )
        if updates:
            with conn.cursor() as cur:
                cur.executemany(
                    f"UPDATE {self._table} SET text = %s, embedding = %s, tier = %s, tiers = %s,"
                    f" unit = %s::jsonb, evicted = %s, owner_subject = %s, updated_at = %s{extra_set}"
                    " WHERE session_id = %s AND item_id = %s",
                    updates,
                )
        live_ids = {item.item_id for item in items}
        gone = [iid for iid, old in stored.items() if iid not in live_ids and not old.evicted]
        if gone:
            conn.execute(
                f"UPDATE {self._table} SET evicted = true, updated_at = %s"
                " WHERE session_id = %s AND item_id = ANY(%s)",
                (now, session_id, gone),
            )
        return ItemSyncResult(added=len(inserts), updated=len(updates), evicted=len(gone),
                              unchanged=unchanged)

    def iter_live_items(
        self, session_id: str, *, owner_subject: OwnerFilter = UNSCOPED
    ) -> Iterator[MemoryItem]:
        clause, params = owner_clause(owner_subject)
        db = self._placement.for_session(session_id)

        def work(conn: Any) -> list[MemoryItem]:
            rows = conn.execute(
                f"SELECT {self._columns(conn, db)} FROM {self._table} WHERE session_id = %s"
                f" AND NOT evicted AND {clause} ORDER BY item_id",
                (session_id, *params),
            ).fetchall()
            # the engine's order: by tier, then position in it (item id where unknown)
            return sorted((item_from_row(r) for r in rows), key=tier_order_key)

        return iter(db.read(work, list, typed=True))

    def mirror_size(self) -> dict[str, int | None]:
        """Rows, evicted rows and their stored bytes (``pg_column_size`` of each row: one
        scan of the table), added up over the shards."""

        def work(conn: Any) -> dict[str, int | None]:
            rows, evicted, size = conn.execute(
                f"SELECT count(*), count(*) FILTER (WHERE evicted), "
                f"coalesce(sum(pg_column_size(t.*)), 0) FROM {self._table} t").fetchone()
            return {"items": int(rows), "evicted": int(evicted), "bytes": int(size)}

        total: dict[str, int | None] = {"items": 0, "evicted": 0, "bytes": 0}
        for db in self._placement.state_databases():
            for key, value in db.read(work, lambda: {}, typed=True).items():
                total[key] = (total[key] or 0) + (value or 0)
        return total

    def purge_items(self, session_id: str) -> int:
        """Hard-delete every mirrored item of a session (evicted ones too); returns the
        number of rows removed. For session deletion and test cleanup, not for sync."""

        def work(conn: Any) -> int:
            return conn.execute(
                f"DELETE FROM {self._table} WHERE session_id = %s", (session_id,)
            ).rowcount

        return self._placement.for_session(session_id).read(work, lambda: 0)
