"""The engine's optional ``erasure_backend()`` on MongoDB: removes the item-mirror
documents of erased sessions (ENGINE-WIRE §6), scoped like the engine's own eraser."""

from __future__ import annotations

from typing import Any

from backends.contract import ItemEraser, OwnerFilter
from backends.mongo.errors import driver_errors
from backends.mongo.state import owner_clause


def item_eraser(collection: Any) -> ItemEraser:
    """An :class:`~backends.contract.ItemEraser` over ``semvec_memory_items``."""

    def delete(session_ids: list[str], owner_subject: OwnerFilter) -> int:
        with driver_errors("items.erase"):
            return int(collection.delete_many(
                {"session_id": {"$in": session_ids}, **owner_clause(owner_subject)}).deleted_count)

    return ItemEraser(delete)
