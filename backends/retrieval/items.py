"""Memory items from outside a store: a JSONL file for offline analysis, and the
look-up of one item to query "like" it.

One JSON object per line: ``item_id`` and ``text`` required; ``embedding`` (list of
numbers), ``tier``, ``tiers``, ``positions`` (``{tier: position}``), ``unit``,
``evicted``, ``owner_subject``, ``session_id``, ``created_at``/``updated_at`` (ISO 8601)
optional. Blank lines and lines starting with ``#`` are skipped. The file's order is the
order of the items within each tier (the engine's BM25 documents and tie order follow
it), unless ``positions`` says otherwise.

Mirrors record each item's position in its tier (:func:`with_tier_positions`, from the
order a sync hands the items over) and list live items in that order
(:func:`tier_order_key`).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from backends.contract import MemoryItem

__all__ = ["item_from_record", "item_to_record", "load_items_jsonl", "read_jsonl", "find_item",
           "TIER_ORDER", "item_tier_list", "with_tier_positions", "tier_order_key",
           "parse_positions", "order_known"]

#: The engine's tiers, in its document order.
TIER_ORDER = ("short_term", "medium_term", "long_term")

T = TypeVar("T")

_KNOWN = {"item_id", "text", "embedding", "tier", "tiers", "positions", "unit", "evicted",
          "owner_subject", "session_id", "created_at", "updated_at"}


def item_tier_list(item: MemoryItem) -> tuple[str, ...]:
    """The tiers an item sits in: ``tiers``, else ``tier``, else short_term."""
    if item.tiers:
        return tuple(dict.fromkeys(item.tiers))
    return (item.tier,) if item.tier else ("short_term",)


def parse_positions(value: Any, what: str = "positions") -> dict[str, int]:
    """``{tier: non-negative int}`` from a record (None or {} for none)."""
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be an object {{tier: position}}")
    out: dict[str, int] = {}
    for tier, pos in value.items():
        if isinstance(pos, bool) or not isinstance(pos, int) or pos < 0:
            raise ValueError(f"{what}[{tier!r}] must be a non-negative integer")
        out[str(tier)] = pos
    return out


def with_tier_positions(items: Sequence[MemoryItem]) -> list[MemoryItem]:
    """The items with ``positions`` filled in for every tier they sit in: a position the
    item already carries is kept, any other is its index among the items of that tier in
    the order given (the order a sync hands them over is the tier's order)."""
    from dataclasses import replace

    counters: dict[str, int] = {}
    out: list[MemoryItem] = []
    for item in items:
        positions = dict(item.positions or {})
        for tier in item_tier_list(item):
            index = counters.get(tier, 0)
            counters[tier] = index + 1
            positions.setdefault(tier, index)
        out.append(item if positions == dict(item.positions or {}) else replace(item, positions=positions))
    return out


def tier_order_key(item: MemoryItem) -> tuple:
    """Sort key listing items in the engine's order: by the first tier they sit in (in
    :data:`TIER_ORDER`, unknown tiers after), then their position there, then item id
    (items without a recorded position keep the id order, after those with one)."""
    tiers = item_tier_list(item)
    first = min(tiers, key=lambda t: TIER_ORDER.index(t) if t in TIER_ORDER else len(TIER_ORDER))
    rank = TIER_ORDER.index(first) if first in TIER_ORDER else len(TIER_ORDER)
    pos = (item.positions or {}).get(first)
    return (rank, pos is None, pos if pos is not None else 0, item.item_id)


def order_known(items: Sequence[MemoryItem]) -> bool:
    """Whether every item carries its position in each of its tiers."""
    return all(set(item_tier_list(i)) <= set(i.positions or {}) for i in items)


def _time(value: Any, name: str) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        stamp = value
    else:
        try:
            stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{name} is not an ISO 8601 timestamp: {value!r}") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def parse_vector(value: Any, what: str = "embedding") -> tuple[float, ...]:
    """A finite, non-empty list of numbers as a float tuple."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"{what} must be a list of numbers")
    try:
        vector = tuple(float(x) for x in value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a list of numbers") from None
    if not vector:
        raise ValueError(f"{what} must not be empty")
    if any(math.isnan(x) or math.isinf(x) for x in vector):
        raise ValueError(f"{what} must not contain NaN or infinity")
    return vector


def item_from_record(record: Mapping[str, Any]) -> MemoryItem:
    """A MemoryItem from a mirror document or a JSONL object (unknown keys ignored)."""
    item_id = record.get("item_id")
    if not isinstance(item_id, str) or not item_id:
        raise ValueError("item_id must be a non-empty string")
    embedding = record.get("embedding")
    return MemoryItem(
        item_id=item_id,
        text=str(record.get("text") or ""),
        embedding=parse_vector(embedding) if embedding is not None else None,
        tier=record.get("tier") or None,
        tiers=tuple(record.get("tiers") or ()),
        unit=dict(record.get("unit") or {}),
        evicted=bool(record.get("evicted", False)),
        created_at=_time(record.get("created_at"), "created_at"),
        updated_at=_time(record.get("updated_at"), "updated_at"),
        owner_subject=record.get("owner_subject") or None,
        session_id=record.get("session_id") or None,
        positions=parse_positions(record.get("positions")),
    )


def item_to_record(item: MemoryItem) -> dict[str, Any]:
    """The JSONL shape of an item (the inverse of :func:`item_from_record`);
    ``positions`` only when the item carries any."""
    record: dict[str, Any] = {
        "item_id": item.item_id,
        "text": item.text,
        "embedding": [float(x) for x in item.embedding] if item.embedding is not None else None,
        "tier": item.tier,
        "tiers": list(item.tiers),
        "evicted": item.evicted,
        "owner_subject": item.owner_subject,
        "session_id": item.session_id,
        "created_at": item.created_at.isoformat() if item.created_at else None,
        "updated_at": item.updated_at.isoformat() if item.updated_at else None,
    }
    if item.positions:
        record["positions"] = dict(item.positions)
    return record


def read_jsonl(path: str | Path, parse: Callable[[dict[str, Any]], T]) -> list[T]:
    """``parse`` applied to each JSON object line of a file, in order. Blank lines and
    lines starting with ``#`` are skipped; a ValueError (bad JSON, not an object, or
    raised by ``parse``) is re-raised prefixed with ``path:line``."""
    out: list[T] = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("expected a JSON object")
                out.append(parse(record))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: {exc}") from None
    return out


def load_items_jsonl(path: str | Path) -> tuple[MemoryItem, ...]:
    """Every item of a JSONL file; errors name the line."""
    return tuple(read_jsonl(path, item_from_record))


def find_item(items: Sequence[MemoryItem], item_id: str) -> MemoryItem | None:
    for item in items:
        if item.item_id == item_id:
            return item
    return None
