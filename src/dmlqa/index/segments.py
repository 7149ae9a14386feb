"""Immutable index segments: the passages, sentences and vectors of some documents, written once.

A version (:mod:`dmlqa.index.versions`) is a manifest naming segments; a build writes segments for new
and changed documents only and shares the unchanged ones with the previous version as hard links, so a
rebuild costs what changed, not what the collection holds. Layout of one segment folder::

    segment.json         rows, sentences, dimension, dense index type
    rows.sqlite          chunks and quotable sentences (page, section, offsets); each passage's text and the
                         texts of the sentences that start in it, zlib-compressed together (a sentence
                         repeats its passage's words, so the pair costs ~35 % of the raw texts)
    vectors.npy          float32 passage vectors (flat segments: searched exactly, memory-mapped)
    dense.faiss          HNSW (vectors kept as 8-bit codes) or IVF-PQ index of the passage vectors
                         (big segments; no vectors.npy then)
    bm25/                postings (:class:`dmlqa.index.postings.Postings`)
    sentences.q.npy      int8 sentence vectors, one scale per row in sentences.scale.npy

Rows are numbered from 0 inside a segment; the version adds each segment's offset. A document's rows are
always contiguous in one segment, so a version places a document with (segment, first row, count).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dmlqa.errors import IndexDamagedError
from dmlqa.index.ann import choose_index_type
from dmlqa.index.postings import Postings, PostingsBuilder, load_npy
from dmlqa.index.rowread import read_rows

#: HNSW parameters for big segments. Measured on 11k real all-MiniLM-L6-v2 vectors of the snapshot (300
#: held-out queries, recall@10 against exact search, efSearch 128): float32 M=32 0.997 at 1,808 B a vector;
#: float16 M=16 0.996 at 912 B; 8-bit scalar-quantised M=16 0.992 at 528 B. The last is kept: a quarter of
#: the bytes for 0.5 % of recall, and the version of a 200k-passage collection fits in 800 MiB.
#: M=12 and efConstruction 40 (were 16 and 80): the graph's build is the largest single cost of a large segment (a
#: quarter of a 250k-passage build's CPU), and a 1M build was over its budget. On 19k real vectors of the snapshot
#: (SQ8, 300 held-out queries; ``bench/ann_index.py``), µs to add a vector and recall@10 at efSearch 128 / 64:
#: M=16 efC 80: 217, 0.983 / 0.977; 48: 108, 0.980 / 0.971; 40: 101, 0.978 / 0.965; 32: 74, 0.974 / 0.959;
#: M=12 efC 48: 97, 0.979 / 0.970; 40: 84, 0.976 / 0.962. On the scale bench's stand-in vectors M=12 saves 14 %
#: of the graph's build, and each vector keeps 8 fewer links.
HNSW_M = 12
HNSW_EF_CONSTRUCTION = 40
HNSW_EF_SEARCH = 128

_SCHEMA = """
CREATE TABLE chunks (
    row INTEGER PRIMARY KEY, chunk_id TEXT, doc_id TEXT, page INTEGER, section TEXT, start INTEGER, "end" INTEGER,
    body BLOB
);
CREATE TABLE sentences (
    row INTEGER PRIMARY KEY, chunk INTEGER, pos INTEGER, ordinal INTEGER, start INTEGER, "end" INTEGER,
    page INTEGER, section TEXT, role TEXT
);
"""
#: zlib level for the texts: 6 (the default) compresses English ~2.8x; higher levels gain < 2 %.
ZLIB_LEVEL = 6


@dataclass(slots=True)
class ChunkRow:
    """A passage as a segment stores it (the version adds the segment's offset to ``row``)."""

    row: int
    chunk_id: str
    doc_id: str
    text: str
    page: int | None
    section: str | None
    start: int
    end: int


@dataclass(slots=True)
class SentenceRow:
    row: int
    doc_id: str
    ordinal: int  # position among all the document's sentences (quotable or not)
    start: int
    end: int
    page: int | None
    section: str | None
    text: str
    role: str


class SentencePlace(NamedTuple):
    """A stored sentence without its text: where it stands and which passage's body holds its text.

    An answer ranks the thousands of sentences of its documents by their vectors and quotes a few dozen;
    reading every text first decompressed every passage of those documents (~1,700 a question). A tuple,
    not a dataclass: a question reads ~4,500 of them straight from SQLite."""

    row: int  # the sentence's row (its vector)
    chunk: int  # the row of the passage whose stored body holds its text
    pos: int  # its index among the texts stored with that passage
    ordinal: int  # position among all the document's sentences (quotable or not)
    start: int
    end: int
    page: int | None
    section: str | None
    role: str


def new_segment_id() -> str:
    return datetime.now(UTC).strftime("s%Y%m%dT%H%M%S") + "-" + secrets.token_hex(4)


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes and one scale per row (max |x| / 127): a quarter of float32's bytes.

    Sentence vectors are only compared with a question's vector to rank a few hundred candidates; the
    rounding error (≤ 0.4 % of the largest component) moves cosines by ~1e-3.
    """
    x = np.asarray(vectors, dtype=np.float32)
    if not len(x):
        return np.zeros((0, x.shape[1] if x.ndim == 2 else 0), dtype=np.int8), np.zeros(0, dtype=np.float32)
    scale = np.abs(x).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    return np.clip(np.rint(x / scale[:, None]), -127, 127).astype(np.int8), scale.astype(np.float32)


def build_dense(vectors: np.ndarray, index_type: str):  # noqa: ANN201 - faiss.Index
    import faiss

    dim = int(vectors.shape[1])
    if index_type == "ivfpq":
        from dmlqa.index.ann import build_ivfpq

        return build_ivfpq(vectors)
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.hnsw.efSearch = HNSW_EF_SEARCH
    index.train(x)  # each dimension's range, for its 8-bit codes
    index.add(x)
    return index


def _bodies(chunks: Sequence[ChunkRow], sentences: Sequence[SentenceRow]) -> tuple[list[bytes], list[tuple]]:
    """Each passage's stored body (its text and the texts of the sentences that start in it) and the
    sentence rows pointing into them: a sentence goes with its document's last passage starting at or
    before it (the first passage when none does)."""
    import bisect

    by_doc: dict[str, list[tuple[int, int]]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append((c.start, c.row))
    starts_rows = {d: ([a for a, _ in sorted(v)], [b for _, b in sorted(v)]) for d, v in by_doc.items()}
    texts: dict[int, list[str]] = {c.row: [] for c in chunks}
    placed = []
    for s in sentences:
        starts, rows = starts_rows[s.doc_id]
        chunk = rows[max(0, bisect.bisect_right(starts, s.start) - 1)]
        placed.append((s.row, chunk, len(texts[chunk]), s.ordinal, s.start, s.end, s.page, s.section, s.role))
        texts[chunk].append(s.text)
    bodies = [zlib.compress(json.dumps([c.text, texts[c.row]], ensure_ascii=False).encode("utf-8", "surrogatepass"),
                            ZLIB_LEVEL) for c in chunks]
    return bodies, placed


def _body(blob: bytes) -> tuple[str, list[str]]:
    text, sentences = json.loads(zlib.decompress(blob).decode("utf-8", "surrogatepass"))
    return text, sentences


class SegmentBuilder:
    """The rows of one segment being filled, written to its folder as they arrive: passages and sentences
    (texts zlib-compressed) into ``rows.sqlite``, passage and sentence vectors into raw files; only the BM25
    terms (int32 ids) stay in memory. :meth:`write` turns the files into the segment's final ones.

    So a build's memory does not follow the rows of the segment being filled (a million-row build would
    otherwise keep ~7 KB a row, 350 MB per 50k rows, in Python objects), and segments can be large: a
    query searches each segment's HNSW graph and postings, so fewer, larger segments are what keep search
    fast at a million rows."""

    def __init__(self, dim: int, folder: Path) -> None:
        self.dim = dim
        self.folder = folder
        self.postings = PostingsBuilder()
        self._rows = 0
        self._sentences = 0
        self._db: sqlite3.Connection | None = None
        self._files: dict[str, Any] = {}

    @property
    def rows(self) -> int:
        return self._rows

    def _open(self) -> None:
        self.folder.mkdir(parents=True)
        self._db = sqlite3.connect(str(self.folder / "rows.sqlite"))
        self._db.executescript(_SCHEMA)
        for name in _SPILL:
            self._files[name] = open(self.folder / name, "wb")  # noqa: SIM115 - closed in write()

    def add(self, chunks: Sequence[ChunkRow], lexical_texts: Sequence[str], vectors: np.ndarray,
            sentences: Sequence[SentenceRow], codes: tuple[np.ndarray, np.ndarray]) -> tuple[int, int]:
        """One document's rows (``chunks[i]`` has ``vectors[i]`` and BM25 text ``lexical_texts[i]``; ``codes`` are
        its sentences' quantised vectors, :func:`quantize`); returns its first row and first sentence here."""
        if not (len(chunks) == len(vectors) == len(lexical_texts)):
            raise ValueError(f"{len(chunks)} chunks, {len(vectors)} vectors, {len(lexical_texts)} texts")
        if len(sentences) != len(codes[0]):
            raise ValueError(f"{len(sentences)} sentences but {len(codes[0])} sentence vectors")
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(chunks), -1)
        if len(chunks) and vectors.shape[1] != self.dim:
            raise ValueError(f"vectors of dimension {vectors.shape[1]}, not {self.dim}")
        if self._db is None:
            self._open()
        first, first_s = self._rows, self._sentences
        # renumbered by the constructors: dataclasses.replace costs ~10 us a call, 4 % of a build at 1M
        chunks = [ChunkRow(first + i, c.chunk_id, c.doc_id, c.text, c.page, c.section, c.start, c.end)
                  for i, c in enumerate(chunks)]
        sentences = [SentenceRow(first_s + i, x.doc_id, x.ordinal, x.start, x.end, x.page, x.section, x.text, x.role)
                     for i, x in enumerate(sentences)]
        bodies, placed = _bodies(chunks, sentences)
        assert self._db is not None
        self._db.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?)",
                             [(c.row, c.chunk_id, c.doc_id, c.page, c.section, c.start, c.end, b)
                              for c, b in zip(chunks, bodies, strict=True)])
        self._db.executemany("INSERT INTO sentences VALUES (?,?,?,?,?,?,?,?,?)", placed)
        self._files["vectors.f32"].write(vectors.tobytes())
        if sentences:
            self._files["sentences.q.raw"].write(np.asarray(codes[0], dtype=np.int8).tobytes())
            self._files["sentences.scale.raw"].write(np.asarray(codes[1], dtype=np.float32).tobytes())
        self.postings.add(lexical_texts)
        self._rows += len(chunks)
        self._sentences += len(sentences)
        return first, first_s

    def write(self, *, ann_threshold: int, ivfpq_threshold: int | None) -> dict[str, Any]:
        """Finish the segment in its folder; its description for the version's manifest."""
        folder = self.folder
        if self._db is None:
            self._open()
        assert self._db is not None
        self._db.commit()
        self._db.close()
        for f in self._files.values():
            f.close()
        dim = self.dim
        vectors = np.fromfile(folder / "vectors.f32", dtype=np.float32).reshape(self._rows, dim)
        (folder / "vectors.f32").unlink()
        index_type = choose_index_type(len(vectors), ann_threshold, ivfpq_threshold)
        if index_type == "flat":
            np.save(folder / "vectors.npy", vectors)
        else:
            import faiss

            faiss.write_index(build_dense(vectors, index_type), str(folder / "dense.faiss"))
        del vectors
        self.postings.build().save(folder / "bm25")
        _raw_to_npy(folder / "sentences.q.raw", folder / "sentences.q.npy", np.int8, (self._sentences, dim))
        _raw_to_npy(folder / "sentences.scale.raw", folder / "sentences.scale.npy", np.float32, (self._sentences,))
        info = {"id": folder.name, "rows": self._rows, "sentences": self._sentences, "dim": dim,
                "index_type": index_type}
        if index_type == "hnsw":
            info["hnsw"] = {"M": HNSW_M, "efSearch": HNSW_EF_SEARCH}
        (folder / "segment.json").write_text(json.dumps(info), encoding="utf-8")
        fsync_tree(folder)
        return info


