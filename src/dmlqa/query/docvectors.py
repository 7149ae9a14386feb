"""Document vectors: one vector per document of an index version, for document-level similarity.

A document's vector is 0.75 × the normalised mean of its chunk vectors + 0.25 × its first chunk (the
title and opening: for a paper, its abstract), centred on the corpus mean so that what every
document in a distributed-ML corpus shares does not dominate the cosine. Catalog cards have a single
chunk, so their card vector is their document vector. Measured on the snapshot index (238 documents,
12 query documents with hand-judged neighbours, nDCG@10): first chunk alone 0.53, plain mean 0.58,
the blend 0.58, the blend centred 0.64; embedding titles separately did not help (≤ 0.62).

The vectors are computed once per index version with numpy (``reconstruct_n`` in blocks, so an
index of hundreds of thousands of chunks is read once, not per query) and cached in memory. They
live apart from the ranking (:mod:`dmlqa.query.relatedness`) because they are a per-version cache
with its own lifetime, and the one place that reads a whole dense index.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from dmlqa.index.versions import IndexVersion

#: Weight of the mean of all chunk vectors against the first chunk (title + opening) in a
#: document's vector (nDCG@10 on the snapshot: 0 → 0.56, 0.5 → 0.62, 0.75 → 0.64, 1 → 0.61, centred).
MEAN_WEIGHT = 0.75
#: Subtract the corpus mean of the document vectors before comparing them.
CENTER = True
#: Rows read from the dense index per block while pooling.
_BLOCK = 65536
#: Versions whose document vectors (and :mod:`dmlqa.query.related`'s URL maps) stay in memory.
CACHE_VERSIONS = 4


@dataclass(frozen=True)
class DocVectors:
    """One vector per document of a version (row ``i`` is ``doc_ids[i]``), all L2-normalised.

    ``mean`` pools all chunk vectors, ``first`` is the first chunk (title + opening); ``rep`` is
    what documents are compared with: the blend of the two, minus ``center`` (the corpus mean of the
    blends; zero when not centring) and normalised again.
    """

    version: str
    doc_ids: tuple[str, ...]
    pos: dict[str, int]
    mean: np.ndarray
    first: np.ndarray
    rep: np.ndarray
    center: np.ndarray
    has_vector: np.ndarray  # bool: documents without chunks get no vector
    topic_weight: dict[str, float]  # lower-cased topic → rarity in [0, 1]
    topic_pos: dict[str, np.ndarray]  # lower-cased topic → positions of the documents that have it


def normalise(a: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; all-zero rows (documents without text) stay zero."""
    norms = np.linalg.norm(a, axis=-1, keepdims=True)
    return np.divide(a, norms, out=np.zeros_like(a), where=norms > 0)


def read_block(version: IndexVersion, start: int, n: int) -> np.ndarray:
    """Rows ``start .. start + n`` of the dense index, in one call where the index type allows it."""
    return version.vector_block(start, n)


def pool_vectors(version: IndexVersion) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    """(doc ids, normalised mean vectors, first-chunk vectors, has-vector mask), one pass over the index."""
    doc_ids = tuple(sorted(version.docs))
    pos = {d: i for i, d in enumerate(doc_ids)}
    dim = version.dim
    n = version.size
    lut = np.array([pos.get(d, -1) for d in version.doc_ids] + [-1], dtype=np.int64)
    codes = lut[version.row_doc]  # row_doc -1 (a deleted row) reads the trailing -1
    sums = np.zeros((len(doc_ids), dim), dtype=np.float64)
    first = np.zeros((len(doc_ids), dim), dtype=np.float32)
    first_seen = np.full(len(doc_ids), n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        block = read_block(version, start, min(_BLOCK, n - start))
        c = codes[start : start + len(block)]
        keep = c >= 0
        block, c, rows = block[keep], c[keep], np.flatnonzero(keep) + start
        if not len(c):
            continue
        # Chunks of a document are (nearly always) adjacent rows: sum each run, then add runs per doc.
        starts = np.concatenate(([0], np.flatnonzero(np.diff(c)) + 1))
        np.add.at(sums, c[starts], np.add.reduceat(block.astype(np.float64), starts, axis=0))
        earlier = rows[starts] < first_seen[c[starts]]
        for s in starts[earlier]:
            if rows[s] < first_seen[c[s]]:
                first_seen[c[s]] = rows[s]
                first[c[s]] = block[s]
    has = first_seen < n
    return doc_ids, normalise(sums.astype(np.float32)), normalise(first), has


def _build(version: IndexVersion, mean_weight: float, center: bool) -> DocVectors:
    doc_ids, mean, first, has = pool_vectors(version)
    raw = normalise(mean_weight * mean + (1.0 - mean_weight) * first)
    mu = raw[has].mean(axis=0) if center and has.any() else np.zeros(raw.shape[1], dtype=np.float32)
    rep = normalise(raw - mu) if center else raw
    rep[~has] = 0.0
    members: dict[str, list[int]] = {}
    for i, d in enumerate(doc_ids):
        for topic in {t.strip().lower() for t in version.docs[d].topics if t.strip()}:
            members.setdefault(topic, []).append(i)
    return DocVectors(
        version.name, doc_ids, {d: i for i, d in enumerate(doc_ids)}, mean, first, rep, mu.astype(np.float32),
        has, topic_weights(version), {t: np.array(p, dtype=np.int64) for t, p in members.items()},
    )


_T = TypeVar("_T")


class VersionCache(Generic[_T]):
    """Values derived from an index version (document vectors, the citation graph, URL maps), each
    computed once and kept for the last :data:`CACHE_VERSIONS` keys, so a newly published version
    replaces old ones without a restart.

    The value is computed under the lock: two threads never derive the same version twice.
    """

    def __init__(self, size: int = CACHE_VERSIONS) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, _T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], _T]) -> _T:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                found = self._items[key] = make()
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
            self._items.move_to_end(key)
            return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_VECTORS: VersionCache[DocVectors] = VersionCache()


def doc_vectors(version: IndexVersion, *, mean_weight: float | None = None, center: bool | None = None) -> DocVectors:
    """The document vectors of ``version``: computed on first use, then served from memory."""
    mw = MEAN_WEIGHT if mean_weight is None else mean_weight
    ce = CENTER if center is None else center
    return _VECTORS.get((str(version.path), version.name, float(mw), bool(ce)), lambda: _build(version, mw, ce))


def topic_weights(version: IndexVersion) -> dict[str, float]:
    """Rarity of each topic (lower-cased) in [0, 1]: ``log(N/df) / log(N)``; a topic on every doc is 0."""
    n = len(version.docs)
    df: dict[str, int] = {}
    for d in version.docs.values():
        for t in {t.strip().lower() for t in d.topics if t.strip()}:
            df[t] = df.get(t, 0) + 1
    if n < 2:
        return {t: 0.0 for t in df}
    return {t: max(0.0, math.log(n / c) / math.log(n)) for t, c in df.items()}


def clear_vectors() -> None:
    """Forget all cached document vectors (tests, benchmarks)."""
    _VECTORS.clear()
