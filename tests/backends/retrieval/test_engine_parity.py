"""The in-process pipeline ranks exactly as the engine's ``InProcessRetrievalBackend``
(ENGINE-WIRE section 8) on a deterministic bed (``tests/support/engine_bed.py``: tiered,
exact duplicates, shared 80-character prefixes, a unit in two tiers, empty texts), for
BM25 off/on, fusion weights, a narrow BM25 width, MMR and k 5 and 10.

Without the engine, the golden rankings recorded from it (semvec 0.8.9) pin every case;
with the engine importable (marker ``engine``), the engine itself is run on the same bed.
Ids are compared after :func:`canonical` (indistinguishable units are one: the engine's
order among exact ties is unspecified)."""

from __future__ import annotations

import json

import pytest

from tests.support import engine_bed as eb


def _golden():
    return json.loads(eb.GOLDEN.read_text(encoding="utf-8"))


def _disagreements(bed, expected):
    canon = eb.canonical(bed)
    items = eb.our_items(bed)
    wrong, total = [], 0
    for case_id, query, setting, top_k in eb.cases(bed):
        total += 1
        got = [canon[i] for i in eb.ours(bed, query, setting, top_k, items)]
        want = [canon[i] for i in expected[case_id]]
        if got != want:
            wrong.append((case_id, got, want))
    return wrong, total


def test_the_golden_bed_is_the_bed_this_code_builds():
    assert _golden()["bed"] == json.loads(json.dumps(eb.build_bed()))


def test_every_case_ranks_as_the_engine_recorded():
    golden = _golden()
    wrong, total = _disagreements(golden["bed"], golden["rankings"])
    assert total == len(eb.SETTINGS) * len(eb.TOP_KS) * len(golden["bed"]["queries"]) == 320
    assert not wrong, f"{len(wrong)} of {total} differ, first: {wrong[0]}"


def test_the_bed_exercises_what_it_claims():
    bed = eb.build_bed()
    units = [u for t in bed["tiers"].values() for u in t]
    ids = [u["id"] for u in units]
    assert len(ids) != len(set(ids))  # a unit in two tiers
    assert any(u["text"] == "" for u in units)
    prefixes = [u["text"][:80] for u in units if len(u["text"]) >= 80]
    assert len(prefixes) != len(set(prefixes))
    assert len(set(eb.canonical(bed).values())) < len(set(ids))  # exact duplicates
    golden = _golden()["rankings"]
    # the settings really differ from one another somewhere
    for a, b in (("bm25-off", "bm25-on"), ("bm25-on", "bm25-on-weighted"),
                 ("bm25-off", "mmr"), ("bm25-on", "bm25-on-narrow")):
        assert any(golden[f"{a}/k10/{q['id']}"] != golden[f"{b}/k10/{q['id']}"]
                   for q in bed["queries"]), (a, b)


@pytest.mark.engine
def test_every_case_ranks_as_the_engine_ranks_it_now():
    pytest.importorskip("semvec", reason="the semvec engine is not importable (opt-in)")
    bed = eb.build_bed()
    wrong, total = _disagreements(bed, eb.engine_rankings(bed))
    assert total == 320
    assert not wrong, f"{len(wrong)} of {total} differ, first: {wrong[0]}"
