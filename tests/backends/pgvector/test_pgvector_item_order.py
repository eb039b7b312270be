"""The pgvector item mirror keeps the engine's tier order (each item's position in every
tier it sits in) and lists live items in it; a table from before the ``tier_positions``
column keeps working and gets the column when the items group is provisioned. Real
PostgreSQL."""

from __future__ import annotations

import pytest

from backends.contract import MemoryItem

pytestmark = pytest.mark.postgres


def item(item_id: str, tier: str, *tiers: str, **kw) -> MemoryItem:
    return MemoryItem(item_id=item_id, text=f"text {item_id}", embedding=(1.0, 0.0, 0.5, 0.25),
                      tier=tier, tiers=tiers or (tier,), **kw)


# engine order: short z, a; medium m, b (b also in long); long y, b
SYNCED = [item("z", "short_term"), item("a", "short_term"), item("m", "medium_term"),
          item("b", "long_term", "medium_term", "long_term"), item("y", "long_term")]


def _drop_positions_column(adapter) -> None:
    with adapter._db.connection() as conn:
        conn.execute(f"ALTER TABLE {adapter._db.tables.of('semvec_memory_items')} DROP COLUMN tier_positions")


def test_positions_are_recorded_and_live_items_come_back_in_tier_order(pgvector_adapter_factory):
    adapter = pgvector_adapter_factory(dimensions=4)
    adapter.sync_items("s", SYNCED)
    live = list(adapter.iter_live_items("s"))
    assert [i.item_id for i in live] == ["z", "a", "m", "b", "y"]
    by_id = {i.item_id: i for i in live}
    assert by_id["b"].positions == {"medium_term": 1, "long_term": 0}
    assert by_id["y"].positions == {"long_term": 1}
    # the order is content: a reordered tier is an update, the same order is not
    assert adapter.sync_items("s", SYNCED).unchanged == 5
    swapped = [SYNCED[1], SYNCED[0], *SYNCED[2:]]
    assert adapter.sync_items("s", swapped).updated == 2
    assert [i.item_id for i in adapter.iter_live_items("s")][:2] == ["a", "z"]
    # an item's own positions win over the order it is handed over in
    adapter.sync_items("s", [item("q", "short_term", positions={"short_term": 9}),
                             item("r", "short_term")])
    assert [(i.item_id, i.positions) for i in adapter.iter_live_items("s")] == [
        ("r", {"short_term": 1}), ("q", {"short_term": 9})]


def test_a_table_without_the_column_works_and_is_upgraded_by_provisioning(
        pgvector_adapter_factory):
    first = pgvector_adapter_factory(dimensions=4)
    first.ensure_schema()
    first.ensure_indexes()
    _drop_positions_column(first)

    legacy = pgvector_adapter_factory(dimensions=4, create_tables=False)
    legacy.sync_items("s", SYNCED)
    live = list(legacy.iter_live_items("s"))
    assert sorted(i.item_id for i in live) == ["a", "b", "m", "y", "z"]
    assert all(i.positions == {} for i in live)  # the store cannot tell the order
    assert legacy.sync_items("s", SYNCED).unchanged == 5
    assert all(r.status in ("ok", "extra") for r in legacy.validate_indexes()), \
        [(r.name, r.status) for r in legacy.validate_indexes()]

    upgraded = pgvector_adapter_factory(dimensions=4)
    upgraded.ensure_schema()  # what `indexes ensure` runs: adds the column
    assert upgraded.sync_items("s", SYNCED).updated == 5  # positions recorded now
    assert [i.item_id for i in upgraded.iter_live_items("s")] == ["z", "a", "m", "b", "y"]
    assert all(r.status in ("ok", "extra") for r in upgraded.validate_indexes())
