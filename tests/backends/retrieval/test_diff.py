"""The diff engine: side-by-side rows, metrics, notes read from the server retriever's
declarations, multi-query aggregates and gates, queries and items files."""

from __future__ import annotations

import json

import pytest

from backends.contract import MemoryItem, MemoryUnit, RetrievalContext
from backends.retrieval.diff import (
    QuerySpec,
    diff_queries,
    diff_query,
    divergence_notes,
    load_queries_jsonl,
    resolve_query,
    run_side,
)
from backends.retrieval.items import item_to_record, load_items_jsonl

ITEMS = (
    MemoryItem("a", "alpha apples", (1.0, 0.0), session_id="s1"),
    MemoryItem("b", "beta bananas", (0.9, 0.1)),
    MemoryItem("c", "gamma cherries", (0.5, 0.5)),
    MemoryItem("d", "delta dates", (0.0, 1.0)),
    MemoryItem("gone", "evicted", (1.0, 0.0), evicted=True),
)


class FakeServer:
    """Returns a fixed ranking; records the context it was given."""

    name = "fake-server"

    def __init__(self, ranking, inert=frozenset({"rrf_k", "rrf_weights", "memory", "stage"}),
                 signals=("semantic", "recency")):
        self.ranking = ranking
        self.inert_fields = frozenset(inert)
        self.signals = signals
        self.seen = []

    def search(self, ctx):
        self.seen.append(ctx)
        return [MemoryUnit(item_id=i, text=f"text of {i}", score=1.0 / r)
                for r, i in enumerate(self.ranking[: ctx.top_k], 1)]


def ctx(**kw):
    kw.setdefault("query_embedding", (1.0, 0.0))
    kw.setdefault("top_k", 3)
    return RetrievalContext(session_id="s1", **kw)


def test_rows_metrics_and_presence():
    server = FakeServer(["b", "a", "zz"])
    result = diff_query(ctx(), items=ITEMS, server=server)
    assert [u.item_id for u in result.in_process] == ["a", "b", "c"]
    first, third = result.rows[0], result.rows[2]
    assert (first.in_process_item, first.in_process_presence) == ("a", "both")
    assert (first.server_item, first.server_presence) == ("b", "both")
    assert (third.in_process_item, third.in_process_presence) == ("c", "in-process only")
    assert (third.server_item, third.server_presence) == ("zz", "server only")
    m = result.metrics
    assert (m.k, m.common, m.only_a, m.only_b) == (3, 2, 1, 1)
    assert m.jaccard == pytest.approx(2 / 4) and m.overlap == pytest.approx(2 / 3)
    assert m.kendall_tau_b == -1.0
    assert {(mv.item, mv.delta) for mv in result.moves if mv.side == "both"} == {("a", 1), ("b", -1)}
    data = result.to_dict()
    json.dumps(data)
    assert data["moves"][2]["side"] == "in-process only"


def test_server_gets_no_memory_or_trace_when_it_declares_them_inert():
    server = FakeServer(["a"])
    run_side("server", ctx(stage=lambda *a: None), items=ITEMS, server=server)
    assert server.seen[-1].memory is None and server.seen[-1].stage is None
    honest = FakeServer(["a"], inert=frozenset())
    run_side("server", ctx(), items=ITEMS, server=honest)
    assert len(honest.seen[-1].memory) == len(ITEMS)
    with pytest.raises(LookupError):
        run_side("server", ctx(), items=ITEMS, server=None)
    with pytest.raises(ValueError):
        run_side("sideways", ctx(), items=ITEMS, server=server)


def test_notes_come_from_the_declarations_not_from_a_list():
    server = FakeServer(["zz", "a"])
    codes = [n.code for n in diff_query(ctx(rrf_k=30), items=ITEMS, server=server).notes]
    assert codes.count("inert-field") == 3  # rrf_k, rrf_weights, stage
    assert "mirror-lag" in codes and "recency-server-only" in codes and "not-live" in codes
    messages = " ".join(n.message for n in divergence_notes(ctx(rrf_k=30), server))
    assert "rrf_k=30" in messages and "rrf_weights" in messages
    assert "you set rrf_weights" not in messages  # left at its default

    plain = FakeServer(["a"], inert=frozenset({"fuse_with_bm25"}), signals=("semantic",))
    notes = divergence_notes(ctx(), plain)
    assert [n.code for n in notes] == ["inert-field"] and "fuse_with_bm25" in notes[0].message
    bare = type("Bare", (), {"name": "bare", "search": lambda self, c: []})()
    notes = divergence_notes(ctx(use_bm25=True), bare, items_origin="items.jsonl")
    assert [n.code for n in notes] == ["bm25-without-text", "items-file"]
    assert divergence_notes(ctx(), bare) == []


