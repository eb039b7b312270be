"""BM25 as the engine ranks it (bm25s, Lucene scoring, k1 1.5, b 0.75, English stop words,
Snowball stemming), pinned to a case computed by hand."""

from __future__ import annotations

import math

import pytest

from backends.retrieval import bm25 as bm25_module
from backends.retrieval.bm25 import BM25Index

# After stop words and stemming: [cat, sit], [dog, run], [cat, dog, run, togeth],
# [unrel, text, here] -> lengths 2, 2, 4, 3; avgdl 11/4.
DOCS = ["The cats are sitting", "a dog runs", "cats and dogs running together",
        "unrelated text here"]


def _lucene(tf: float, length: float, avgdl: float = 11 / 4) -> float:
    return tf / (tf + 1.5 * (0.25 + 0.75 * length / avgdl))


def test_the_engines_stemmer_is_used_when_installed():
    # PyStemmer is in the test extra, so the suite pins the engine's preferred choice
    assert BM25Index(DOCS).stemmer_name == "snowball-english"


def test_scores_hand_computed():
    index = BM25Index(DOCS)
    idf = math.log(1 + 2.5 / 2.5)  # 'cat' and 'run' are each in 2 of 4 documents
    # "running cat" stems to [run, cat]: d2 has both (|d| 4), d0 cat and d1 run (|d| 2)
    positions, scores = index.top("running cat", 4)
    assert positions.tolist()[:3] in ([2, 1, 0], [2, 0, 1])
    expected = {2: 2 * idf * _lucene(1, 4), 0: idf * _lucene(1, 2), 1: idf * _lucene(1, 2)}
    for pos, score in zip(positions.tolist()[:3], scores.tolist()[:3]):
        assert score == pytest.approx(expected[pos], rel=1e-5)
    # bm25s returns k documents: the one that matches nothing fills the tail at 0
    assert positions.tolist()[3] == 3 and scores.tolist()[3] == 0.0


def test_stop_words_stemming_and_repeated_tokens():
    index = BM25Index(DOCS)
    assert index.scores("the and are").tolist() == [0.0, 0.0, 0.0, 0.0]  # stop words only
    assert index.scores("sits").tolist()[0] > 0  # 'sits' and 'sitting' share a stem
    once = index.scores("cat")
    assert index.scores("cat cat").tolist() == pytest.approx((2 * once).tolist())


def test_a_query_that_matches_nothing_still_returns_k_zero_scores():
    positions, scores = BM25Index(DOCS).top("zebra", 2)
    assert len(positions) == 2 and scores.tolist() == [0.0, 0.0]


def test_empty_inputs():
    assert BM25Index([]).top("x", 5)[0].tolist() == []
    assert BM25Index(DOCS).top("", 5)[0].tolist() == []
    assert BM25Index(DOCS).top("cat", 0)[0].tolist() == []
    assert BM25Index(["", None]).size == 2  # empty texts are indexed, as by the engine


def test_without_a_stemmer_words_must_match_exactly(monkeypatch):
    monkeypatch.setattr(bm25_module, "engine_stemmer", lambda: ("none", None))
    index = BM25Index(DOCS)
    assert index.stemmer_name == "none"
    assert index.scores("sits").tolist() == [0.0, 0.0, 0.0, 0.0]
    assert index.scores("sitting").tolist()[0] > 0
