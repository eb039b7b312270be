"""The engine's optional `erasure_backend()` (ENGINE-WIRE §6) on the backends that keep an
item mirror, driven exactly as the engine's ErasureCoordinator drives it: no arguments to
`erasure_backend()`, then `erase_sessions(ids, user_id=..., scope=...)` with the engine's
scope object (its own `OwnerScope` when the engine is importable, else a frozen double
with the same `owner_subject` property). pgvector on the suite's real PostgreSQL, MongoDB
on mongomock (a fake: no real MongoDB runs here)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from backends.contract import MemoryItem
from tests.support.fixtures.mongo import cli_mongo, db_name, mongo_client  # noqa: F401
from tests.support.maintenance import make_target


@dataclass(frozen=True)
class _Scope:
    tenant: str
    agent: str | None = None

    @property
    def owner_subject(self) -> str:
        return self.tenant if self.agent is None else f"{self.tenant}/{self.agent}"


def scope(tenant: str):
    try:
        from semvec.api.owner_scope import OwnerScope  # the engine's, when installed
    except ImportError:
        return _Scope(tenant)
    return OwnerScope(tenant)


def _items(n: int = 3):
    return [MemoryItem(item_id=f"i{k}", text=f"t{k}", embedding=(0.5,) * 8) for k in range(n)]


@pytest.fixture(params=[pytest.param("pgvector", marks=pytest.mark.postgres), "mongo"])
def target(request):
    return make_target(request, request.param,
                       **({"item_sync": True} if request.param == "mongo" else {}))


def test_erase_sessions_removes_the_scoped_rows_of_those_sessions_only(target):
    adapter = target.adapter
    adapter.sync_items("e-s1", _items(), owner_subject="acme")
    adapter.sync_items("e-s1", [MemoryItem(item_id="x", text="x", embedding=(0.1,) * 8)],
                       owner_subject="globex")  # not the tenant's: stays
    adapter.sync_items("e-s2", _items(2), owner_subject="acme")
    adapter.sync_items("e-s3", _items(), owner_subject="acme")  # not named: stays
    eraser = adapter.erasure_backend()
    assert eraser is not None
    assert eraser.erase_sessions([], user_id="alice", scope=scope("acme")) == 0
    removed = eraser.erase_sessions(["e-s1", "e-s2"], user_id="alice", scope=scope("acme"))
    assert removed == 5
    assert list(adapter.iter_live_items("e-s1", owner_subject="acme")) == []
    assert [i.item_id for i in adapter.iter_live_items("e-s1")] == ["x"]
    assert list(adapter.iter_live_items("e-s2")) == []
    assert len(list(adapter.iter_live_items("e-s3"))) == 3
    # user_id=None: every subject in those sessions (items carry no user id either way)
    assert eraser.erase_sessions(["e-s3"], user_id=None, scope=scope("acme")) == 3
    # scope=None: every owner's rows
    assert eraser.erase_sessions(["e-s1"], user_id=None, scope=None) == 1
    assert list(adapter.iter_live_items("e-s1")) == []
