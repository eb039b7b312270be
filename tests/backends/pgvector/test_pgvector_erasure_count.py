"""The engine's erasure deletes a session's state first and then asks ``erasure_backend()``
to remove what the backend keeps beyond it (ENGINE-WIRE section 6). pgvector's state delete
takes the session's item rows in its own transaction (no orphan a search could serve), so
the hook reports those rows: counted once, on the suite's real PostgreSQL."""

from __future__ import annotations

import pytest

from backends.contract import MemoryItem

pytestmark = pytest.mark.postgres


def test_item_rows_a_state_delete_took_are_reported_once_by_the_erasure_hook(pgvector_adapter_factory):
    adapter = pgvector_adapter_factory()
    items = [MemoryItem(item_id=f"i{n}", text=f"t{n}", embedding=(0.5,) * 8) for n in range(3)]
    for sid in ("gone", "kept"):
        adapter.state_store().save(sid, b"s", expected_version=None, owner_subject="acme")
        adapter.sync_items(sid, items, owner_subject="acme")
    assert adapter.state_store().delete("gone") is True
    eraser = adapter.erasure_backend()
    assert eraser.erase_sessions(["gone"], user_id=None, scope=None) == 3
    assert eraser.erase_sessions(["gone"], user_id=None, scope=None) == 0  # once
    assert len(list(adapter.iter_live_items("kept"))) == 3
    assert eraser.erase_sessions(["kept"], user_id=None, scope=None) == 3
