"""BM25 over a segmented index: postings per segment, collection statistics per version.

Each immutable segment keeps its own inverted index (sorted terms, term frequencies per row and row
lengths), and each version keeps one lexicon: the document frequency of every term over the rows that are
live in that version, their count and mean length. A query scores every segment with those global
statistics, so a passage gets the same BM25 score whether its version has one segment or twenty, and a
score never depends on how the rows happen to be split (Lucene does the same with per-index statistics).

bm25s, which scored the single-segment index before, keeps per-index statistics baked into its stored
scores; it cannot score two indexes on one scale, so the scoring is here: the same Lucene variant and
the same parameters (``k1`` 1.2, ``b`` 0.75), checked against bm25s in ``tests/test_segments.py``.

Everything is a NumPy array saved as ``.npy`` and opened memory-mapped: opening a version builds no
Python object per row or per term.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dmlqa.index.lexical import WORD_MEMO_MAX, tokenize, word_tokens, words

K1 = 1.2
B = 0.75
#: Stands in for a passage with no token at all, so it keeps its row and length 1 (as bm25s did).
EMPTY = "\u2205"


#: NumPy reads a ``.npy`` header with ``ast.literal_eval``, and CPython 3.11 (before 3.11.8) fails with
#: "SystemError: AST constructor recursion depth mismatch" when two threads compile at once: the chat app
#: opens a new version on one request thread while others serve. One lock makes the header reads take turns.
_NPY_LOCK = threading.Lock()


def load_npy(path: Path, *, mmap: bool = True) -> np.ndarray:
    """``np.load`` (memory-mapped by default), one thread at a time (see :data:`_NPY_LOCK`)."""
    with _NPY_LOCK:
        return np.load(path, mmap_mode="r" if mmap else None)


def _encode(terms: Sequence[str]) -> np.ndarray:
    """Terms as UTF-8 in a fixed-width byte array (as wide as the longest: NumPy compares across widths)."""
    return np.array([t.encode("utf-8") for t in terms], dtype=bytes) if terms else np.zeros(0, dtype="S1")


def _lookup(sorted_terms: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """Positions of ``terms`` in ``sorted_terms``, -1 where absent."""
    if not len(sorted_terms) or not len(terms):
        return np.full(len(terms), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_terms, terms)
    pos = np.minimum(pos, len(sorted_terms) - 1)
    return np.where(sorted_terms[pos] == terms, pos, -1)


#: A term in at least this share of a segment's rows keeps a dense row of term frequencies instead of a
#: postings list: 2 bytes a row against 6 a posting, and scored by whole-array arithmetic instead of a gather
#: and a scatter per posting ("model" is in 86 % of the generated papers' passages: 9 ms a query at 1M rows
#: as postings).
DENSE_SHARE = 1 / 3
#: ...and in at least this many rows (a tiny segment gains nothing).
DENSE_MIN_ROWS = 64

_NAMES = ("terms", "indptr", "rows", "tf", "lengths", "dense_ids", "dense_tf")


@dataclass(frozen=True)
class Postings:
    """One segment's inverted index: ``rows[indptr[t]:indptr[t+1]]`` hold term ``terms[t]``, ``tf`` times each;
    a very common term ``terms[dense_ids[k]]`` has no postings but a dense row ``dense_tf[k]`` (its tf per row)."""

    terms: np.ndarray  # sorted UTF-8 bytes
    indptr: np.ndarray  # int64, len(terms) + 1
    rows: np.ndarray  # local rows (uint16 in segments of up to 65,536 rows, else int32)
    tf: np.ndarray  # uint16, term frequency in that row
    lengths: np.ndarray  # float32, tokens per row
    dense_ids: np.ndarray  # int64, sorted positions in ``terms`` of the terms kept dense
    dense_tf: np.ndarray  # uint16, (len(dense_ids), rows)

    @classmethod
    def build(cls, texts: Sequence[str]) -> Postings:
        """The postings of ``texts`` (row ``i`` is ``texts[i]``), tokenised by :func:`tokenize`."""
        builder = PostingsBuilder()
        builder.add(texts)
        return builder.build()

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name in _NAMES:
            np.save(folder / f"{name}.npy", getattr(self, name))

    @classmethod
    def load(cls, folder: Path) -> Postings:
        return cls(*(load_npy(folder / f"{name}.npy") for name in _NAMES))

    def dense_row(self, pos: int) -> np.ndarray | None:
        """The dense tf row of the term at ``pos`` in ``terms``, None when it has postings."""
        if not len(self.dense_ids):
            return None
        k = int(np.searchsorted(self.dense_ids, pos))
        return self.dense_tf[k] if k < len(self.dense_ids) and int(self.dense_ids[k]) == pos else None

    def live_df(self, live: np.ndarray) -> np.ndarray:
        """Per term, how many of its rows are live (``live``: bool per local row)."""
        if not len(self.terms):
            return np.zeros(0, dtype=np.int64)
        if live.all():
            df = np.diff(self.indptr)
        else:
            hit = live[np.asarray(self.rows)].astype(np.int64)
            csum = np.concatenate(([0], np.cumsum(hit)))
            df = csum[np.asarray(self.indptr[1:])] - csum[np.asarray(self.indptr[:-1])]
        if len(self.dense_ids):
            dense = np.asarray(self.dense_tf)
            df = df.copy()
            df[np.asarray(self.dense_ids)] = ((dense if live.all() else dense[:, live]) > 0).sum(axis=1)
        return df

    def term_rows(self, term: bytes) -> tuple[np.ndarray, np.ndarray]:
        pos = int(_lookup(self.terms, np.array([term], dtype=self.terms.dtype))[0])
        if pos < 0:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        dense = self.dense_row(pos)
        if dense is not None:
            rows = np.flatnonzero(dense)
            return rows, dense[rows]
        a, b = int(self.indptr[pos]), int(self.indptr[pos + 1])
        return self.rows[a:b], self.tf[a:b]


class PostingsBuilder:
    """Postings built row by row: each text becomes an int32 array of term ids as it arrives, so a segment
    being filled holds ~4 bytes a token instead of the texts (or Python lists of ids)."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.ids: list[np.ndarray] = []
        self.lengths: list[int] = []
        #: Term ids of each word seen (its :func:`~dmlqa.index.lexical.tokenize` tokens, numbered): a text
        #: becomes ids in one pass over its words, where tokens then a lookup per token cost a third more.
        self._word_ids: dict[str, tuple[int, ...]] = {}

    def add(self, texts: Sequence[str]) -> None:
        """Append each text's term ids (``tokenize(text)``, or :data:`EMPTY` for a text without any)."""
        vocab, memo = self.vocab, self._word_ids
        for text in texts:
            ids: list[int] = []
            for w in words(text.lower()):
                got = memo.get(w)
                if got is None:
                    if len(memo) >= WORD_MEMO_MAX:
                        memo.clear()
                    got = memo[w] = tuple(vocab.setdefault(t, len(vocab)) for t in word_tokens(w))
                ids += got
            if not ids:
                ids.append(vocab.setdefault(EMPTY, len(vocab)))
            self.ids.append(np.array(ids, dtype=np.int32))
            self.lengths.append(len(ids))

    def build(self) -> Postings:
        n = len(self.lengths)
        lengths = np.asarray(self.lengths, dtype=np.float32)
        names = sorted(self.vocab)
        if not names:
            return Postings(_encode([]), np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint16),
                            np.zeros(0, dtype=np.uint16), lengths, np.zeros(0, dtype=np.int64),
                            np.zeros((0, n), dtype=np.uint16))
        rank = np.empty(len(self.vocab), dtype=np.int64)
        rank[[self.vocab[t] for t in names]] = np.arange(len(names))
        # (term rank, row) pairs, counted: one posting per distinct pair, sorted by term then row
        rows = np.repeat(np.arange(n, dtype=np.int64), np.asarray(self.lengths, dtype=np.int64))
        keys = rank[np.concatenate(self.ids)] * max(n, 1) + rows
        del rows
        uniq, counts = np.unique(keys, return_counts=True)
        del keys
        term, row = uniq // max(n, 1), uniq % max(n, 1)
        del uniq
        counts = np.minimum(counts, 65535).astype(np.uint16)
        df = np.bincount(term, minlength=len(names))
        dense_ids = np.flatnonzero((df >= DENSE_MIN_ROWS) & (df * (1 / DENSE_SHARE) >= n))
        dense_tf = np.zeros((len(dense_ids), n), dtype=np.uint16)
        if len(dense_ids):
            slot = np.full(len(names), -1, dtype=np.int64)
            slot[dense_ids] = np.arange(len(dense_ids))
            k = slot[term]
            in_dense = k >= 0
            dense_tf[k[in_dense], row[in_dense]] = counts[in_dense]
            keep = ~in_dense
            term, row, counts = term[keep], row[keep], counts[keep]
            df[dense_ids] = 0
        indptr = np.concatenate(([0], np.cumsum(df))).astype(np.int64)
        # row numbers in 2 bytes while a segment's rows fit, else 4; term counts in 2
        row_type = np.uint16 if n <= 1 << 16 else np.int32
        return Postings(_encode(names), indptr, row.astype(row_type), counts, lengths, dense_ids.astype(np.int64),
                        dense_tf)


