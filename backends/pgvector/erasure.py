"""The engine's optional ``erasure_backend()`` on pgvector: removes the item-mirror rows
of erased sessions (the engine's erasure calls it for what a backend keeps beyond state
and events; ENGINE-WIRE §6)."""

from __future__ import annotations

from typing import Any

from backends.contract import ItemEraser, OwnerFilter
from backends.postgres.placement import Placement
from backends.postgres.state import owner_clause


def item_eraser(placement: Placement, taken_along: dict[str, int] | None = None) -> ItemEraser:
    """An :class:`~backends.contract.ItemEraser` over ``semvec_memory_items`` (each
    session's rows on its shard); a missing table removes nothing. ``taken_along`` holds
    the item rows a state delete of this adapter already removed with the session: they
    are counted here once, so the engine's erasure (state delete, then this hook)
    reports them."""
    from backends.pgvector.schema import ITEMS_TABLE

    table = placement.primary.tables.of(ITEMS_TABLE)

    def delete(session_ids: list[str], owner_subject: OwnerFilter) -> int:
        clause, params = owner_clause(owner_subject)

        def work(conn: Any, ids: list[str]) -> int:
            return conn.execute(
                f"DELETE FROM {table} WHERE session_id = ANY(%s) AND {clause}",
                (ids, *params)).rowcount

        removed = sum(int(db.read(lambda conn, ids=ids: work(conn, ids), lambda: 0))
                      for db, ids in placement.group(session_ids))
        if taken_along:
            removed += sum(taken_along.pop(sid, 0) for sid in session_ids)
        return removed

    return ItemEraser(delete)
