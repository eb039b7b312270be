"""``retrieve diff --exact``: recall@k and Jaccard@k of the server side against an exact
search of the same store and filter, per query and aggregated, and ``--min-recall`` as a
gate. Hand-built cases where the approximate side is known to miss an item."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryItem, RetrievalContext
from backends.retrieval.diff import QuerySpec, diff_queries, diff_query, run_side
from backends.retrieval.metrics import compare_to_exact, recall_at_k
from semvecctl.app import app
from tests.support import retrieval_doubles as doubles

APPROX = ["--adapter", "tests.support.retrieval_doubles:approx_server_adapter"]

ITEMS = (
    MemoryItem("a", "apples are red", (1.0, 0.0)),
    MemoryItem("b", "bananas are yellow", (0.9, 0.3)),
    MemoryItem("c", "cherries are dark", (0.7, 0.7)),
    MemoryItem("d", "dates are sweet", (0.0, 1.0)),
    MemoryItem("e", "elderberries", (-1.0, 0.0)),
)


@pytest.fixture
def session():
    sid = f"s-{uuid.uuid4().hex}"
    doubles.SEEDED[sid] = ITEMS
    doubles.MISSED[sid] = frozenset({"b"})  # the approximate index never finds b
    yield sid
    doubles.SEEDED.pop(sid, None)
    doubles.MISSED.pop(sid, None)


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_recall_and_jaccard_by_hand():
    # exact top-3 a, b, c; approximate found a, c and put d instead of b
    assert recall_at_k(["a", "c", "d"], ["a", "b", "c"], 3) == pytest.approx(2 / 3)
    agreement = compare_to_exact(["a", "c", "d", "e"], ["a", "b", "c", "d"], k=3)
    assert agreement.recall == pytest.approx(2 / 3)
    assert agreement.jaccard == pytest.approx(2 / 4)
    assert agreement.missed == ("b",) and agreement.extra == ("d",)
    # nothing to find: full recall; found everything exact search has: full recall
    assert recall_at_k(["x"], [], 5) == 1.0
    assert recall_at_k(["a", "b"], ["b", "a"], 5) == 1.0
    with pytest.raises(ValueError):
        recall_at_k(["a"], ["a"], 0)


def test_diff_measures_the_server_against_its_exact_search(session):
    server = doubles.ApproxRetriever()
    ctx = RetrievalContext(session_id=session, query_embedding=(1.0, 0.0), top_k=3)
    assert [u.item_id for u in run_side("exact", ctx, items=ITEMS, server=server)] == ["a", "b", "c"]
    result = diff_query(ctx, items=ITEMS, server=server, exact=True)
    assert [u.item_id for u in result.server] == ["a", "c", "d"]
    assert result.exact.recall == pytest.approx(2 / 3)
    assert result.exact.jaccard == pytest.approx(2 / 4)
    assert result.exact.missed == ("b",)
    data = result.to_dict()
    assert data["exact"]["ranking"] == ["a", "b", "c"] and data["exact"]["missed"] == ["b"]
    # without exact=True nothing is measured (and nothing is added to the output)
    plain = diff_query(ctx, items=ITEMS, server=server)
    assert plain.exact is None and "exact" not in plain.to_dict()


def test_aggregate_and_recall_gate(session):
    server = doubles.ApproxRetriever()
    base = RetrievalContext(session_id=session, top_k=3)
    specs = [QuerySpec("near-a", vector=(1.0, 0.0)),   # exact a, b, c: b missed
             QuerySpec("near-d", vector=(0.0, 1.0))]   # exact d, c, b: b missed
    report = diff_queries(base, specs, items=ITEMS, server=server, min_recall=0.9)
    agg = report.aggregate
    assert agg["mean_exact_recall"] == pytest.approx(2 / 3)
    assert agg["min_exact_recall"] == pytest.approx(2 / 3)
    assert agg["worst_recall_query"] == "near-a"
    assert [(m.query_id, m.metric) for m in report.misses] == [("near-a", "recall"), ("near-d", "recall")]
    assert not report.passed
    passing = diff_queries(base, specs, items=ITEMS, server=server, min_recall=0.6)
    assert passing.passed and "mean_exact_jaccard" in passing.aggregate
    without = diff_queries(base, specs, items=ITEMS, server=server)
    assert "mean_exact_recall" not in without.aggregate


def test_a_server_without_exact_search_is_refused():
    with pytest.raises(LookupError, match="no exact search"):
        run_side("exact", RetrievalContext(session_id="s", query_embedding=(1.0, 0.0)),
                 items=ITEMS, server=doubles.FakeServerRetriever())


def test_cli_exact_table_json_and_gate(session):
    base = ["retrieve", "diff", *APPROX, "-s", session, "--query-vector", "[1, 0]", "-k", "3"]
    result = invoke(*base, "--exact")
    assert result.exit_code == 0, result.output
    assert "server recall@3 vs exact" in result.stdout and "0.6667" in result.stdout
    assert "exact results the server missed" in result.stdout

    result = invoke(*base, "--min-recall", "0.9", "-o", "json")  # implies --exact
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    (query,) = data["queries"]
    assert query["exact"]["recall"] == pytest.approx(2 / 3)
    assert data["aggregate"]["min_exact_recall"] == pytest.approx(2 / 3)
    assert data["gate"]["missed"][0]["metric"] == "recall"
    assert "gate missed: query 'query' recall 0.6667 < 0.9" in result.stderr

    assert invoke(*base, "--min-recall", "0.6").exit_code == 0


def test_cli_exact_per_query_table(session, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"id": "near-a", "vector": [1.0, 0.0]}, {"id": "near-e", "vector": [-1.0, 0.0], "top_k": 1}]))
    result = invoke("retrieve", "diff", *APPROX, "-s", session, "--queries", str(queries),
                    "-k", "3", "--exact")
    assert result.exit_code == 0, result.output
    assert "RECALL" in result.stdout and "server recall vs exact" in result.stdout


@pytest.mark.parametrize("value", ["nan", "inf", "-0.1", "1.5", "lots"])
def test_cli_min_recall_must_be_a_number_in_range(session, value):
    result = invoke("retrieve", "diff", *APPROX, "-s", session, "--query-vector", "[1, 0]",
                    "--min-recall", value)
    assert result.exit_code == 2, result.output
    assert "--min-recall" in result.stderr


def test_cli_exact_needs_a_server_that_can_search_exactly(session):
    result = invoke("retrieve", "diff", "--adapter", "tests.support.retrieval_doubles:server_adapter",
                    "-s", session, "--query-vector", "[1, 0]", "--exact")
    assert result.exit_code == 3, result.output
    assert "no exact search" in result.stderr
