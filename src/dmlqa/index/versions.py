"""The index stage: versioned, atomically published search indexes under ``home/index``.

Layout::

    index/
      CURRENT                  name of the published version (replaced atomically)
      versions/<name>/         one complete version:
        meta.json              the manifest: its segments, their deleted rows, counts, how it was built
        store.sqlite           its documents (where each one's rows are) and the citation graph
        lexicon/               BM25 collection statistics over its live rows (dmlqa.index.postings)
        segments/<id>/         immutable segments (dmlqa.index.segments), hard links shared between versions
      versions/.building-*     a version being written (never read; removed when stale)
      cache/embeddings.sqlite  vectors by (encoder, sha256 of text), shared by all versions

A build (:mod:`dmlqa.index.writer`) writes a new version into a ``.building-`` folder, renames it into
place (atomic on one file system) and only then replaces ``CURRENT`` with ``os.replace``. A reader
resolves ``CURRENT`` once and opens that folder — every file of it, at once — so it sees the old version
or the new one, never a mix, and a version pruned while a reader holds it keeps serving that reader
(hard-linked and open files outlive their names).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dmlqa.errors import DiskFullError, IndexDamagedError, IndexMissingError, is_disk_full
from dmlqa.extract.sentences import Sentence
from dmlqa.index.ann import choose_index_type
from dmlqa.index.citation_table import CitationRecord, has_citations, read_citations
from dmlqa.index.postings import Lexicon, length_norms, score
from dmlqa.index.segments import (
    HNSW_EF_SEARCH,
    HNSW_M,
    ChunkRow,
    Segment,
    SentencePlace,
    SentenceRow,
    fsync_path,
    short_error,
    top_k,
)
from dmlqa.index.writer import BUILDING_PREFIX, FORMAT, VersionWriter, dense_text, new_version_name
from dmlqa.models import Chunk, CitationLink, Document, shown_url
from dmlqa.paths import CURRENT, VERSIONS

__all__ = [
    "BUILDING_PREFIX", "CURRENT", "FORMAT", "HNSW_EF_SEARCH", "HNSW_M", "VERSIONS", "ChunkRecord", "DocRecord",
    "IndexVersion", "SentencePlace", "SentenceRecord", "check_version", "choose_index_type", "current_version",
    "dense_text", "list_versions", "new_version_name", "open_current", "prune", "publish", "read_meta",
    "remove_version", "write_version",
]

#: A first look into each HNSW segment (see :meth:`IndexVersion.dense_search`): this many times its share
#: of the results asked for, at least PROBE_MIN, with a candidate list of PROBE_EF.
PROBE_SHARE = 2.0
PROBE_MIN = 16
PROBE_EF = 64


def write_version(
    index_dir: Path, documents: Sequence[Document], chunks: Sequence[Chunk], vectors: np.ndarray,
    meta: dict[str, Any], *, ann_threshold: int, ivfpq_threshold: int | None = None, name: str | None = None,
    sentences: Sequence[tuple[int, Sentence]] = (), sentence_vectors: np.ndarray | None = None,
    citations: Sequence[tuple[CitationLink, str]] = (),
) -> str:
    """Write a complete version from scratch (not yet published), every document added anew; its name.

    ``chunks[i]`` has vector ``vectors[i]``; ``sentences`` are the quotable sentences as (ordinal in
    their document, sentence) with ``sentence_vectors[i]`` for ``sentences[i]``. The build itself goes
    through :class:`~dmlqa.index.writer.VersionWriter` document by document, reusing what did not change;
    this is that writer with nothing to reuse, for tests and tools.
    """
    if len(chunks) != len(vectors):
        raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    if sentence_vectors is None:
        sentence_vectors = np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 0), dtype=np.float32)
    if len(sentences) != len(sentence_vectors):
        raise ValueError(f"{len(sentences)} sentences but {len(sentence_vectors)} sentence vectors")
    by_doc: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_doc.setdefault(c.doc_id, []).append(i)
    sent_by_doc: dict[str, list[int]] = {}
    for i, (_, s) in enumerate(sentences):
        sent_by_doc.setdefault(s.doc_id, []).append(i)
    dim = int(vectors.shape[1]) if vectors.ndim == 2 else 0
    with VersionWriter(index_dir, None, ann_threshold=ann_threshold, ivfpq_threshold=ivfpq_threshold,
                       segment_rows=max(1, len(chunks)), name=name, dim=dim) as writer:
        for d in documents:
            rows = by_doc.get(d.doc_id, [])
            srows = sent_by_doc.get(d.doc_id, [])
            writer.add(d.doc_id, "", [chunks[i] for i in rows],
                       [dense_text(d.title, chunks[i].section, chunks[i].text) for i in rows],
                       vectors[rows] if rows else np.zeros((0, dim), dtype=np.float32),
                       [sentences[i] for i in srows],
                       sentence_vectors[srows] if srows else np.zeros((0, dim), dtype=np.float32))
        return writer.finish(documents, meta, citations)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def publish(index_dir: Path, name: str) -> None:
    """Make ``name`` the current version: one atomic rename of the pointer file."""
    if not (index_dir / VERSIONS / name / "meta.json").is_file():
        raise ValueError(f"version {name} is not complete")
    tmp = index_dir / f".{CURRENT}.{os.getpid()}.tmp"
    try:
        tmp.write_text(name + "\n", encoding="utf-8")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, index_dir / CURRENT)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if is_disk_full(exc):  # the version's last write: the pointer still names the old version
            raise DiskFullError(
                f"disk full while writing {index_dir / CURRENT} to publish index version {name}: free space and run "
                "again (the published version is unchanged)"
            ) from None
        raise
    fsync_path(index_dir)


def remove_version(index_dir: Path, name: str) -> None:
    """Delete an unpublished version folder (one :func:`publish` could not make current)."""
    if name != current_version(index_dir):
        shutil.rmtree(index_dir / VERSIONS / name, ignore_errors=True)


def current_version(index_dir: Path) -> str | None:
    try:
        name = (index_dir / CURRENT).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return name or None


def list_versions(index_dir: Path) -> list[str]:
    root = index_dir / VERSIONS
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def prune(index_dir: Path, keep: int, *, min_age_s: float = 60.0) -> list[str]:
    """Remove old versions beyond the newest ``keep`` and stale ``.building-`` folders.

    A building folder is stale when the process that wrote it is gone. The current version is
    never removed, whatever its age.
    """
    removed: list[str] = []
    root = index_dir / VERSIONS
    if not root.is_dir():
        return removed
    for p in root.iterdir():
        if p.name.startswith(BUILDING_PREFIX):
            pid_part = p.name.rsplit("-", 1)[-1]
            pid = int(pid_part) if pid_part.isdigit() else -1
            if pid != os.getpid() and not _pid_alive(pid):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p.name)
    current = current_version(index_dir)
    names = list_versions(index_dir)
    old = [n for n in names if n != current][: max(0, len(names) - max(keep, 1))]
    now = time.time()
    for n in old:
        p = root / n
        if now - p.stat().st_mtime >= min_age_s or keep == 0:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(n)
    return removed


# -- reading --------------------------------------------------------------------------------------


def read_meta(path: Path) -> dict[str, Any]:
    """A version folder's ``meta.json``, or :class:`IndexDamagedError` saying what is wrong with it."""
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IndexDamagedError(path.name, "meta.json is missing") from None
    except UnicodeDecodeError:
        raise IndexDamagedError(path.name, "meta.json is not UTF-8 text") from None
    except (OSError, ValueError) as exc:
        raise IndexDamagedError(path.name, f"meta.json is not valid JSON ({short_error(exc)})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("version"), str):
        raise IndexDamagedError(path.name, "meta.json is not an index description (no version)")
    if meta.get("format") != FORMAT or not isinstance(meta.get("segments"), list):
        # the error adds "; run `dmlqa build`" itself
        raise IndexDamagedError(path.name, f"it is in index format {meta.get('format')}, this dmlqa reads {FORMAT}")
    return meta


def check_version(path: Path) -> dict[str, Any]:
    """Open a version fully (meta, segments, lexicon, store) to tell whether it is readable; return its meta."""
    version = IndexVersion(path)
    version.close()
    return version.meta


#: A passage as a version returns it: a segment's row with the segment's offset added to ``row``.
ChunkRecord = ChunkRow


@dataclass(frozen=True)
class DocRecord:
    doc_id: str
    url: str
    source_url: str
    title: str
    kind: str
    content_type: str
    authors: tuple[str, ...]
    venue: str | None
    year: int | None
    topics: tuple[str, ...]
    is_card: bool
    n_chunks: int
    first_row: int | None  # the first of its rows in the version (a document's rows are contiguous)
    aliases: tuple[str, ...] = ()  # every URL the work is known by (see dmlqa.pipeline.works)
    lists: tuple[str, ...] = ()

    @property
    def link(self) -> str:
        """The address users are shown (``url`` is the identity copies merge on; see shown_url)."""
        return shown_url(self.url, self.source_url)


#: A stored sentence as a version returns it (``row`` counts across the version's segments).
SentenceRecord = SentenceRow


class _Lexical:
    """BM25 over a version's segments with its collection statistics (:mod:`dmlqa.index.postings`)."""

    def __init__(self, version: IndexVersion, lexicon: Lexicon) -> None:
        self._version = version
        self.lexicon = lexicon
        self._vocab: frozenset[str] | None = None
        self._segments = [(s.postings, int(o)) for s, o in zip(version.segments, version.offsets, strict=False)]
        self._norms = [length_norms(s.postings, lexicon.mean_length) for s in version.segments]
        self._dead = np.flatnonzero(~version.live)  # deleted rows, zeroed after scoring

    def scores(self, query: str) -> np.ndarray:
        """One BM25 score per row of the version; 0 for deleted rows and when no query term is indexed."""
        v = self._version
        out = score(query, self.lexicon, self._segments, v.size, self._norms)
        if len(self._dead):
            out[self._dead] = 0.0
        return out

    def vocabulary(self) -> frozenset[str]:
        """Every token some live passage holds (tokenised as :func:`dmlqa.index.lexical.tokenize` does)."""
        if self._vocab is None:
            self._vocab = self.lexicon.vocabulary()
        return self._vocab


class IndexVersion:
    """One opened, immutable version over its segments; safe to share between threads.

    Rows are numbered across segments (each segment's rows follow the previous one's); rows of deleted
    passages keep their numbers but are never returned. Everything per row is a NumPy array
    (memory-mapped where it is stored): ``row_doc[r]`` is the position in ``doc_ids`` of the document
    that owns row ``r``, -1 for a deleted row.
    """

    def __init__(self, path: Path) -> None:
        import faiss

        # Queries arrive one at a time: FAISS's OpenMP threads only fight over the cores then.
        # Measured on 2 busy cores at 20k vectors: p50 36 ms with 2 threads, 1.7 ms with 1.
        faiss.omp_set_num_threads(1)
        # The same for BLAS (NumPy's and FAISS's OpenBLAS): a query's products are small, and idle BLAS
        # threads spin between them. bench/scale.py at 200k passages: search p50/p95 16/23 CPU ms with
        # the default 2 threads, 8/12 with 1 (filtered 24/32 -> 11/14).
        threadpool_limits(1, user_api="blas")
        self.path = path
        self.name = path.name
        self.meta: dict[str, Any] = read_meta(path)
        self.segments: list[Segment] = []
        try:
            for info in self.meta["segments"]:
                self.segments.append(Segment(path / "segments" / str(info["id"]), self.name))
        except BaseException:
            self.close()
            raise
        sizes = [s.rows for s in self.segments]
        self.offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.sentence_offsets = np.concatenate(([0], np.cumsum([s.n_sentences for s in self.segments]))).astype(
            np.int64)
        self._seg_index = {s.folder.name: i for i, s in enumerate(self.segments)}
        self.dim = int(self.meta.get("dim") or next((s.dim for s in self.segments if s.dim), 0))
        self._read_documents()
        stats = self.meta.get("lexicon") or {}
        try:
            lexicon = Lexicon.load(path / "lexicon", int(stats.get("rows", 0)), float(stats.get("mean_length", 1.0)))
        except (OSError, ValueError) as exc:
            self.close()
            raise IndexDamagedError(self.name, f"lexicon/ cannot be read ({short_error(exc)})") from None
        self.lexical = _Lexical(self, lexicon)

    def _read_documents(self) -> None:
        try:
            self._db = sqlite3.connect(f"file:{self.path / 'store.sqlite'}?mode=ro", uri=True, check_same_thread=False)
            rows = self._db.execute(
                "SELECT doc_id, url, source_url, title, kind, content_type, authors, venue, year, topics, is_card, "
                "n_chunks, aliases, lists, segment, first_row, first_sentence, n_sentences, sha256 FROM documents"
            ).fetchall()
        except sqlite3.Error as exc:
            self.close()
            raise IndexDamagedError(self.name, f"store.sqlite cannot be read ({short_error(exc)})") from None
        self.docs: dict[str, DocRecord] = {}
        self.doc_ids: list[str] = []
        self._placement: dict[str, tuple[int, int, int, int, int]] = {}  # segment, first row, n, first sentence, n
        self._sha: dict[str, str | None] = {}
        self.row_doc = np.full(self.size, -1, dtype=np.int32)
        try:
            for r in rows:
                seg = self._seg_index.get(r[14]) if r[14] else None
                if r[14] and seg is None:
                    raise ValueError(f"document {r[0]} is in segment {r[14]}, which the manifest does not list")
                n = int(r[11] or 0)
                first = int(self.offsets[seg]) + int(r[15]) if seg is not None else None
                if seg is not None and (int(r[15]) < 0 or int(r[15]) + n > self.segments[seg].rows):
                    raise ValueError(f"document {r[0]}'s rows lie outside segment {r[14]}")
                self.docs[r[0]] = DocRecord(
                    r[0], r[1], r[2], r[3], r[4], r[5], tuple(json.loads(r[6] or "[]")), r[7], r[8],
                    tuple(json.loads(r[9] or "[]")), bool(r[10]), n, first,
                    tuple(json.loads(r[12] or "[]")), tuple(json.loads(r[13] or "[]")),
                )
                if seg is not None and n:
                    self.row_doc[first : first + n] = len(self.doc_ids)
                    self._placement[r[0]] = (seg, int(r[15]), n, int(r[16] or 0), int(r[17] or 0))
                self.doc_ids.append(r[0])
                self._sha[r[0]] = r[18] or None
        except (ValueError, TypeError, IndexError) as exc:
            self.close()
            why = f"store.sqlite does not match the segments ({short_error(exc)})"
            raise IndexDamagedError(self.name, why) from None
        self.live = self.row_doc >= 0
        live = int(self.live.sum())
        if isinstance(self.meta.get("chunks"), int) and live != self.meta["chunks"]:
            self.close()
            raise IndexDamagedError(self.name, f"its documents own {live} rows but meta.json says "
                                               f"{self.meta['chunks']} chunks")
        self._doc_kind = np.array([self.docs[d].kind.lower() for d in self.doc_ids], dtype=object)
        self._doc_year = np.array([self.docs[d].year or -1 for d in self.doc_ids], dtype=np.int32)

    @property
    def size(self) -> int:
        """Rows in the version's segments, deleted ones included (row numbers run up to this)."""
        return int(self.offsets[-1])

    # -- rows and documents --------------------------------------------------------------------------
    def doc_of(self, row: int) -> str | None:
        """The document owning ``row`` (None for a deleted row)."""
        i = int(self.row_doc[int(row)])
        return self.doc_ids[i] if i >= 0 else None

    def doc_mask(self, keep: Iterable[str] | None = None, *, kinds: Iterable[str] = (), since: int | None = None,
                 until: int | None = None, undated: bool = True) -> np.ndarray:
        """A bool per document (in ``doc_ids`` order): in ``keep`` (None: all), of one of ``kinds``, in the
        year range (``undated``: whether an unknown year passes it). Vectorised over the documents."""
        mask = np.ones(len(self.doc_ids), dtype=bool)
        if keep is not None:
            wanted = set(keep)
            mask &= np.fromiter((d in wanted for d in self.doc_ids), dtype=bool, count=len(self.doc_ids))
        kinds = [k.lower() for k in kinds]
        if kinds:
            mask &= np.isin(self._doc_kind, kinds)
        if since or until:
            known = self._doc_year >= 0
            in_range = known & (self._doc_year >= (since or 0)) & (self._doc_year <= (until or 10**6))
            mask &= in_range | (~known & undated)
        return mask

    def row_mask(self, doc_mask: np.ndarray) -> np.ndarray:
        """A bool per row: live and owned by a document ``doc_mask`` keeps (one gather, no Python loop)."""
        return np.append(doc_mask, False)[self.row_doc]

    def _locate(self, rows: Iterable[int], offsets: np.ndarray | None = None) -> dict[int, list[tuple[int, int]]]:
        """Global rows (of passages, or of sentences with their offsets) by segment as (global, local) pairs."""
        offsets = self.offsets if offsets is None else offsets
        rows = np.asarray(list(rows), dtype=np.int64)
        seg = np.searchsorted(offsets, rows, side="right") - 1
        out: dict[int, list[tuple[int, int]]] = {}
        for r, s in zip(rows.tolist(), seg.tolist(), strict=True):
            out.setdefault(s, []).append((r, r - int(offsets[s])))
        return out

    def chunks(self, rows: Iterable[int]) -> dict[int, ChunkRecord]:
        out: dict[int, ChunkRecord] = {}
        for s, pairs in self._locate(rows).items():
            off = int(self.offsets[s])
            for c in self.segments[s].chunks([local for _, local in pairs]):
                out[off + c.row] = ChunkRecord(off + c.row, c.chunk_id, c.doc_id, c.text, c.page, c.section,
                                               c.start, c.end)
        return out

    def doc_sha256(self, doc_id: str) -> str | None:
        """The sha256 of the source bytes ``doc_id``'s text was extracted from, as this version indexed it:
        what tells the archived bytes (and the stored text) of this version from a later build's."""
        return self._sha.get(doc_id)

    def doc_rows(self, doc_id: str) -> list[int]:
        place = self._placement.get(doc_id)
        if place is None:
            return []
        first = int(self.offsets[place[0]]) + place[1]
        return list(range(first, first + place[2]))

    # -- vectors -------------------------------------------------------------------------------------
    def vectors(self, rows: Sequence[int]) -> np.ndarray:
        """Stored vectors of some rows (flat and HNSW segments keep them exactly, IVF-PQ approximately)."""
        return self._gather(rows, self.offsets, lambda seg, local: seg.vectors(local))

    def vector_block(self, start: int, n: int) -> np.ndarray:
        """Rows ``start .. start + n`` in as few reads as the segments allow (a pass over the whole index)."""
        parts = []
        end = start + n
        for s, seg in enumerate(self.segments):
            lo, hi = max(start, int(self.offsets[s])), min(end, int(self.offsets[s + 1]))
            if lo < hi:
                parts.append(seg.block(lo - int(self.offsets[s]), hi - lo))
        return np.concatenate(parts) if parts else np.zeros((0, self.dim), dtype=np.float32)

    def dense_search(self, q: np.ndarray, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``n`` nearest live rows to ``q`` (inner product) among ``allowed`` rows (None: all live rows).

        Searching each of many HNSW segments for all ``n`` costs ``n`` candidates per segment (20 segments at
        1M rows: 16 ms). So each HNSW segment is first asked for its share of ``n`` (:data:`PROBE_SHARE` times
        its part of the rows, at least :data:`PROBE_MIN`, with a :data:`PROBE_EF` candidate list); a segment
        whose last answer still beats the ``n``-th best overall may hold more, and is searched again for ``n``.
        A segment that is not searched again holds nothing better than the ``n``-th best (as far as its HNSW
        graph finds), so the result is the one a full search of every segment gives.
        """
        q = np.asarray(q, dtype=np.float32)
        parts = []
        for s, seg in enumerate(self.segments):
            lo, hi = int(self.offsets[s]), int(self.offsets[s + 1])
            mask = (allowed if allowed is not None else self.live)[lo:hi]
            count = int(mask.sum())
            if count:
                parts.append((seg, lo, None if count == hi - lo else mask, count))
        if not parts:
            return []
        total = sum(p[3] for p in parts)
        found: list[tuple[np.ndarray, np.ndarray]] = []
        cut_short: list[bool] = []  # asked for fewer than n, and returned all it was asked for
        for seg, lo, mask, count in parts:
            k = n if seg.index_type != "hnsw" else min(n, max(PROBE_MIN, math.ceil(PROBE_SHARE * n * count / total)))
            local, sc = seg.search(q, k, mask, ef=PROBE_EF if k < n else None)
            found.append((local + lo, sc))
            cut_short.append(k < min(n, count) and len(local) == k)
        scores = np.concatenate([sc for _, sc in found])
        if len(scores) >= n and any(cut_short):
            nth = float(-np.partition(-scores, n - 1)[n - 1])
            for i, (seg, lo, mask, _count) in enumerate(parts):
                if cut_short[i] and float(found[i][1][-1]) >= nth:  # its share was all above the bar: look further
                    local, sc = seg.search(q, n, mask)
                    found[i] = (local + lo, sc)
        all_rows = np.concatenate([r for r, _ in found])
        all_scores = np.concatenate([sc for _, sc in found])
        order = np.argsort(-all_scores, kind="stable")[:n]
        return [(int(all_rows[i]), float(all_scores[i])) for i in order]

    def top_lexical(self, scores: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The ``n`` best rows of a BM25 score array (argpartition, no full sort); zero scores never rank."""
        return [(int(r), float(scores[r])) for r in top_k(scores, n)]

    # -- sentences -------------------------------------------------------------------------------------
    @property
    def has_sentences(self) -> bool:
        return bool(self.meta.get("sentences"))

    def _sentence(self, s: int, row: Any) -> SentenceRecord:
        return SentenceRecord(int(self.sentence_offsets[s]) + row.row, row.doc_id, row.ordinal, row.start, row.end,
                              row.page, row.section, row.text, row.role)

    def sentences_in(self, doc_id: str, start: int, end: int) -> list[SentenceRecord]:
        """The stored (quotable) sentences of a document that overlap ``[start, end)``, in order."""
        place = self._placement.get(doc_id)
        if place is None:
            return []
        seg = self.segments[place[0]]
        return [self._sentence(place[0], r) for r in seg.sentences_in(doc_id, place[3], place[4], start, end)]

    def sentence_by_ordinal(self, doc_id: str, ordinal: int) -> SentenceRecord | None:
        place = self._placement.get(doc_id)
        if place is None:
            return None
        r = self.segments[place[0]].sentence_by_ordinal(doc_id, place[3], place[4], ordinal)
        return self._sentence(place[0], r) if r else None

    def sentence_rows(self, doc_id: str) -> range:
        """A document's sentence rows: contiguous, in the order of the document (a build stores its quotable
        sentences by ordinal), so row ``r - 1`` is the stored sentence before ``r``."""
        if (place := self._placement.get(doc_id)) is None:
            return range(0)
        first = int(self.sentence_offsets[place[0]]) + place[3]
        return range(first, first + place[4])

    def sentence_places(self, rows: Iterable[int]) -> dict[int, SentencePlace]:
        """Some sentences by row, without their texts (rows and chunks counted across the version): an answer
        ranks them by vector (:meth:`sentence_cosines`), then reads the few it keeps (:meth:`sentence_texts`)."""
        out: dict[int, SentencePlace] = {}
        for s, pairs in self._locate(rows, self.sentence_offsets).items():
            base, chunk_base = int(self.sentence_offsets[s]), int(self.offsets[s])
            got = self.segments[s].sentence_places([local for _, local in pairs], row_base=base, chunk_base=chunk_base)
            out.update((p.row, p) for p in got)
        return out

    def sentence_places_in(self, doc_id: str, start: int, end: int) -> list[SentencePlace]:
        """The stored sentences of a document that overlap ``[start, end)``, without their texts, in order."""
        if (place := self._placement.get(doc_id)) is None:
            return []
        s, base, chunk_base = place[0], int(self.sentence_offsets[place[0]]), int(self.offsets[place[0]])
        return self.segments[s].sentence_places_in(place[3], place[4], start, end, row_base=base, chunk_base=chunk_base)

    def sentence_texts(self, places: Iterable[SentencePlace]) -> dict[int, str]:
        """The texts of some sentences (:meth:`sentence_places`) by row; only the passages holding them are read."""
        places = list(places)
        bodies: dict[int, list[str]] = {}
        for s, pairs in self._locate(p.chunk for p in places).items():
            off = int(self.offsets[s])
            for local, texts in self.segments[s].chunk_sentence_texts([local for _, local in pairs]).items():
                bodies[off + local] = texts
        return {p.row: bodies[p.chunk][p.pos] for p in places}

    def sentence_vectors(self, rows: Sequence[int]) -> np.ndarray:
        return self._gather(rows, self.sentence_offsets, lambda seg, local: seg.sentence_vectors(local))

    def sentence_cosines(self, rows: Sequence[int], q: np.ndarray) -> np.ndarray:
        """``sentence_vectors(rows) @ q`` computed on the stored codes (:meth:`Segment.sentence_cosines`)."""
        return self._gather(rows, self.sentence_offsets, lambda seg, local: seg.sentence_cosines(local, q), per_row=())

    def _gather(self, rows: Iterable[int], offsets: np.ndarray, read: Callable[[Segment, np.ndarray], np.ndarray],
                *, per_row: tuple[int, ...] | None = None) -> np.ndarray:
        """What ``read`` gives for version rows (passages or sentences, numbered by ``offsets``), segment by
        segment: an array of shape ``per_row`` a row (default: a vector of the version's dimension)."""
        rows = np.asarray(list(rows), dtype=np.int64)
        out = np.zeros((len(rows), *((self.dim,) if per_row is None else per_row)), dtype=np.float32)
        seg = np.searchsorted(offsets, rows, side="right") - 1
        for s in np.unique(seg).tolist():
            pick = np.flatnonzero(seg == s)
            out[pick] = read(self.segments[s], rows[pick] - int(offsets[s]))
        return out

    # -- citations -------------------------------------------------------------------------------------
    @property
    def has_citations(self) -> bool:
        return has_citations(self._db)

    def citations(self, *, citing: str | None = None, cited: str | None = None) -> list[CitationRecord]:
        """The stored citation links (all, or those of one citing or one cited document), in list order."""
        return read_citations(self._db, self.name, citing=citing, cited=cited)

    def close(self) -> None:
        for s in self.segments:
            s.close()
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()


def open_current(index_dir: Path) -> IndexVersion:
    """Open the published version, or say how to make one."""
    name = current_version(index_dir)
    if name is None:
        raise IndexMissingError(
            f"no index in {index_dir.parent} yet: run `dmlqa build` first (see README.md)"
        )
    path = index_dir / VERSIONS / name
    if not path.is_dir():
        raise IndexDamagedError(name, f"its folder is missing from {path.parent}")
    return IndexVersion(path)
