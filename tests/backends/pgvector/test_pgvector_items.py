"""The pgvector item mirror (sync by diff) and live-item reads on a real PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from backends.contract import ItemMirror, ItemSyncResult, LiveItemSource, MemoryItem

pytestmark = pytest.mark.postgres


@pytest.fixture
def adapter(pgvector_adapter_factory):
    return pgvector_adapter_factory(dimensions=4)


def item(i: int, text: str | None = None, **kw) -> MemoryItem:
    return MemoryItem(item_id=f"i{i}", text=text or f"item number {i}",
                      embedding=(1.0, float(i), 0.5, 0.25), **kw)


def test_adapter_exposes_the_item_seams(adapter):
    assert isinstance(adapter, ItemMirror) and isinstance(adapter, LiveItemSource)


def test_sync_adds_updates_evicts_and_is_idempotent(adapter):
    first = [item(1), item(2, tier="short", tiers=("short",), unit={"role": "user"}), item(3)]
    assert adapter.sync_items("s", first, owner_subject="acme") == ItemSyncResult(added=3)
    assert adapter.sync_items("s", first, owner_subject="acme") == ItemSyncResult(unchanged=3)

    second = [item(1), item(2, "changed text", tier="long", tiers=("short", "long")), item(4)]
    assert adapter.sync_items("s", second, owner_subject="acme") == ItemSyncResult(
        added=1, updated=1, evicted=1, unchanged=1
    )
    live = {i.item_id: i for i in adapter.iter_live_items("s")}
    assert set(live) == {"i1", "i2", "i4"}
    assert live["i2"].text == "changed text" and live["i2"].tier == "long"
    assert live["i2"].tiers == ("short", "long") and live["i2"].unit == {}
    assert live["i1"].embedding == (1.0, 1.0, 0.5, 0.25)
    assert live["i1"].owner_subject == "acme" and live["i1"].session_id == "s"
    assert live["i1"].created_at.tzinfo is not None
    # evicting again is a no-op; re-adding an evicted id revives it
    assert adapter.sync_items("s", second, owner_subject="acme") == ItemSyncResult(unchanged=3)
    assert adapter.sync_items("s", [*second, item(3)], owner_subject="acme").updated == 1
    assert "i3" in {i.item_id for i in adapter.iter_live_items("s")}


def test_live_items_obey_the_owner_filter(adapter):
    adapter.sync_items("owned", [item(1)], owner_subject="acme")
    adapter.sync_items("unowned", [item(1)])
    assert [i.item_id for i in adapter.iter_live_items("owned", owner_subject="acme")] == ["i1"]
    assert list(adapter.iter_live_items("owned", owner_subject="other")) == []
    assert list(adapter.iter_live_items("owned", owner_subject=None)) == []
    assert [i.item_id for i in adapter.iter_live_items("unowned", owner_subject=None)] == ["i1"]


def test_given_timestamps_are_kept(adapter):
    when = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    adapter.sync_items("s", [item(1, updated_at=when, created_at=when - timedelta(days=1))])
    (stored,) = adapter.iter_live_items("s")
    assert stored.updated_at == when and stored.created_at == when - timedelta(days=1)


def test_items_without_embeddings_are_kept(adapter):
    adapter.sync_items("s", [MemoryItem(item_id="t", text="text only")])
    (stored,) = adapter.iter_live_items("s")
    assert stored.embedding is None


@pytest.mark.parametrize(
    "bad",
    [
        [MemoryItem(item_id="x", text="t", embedding=(1.0, 2.0))],  # wrong dimension
        [MemoryItem(item_id="x", text="t", embedding=(1.0, 2.0, float("inf"), 0.0))],
        [MemoryItem(item_id="", text="t")],
        [MemoryItem(item_id="x", text="a"), MemoryItem(item_id="x", text="b")],
    ],
)
def test_bad_items_are_refused_before_any_write(adapter, bad):
    adapter.sync_items("s", [item(1)])
    with pytest.raises((ValueError, TypeError)):
        adapter.sync_items("s", bad)
    assert [i.item_id for i in adapter.iter_live_items("s")] == ["i1"]
