"""BM25 as the deployed engine ranks it (ENGINE-WIRE §8), so that ``retrieve diff`` shows
only the divergence the engine itself would have.

The engine indexes a session's items with the ``bm25s`` library: Lucene scoring with
k1 = 1.5 and b = 0.75, bm25s's tokenizer with English stop words, and a stemmer chosen
by what is installed (Snowball English from PyStemmer, else NLTK's Porter, else none).
We call the same library the same way rather than re-deriving it, which is the only way
to agree with it on ties and tokenization. The Lucene score, for reference::

    idf(t)   = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))
    score(d) = sum over query tokens t (with repeats) of
               idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))

Two consequences of calling bm25s as the engine does, kept on purpose:
- a query returns ``k`` documents even when fewer match: the tail has score 0 and still
  takes part in the fusion (bm25s fills it in its own order);
- repeated query tokens count each time.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["BM25Index", "BM25_K1", "BM25_B", "engine_stemmer"]

BM25_K1 = 1.5
BM25_B = 0.75


def engine_stemmer() -> tuple[str, Any]:
    """The stemmer the engine would use here, and its name: Snowball English when
    PyStemmer is installed, else NLTK's Porter, else none."""
    try:
        import Stemmer  # PyStemmer

        return "snowball-english", Stemmer.Stemmer("english")
    except ImportError:
        pass
    try:
        from nltk.stem import PorterStemmer

        return "nltk-porter", PorterStemmer().stem
    except ImportError:
        return "none", None


class BM25Index:
    """One bm25s index over a fixed list of texts, queried many times."""

    def __init__(self, texts: Sequence[str | None], *, k1: float = BM25_K1, b: float = BM25_B):
        import bm25s

        self.size = len(texts)
        self.stemmer_name, stemmer = engine_stemmer()
        self._tokenizer = bm25s.tokenization.Tokenizer(stemmer=stemmer, stopwords="en")
        self._model = None
        if self.size:
            corpus = self._tokenizer.tokenize([t or "" for t in texts], return_as="tuple",
                                              update_vocab=True, show_progress=False)
            self._model = bm25s.BM25(k1=k1, b=b)
            self._model.index(corpus, show_progress=False)

    def top(self, query: str | None, k: int) -> tuple[Any, Any]:
        """Positions and scores of the ``min(k, size)`` best documents, as bm25s orders
        them (zero-score documents fill the tail). Empty for no query text or k < 1."""
        import numpy as np

        if self._model is None or not query or k < 1:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        tokens = self._tokenizer.tokenize([query], return_as="tuple", update_vocab=False,
                                          show_progress=False)
        positions, scores = self._model.retrieve(tokens, k=min(k, self.size),
                                                 show_progress=False)
        return positions[0].astype(np.int64), scores[0].astype(np.float64)

    def scores(self, query: str | None) -> Any:
        """The score of every document for ``query`` (0 where nothing matches)."""
        import numpy as np

        out = np.zeros(self.size, dtype=np.float64)
        positions, scores = self.top(query, self.size)
        out[positions] = scores
        return out

