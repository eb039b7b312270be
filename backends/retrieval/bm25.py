"""Okapi BM25 over a fixed list of texts, precomputed once and queried many times.

Tokenizer: lower-case the text (``str.lower``) and take maximal runs of Unicode word
characters (``\\w+``: letters, digits and underscore in any script). No stemming, no
stop words: both sides of a diff must tokenize the same obvious way.

Scoring (k1 = 1.5, b = 0.75), summed over the query's tokens WITH multiplicity (a token
repeated in the query counts each time, as in the textbook sum over q_1..q_n)::

    idf(t)    = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))       # never negative
    w(t, d)   = tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))
    score(d)  = sum over query tokens t of idf(t) * w(t, d)

The per-posting weight ``w`` does not depend on the query, so it is computed at index
time; a query touches only the postings of its own tokens.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Sequence

__all__ = ["tokenize", "BM25Index", "BM25_K1", "BM25_B"]

BM25_K1 = 1.5
BM25_B = 0.75
_TOKEN = re.compile(r"\w+")


def tokenize(text: str | None) -> list[str]:
    """Lower-cased runs of Unicode word characters."""
    return _TOKEN.findall(text.lower()) if text else []


class BM25Index:
    """Inverted index with precomputed per-posting weights (numpy arrays)."""

    def __init__(self, texts: Sequence[str | None], *, k1: float = BM25_K1, b: float = BM25_B):
        import numpy as np

        self.k1 = k1
        self.b = b
        self.size = len(texts)
        counts = [Counter(tokenize(t)) for t in texts]
        lengths = np.fromiter((sum(c.values()) for c in counts), dtype=np.float64, count=self.size)
        self.avgdl = float(lengths.mean()) if self.size else 0.0
        norm = (1.0 - b) + b * (lengths / self.avgdl if self.avgdl > 0 else 0.0)
        docs: dict[str, list[int]] = {}
        freqs: dict[str, list[int]] = {}
        for index, counter in enumerate(counts):
            for term, tf in counter.items():
                docs.setdefault(term, []).append(index)
                freqs.setdefault(term, []).append(tf)
        self._postings: dict[str, tuple[Any, Any]] = {}
        for term, doc_list in docs.items():
            doc_idx = np.asarray(doc_list, dtype=np.int64)
            tf = np.asarray(freqs[term], dtype=np.float64)
            weight = tf * (k1 + 1.0) / (tf + k1 * norm[doc_idx])
            self._postings[term] = (doc_idx, weight)

    def idf(self, term: str) -> float:
        posting = self._postings.get(term)
        n = 0 if posting is None else len(posting[0])
        return math.log(1.0 + (self.size - n + 0.5) / (n + 0.5))

    def scores(self, query: str | None) -> Any:
        """BM25 score of every document for ``query`` (a float64 array, 0 = no match)."""
        import numpy as np

        out = np.zeros(self.size, dtype=np.float64)
        for term, times in Counter(tokenize(query)).items():
            posting = self._postings.get(term)
            if posting is None:
                continue
            doc_idx, weight = posting
            out[doc_idx] += times * self.idf(term) * weight
        return out

    def matches(self, query: str | None) -> Any:
        """Indices of documents sharing at least one token with ``query``."""
        import numpy as np

        parts = [self._postings[t][0] for t in set(tokenize(query)) if t in self._postings]
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.concatenate(parts))
