"""Server-side retrieval: session and owner filters apply before top-k.

Seeding needs the adapter's ItemMirror (``sync_items``) and a way to remove what was
seeded (``purge_items(session_id)``); without both the group is not applicable, because
the suite must not leave rows behind in a store it was pointed at.
"""

from __future__ import annotations

import math
import time

from backends.conformance.catalogue import applies, case
from backends.conformance.context import CaseContext
from backends.contract import RetrievalContext, server_retriever_of


@applies("retrieval")
def _can_retrieve(adapter) -> str | None:
    if server_retriever_of(adapter) is None:
        return ("the adapter offers no server-side retriever (server_retriever()): retrieval "
                "runs in-process, in the engine")
    return None  # and the capabilities of GROUP_CAPABILITIES["retrieval"]


def _configured_dimensions(adapter) -> int | None:
    """The embedding width the store was configured for, when the adapter says."""
    for holder in (adapter, getattr(adapter, "settings", None), getattr(adapter, "config", None)):
        value = getattr(holder, "dimensions", None) if holder is not None else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 2:
            return value
    return None


def _unit(dims: int, axis: int, lean: float = 0.0) -> tuple[float, ...]:
    """A unit vector on ``axis``, leaning towards the next axis by ``lean`` (0 = exact)."""
    vec = [0.0] * dims
    vec[axis % dims] = 1.0
    vec[(axis + 1) % dims] = lean
    norm = math.sqrt(sum(x * x for x in vec))
    return tuple(x / norm for x in vec)


@case("retrieval")
def filter_before_top_k(ctx: CaseContext) -> None:
    """Another tenant's closer, identical items never crowd a tenant's own out of top-k."""
    dims = ctx.options.retrieval_dimensions or _configured_dimensions(ctx.adapter) or 8
    retriever = server_retriever_of(ctx.adapter)
    owner_a, owner_b = ctx.owner("tenant-a"), ctx.owner("tenant-b")
    sid_a, sid_b = ctx.item_session("a"), ctx.item_session("b")
    query = _unit(dims, 0)
    # each with a unit payload: the engine's Mongo final read drops rows without one
    items_a = [ctx.item(f"a-{n}", f"identical content {n}", _unit(dims, 0, 0.5),
                        unit={"text": f"identical content {n}"}) for n in range(3)]
    items_b = [ctx.item(f"b-{n}", f"identical content {n}", query,
                        unit={"text": f"identical content {n}"}) for n in range(10)]
    ctx.call("sync_items for tenant a", lambda: ctx.adapter.sync_items(
        sid_a, items_a, owner_subject=owner_a))
    ctx.call("sync_items for tenant b", lambda: ctx.adapter.sync_items(
        sid_b, items_b, owner_subject=owner_b))

    def search(session_id, owner, top_k=3):
        rc = RetrievalContext(session_id=session_id, query_embedding=query,
                              query_text="identical content", top_k=top_k, owner_subject=owner)
        return ctx.call(f"search({session_id!r}, owner={owner!r})", lambda: retriever.search(rc))

    deadline = time.monotonic() + ctx.options.retrieval_wait
    results = search(sid_a, owner_a)
    while len(results) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
        results = search(sid_a, owner_a)
    got = sorted(u.item_id for u in results)
    ctx.expect_equal(got, sorted(i.item_id for i in items_a),
                     "top-3 for tenant a while tenant b holds 10 closer identical items")
    for unit in results:
        ctx.expect(unit.session_id in (None, sid_a) and unit.owner_subject in (None, owner_a),
                   "scope of a returned unit", f"session {sid_a}, owner {owner_a}",
                   f"session {unit.session_id}, owner {unit.owner_subject}")
    ctx.expect_equal(search(sid_a, owner_b), [], "tenant a's session searched as tenant b")
    ctx.expect_equal(search(sid_a, None), [], "tenant a's session searched for unowned items")
    got_b = search(sid_b, owner_b, top_k=4)
    ctx.expect(len(got_b) == 4 and all(u.item_id.startswith(f"{ctx.prefix}b-") for u in got_b),
               "top-4 for tenant b", "4 of tenant b's items",
               [u.item_id for u in got_b])
