"""The index stage: versioned, atomically published search indexes under ``home/index``.

Layout::

    index/
      CURRENT                 name of the published version (replaced atomically)
      versions/<name>/        one complete version: meta.json, dense.faiss, bm25/, store.sqlite
      versions/.building-*    a version being written (never read; removed when stale)
      cache/embeddings.sqlite vectors by (encoder, sha256 of text), shared by all versions

A build writes a whole new version into a ``.building-`` folder, renames it into place (atomic
on one file system) and only then replaces ``CURRENT`` with ``os.replace``. A reader resolves
``CURRENT`` once and opens that folder, so it sees the old version or the new one, never a mix;
versions are kept for a while after they stop being current, so a reader that opened one just
before a publish can finish with it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from dmlqa.errors import DiskFullError, IndexDamagedError, IndexMissingError, NothingToBuildError, is_disk_full
from dmlqa.extract.sentences import Sentence
from dmlqa.index.ann import choose_index_type
from dmlqa.index.citation_table import CitationRecord, has_citations, read_citations, write_citations
from dmlqa.index.lexical import LexicalIndex
from dmlqa.models import Chunk, CitationLink, Document, shown_url
from dmlqa.paths import CURRENT, VERSIONS

log = logging.getLogger(__name__)

BUILDING_PREFIX = ".building-"
FORMAT = 1

#: HNSW parameters for big indexes (see bench/ for the recall/latency trade-off measured here).
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128


def dense_text(title: str, section: str | None, text: str) -> str:
    """What the embedding model reads for a chunk: its passage under its document title.

    A passage such as "It partitions the optimizer states ..." says nothing of what "it" is; the
    title and section put it back in context (measured on the dev questions, see bench/).
    """
    head = title if not section or section == title else f"{title} — {section}"
    return f"{head}\n{text}"


# -- writing --------------------------------------------------------------------------------------


def new_version_name(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return now.strftime("v%Y%m%dT%H%M%S%fZ")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def build_faiss(vectors: np.ndarray, index_type: str):  # noqa: ANN201 - faiss.Index
    import faiss

    dim = int(vectors.shape[1])
    if index_type == "ivfpq":
        from dmlqa.index.ann import build_ivfpq

        return build_ivfpq(vectors)
    if index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
    else:
        index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


_SCHEMA = """
CREATE TABLE documents (
    doc_id TEXT PRIMARY KEY, url TEXT, source_url TEXT, title TEXT, kind TEXT, content_type TEXT,
    authors TEXT, venue TEXT, year INTEGER, topics TEXT, is_card INTEGER, sha256 TEXT,
    n_chunks INTEGER, first_row INTEGER, aliases TEXT, lists TEXT
);
CREATE TABLE chunks (
    row INTEGER PRIMARY KEY, chunk_id TEXT UNIQUE, doc_id TEXT, text TEXT, page INTEGER,
    section TEXT, start INTEGER, "end" INTEGER
);
CREATE INDEX chunks_doc ON chunks(doc_id);
CREATE TABLE sentences (
    row INTEGER PRIMARY KEY, doc_id TEXT, ordinal INTEGER, start INTEGER, "end" INTEGER, page INTEGER,
    section TEXT, text TEXT, role TEXT
);
CREATE INDEX sentences_doc ON sentences(doc_id, start);
CREATE TABLE citations (
    row INTEGER PRIMARY KEY, citing TEXT, ordinal INTEGER, reference TEXT, cited TEXT, context TEXT, how TEXT,
    work TEXT
);
CREATE INDEX citations_citing ON citations(citing, ordinal);
CREATE INDEX citations_cited ON citations(cited);
"""


def write_version(
    index_dir: Path,
    documents: Sequence[Document],
    chunks: Sequence[Chunk],
    vectors: np.ndarray,
    meta: dict[str, Any],
    *,
    ann_threshold: int,
    ivfpq_threshold: int | None = None,
    name: str | None = None,
    sentences: Sequence[tuple[int, Sentence]] = (),
    sentence_vectors: np.ndarray | None = None,
    citations: Sequence[tuple[CitationLink, str]] = (),
) -> str:
    """Write a complete version folder (not yet published); return its name.

    ``chunks[i]`` has vector ``vectors[i]`` and gets row ``i`` in every part of the index.
    ``sentences`` are the quotable sentences as (ordinal in their document, sentence), with
    ``sentence_vectors[i]`` for ``sentences[i]``: the extractive answerer reads both, so that
    answering embeds nothing but the question. ``citations`` are the citation graph's links with the
    work each names (:mod:`dmlqa.pipeline.graph`): stored with the version so that ``cites``,
    ``cited-by`` and ``related`` read the graph of the texts they search.
    """
    if len(chunks) != len(vectors):
        raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    if not chunks:
        raise NothingToBuildError(
            "nothing to index: no document gave any text (see the failed resources above); "
            "add documents with `dmlqa add FILE` or resources with `dmlqa catalog import LIST.md`"
        )
    versions = index_dir / VERSIONS
    name = name or new_version_name()
    tmp = versions / f"{BUILDING_PREFIX}{name}-{os.getpid()}"
    try:
        versions.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        _write_parts(tmp, documents, chunks, vectors, meta, name, ann_threshold, ivfpq_threshold)
        _write_sentences(tmp, sentences, sentence_vectors)
        _write_citations(tmp, citations)
        final = versions / name
        os.rename(tmp, final)
        _fsync_dir(versions)
    except BaseException as exc:
        full = is_disk_full(exc, versions)  # asked first: removing the folder frees the space SQLite's test reads
        shutil.rmtree(tmp, ignore_errors=True)  # never leave a half-written version behind
        if full:
            raise DiskFullError(
                f"disk full while writing index version {name} in {versions}: free space and run again "
                "(the published version is unchanged)"
            ) from None
        raise
    return name


def _write_parts(
    tmp: Path,
    documents: Sequence[Document],
    chunks: Sequence[Chunk],
    vectors: np.ndarray,
    meta: dict[str, Any],
    name: str,
    ann_threshold: int,
    ivfpq_threshold: int | None,
) -> None:
    import faiss

    index_type = choose_index_type(len(vectors), ann_threshold, ivfpq_threshold)
    dense = build_faiss(vectors, index_type)
    faiss.write_index(dense, str(tmp / "dense.faiss"))
    # BM25 sees the same title and section context as the dense model: a passage about "it" is
    # found by the name of the thing it is about, and every name in a title is in the vocabulary.
    LexicalIndex.build([dense_text(c.title, c.section, c.text) for c in chunks]).save(tmp / "bm25")

    db = sqlite3.connect(str(tmp / "store.sqlite"))
    db.executescript(_SCHEMA)
    first_row: dict[str, int] = {}
    counts: dict[str, int] = {}
    for row, c in enumerate(chunks):
        first_row.setdefault(c.doc_id, row)
        counts[c.doc_id] = counts.get(c.doc_id, 0) + 1
    db.executemany(
        "INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                d.doc_id, d.url, d.source_url, d.title, d.kind, d.content_type,
                json.dumps(list(d.authors), ensure_ascii=False), d.venue, d.year,
                json.dumps(list(d.topics), ensure_ascii=False), int(d.is_card), d.sha256,
                counts.get(d.doc_id, 0), first_row.get(d.doc_id),
                json.dumps(list(d.aliases), ensure_ascii=False), json.dumps(list(d.lists), ensure_ascii=False),
            )
            for d in documents
        ],
    )
    db.executemany(
        "INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?)",
        [(i, c.chunk_id, c.doc_id, c.text, c.page, c.section, c.start, c.end) for i, c in enumerate(chunks)],
    )
    db.commit()
    db.close()

    full_meta = {
        **meta,
        "format": FORMAT,
        "version": name,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "index_type": index_type,
        "hnsw": {"M": HNSW_M, "efSearch": HNSW_EF_SEARCH} if index_type == "hnsw" else None,
        "ann_threshold": ann_threshold,
        **({"ivfpq": _ivfpq_params(dense)} if index_type == "ivfpq" else {}),
        "dim": int(vectors.shape[1]) if vectors.ndim == 2 else 0,
        "chunks": len(chunks),
        "documents": sum(1 for d in documents if not d.is_card),
        "cards": sum(1 for d in documents if d.is_card),
    }
    (tmp / "meta.json").write_text(json.dumps(full_meta, indent=2, ensure_ascii=False), encoding="utf-8")
    _fsync_tree(tmp)


def _write_sentences(tmp: Path, sentences: Sequence[tuple[int, Sentence]], vectors: np.ndarray | None) -> None:
    if vectors is None:
        vectors = np.zeros((0, 0), dtype=np.float32)
    if len(sentences) != len(vectors):
        raise ValueError(f"{len(sentences)} sentences but {len(vectors)} sentence vectors")
    db = sqlite3.connect(str(tmp / "store.sqlite"))
    db.executemany(
        "INSERT INTO sentences VALUES (?,?,?,?,?,?,?,?,?)",
        [(i, s.doc_id, o, s.start, s.end, s.page, s.section, s.text, s.role) for i, (o, s) in enumerate(sentences)],
    )
    db.commit()
    db.close()
    np.save(tmp / "sentences.npy", np.ascontiguousarray(vectors, dtype=np.float32))
    meta_path = tmp / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["sentences"] = len(sentences)
    meta_path.write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
    _fsync_tree(tmp)


def _write_citations(tmp: Path, citations: Sequence[tuple[CitationLink, str]]) -> None:
    write_citations(tmp, citations)
    meta_path = tmp / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["citations"] = len(citations)
    meta_path.write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
    _fsync_tree(tmp)


def _ivfpq_params(index) -> dict[str, Any]:  # noqa: ANN001 - faiss.Index
    from dmlqa.index.ann import params

    return params(index)


def _fsync_tree(path: Path) -> None:
    for f in path.rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _fsync_dir(path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    _fsync_dir(index_dir)


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


def _short(exc: BaseException) -> str:
    """The gist of an error in one short line (FAISS errors span several lines with C++ locations)."""
    import re

    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
    text = re.sub(r"^Error in .*? at \S+:\d+: (Error: )?", "", lines[-1])
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= 160 else text[:157] + "..."


def read_meta(path: Path) -> dict[str, Any]:
    """A version folder's ``meta.json``, or :class:`IndexDamagedError` saying what is wrong with it."""
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IndexDamagedError(path.name, "meta.json is missing") from None
    except UnicodeDecodeError:
        raise IndexDamagedError(path.name, "meta.json is not UTF-8 text") from None
    except (OSError, ValueError) as exc:
        raise IndexDamagedError(path.name, f"meta.json is not valid JSON ({_short(exc)})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("version"), str):
        raise IndexDamagedError(path.name, "meta.json is not an index description (no version)")
    return meta


def check_version(path: Path) -> dict[str, Any]:
    """Open a version fully (meta, FAISS, BM25, store) to tell whether it is readable; return its meta."""
    version = IndexVersion(path)
    version.close()
    return version.meta


@dataclass(frozen=True)
class ChunkRecord:
    row: int
    chunk_id: str
    doc_id: str
    text: str
    page: int | None
    section: str | None
    start: int
    end: int


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
    first_row: int | None
    aliases: tuple[str, ...] = ()  # every URL the work is known by (see dmlqa.pipeline.works)
    lists: tuple[str, ...] = ()

    @property
    def link(self) -> str:
        """The address users are shown (``url`` is the identity copies merge on; see shown_url)."""
        return shown_url(self.url, self.source_url)


class IndexVersion:
    """One opened, immutable version: dense + BM25 + metadata, safe to share between threads."""

    def __init__(self, path: Path) -> None:
        import faiss

        # Queries arrive one at a time: FAISS's OpenMP threads only fight over the cores then.
        # Measured on 2 busy cores at 20k vectors: p50 36 ms with 2 threads, 1.7 ms with 1.
        faiss.omp_set_num_threads(1)
        self.path = path
        self.name = path.name
        self._sentence_vectors: np.ndarray | None = None
        self.meta: dict[str, Any] = read_meta(path)
        try:
            self.dense = faiss.read_index(str(path / "dense.faiss"))
            if self.meta.get("index_type") == "hnsw":
                self.dense.hnsw.efSearch = int((self.meta.get("hnsw") or {}).get("efSearch", HNSW_EF_SEARCH))
            elif self.meta.get("index_type") == "ivfpq":
                from dmlqa.index.ann import enable_reconstruct, set_search_params

                set_search_params(self.dense, self.meta.get("ivfpq") or {})
                enable_reconstruct(self.dense)
        except (RuntimeError, MemoryError, OSError, ValueError, TypeError, AttributeError) as exc:
            raise IndexDamagedError(self.name, f"dense.faiss cannot be read ({_short(exc)})") from None
        chunks_meta = self.meta.get("chunks")
        if isinstance(chunks_meta, int) and chunks_meta != self.dense.ntotal:
            raise IndexDamagedError(
                self.name, f"dense.faiss holds {self.dense.ntotal} vectors but meta.json says {chunks_meta} chunks"
            )
        try:
            self.lexical = LexicalIndex.load(path / "bm25")
        except Exception as exc:  # noqa: BLE001 - bm25s raises whatever numpy/json raise on a bad file
            raise IndexDamagedError(self.name, f"bm25/ cannot be read ({_short(exc)})") from None
        try:
            self._db = sqlite3.connect(f"file:{path / 'store.sqlite'}?mode=ro", uri=True, check_same_thread=False)
            self.docs: dict[str, DocRecord] = {}
            # Versions written before aliases and lists were stored read as having none.
            columns = {c[1] for c in self._db.execute("PRAGMA table_info(documents)")}
            extra = "aliases, lists" if {"aliases", "lists"} <= columns else "NULL, NULL"
            for r in self._db.execute(
                "SELECT doc_id, url, source_url, title, kind, content_type, authors, venue, year, topics, "
                f"is_card, n_chunks, first_row, {extra} FROM documents"
            ):
                self.docs[r[0]] = DocRecord(
                    r[0], r[1], r[2], r[3], r[4], r[5], tuple(json.loads(r[6] or "[]")), r[7], r[8],
                    tuple(json.loads(r[9] or "[]")), bool(r[10]), r[11], r[12],
                    tuple(json.loads(r[13] or "[]")), tuple(json.loads(r[14] or "[]")),
                )
            self.row_doc = np.empty(self.dense.ntotal, dtype=object)
            n_rows = 0
            for row, doc_id in self._db.execute("SELECT row, doc_id FROM chunks"):
                self.row_doc[row] = doc_id
                n_rows += 1
        except (sqlite3.Error, ValueError, TypeError, IndexError) as exc:
            raise IndexDamagedError(self.name, f"store.sqlite cannot be read ({_short(exc)})") from None
        if n_rows != self.dense.ntotal:
            raise IndexDamagedError(
                self.name, f"store.sqlite holds {n_rows} chunks but dense.faiss {self.dense.ntotal} vectors"
            )

    @property
    def size(self) -> int:
        return int(self.dense.ntotal)

    def chunks(self, rows: Iterable[int]) -> dict[int, ChunkRecord]:
        rows = [int(r) for r in rows]
        out: dict[int, ChunkRecord] = {}
        try:
            for s in range(0, len(rows), 500):
                part = rows[s : s + 500]
                marks = ",".join("?" * len(part))
                for r in self._db.execute(
                    f'SELECT row, chunk_id, doc_id, text, page, section, start, "end" FROM chunks '
                    f"WHERE row IN ({marks})",
                    part,
                ):
                    out[r[0]] = ChunkRecord(*r)
        except sqlite3.DatabaseError as exc:
            raise IndexDamagedError(self.name, f"store.sqlite cannot be read ({_short(exc)})") from None
        return out

    def doc_sha256(self, doc_id: str) -> str | None:
        """The sha256 of the source bytes ``doc_id``'s text was extracted from, as this version indexed it:
        what tells the archived bytes (and the stored text) of this version from a later build's."""
        row = self._db.execute("SELECT sha256 FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
        return row[0] if row and row[0] else None

    def doc_rows(self, doc_id: str) -> list[int]:
        return [r for (r,) in self._db.execute("SELECT row FROM chunks WHERE doc_id=? ORDER BY row", (doc_id,))]

    def vectors(self, rows: Sequence[int]) -> np.ndarray:
        """Stored vectors of some rows (flat and HNSW-flat indexes keep them exactly, IVF-PQ approximately)."""
        if not rows:
            return np.zeros((0, self.dense.d), dtype=np.float32)
        return np.vstack([self.dense.reconstruct(int(r)) for r in rows]).astype(np.float32)

    @property
    def has_sentences(self) -> bool:
        """Versions built before sentences were stored have none (the answerer then splits chunks)."""
        return bool(self.meta.get("sentences")) and (self.path / "sentences.npy").is_file()

    def sentences_in(self, doc_id: str, start: int, end: int) -> list[SentenceRecord]:
        """The stored (quotable) sentences of a document that overlap ``[start, end)``, in order."""
        rows = self._db.execute(
            'SELECT row, doc_id, ordinal, start, "end", page, section, text, role FROM sentences '
            'WHERE doc_id=? AND start < ? AND "end" > ? ORDER BY start', (doc_id, end, start))
        return [SentenceRecord(*r) for r in rows]

    def sentence_by_ordinal(self, doc_id: str, ordinal: int) -> SentenceRecord | None:
        r = self._db.execute(
            'SELECT row, doc_id, ordinal, start, "end", page, section, text, role FROM sentences '
            "WHERE doc_id=? AND ordinal=?", (doc_id, ordinal)).fetchone()
        return SentenceRecord(*r) if r else None

    def sentence_vectors(self, rows: Sequence[int]) -> np.ndarray:
        if self._sentence_vectors is None:
            self._sentence_vectors = np.load(self.path / "sentences.npy", mmap_mode="r")
        return np.asarray(self._sentence_vectors[list(rows)], dtype=np.float32)

    @property
    def has_citations(self) -> bool:
        """Versions built before the citation graph have no ``citations`` table: they read as citing nothing."""
        return has_citations(self._db)

    def citations(self, *, citing: str | None = None, cited: str | None = None) -> list[CitationRecord]:
        """The stored citation links (all, or those of one citing or one cited document), in list order."""
        return read_citations(self._db, self.name, citing=citing, cited=cited)

    def close(self) -> None:
        self._db.close()


@dataclass(frozen=True)
class SentenceRecord:
    row: int
    doc_id: str
    ordinal: int  # position among all the document's sentences (quotable or not)
    start: int
    end: int
    page: int | None
    section: str | None
    text: str
    role: str


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