@dataclass(frozen=True)
class Lexicon:
    """A version's collection statistics: document frequency of each term over its live rows."""

    terms: np.ndarray  # sorted UTF-8 bytes
    df: np.ndarray  # int64
    n_rows: int
    mean_length: float

    @classmethod
    def combine(cls, parts: Sequence[tuple[Postings, np.ndarray]]) -> Lexicon:
        """The statistics of segments' postings, each with its live-row mask."""
        all_terms = [p.terms for p, _ in parts if len(p.terms)]
        dfs = [p.live_df(live) for p, live in parts if len(p.terms)]
        n = int(sum(int(live.sum()) for _, live in parts))
        total = float(sum(float(np.asarray(p.lengths)[live].sum()) for p, live in parts))
        if not all_terms:
            return cls(_encode([]), np.zeros(0, dtype=np.int64), n, total / n if n else 1.0)
        terms, inverse = np.unique(np.concatenate(all_terms), return_inverse=True)
        df = np.bincount(inverse, weights=np.concatenate(dfs), minlength=len(terms)).astype(np.int64)
        keep = df > 0
        return cls(terms[keep], df[keep], n, total / n if n else 1.0)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "terms.npy", self.terms)
        np.save(folder / "df.npy", self.df)

    @classmethod
    def load(cls, folder: Path, n_rows: int, mean_length: float) -> Lexicon:
        return cls(load_npy(folder / "terms.npy"), load_npy(folder / "df.npy"), n_rows, mean_length)

    def idf(self, terms: np.ndarray) -> np.ndarray:
        """Lucene's idf, ln(1 + (N − df + 0.5) / (df + 0.5)); 0 for a term no live row holds."""
        pos = _lookup(self.terms, terms)
        df = np.where(pos >= 0, np.asarray(self.df)[np.maximum(pos, 0)], 0).astype(np.float64)
        return np.where(pos >= 0, np.log1p((self.n_rows - df + 0.5) / (df + 0.5)), 0.0)

    def vocabulary(self) -> frozenset[str]:
        """Every term some live row holds."""
        return frozenset(t.decode("utf-8") for t in np.asarray(self.terms).tolist())