def test_evicted_items_are_not_live_for_the_not_live_note():
    result = diff_query(ctx(), items=ITEMS, server=FakeServer(["gone"], inert=frozenset(), signals=()))
    # ITEMS carry no tier positions but sit in one tier: the order given is their position,
    # so no order note beside the one tested
    assert [n.code for n in result.notes] == ["not-live"]
    assert "gone" in result.notes[0].message


def test_many_queries_aggregate_and_gate(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_text("\n".join([
        json.dumps({"id": "same", "vector": [1.0, 0.0]}),
        "# a comment",
        json.dumps({"id": "like-d", "like": "d", "top_k": 2}),
        "",
    ]))
    specs = load_queries_jsonl(path)
    assert [s.query_id for s in specs] == ["same", "like-d"]
    server = FakeServer(["a", "b", "c"], inert=frozenset(), signals=())
    report = diff_queries(ctx(), specs, items=ITEMS, server=server, min_rbo=0.5, min_jaccard=0.9)
    same, like = report.queries
    assert same.metrics.rbo == pytest.approx(1.0) and same.metrics.jaccard == 1.0
    assert [u.item_id for u in like.in_process] == ["d", "c"]
    assert like.metrics.jaccard == 0.0
    agg = report.aggregate
    assert agg["queries"] == 2 and agg["min_rbo"] == like.metrics.rbo == 0.0
    assert agg["mean_jaccard"] == pytest.approx(0.5) and agg["worst_query"] == "like-d"
    assert agg["tau_undefined"] == 1
    assert not report.passed
    assert {(m.query_id, m.metric) for m in report.misses} == {("like-d", "rbo"), ("like-d", "jaccard")}
    assert report.to_dict()["gate"]["passed"] is False
    assert diff_queries(ctx(), specs[:1], items=ITEMS, server=server, min_rbo=0.99).passed


@pytest.mark.parametrize("line,fragment", [
    ('{"id": "x"}', "needs text"),
    ('{"query": "a", "colour": 1}', "unknown key"),
    ('{"vector": "nope"}', "list of numbers"),
    ('{"vector": [1], "like": "a"}', "either"),
    ('{"query": "a", "top_k": "3"}', "integer"),
    ('[1, 2]', "JSON object"),
    ('{not json', "line"),
])
def test_queries_file_errors_name_the_line(tmp_path, line, fragment):
    path = tmp_path / "q.jsonl"
    path.write_text('{"query": "fine"}\n' + line + "\n")
    with pytest.raises(ValueError) as info:
        load_queries_jsonl(path)
    assert ":2:" in str(info.value)
    assert fragment in str(info.value) or fragment == "line"


def test_resolve_like_borrows_vector_and_text():
    assert resolve_query(QuerySpec("q", like="c"), ITEMS) == ((0.5, 0.5), "gamma cherries")
    assert resolve_query(QuerySpec("q", text="own", like="c"), ITEMS)[1] == "own"
    with pytest.raises(LookupError):
        resolve_query(QuerySpec("q", like="nope"), ITEMS)
    with pytest.raises(LookupError):
        resolve_query(QuerySpec("q", like="x"), (MemoryItem("x", "no vector"),))


def test_items_file_round_trip(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(item_to_record(i)) for i in ITEMS) + "\n")
    loaded = load_items_jsonl(path)
    assert [i.item_id for i in loaded] == [i.item_id for i in ITEMS]
    assert loaded[0].embedding == (1.0, 0.0) and loaded[4].evicted is True
    path.write_text('{"item_id": "a", "text": "t", "embedding": [1, "x"]}\n')
    with pytest.raises(ValueError, match=":1:"):
        load_items_jsonl(path)