#: The files a SegmentBuilder appends to as rows arrive (raw arrays, no header), turned into .npy by write().
_SPILL = ("vectors.f32", "sentences.q.raw", "sentences.scale.raw")


def _raw_to_npy(raw: Path, target: Path, dtype: type, shape: tuple[int, ...]) -> None:
    """A headerless array file as a ``.npy``: NumPy's header, then the bytes copied in blocks (sentence codes run
    to gigabytes). Plain writes, not a memory map: a full disk must raise ENOSPC, not kill the build with SIGBUS."""
    import shutil

    with open(target, "wb") as out, open(raw, "rb") as src:
        np.lib.format.write_array_header_1_0(
            out, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape})
        shutil.copyfileobj(src, out, 1 << 22)
    raw.unlink()


def fsync_tree(path: Path) -> None:
    for f in path.rglob("*"):
        if f.is_file():
            fsync_path(f)
    fsync_path(path)


def fsync_path(path: Path) -> None:
    """Flush a file, or a directory's entries, to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def link_segment(source: Path, target: Path) -> None:
    """Share an unchanged segment with a new version: hard links (no copy), a copy where links fail."""
    import shutil

    target.mkdir(parents=True)
    for f in source.rglob("*"):
        dest = target / f.relative_to(source)
        if f.is_dir():
            dest.mkdir(exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(f, dest)
        except OSError:  # another file system, or one without hard links
            shutil.copy2(f, dest)


def short_error(exc: BaseException) -> str:
    """The gist of an error in one short line (FAISS errors span several lines with C++ locations)."""
    import re

    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
    text = re.sub(r"^Error in .*? at \S+:\d+: (Error: )?", "", lines[-1])
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= 160 else text[:157] + "..."


class Segment:
    """One opened segment; every file is opened here, so a reader never needs the folder again
    (a version pruned while a request still holds it keeps serving from the open files)."""

    def __init__(self, folder: Path, version_name: str) -> None:
        import faiss

        self.folder = folder
        where = f"segment {folder.name}"
        try:
            self.info: dict[str, Any] = json.loads((folder / "segment.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            why = f"{where}: segment.json cannot be read ({short_error(exc)})"
            raise IndexDamagedError(version_name, why) from None
        self.rows = int(self.info["rows"])
        self.n_sentences = int(self.info.get("sentences", 0))
        self.index_type = self.info.get("index_type", "flat")
        self.dense = None
        self._vectors: np.ndarray | None = None
        try:
            if self.index_type == "flat":
                self._vectors = load_npy(folder / "vectors.npy")
                n = len(self._vectors)
            else:
                self.dense = faiss.read_index(str(folder / "dense.faiss"))
                if self.index_type == "hnsw":
                    self.dense.hnsw.efSearch = int((self.info.get("hnsw") or {}).get("efSearch", HNSW_EF_SEARCH))
                else:
                    from dmlqa.index.ann import enable_reconstruct

                    enable_reconstruct(self.dense)
                n = int(self.dense.ntotal)
        except (RuntimeError, MemoryError, OSError, ValueError, TypeError, AttributeError) as exc:
            name = "vectors.npy" if self.index_type == "flat" else "dense.faiss"
            raise IndexDamagedError(version_name, f"{where}: {name} cannot be read ({short_error(exc)})") from None
        if n != self.rows:
            raise IndexDamagedError(version_name, f"{where}: holds {n} vectors but segment.json says {self.rows}")
        self.dim = int(self.info.get("dim", 0))
        try:
            self.postings = Postings.load(folder / "bm25")
            self._sq = load_npy(folder / "sentences.q.npy")
            self._scale = load_npy(folder / "sentences.scale.npy")
            # kept open, so that a pruned version's reader still reads it (as its memory maps do)
            self._sq_file = open(folder / "sentences.q.npy", "rb", buffering=0)  # noqa: SIM115 - closed in close()
        except (OSError, ValueError) as exc:
            raise IndexDamagedError(version_name, f"{where}: bm25/ or sentence vectors cannot be read "
                                                  f"({short_error(exc)})") from None
        if len(self.postings.lengths) != self.rows:
            raise IndexDamagedError(version_name, f"{where}: bm25/ holds {len(self.postings.lengths)} rows, "
                                                  f"not {self.rows}")
        try:
            self._db = sqlite3.connect(f"file:{folder / 'rows.sqlite'}?mode=ro", uri=True, check_same_thread=False)
            self._db.execute("SELECT count(*) FROM chunks").fetchone()
        except sqlite3.Error as exc:
            raise IndexDamagedError(version_name, f"{where}: rows.sqlite cannot be read ({short_error(exc)})") from None
        self._lock = threading.Lock()  # one SQLite connection, shared by the request threads
        self._version_name = version_name

    # -- vectors ----------------------------------------------------------------------------------
    def search(self, q: np.ndarray, k: int, allowed: np.ndarray | None,
               ef: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best local rows for ``q`` (inner product) among ``allowed`` (bool per row; None: all);
        ``ef``: the HNSW candidate list (default: the segment's ``efSearch``), never below ``k``."""
        k = min(k, self.rows if allowed is None else int(allowed.sum()))
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if self._vectors is not None:
            return _top(np.asarray(self._vectors @ q, dtype=np.float32), k, allowed)
        if self.index_type == "hnsw" and (allowed is not None or ef is not None):
            import faiss

            params = faiss.SearchParametersHNSW()
            params.efSearch = max(int(ef or self.dense.hnsw.efSearch), k)
            if allowed is not None:
                bits = np.packbits(allowed, bitorder="little")
                params.sel = faiss.IDSelectorBitmap(self.rows, faiss.swig_ptr(bits))
            scores, rows = self.dense.search(q[None, :].astype(np.float32), k, params=params)
        else:
            want = k if allowed is None else min(self.rows, k * 4)
            scores, rows = self.dense.search(q[None, :].astype(np.float32), want)
        rows, scores = rows[0], scores[0]
        ok = rows >= 0
        if allowed is not None:
            ok &= allowed[np.maximum(rows, 0)]
        rows, scores = rows[ok][:k], scores[ok][:k]
        if allowed is not None and len(rows) < k:  # a narrow filter: score the allowed rows exactly
            keep = np.flatnonzero(allowed)
            order, values = _top(self.vectors(keep) @ q, k, None)
            return keep[order], values
        return rows.astype(np.int64), scores.astype(np.float32)

    def vectors(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        if self._vectors is not None:
            return np.asarray(self._vectors[rows], dtype=np.float32)
        if not len(rows):
            return np.zeros((0, self.dim), dtype=np.float32)
        lo, hi = int(rows.min()), int(rows.max()) + 1
        if hi - lo <= 4 * len(rows):  # one bulk read of the span beats row-by-row calls
            return self.block(lo, hi - lo)[rows - lo]
        return np.vstack([self.dense.reconstruct(int(r)) for r in rows]).astype(np.float32)

    def block(self, start: int, n: int) -> np.ndarray:
        """Rows ``start .. start + n`` of the passage vectors."""
        if self._vectors is not None:
            return np.asarray(self._vectors[start : start + n], dtype=np.float32)
        try:
            return np.asarray(self.dense.reconstruct_n(start, n), dtype=np.float32)
        except RuntimeError:
            return np.vstack([self.dense.reconstruct(int(r)) for r in range(start, start + n)]).astype(np.float32)

    def sentence_vectors(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        return self._codes(rows).astype(np.float32) * np.asarray(self._scale[rows])[:, None]

    def _codes(self, rows: np.ndarray) -> np.ndarray:
        """The int8 codes of ``rows``, read with ``pread`` (:func:`dmlqa.index.rowread.read_rows` says why)."""
        return read_rows(self._sq_file, self._sq, rows)

    def sentence_cosines(self, rows: Sequence[int] | np.ndarray, q: np.ndarray) -> np.ndarray:
        """Inner products of some sentences' vectors with ``q``: the codes times ``q``, then each row's scale
        (the same as :meth:`sentence_vectors` ``@ q`` without making the float vectors: a tenth of the time
        for the thousands of sentences an answer ranks)."""
        rows = np.asarray(rows, dtype=np.int64)
        return (self._codes(rows).astype(np.float32) @ np.asarray(q, dtype=np.float32)) * self._scale[rows]

    def sentence_codes(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self._sq[start : start + n]), np.asarray(self._scale[start : start + n])

    # -- rows -------------------------------------------------------------------------------------
    def _query(self, sql: str, args: Sequence[Any]) -> list[tuple]:
        try:
            with self._lock:
                return self._db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise IndexDamagedError(self._version_name, f"segment {self.folder.name}: rows.sqlite cannot be read "
                                                        f"({short_error(exc)})") from None

    def _query_in(self, sql: str, rows: Sequence[int], before: Sequence[Any] = ()) -> list[tuple]:
        """``sql`` for ``rows``, whose ``{marks}`` is the placeholder list of an ``IN``, run 500 rows at a time (under
        SQLite's limit on bound parameters); ``before`` are the parameters ahead of the list."""
        out: list[tuple] = []
        for s in range(0, len(rows), 500):
            part = rows[s : s + 500]
            out += self._query(sql.format(marks=",".join("?" * len(part))), (*before, *part))
        return out

    def chunks(self, rows: Sequence[int]) -> list[ChunkRow]:
        return [_chunk(r) for r in self._query_in(
            'SELECT row, chunk_id, doc_id, page, section, start, "end", body FROM chunks WHERE row IN ({marks})',
            [int(r) for r in rows])]

    def chunk_range(self, start: int, n: int) -> list[ChunkRow]:
        return [_chunk(r) for r in self._query(
            'SELECT row, chunk_id, doc_id, page, section, start, "end", body FROM chunks WHERE row >= ? AND row < ? '
            "ORDER BY row", (start, start + n))]

    def _sentences(self, doc_id: str, where: str, args: Sequence[Any]) -> list[SentenceRow]:
        rows = self._query(
            'SELECT s.row, s.pos, s.ordinal, s.start, s."end", s.page, s.section, s.role, c.row, c.body '
            f"FROM sentences s JOIN chunks c ON c.row = s.chunk WHERE {where} ORDER BY s.start, s.row", args)
        bodies: dict[int, list[str]] = {}
        out = []
        for r in rows:
            if r[8] not in bodies:
                bodies[r[8]] = _body(r[9])[1]
            out.append(SentenceRow(r[0], doc_id, r[2], r[3], r[4], r[5], r[6], bodies[r[8]][r[1]], r[7]))
        return out

    def sentences_in(self, doc_id: str, first: int, n: int, start: int, end: int) -> list[SentenceRow]:
        """The document's sentences (rows ``first .. first + n``) that overlap ``[start, end)``, in order."""
        return self._sentences(doc_id, 's.row >= ? AND s.row < ? AND s.start < ? AND s."end" > ?',
                               (first, first + n, end, start))

    def sentence_by_ordinal(self, doc_id: str, first: int, n: int, ordinal: int) -> SentenceRow | None:
        found = self._sentences(doc_id, "s.row >= ? AND s.row < ? AND s.ordinal = ?", (first, first + n, ordinal))
        return found[0] if found else None

    def sentence_range(self, doc_id: str, start: int, n: int) -> list[SentenceRow]:
        return sorted(self._sentences(doc_id, "s.row >= ? AND s.row < ?", (start, start + n)), key=lambda x: x.row)

    def sentence_places(self, rows: Sequence[int], *, row_base: int = 0, chunk_base: int = 0) -> list[SentencePlace]:
        """Some sentences (local rows) without their texts, in row order; their rows and chunks are numbered from
        ``row_base`` and ``chunk_base`` (a version's offsets for this segment), so a version hands them on as
        they come from SQLite."""
        return list(map(SentencePlace._make, self._query_in(
            _PLACES + "WHERE row IN ({marks}) ORDER BY row", sorted({int(r) for r in rows}), (row_base, chunk_base))))

    def sentence_places_in(self, first: int, n: int, start: int, end: int, *, row_base: int = 0,
                           chunk_base: int = 0) -> list[SentencePlace]:
        """The sentences of rows ``first .. first + n`` (one document's) that overlap ``[start, end)``, without
        their texts, in row order (numbered as :meth:`sentence_places` numbers them)."""
        return list(map(SentencePlace._make, self._query(
            _PLACES + 'WHERE row >= ? AND row < ? AND start < ? AND "end" > ? ORDER BY row',
            (row_base, chunk_base, first, first + n, end, start))))

    def chunk_sentence_texts(self, rows: Sequence[int]) -> dict[int, list[str]]:
        """The texts of the sentences stored with each of some passages (local rows), in stored order: a
        :class:`SentencePlace`'s ``pos`` indexes its passage's list. Only these passages' bodies are read."""
        return {row: _body(body)[1] for row, body in self._query_in(
            "SELECT row, body FROM chunks WHERE row IN ({marks})", [int(r) for r in dict.fromkeys(rows)])}

    def close(self) -> None:
        self._db.close()
        self._sq_file.close()


#: A :class:`SentencePlace` as SQLite gives it, its row and chunk moved by the two parameters ahead of the rest.
_PLACES = 'SELECT row + ?, chunk + ?, pos, ordinal, start, "end", page, section, role FROM sentences '


def _chunk(r: tuple) -> ChunkRow:
    return ChunkRow(r[0], r[1], r[2], _body(r[7])[0], r[3], r[4], r[5], r[6])


def _top(scores: np.ndarray, k: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best positions of ``scores`` (best first) among ``allowed``: argpartition, then a sort of k."""
    # Partitioned on the negated scores with a small kth: NumPy's introselect asked for the kth of n - k
    # on an array of many equal values (BM25 scores are mostly 0, the rest take a few hundred values) ran
    # 11 ms at 200k rows where this takes 0.5 ms.
    neg = -np.asarray(scores, dtype=np.float32)
    if allowed is not None:
        neg = np.where(allowed, neg, np.inf)
        k = min(k, int(allowed.sum()))
    if k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    part = np.argpartition(neg, k - 1)[:k] if k < len(neg) else np.arange(len(neg))
    order = part[np.argsort(neg[part], kind="stable")]
    return order.astype(np.int64), -neg[order]


#: ``top_k`` over more rows than this first guesses a cut from every ``SAMPLE_STRIDE``-th score.
SAMPLE_ABOVE = 1 << 16
SAMPLE_STRIDE = 32


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest ``scores`` with a positive score, best first (argpartition: no full sort).

    Only scores at or above a cut are partitioned. A query with a very common word scores nearly every row,
    so "the positive ones" can be all of a million; the cut is instead the ``2k/stride``-th best of a strided
    sample, which about ``2k`` rows reach, and when fewer than ``k`` reach it (the best rows sit between the
    samples) the positive scores are taken as before. At 1M rows: 1.5 ms instead of 8.
    """
    scores = np.asarray(scores)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if len(scores) > SAMPLE_ABOVE:
        sample = scores[::SAMPLE_STRIDE]
        j = min(len(sample), 2 * (k // SAMPLE_STRIDE) + 2)
        cut = float(np.partition(sample, len(sample) - j)[len(sample) - j])
        if cut > 0:
            hit = np.flatnonzero(scores >= cut)
            if len(hit) >= k:
                order, _values = _top(scores[hit], k, None)
                return hit[order]
    hit = np.flatnonzero(scores > 0)
    order, _values = _top(scores[hit], k, None)
    return hit[order]