def length_norms(postings: Postings, mean_length: float) -> np.ndarray:
    """``k1 · (1 − b + b · length / mean length)`` per row: the part of BM25 that depends on the row alone,
    computed once per opened version rather than per query term."""
    return (K1 * ((1 - B) + B * np.asarray(postings.lengths, dtype=np.float32) / np.float32(mean_length))).astype(
        np.float32)


def score(query: str, lexicon: Lexicon, segments: Sequence[tuple[Postings, int]], total_rows: int,
          norms: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """BM25 of ``query`` for every row of a version (``segments``: postings with their first global row;
    ``norms``: their :func:`length_norms`, computed here when not given).

    Rows of deleted passages may score too; the caller masks them (it holds the live rows).
    Repeated query words count once each time, as in bm25s.
    """
    out = np.zeros(total_rows, dtype=np.float32)
    tokens = tokenize(query)
    if not tokens:
        return out
    terms = _encode(tokens)
    idf = lexicon.idf(terms)
    keep = idf > 0
    terms, idf = terms[keep], idf[keep].astype(np.float32)
    if not len(terms):
        return out
    for i, (postings, offset) in enumerate(segments):
        norm = norms[i] if norms is not None else length_norms(postings, lexicon.mean_length)
        part = out[offset : offset + len(norm)]  # a view: rows index it directly, whatever their dtype
        for pos, weight in zip(_lookup(postings.terms, terms).tolist(), idf.tolist(), strict=True):
            if pos < 0:
                continue
            dense = postings.dense_row(pos)
            if dense is not None:  # whole-row arithmetic: a row without the term adds 0 / norm
                tf = np.asarray(dense, dtype=np.float32)
                tf /= tf + norm
                tf *= np.float32(weight)
                part += tf
                continue
            a, b = int(postings.indptr[pos]), int(postings.indptr[pos + 1])
            rows = np.asarray(postings.rows[a:b])
            tf = np.asarray(postings.tf[a:b], dtype=np.float32)
            div = norm.take(rows)
            div += tf
            tf /= div
            tf *= np.float32(weight)
            # np.add.at, not part[rows] += …: NumPy ≥ 1.25 runs it as one unbuffered loop (0.43 ms against 1.37 ms
            # for 233k postings at 1M rows); rows are unique within a term, so both sum the same
            np.add.at(part, rows, tf)
    return out
