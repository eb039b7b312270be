"""BM25 against a hand-computed case, and the documented tokenizer."""

from __future__ import annotations

import math

import pytest

from backends.retrieval.bm25 import BM25Index, tokenize

DOCS = ["The cat sat", "the dog", "Cat cat dog bird"]  # lengths 3, 2, 4; avgdl 3


def test_tokenizer_lowercases_unicode_word_runs():
    assert tokenize("Héllo, WORLD! snake_case x2 — Ωmega") == [
        "héllo", "world", "snake_case", "x2", "ωmega"]
    assert tokenize(None) == [] and tokenize("") == []


def test_idf_is_the_non_negative_variant():
    index = BM25Index(DOCS)
    assert index.idf("cat") == pytest.approx(math.log(1.6))  # ln(1 + 1.5/2.5)
    assert index.idf("bird") == pytest.approx(math.log(1 + 2.5 / 1.5))
    assert index.idf("absent") == pytest.approx(math.log(1 + 3.5 / 0.5))
    # a term in every document still has a positive idf (classic Robertson idf would be < 0)
    assert BM25Index(["a", "a b", "a c"]).idf("a") == pytest.approx(math.log(1 + 0.5 / 3.5))


def test_scores_hand_computed():
    index = BM25Index(DOCS)
    idf = math.log(1.6)
    # "cat": d0 tf 1, |d|/avgdl 1 -> 2.5/2.5 = 1; d2 tf 2, norm .25+.75*4/3 = 1.25 -> 5/3.875
    cat = index.scores("cat")
    assert cat.tolist() == pytest.approx([idf * 1.0, 0.0, idf * 5 / 3.875])
    # "cat dog": d1 dog tf 1, norm .75 -> 2.5/2.125; d2 dog tf 1 -> 2.5/2.875
    both = index.scores("CAT dog")
    assert both.tolist() == pytest.approx(
        [idf, idf * 2.5 / 2.125, idf * (5 / 3.875 + 2.5 / 2.875)])
    # a repeated query token counts each time
    assert index.scores("cat cat").tolist() == pytest.approx((2 * cat).tolist())
    assert index.matches("dog zebra").tolist() == [1, 2]
    assert index.scores("zebra").tolist() == [0.0, 0.0, 0.0]


def test_empty_corpus_and_empty_texts():
    assert BM25Index([]).scores("x").tolist() == []
    assert BM25Index(["", None]).scores("x").tolist() == [0.0, 0.0]
