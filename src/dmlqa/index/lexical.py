"""The sparse half of hybrid search: how texts become BM25 terms (:mod:`dmlqa.index.postings` scores them).

Tokenisation is ours
(shared by indexing and querying, so they can never drift apart): lower-case word tokens, single
characters kept (``ZeRO-3`` → ``zero``, ``3``), snake_case names kept whole and split into their
words, English stop words dropped, Snowball-stemmed.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache

_TOKEN = re.compile(r"(?u)\w+")
#: ASCII characters that are not word characters, mapped to a space: on ASCII text ``translate`` and
#: ``split`` find the same words as ``_TOKEN`` (``\w`` is ``[A-Za-z0-9_]`` there) in about 60 % of the
#: regex's time, and tokenising was 7 % of a large build.
_ASCII_NON_WORD = bytes.maketrans(
    bytes(range(128)), bytes(c if chr(c).isalnum() or c == 95 else 32 for c in range(128)))


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


#: Tokens of each word seen, so that a corpus stems each distinct word once: words repeat far more
#: than they vary, and the per-word rules and the stemmer call were most of indexing's tokenising time.
#: Cleared when full; a word's tokens depend on nothing else, so a hit is the same answer.
_WORD_TOKENS: dict[str, tuple[str, ...]] = {}
#: The most words a memo of them keeps (this one, and the postings builder's word → term ids).
WORD_MEMO_MAX = 500_000


def word_tokens(w: str) -> tuple[str, ...]:
    """BM25 tokens of one lower-cased word (none for a stop word)."""
    stop = _stopwords()
    words: list[str] = []
    if "_" in w:  # snake_case identifiers: the whole name and its words (shard_map → shard, map)
        words.extend(p for p in w.split("_") if p and p not in stop)
    if w not in stop and len(w) < 40:
        words.append(w)
    stemmer = _stemmer()
    return tuple(stemmer.stemWords(words) if stemmer else words)


def words(lowered: str) -> list[str]:
    """The word tokens of lower-cased text, as ``_TOKEN.findall`` finds them."""
    if lowered.isascii():
        return lowered.encode("ascii").translate(_ASCII_NON_WORD).decode("ascii").split()
    return _TOKEN.findall(lowered)


def tokenize(text: str) -> list[str]:
    """BM25 tokens of ``text`` (stemmed, stop words dropped)."""
    memo = _WORD_TOKENS
    out: list[str] = []
    for w in words(text.lower()):
        tokens = memo.get(w)
        if tokens is None:
            if len(memo) >= WORD_MEMO_MAX:
                memo.clear()
            tokens = memo[w] = word_tokens(w)
        out.extend(tokens)
    return out
