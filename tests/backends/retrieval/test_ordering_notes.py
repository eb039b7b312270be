"""Issue 42: the in-process side says where the engine's order may differ from its own.

The engine ranks units of several tiers by their place inside each tier. Units with no
recorded in-tier position (a mirror the engine wrote without positions, a JSONL without
``positions``) in a store whose units sit in several tiers get a note naming how many; one
tier needs none (the order given is the position). BM25 ties at the cut get a note that an
engine on numpy 1.x orders them differently. Both reach ``retrieve run`` and ``retrieve
diff``, table and json."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryItem, RetrievalContext
from backends.retrieval.diff import ordering_notes
from backends.retrieval.items import item_to_record
from semvecctl.app import app


def ctx(**kw) -> RetrievalContext:
    base = dict(session_id="s1", top_k=3, query_embedding=(1.0, 0.0))
    base.update(kw)
    return RetrievalContext(**base)


def item(item_id, tiers, positions=None, text=None, vector=(1.0, 0.0), **kw) -> MemoryItem:
    return MemoryItem(item_id, text or f"text of {item_id}", vector, tiers=tuple(tiers),
                      positions=positions or {}, **kw)


def codes(notes) -> list[str]:
    return [n.code for n in notes]


# -- in-tier positions -------------------------------------------------------------------------


def test_no_note_when_every_unit_carries_its_positions_in_several_tiers():
    items = (item("a", ["short_term"], {"short_term": 0}),
             item("b", ["short_term", "long_term"], {"short_term": 1, "long_term": 0}),
             item("c", ["medium_term"], {"medium_term": 0}))
    assert ordering_notes(ctx(), items) == []


def test_no_note_for_one_tier_without_positions_the_order_given_is_the_position():
    items = tuple(item(f"u{n}", ["medium_term"]) for n in range(6))
    assert ordering_notes(ctx(), items) == []
    assert ordering_notes(ctx(), tuple(MemoryItem(f"v{n}", f"t{n}", (1.0, 0.0))
                                       for n in range(3))) == []  # no tier: short_term


def test_a_note_with_the_exact_count_of_units_without_positions_in_several_tiers():
    items = (item("a", ["short_term"], {"short_term": 0}),
             item("b", ["short_term"]),                                  # none
             item("c", ["long_term"]),                                   # none
             item("d", ["short_term", "long_term"], {"short_term": 1}),  # one tier missing
             item("e", ["long_term"], {"long_term": 0}),
             item("gone", ["long_term"], evicted=True),                  # not ranked: not counted
             item("other", ["long_term"], session_id="s2"))              # another session's
    notes = ordering_notes(ctx(), items)
    assert codes(notes) == ["positions-unknown"]
    message = notes[0].message
    assert message.startswith("3 of 5 unit(s) have no recorded position in their tier")
    assert "sit in 2 tiers" in message and "the engine's order among them may differ" in message


def test_owner_filter_counts_only_the_units_ranked():
    items = (item("a", ["short_term"], owner_subject="t1"),
             item("b", ["long_term"], owner_subject="t2"),
             item("c", ["long_term"], owner_subject="t1"))
    (note,) = ordering_notes(ctx(owner_subject="t1"), items)
    assert note.message.startswith("2 of 2 unit(s)")
    assert ordering_notes(ctx(owner_subject="t2"), items) == []  # t2's one unit: one tier


# -- BM25 ties at the cut ------------------------------------------------------------------------


def test_bm25_ties_at_the_cut_get_the_numpy_note_only_with_bm25_on():
    tied = tuple(item(f"u{n}", ["short_term"], {"short_term": n}, text=f"note {n} about apples")
                 for n in range(4))
    notes = ordering_notes(ctx(use_bm25=True, query_text="apples", bm25_fetch_k=2), tied)
    assert codes(notes) == ["bm25-ties-numpy1"]
    assert notes[0].message.startswith("2 BM25 hit(s) tie on score at the cut of 2")
    assert "numpy 1.x" in notes[0].message
    assert ordering_notes(ctx(query_text="apples", bm25_fetch_k=2), tied) == []  # BM25 off
    assert ordering_notes(ctx(use_bm25=True, bm25_fetch_k=2), tied) == []  # no query text


def test_no_numpy_note_when_the_bm25_scores_do_not_tie():
    texts = ["apple pie", "apple apple tart with cream", "apple apple apple cake", "banana"]
    distinct = tuple(item(f"u{n}", ["short_term"], {"short_term": n}, text=t)
                     for n, t in enumerate(texts))
    assert ordering_notes(ctx(use_bm25=True, query_text="apple", bm25_fetch_k=50), distinct) == []
    # a unit held by two tiers is indexed twice: equal to itself is no tie
    twice = (item("x", ["short_term", "long_term"], {"short_term": 0, "long_term": 0},
                  text="apple pie"),
             item("y", ["short_term"], {"short_term": 1}, text="banana bread"))
    assert ordering_notes(ctx(use_bm25=True, query_text="apple", bm25_fetch_k=1), twice) == []


# -- the commands -------------------------------------------------------------------------------


def _items_file(tmp_path, items) -> str:
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(item_to_record(i)) for i in items) + "\n")
    return str(path)


MIXED = (item("a", ["short_term"]), item("b", ["long_term"]), item("c", ["medium_term"]),
         item("d", ["long_term"], {"long_term": 1}))


def test_retrieve_run_carries_the_note_in_json_and_table(tmp_path):
    path = _items_file(tmp_path, MIXED)
    result = CliRunner().invoke(app, ["retrieve", "run", "--backend", "memory", "-s", "s1",
                                      "--items", path, "--query-vector", "[1, 0]", "-o", "json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert [n["code"] for n in notes] == ["positions-unknown"]
    assert notes[0]["message"].startswith("3 of 4 unit(s)")
    table = CliRunner().invoke(app, ["retrieve", "run", "--backend", "memory", "-s", "s1",
                                     "--items", path, "--query-vector", "[1, 0]"])
    assert table.exit_code == 0, table.output
    stderr = " ".join(table.stderr.split())
    assert "note [positions-unknown]: 3 of 4 unit(s)" in stderr
    assert "positions-unknown" not in table.stdout  # stdout: the table's rows only

    (tmp_path / "known").mkdir()
    known = _items_file(tmp_path / "known", tuple(item(i.item_id, i.tiers, {t: 0 for t in i.tiers})
                                               for i in MIXED))
    quiet = CliRunner().invoke(app, ["retrieve", "run", "--backend", "memory", "-s", "s1",
                                     "--items", known, "--query-vector", "[1, 0]", "-o", "json"])
    assert json.loads(quiet.stdout)["notes"] == []


def test_retrieve_diff_carries_the_note_in_json_and_table(tmp_path):
    path = _items_file(tmp_path, MIXED)
    adapter = ["--adapter", "tests.support.retrieval_doubles:server_adapter"]
    result = CliRunner().invoke(app, ["retrieve", "diff", *adapter, "-s", "s1", "--items", path,
                                      "--query-vector", "[1, 0]", "-o", "json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["queries"][0]["notes"]
    (note,) = [n for n in notes if n["code"] == "positions-unknown"]
    assert note["message"].startswith("3 of 4 unit(s)")
    table = CliRunner().invoke(app, ["retrieve", "diff", *adapter, "-s", "s1", "--items", path,
                                     "--query-vector", "[1, 0]"], env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    assert re.search(r"\[positions-unknown\] 3 of 4 unit\(s\)", " ".join(table.stdout.split()))


@pytest.mark.parametrize("bm25, tied", [("--bm25", True), ("--no-bm25", False)])
def test_retrieve_run_names_bm25_ties(tmp_path, bm25, tied):
    path = _items_file(tmp_path, tuple(item(f"u{n}", ["short_term"], text=f"note {n} about apples")
                                       for n in range(4)))
    result = CliRunner().invoke(app, ["retrieve", "run", "--backend", "memory", "-s", "s1",
                                      "--items", path, "--query-vector", "[1, 0]", bm25,
                                      "-q", "apples", "--bm25-fetch-k", "2", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert ("bm25-ties-numpy1" in [n["code"] for n in json.loads(result.stdout)["notes"]]) is tied
