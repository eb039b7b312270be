"""#23 Build 9: on pgvector, deleting a session (`delete`, `sessions delete`, `sessions
prune`) removes its item-mirror rows in the same transaction as the state row, so no
orphan row is left for server-side retrieval to serve. Real PostgreSQL from the suite."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from typer.testing import CliRunner

from backends.contract import MemoryItem
from semvecctl.app import app

pytestmark = pytest.mark.postgres


def _items(n: int = 3):
    return [MemoryItem(item_id=f"i{k}", text=f"t{k}", embedding=(0.5,) * 8) for k in range(n)]


def _rows(url: str, sid: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM semvec_memory_items WHERE session_id = %s",
                            (sid,)).fetchone()[0]


@pytest.fixture
def adapter(pgvector_adapter_factory):
    made = pgvector_adapter_factory()
    made.ensure_schema()
    return made


def test_delete_removes_the_sessions_item_rows_and_only_its(adapter, pgvector_url):
    tag = uuid.uuid4().hex[:8]
    sid, other = f"{tag}-s", f"{tag}-o"
    for s in (sid, other):
        adapter.state_store().save(s, b"x", expected_version=None, owner_subject="acme")
        adapter.sync_items(s, _items(), owner_subject="acme")
    adapter.sync_items(sid, [MemoryItem(item_id="z", text="z", embedding=(0.1,) * 8,
                                        evicted=True)], owner_subject="globex")
    assert adapter.state_store().delete(sid, owner_subject="acme", expected_version=1) is True
    assert _rows(pgvector_url, sid) == 0
    assert _rows(pgvector_url, other) == 3
    # a refused delete (another owner) leaves state and items alone
    assert adapter.state_store().delete(other, owner_subject="globex") is False
    assert _rows(pgvector_url, other) == 3


def test_the_state_row_and_item_rows_go_in_one_transaction(adapter, pgvector_url):
    """An item delete that fails rolls the state delete back with it."""
    tag = uuid.uuid4().hex[:8]
    sid = f"{tag}-s"
    adapter.state_store().save(sid, b"x", expected_version=None)
    adapter.sync_items(sid, _items())
    fn, trigger = f"refuse_{tag}", f"refuse_{tag}_t"
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute(f"CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$")
        conn.execute(f"CREATE TRIGGER {trigger} BEFORE DELETE ON semvec_memory_items "
                     f"FOR EACH ROW WHEN (OLD.session_id = '{sid}') EXECUTE FUNCTION {fn}()")
    try:
        with pytest.raises(Exception, match="refused by the test"):
            adapter.state_store().delete(sid)
        assert adapter.state_store().load(sid) is not None
        assert _rows(pgvector_url, sid) == 3
    finally:
        with psycopg.connect(pgvector_url, autocommit=True) as conn:
            conn.execute(f"DROP TRIGGER {trigger} ON semvec_memory_items")
            conn.execute(f"DROP FUNCTION {fn}()")
    assert adapter.state_store().delete(sid) is True
    assert _rows(pgvector_url, sid) == 0


def test_sessions_delete_and_prune_leave_no_item_rows(adapter, pgvector_url):
    tag = uuid.uuid4().hex[:8]
    gone, idle = f"{tag}-gone", f"{tag}-idle"
    for s in (gone, idle):
        adapter.state_store().save(s, b"x", expected_version=None)
        adapter.sync_items(s, _items())
    with psycopg.connect(pgvector_url) as conn:
        conn.execute("UPDATE semvec_session_state SET updated_at = updated_at - interval '2 days'"
                     " WHERE session_id = %s", (idle,))
    base = ["--uri", pgvector_url, "--backend", "pgvector"]
    deleted = CliRunner().invoke(app, ["sessions", "delete", gone, *base, "--apply", "--yes"])
    assert deleted.exit_code == 0, deleted.output
    assert _rows(pgvector_url, gone) == 0
    pruned = CliRunner().invoke(app, ["sessions", "prune", "--idle-for", "1d", "--match",
                                      f"{tag}-*", "--apply", "--yes", "-o", "jsonl", *base])
    assert pruned.exit_code == 0, pruned.output
    assert [json.loads(line)["session_id"] for line in pruned.stdout.splitlines()] == [idle]
    assert _rows(pgvector_url, idle) == 0
