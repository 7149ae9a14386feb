"""The sparse half of hybrid search: BM25 over chunk texts (bm25s).

Kept apart from the dense index so each can be tested and measured alone. Tokenisation is ours
(shared by indexing and querying, so they can never drift apart): lower-case word tokens, single
characters kept (``ZeRO-3`` → ``zero``, ``3``), snake_case names kept whole and split into their
words, English stop words dropped, Snowball-stemmed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

_TOKEN = re.compile(r"(?u)\b\w+\b")


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    return frozenset(_bm25s().stopwords.STOPWORDS_EN)


@lru_cache(maxsize=1)
def _stemmer():  # noqa: ANN202 - PyStemmer has no type hints
    try:
        import Stemmer

        return Stemmer.Stemmer("english")
    except ImportError:  # pragma: no cover - PyStemmer is a dependency; degrade to no stemming
        return None


def _bm25s():  # noqa: ANN202
    """Import bm25s, which sets its own logger to DEBUG on import; put it back to quiet."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def tokenize(text: str) -> list[str]:
    """BM25 tokens of ``text`` (stemmed, stop words dropped)."""
    stop = _stopwords()
    words: list[str] = []
    for w in _TOKEN.findall(text.lower()):
        if "_" in w:  # snake_case identifiers: the whole name and its words (shard_map → shard, map)
            words.extend(p for p in w.split("_") if p and p not in stop)
        if w not in stop and len(w) < 40:
            words.append(w)
    stemmer = _stemmer()
    return stemmer.stemWords(words) if stemmer else words


class LexicalIndex:
    """BM25 scores for every chunk row; rows line up with the dense index's ids."""

    def __init__(self, bm25) -> None:  # noqa: ANN001 - bm25s.BM25
        self._bm25 = bm25
        self._vocab: frozenset[str] | None = None

    @classmethod
    def build(cls, texts: Sequence[str]) -> LexicalIndex:
        bm25 = _bm25s().BM25(k1=1.2, b=0.75)
        # An empty token list would make a chunk invisible but must keep its row number.
        bm25.index([tokenize(t) or ["\u2205"] for t in texts], show_progress=False)
        return cls(bm25)

    def save(self, path: Path) -> None:
        self._bm25.save(str(path))

    @classmethod
    def load(cls, path: Path) -> LexicalIndex:
        return cls(_bm25s().BM25.load(str(path), mmap=True, show_progress=False))

    def vocabulary(self) -> frozenset[str]:
        """Every token that occurs in some chunk (tokenised as :func:`tokenize` does)."""
        if getattr(self, "_vocab", None) is None:
            self._vocab = frozenset(self._bm25.vocab_dict)
        return self._vocab

    def scores(self, query: str) -> np.ndarray:
        """One BM25 score per chunk row (zeros when no query term is in the index)."""
        tokens = tokenize(query)
        n = int(self._bm25.scores["num_docs"])
        if not tokens:
            return np.zeros(n, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float32)
