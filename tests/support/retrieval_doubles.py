"""Test-only adapters for the ``retrieve`` commands (loaded with ``--adapter``).

``FakeServerRetriever`` stands in for a server-side retriever (MongoDB's is built
elsewhere): it ranks the seeded items by cosine plus a recency tie-in, and declares
``inert_fields`` and ``signals`` the way a real one must. Sessions are seeded per test
under unique ids in ``SEEDED`` (CliRunner runs in the test's own process).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Iterator

from backends.contract import UNSCOPED, MemoryItem, MemoryUnit, owner_matches
from backends.memory import MemoryBackendAdapter

#: session id -> items; server-side view may differ (``SERVER_EXTRA``: mirror-only items)
SEEDED: dict[str, tuple[MemoryItem, ...]] = {}
SERVER_EXTRA: dict[str, tuple[MemoryItem, ...]] = {}


class FakeServerRetriever:
    name = "fake-server"
    inert_fields = frozenset({"rrf_k", "rrf_weights", "fuse_with_bm25", "memory", "stage"})
    signals = ("semantic", "lexical", "recency")

    def search(self, ctx) -> list[MemoryUnit]:
        pool = SEEDED.get(ctx.session_id, ()) + SERVER_EXTRA.get(ctx.session_id, ())
        live = [i for i in pool if not i.evicted and owner_matches(i.owner_subject, ctx.owner_subject)]

        def cosine(item: MemoryItem) -> float:
            if ctx.query_embedding is None or item.embedding is None:
                return 0.0
            dot = sum(a * b for a, b in zip(item.embedding, ctx.query_embedding))
            norm = math.sqrt(sum(a * a for a in item.embedding)) * math.sqrt(
                sum(b * b for b in ctx.query_embedding))
            return dot / norm if norm else 0.0

        # "recency": a later item id wins a small bonus, so the rankings really differ
        scored = sorted(live, key=lambda i: (-(cosine(i) + 0.05 * i.item_id.count("new")), i.item_id))
        return [MemoryUnit(item_id=i.item_id, text=i.text, score=cosine(i), tier=i.tier)
                for i in scored[: ctx.top_k]]


class ServerAdapter(MemoryBackendAdapter):
    """The memory adapter plus live-item enumeration and a server-side retriever."""

    name = "fake-server-backend"

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._retriever = FakeServerRetriever()

    def server_retriever(self) -> FakeServerRetriever:
        return self._retriever

    def iter_live_items(self, session_id: str, *, owner_subject: Any = UNSCOPED) -> Iterator[MemoryItem]:
        for item in SEEDED.get(session_id, ()):
            if not item.evicted and owner_matches(item.owner_subject, owner_subject):
                yield item


class NoServerAdapter(ServerAdapter):
    name = "no-server-backend"

    def server_retriever(self) -> None:
        return None


def server_adapter(uri: str | None = None) -> ServerAdapter:
    return ServerAdapter(uri)


def no_server_adapter(uri: str | None = None) -> NoServerAdapter:
    return NoServerAdapter(uri)


#: session id -> item ids the approximate index of ``ApproxRetriever`` never finds
MISSED: dict[str, frozenset[str]] = {}


class ApproxRetriever(FakeServerRetriever):
    """A server side with an approximate index that misses the items in ``MISSED``, and
    the exact search ``retrieve diff --exact`` compares it with (plain cosine)."""

    name = "approx-server"

    def search(self, ctx) -> list[MemoryUnit]:
        missed = MISSED.get(ctx.session_id, frozenset())
        return [u for u in self.exact_search(replace(ctx, top_k=ctx.top_k + len(missed)))
                if u.item_id not in missed][: ctx.top_k]

    def exact_search(self, ctx) -> list[MemoryUnit]:
        everything = super().search(replace(ctx, top_k=10_000))  # score = plain cosine
        return sorted(everything, key=lambda u: (-u.score, u.item_id))[: ctx.top_k]


class ApproxServerAdapter(ServerAdapter):
    name = "approx-server-backend"

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._retriever = ApproxRetriever()


def approx_server_adapter(uri: str | None = None) -> ApproxServerAdapter:
    return ApproxServerAdapter(uri)


class MirrorLikeInProcess(FakeServerRetriever):
    """A server side that declares what a mirror-reading retriever declares (inert
    memory and fusion knobs, a recency signal) yet ranks exactly as in-process does over
    the seeded items: a diff against it must find nothing to blame."""

    name = "identical-server"

    def search(self, ctx) -> list[MemoryUnit]:
        from backends.retrieval.inprocess import InProcessRetrievalBackend

        return InProcessRetrievalBackend().search(
            replace(ctx, memory=SEEDED.get(ctx.session_id, ()), stage=None))


class IdenticalServerAdapter(ServerAdapter):
    name = "identical-server-backend"

    def __init__(self, uri: str | None = None) -> None:
        super().__init__(uri)
        self._retriever = MirrorLikeInProcess()


def identical_server_adapter(uri: str | None = None) -> IdenticalServerAdapter:
    return IdenticalServerAdapter(uri)
