"""``semvecctl retrieve run|diff`` end to end, against a test-only adapter with a fake
server-side retriever (tests/support/retrieval_doubles.py) and the real memory backend."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryItem
from backends.retrieval.items import item_to_record
from semvecctl.app import app
from tests.support import retrieval_doubles as doubles

ADAPTER = ["--adapter", "tests.support.retrieval_doubles:server_adapter"]


def invoke(*args):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def session():
    sid = f"s-{uuid.uuid4().hex}"
    doubles.SEEDED[sid] = (
        MemoryItem("a", "apples are red", (1.0, 0.0), owner_subject="t1", tier="short"),
        MemoryItem("b", "bananas are yellow", (0.9, 0.3), owner_subject="t1"),
        MemoryItem("c-new", "cherries are dark", (0.88, 0.35), owner_subject="t1"),
        MemoryItem("d", "dates are sweet", (0.0, 1.0), owner_subject="t2"),
        MemoryItem("e", "evicted", (1.0, 0.0), evicted=True),
    )
    yield sid
    doubles.SEEDED.pop(sid, None)
    doubles.SERVER_EXTRA.pop(sid, None)


def test_run_in_process_and_server(session):
    result = invoke("retrieve", "run", *ADAPTER, "-s", session, "--query-vector", "[1, 0]",
                    "-k", "3", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [r["item_id"] for r in data["results"]] == ["a", "b", "c-new"]
    assert data["side"] == "in-process" and data["items"] == "live"

    result = invoke("retrieve", "run", *ADAPTER, "-s", session, "--like", "a", "-k", "3",
                    "--side", "server", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["retriever"] == "fake-server"
    assert [r["item_id"] for r in data["results"]] == ["a", "c-new", "b"]


def test_run_owner_filter_and_table(session):
    result = invoke("retrieve", "run", *ADAPTER, "-s", session, "--query-vector", "[0, 1]",
                    "-k", "1", "--owner", "t1")
    assert result.exit_code == 0, result.output
    items = [line.split()[1] for line in result.stdout.splitlines()[1:] if line.strip()]
    assert items == ["c-new"]  # "d" is another owner's
    assert "tier-weighted cosine" in result.stdout  # the score says what it is
    assert "1 result(s)" in result.stderr


def test_run_with_bm25_text_only(session):
    result = invoke("retrieve", "run", *ADAPTER, "-s", session, "-q", "sweet dates", "--bm25",
                    "-o", "json")
    assert result.exit_code == 0, result.output
    assert [r["item_id"] for r in json.loads(result.stdout)["results"]] == ["d"]


def test_diff_single_query_table_and_json(session):
    doubles.SERVER_EXTRA[session] = (MemoryItem("stale", "mirror only", (1.0, 0.01)),)
    args = ["retrieve", "diff", *ADAPTER, "-s", session, "--like", "a", "-k", "3", "--rrf-k", "30"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "in-process vs fake-server" in out and "server only" in out
    assert "rbo (p=0.9)" in out and "Why they can differ:" in out
    for code in ("mirror-lag", "recency-server-only", "not-live", "inert-field"):
        assert f"[{code}]" in out
    assert "rrf_k=30" in out

    data = json.loads(invoke(*args, "-o", "json").stdout)
    (query,) = data["queries"]
    assert data["server"] == "fake-server" and data["gate"]["passed"] is True
    assert [r["in_process_item"] for r in query["rows"]] == ["a", "b", "c-new"]
    assert [r["server_item"] for r in query["rows"]] == ["a", "stale", "c-new"]
    assert query["metrics"]["common"] == 2


def test_diff_yaml_output(session):
    result = invoke("retrieve", "diff", *ADAPTER, "-s", session, "--like", "a", "-o", "yaml")
    assert result.exit_code == 0, result.output
    assert "aggregate:" in result.stdout and "queries:" in result.stdout


def test_diff_queries_file_and_gate(session, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"id": "near-a", "like": "a", "top_k": 3},
        {"id": "vec", "vector": [0.0, 1.0], "top_k": 2},
    ]))
    base = ["retrieve", "diff", *ADAPTER, "-s", session, "--queries", str(queries)]
    result = invoke(*base)
    assert result.exit_code == 0, result.output
    assert "near-a" in result.stdout and "AGGREGATE" in result.stdout

    result = invoke(*base, "--min-rbo", "0.99", "-o", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["gate"]["passed"] is False
    assert {m["query_id"] for m in data["gate"]["missed"]} == {"near-a"}
    assert "gate missed: query 'near-a' rbo" in result.stderr

    result = invoke(*base, "--min-jaccard", "0.1")
    assert result.exit_code == 0, result.output


def test_diff_without_server_side_retrieval_exits_3(session, tmp_path):
    result = invoke("retrieve", "diff", "--adapter", "tests.support.retrieval_doubles:no_server_adapter",
                    "-s", session, "--like", "a")
    assert result.exit_code == 3
    assert "no server-side retrieval" in result.stderr

    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(item_to_record(MemoryItem("x", "t", (1.0,)))) + "\n")
    result = invoke("retrieve", "diff", "--backend", "memory", "-s", session, "--items",
                    str(items), "--query-vector", "[1]")
    assert result.exit_code == 3
    assert "'memory' has no server-side retrieval" in result.stderr


def test_items_file_drives_the_in_process_side(tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(json.dumps(item_to_record(i)) for i in [
        MemoryItem("x", "first", (1.0, 0.0)), MemoryItem("y", "second", (0.0, 1.0))]) + "\n")
    result = invoke("retrieve", "run", "--backend", "memory", "-s", "any", "--items", str(items),
                    "--like", "y", "-k", "1", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["items"] == str(items) and data["results"][0]["item_id"] == "y"

    result = invoke("retrieve", "run", "--backend", "memory", "-s", "any", "--query-vector", "[1, 0]")
    assert result.exit_code == 3
    assert "pass --items" in result.stderr


@pytest.mark.parametrize("args,fragment", [
    ([], "nothing to search for"),
    (["--query-vector", "[1, 0]", "--like", "a"], "not both"),
    (["--query-vector", "nope.json"], "neither a JSON array"),
    (["--query-vector", "[1, \"x\"]"], "list of numbers"),
    (["--query-vector", "[1, 0, 0]"], "dimensions"),
    (["--like", "missing"], "not among"),
    (["-q", "text without bm25"], "BM25"),
    (["--like", "a", "--owner", "t1", "--unowned"], "exclude each other"),
    (["--like", "a", "--rrf-weights", "1"], "--rrf-weights"),
])
def test_usage_errors_exit_2(session, args, fragment):
    result = invoke("retrieve", "run", *ADAPTER, "-s", session, *args)
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr


def test_server_side_run_needs_a_server(session):
    result = invoke("retrieve", "run", "--adapter", "tests.support.retrieval_doubles:no_server_adapter",
                    "-s", session, "--like", "a", "--side", "server")
    assert result.exit_code == 3
    assert "--side in-process" in result.stderr


def test_query_vector_from_file(session, tmp_path):
    vector = tmp_path / "v.json"
    vector.write_text(json.dumps({"embedding": [0.0, 1.0]}))
    result = invoke("retrieve", "run", *ADAPTER, "-s", session, "--query-vector", str(vector),
                    "-k", "1", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"][0]["item_id"] == "d"


# -- --items with no store named (issue 42) --------------------------------------------------

#: every variable that could name a store, cleared so that no store is named at all
NO_STORE = {"SEMVEC_SESSION_BACKEND": None, "REDIS_URL": None, "MONGODB_URI": None,
            "DATABASE_URL": None, "SEMVEC_PGVECTOR_URL": None, "SEMVECCTL_CONFIG": None,
            "SEMVECCTL_PROFILE": None}


def _items_file(tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(json.dumps(item_to_record(i)) for i in [
        MemoryItem("x", "first", (1.0, 0.0)), MemoryItem("y", "second", (0.0, 1.0))]) + "\n")
    return items


def test_run_ranks_an_items_file_with_no_store_named(tmp_path, monkeypatch):
    """Ranking a file's items in-process touches no store: no store named is not refused,
    and no connection is resolved or opened."""
    from semvecctl import connection

    items = _items_file(tmp_path)
    opened: list = []
    monkeypatch.setattr(connection, "resolve_connection",
                        lambda *a, **k: opened.append(a) or pytest.fail("a store was resolved"))
    result = CliRunner().invoke(
        app, ["retrieve", "run", "-s", "any", "--items", str(items), "--like", "y", "-k", "1",
              "-o", "json"], env={**NO_STORE, "XDG_CONFIG_HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["backend"] is None and data["items"] == str(items)
    assert [r["item_id"] for r in data["results"]] == ["y"]
    assert opened == []
    table = CliRunner().invoke(
        app, ["retrieve", "run", "-s", "any", "--items", str(items), "--query-vector", "[1, 0]"],
        env={**NO_STORE, "XDG_CONFIG_HOME": str(tmp_path)})
    assert table.exit_code == 0, table.output
    assert "first" in table.stdout
    assert "2 result(s) from the in-process retriever for session any" in table.stderr


def test_run_without_items_and_without_a_store_is_still_refused(tmp_path):
    result = CliRunner().invoke(
        app, ["retrieve", "run", "-s", "any", "--query-vector", "[1, 0]"],
        env={**NO_STORE, "XDG_CONFIG_HOME": str(tmp_path)})
    assert result.exit_code == 2
    assert "no backend named" in result.stderr


def test_run_server_side_with_items_and_no_store_is_refused(tmp_path):
    items = _items_file(tmp_path)
    result = CliRunner().invoke(
        app, ["retrieve", "run", "-s", "any", "--items", str(items), "--query-vector", "[1, 0]",
              "--side", "server"], env={**NO_STORE, "XDG_CONFIG_HOME": str(tmp_path)})
    assert result.exit_code == 2
    assert "no backend named" in result.stderr and "Traceback" not in result.output


def test_diff_with_items_and_no_store_is_refused_in_one_line(tmp_path):
    """diff's server side is a store's retriever: --items cannot stand in for the store."""
    items = _items_file(tmp_path)
    result = CliRunner().invoke(
        app, ["retrieve", "diff", "-s", "any", "--items", str(items), "--query-vector", "[1, 0]"],
        env={**NO_STORE, "XDG_CONFIG_HOME": str(tmp_path)})
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in result.output
    assert "no backend named" in message and "--backend NAME or --uri URI" in message
