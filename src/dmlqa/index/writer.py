"""Writing a segmented index version: new segments for what changed, the rest shared with the last version.

A build hands :class:`VersionWriter` every document of the new version, in order: one whose key (the
sha256 of its text's source, its title, the settings that shape its passages, the encoder) matches the
published version's is *reused* — its rows stay where they are, in a segment hard-linked into the new
version; a new or changed one is *added* with its passages, vectors and quotable sentences, and goes into
the next new segment, written to disk as soon as it holds ``segment_rows`` passages (so a build holds one
segment's rows in memory, never the collection's). The old rows of changed and removed documents become
the version's deleted rows.

Small segments are merged by a tiered policy, as Lucene does: segments below ``segment_rows`` passages
are grouped by order of magnitude and merged once a tier holds :data:`MERGE_FACTOR` of them; exact
(flat) segments are merged into one as soon as they hold more than ``ann_threshold`` passages together,
which keeps exact search bounded; a segment more than half deleted is rewritten without its dead rows.
Everything is written into a ``.building-`` folder that is renamed into place only when complete.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from dmlqa.errors import DiskFullError, NothingToBuildError, is_disk_full
from dmlqa.extract.sentences import Sentence
from dmlqa.index.citation_table import write_citations
from dmlqa.index.postings import Lexicon, Postings
from dmlqa.index.segments import (
    ChunkRow,
    Segment,
    SegmentBuilder,
    SentenceRow,
    fsync_path,
    fsync_tree,
    link_segment,
    new_segment_id,
    quantize,
)
from dmlqa.models import Chunk, CitationLink, Document
from dmlqa.paths import VERSIONS

BUILDING_PREFIX = ".building-"
FORMAT = 3
#: Passages a build writes into one segment before starting the next (bounds the build's memory).
SEGMENT_ROWS = 250_000
#: Segments of one size tier that trigger a merge (Lucene's segmentsPerTier).
MERGE_FACTOR = 10

_SCHEMA = """
CREATE TABLE documents (
    doc_id TEXT PRIMARY KEY, url TEXT, source_url TEXT, title TEXT, kind TEXT, content_type TEXT,
    authors TEXT, venue TEXT, year INTEGER, topics TEXT, is_card INTEGER, sha256 TEXT, aliases TEXT, lists TEXT,
    content TEXT, key TEXT, segment TEXT, first_row INTEGER, n_chunks INTEGER, first_sentence INTEGER,
    n_sentences INTEGER
);
CREATE TABLE citations (
    row INTEGER PRIMARY KEY, citing TEXT, ordinal INTEGER, reference TEXT, cited TEXT, context TEXT, how TEXT,
    work TEXT
);
CREATE INDEX citations_citing ON citations(citing, ordinal);
CREATE INDEX citations_cited ON citations(cited);
"""


def dense_text(title: str, section: str | None, text: str) -> str:
    """What the embedding model reads for a chunk: its passage under its document title.

    A passage such as "It partitions the optimizer states ..." says nothing of what "it" is; the
    title and section put it back in context (measured on the dev questions, see bench/). BM25 reads
    the same text, so every name in a title is in the vocabulary.
    """
    head = title if not section or section == title else f"{title} — {section}"
    return f"{head}\n{text}"


def new_version_name(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return now.strftime("v%Y%m%dT%H%M%S%fZ")


def content_key(doc: Document) -> str:
    """What a document's text is, in one string: the sha256 of its source bytes (the text is extracted from
    them, and kept while they stay the same), or for a catalog card, which has no source, of its text."""
    if not doc.is_card and doc.sha256:
        return doc.sha256
    return "text:" + hashlib.sha256(doc.text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Placement:
    """Where a version holds a document's rows (segment None: a document without passages)."""

    key: str
    segment: str | None
    first_row: int = 0
    n_chunks: int = 0
    first_sentence: int = 0
    n_sentences: int = 0


def read_placements(version_dir: Path) -> dict[str, Placement]:
    """The placements of a written version's documents (empty when it has none or cannot be read)."""
    store = version_dir / "store.sqlite"
    if not store.is_file():
        return {}
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT doc_id, key, segment, first_row, n_chunks, first_sentence, n_sentences "
                              "FROM documents").fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return {}
    return {r[0]: Placement(r[1] or "", r[2], r[3] or 0, r[4] or 0, r[5] or 0, r[6] or 0) for r in rows}


class VersionWriter:
    """One version being written; use as a context manager (an exception removes the half-written folder)."""

    def __init__(self, index_dir: Path, previous: str | None, *, ann_threshold: int,
                 ivfpq_threshold: int | None = None, segment_rows: int = SEGMENT_ROWS, name: str | None = None,
                 dim: int = 0) -> None:
        self.versions = index_dir / VERSIONS
        self.name = name or new_version_name()
        self.tmp = self.versions / f"{BUILDING_PREFIX}{self.name}-{os.getpid()}"
        self.ann_threshold = ann_threshold
        self.ivfpq_threshold = ivfpq_threshold
        self.segment_rows = max(1, segment_rows)
        self.dim = dim
        self.previous_dir = self.versions / previous if previous else None
        self.previous = read_placements(self.previous_dir) if self.previous_dir else {}
        self.previous_segments: dict[str, dict[str, Any]] = {}
        if self.previous_dir is not None and self.previous:
            try:
                meta = json.loads((self.previous_dir / "meta.json").read_text(encoding="utf-8"))
                self.previous_segments = {s["id"]: s for s in meta.get("segments", [])}
            except (OSError, ValueError, KeyError, TypeError):
                self.previous = {}
        self.placements: dict[str, Placement] = {}
        self.new_segments: dict[str, dict[str, Any]] = {}
        self._pending = SegmentBuilder(dim, self.tmp / "segments" / new_segment_id())
        self._placed: dict[str, Placement] = {}
        self.counts = {"chunks": 0, "sentences": 0}

    def __enter__(self) -> VersionWriter:
        try:
            (self.tmp / "segments").mkdir(parents=True)
        except OSError as exc:
            self._raise_disk_full(exc)
            raise
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            full = is_disk_full(exc, self.versions)  # asked first: removing the folder frees the space
            shutil.rmtree(self.tmp, ignore_errors=True)  # never leave a half-written version behind
            if full:
                self._raise_disk_full(exc)

    def _raise_disk_full(self, exc: BaseException) -> None:
        if is_disk_full(exc, self.versions):
            raise DiskFullError(
                f"disk full while writing index version {self.name} in {self.versions}: free space and run again "
                "(the published version is unchanged)"
            ) from None

    # -- documents --------------------------------------------------------------------------------
    def reusable(self, doc_id: str, key: str) -> bool:
        """Whether the published version holds ``doc_id``'s rows under the same key (nothing to redo)."""
        p = self.previous.get(doc_id)
        return p is not None and p.key == key and (p.segment is None or p.segment in self.previous_segments)

    def reuse(self, doc_id: str) -> None:
        self.placements[doc_id] = self.previous[doc_id]

    def add(self, doc_id: str, key: str, chunks: Sequence[Chunk], lexical_texts: Sequence[str], vectors: np.ndarray,
            sentences: Sequence[tuple[int, Sentence]], sentence_vectors: np.ndarray) -> None:
        """A new or changed document's rows, for the next new segment."""
        if not chunks:
            self.placements[doc_id] = Placement(key, None)
            return
        rows = [ChunkRow(i, c.chunk_id, c.doc_id, c.text, c.page, c.section, c.start, c.end)
                for i, c in enumerate(chunks)]
        srows = [SentenceRow(i, x.doc_id, o, x.start, x.end, x.page, x.section, x.text, x.role)
                 for i, (o, x) in enumerate(sentences)]
        codes = quantize(sentence_vectors) if len(sentences) else (
            np.zeros((0, np.asarray(vectors).shape[1]), dtype=np.int8), np.zeros(0, dtype=np.float32))
        first, first_s = self._pending.add(rows, lexical_texts, vectors, srows, codes)
        self._placed[doc_id] = Placement(key, None, first, len(chunks), first_s, len(sentences))
        if self._pending.rows >= self.segment_rows:
            self.flush()

    def flush(self) -> None:
        """Write the pending rows as a new segment."""
        if not self._pending.rows:
            return
        seg = self._pending.folder.name
        self.new_segments[seg] = self._pending.write(ann_threshold=self.ann_threshold,
                                                     ivfpq_threshold=self.ivfpq_threshold)
        for doc_id, place in self._placed.items():
            self.placements[doc_id] = replace(place, segment=seg)
        self._pending = SegmentBuilder(self.dim, self.tmp / "segments" / new_segment_id())
        self._placed = {}

    # -- finishing --------------------------------------------------------------------------------
    def finish(self, documents: Sequence[Document], meta: dict[str, Any],
               citations: Sequence[tuple[CitationLink, str]] = ()) -> str:
        """Merge, write the manifest, the document table and the lexicon; rename into place; the name.

        ``documents`` are all the version's documents, each reused or added before.
        """
        self.flush()
        missing = [d.doc_id for d in documents if d.doc_id not in self.placements]
        if missing:
            raise ValueError(f"{len(missing)} documents were neither added nor reused (first: {missing[0]})")
        if not any(self.placements[d.doc_id].n_chunks for d in documents):
            raise NothingToBuildError(
                "nothing to index: no document gave any text (see the failed resources above); "
                "add documents with `dmlqa add FILE` or resources with `dmlqa catalog import LIST.md`"
            )
        placements = {d.doc_id: self.placements[d.doc_id] for d in documents}
        for seg in {p.segment for p in placements.values()} - set(self.new_segments) - {None}:
            link_segment(self.previous_dir / "segments" / seg, self.tmp / "segments" / seg)
        linked = {s: info for s, info in self.previous_segments.items() if (self.tmp / "segments" / s).is_dir()}
        infos = {**linked, **self.new_segments}
        titles = {d.doc_id: d.title for d in documents}
        placements, infos = self._merge(placements, infos, titles)
        for stale in set(os.listdir(self.tmp / "segments")) - set(infos):
            shutil.rmtree(self.tmp / "segments" / stale)
        order = sorted(infos, key=lambda s: (-infos[s]["rows"], s))  # biggest first: a stable row order
        live = live_rows(infos, placements)
        manifest = self._manifest(order, infos, live)
        self._write_store(documents, placements, citations)
        lexicon = Lexicon.combine([(Postings.load(self.tmp / "segments" / s / "bm25"), live[s]) for s in order])
        lexicon.save(self.tmp / "lexicon")
        counts = {"chunks": sum(p.n_chunks for p in placements.values()),
                  "sentences": sum(p.n_sentences for p in placements.values())}
        self.counts = counts
        dims = {int(infos[s].get("dim", 0)) for s in order} - {0}
        types = [infos[s]["index_type"] for s in order]
        full_meta = {
            **meta, "format": FORMAT, "version": self.name,
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "index_type": types[0] if len(set(types)) == 1 else "+".join(sorted(set(types))),
            "ann_threshold": self.ann_threshold, "dim": max(dims) if dims else self.dim, **counts,
            "documents": sum(1 for d in documents if not d.is_card), "cards": sum(1 for d in documents if d.is_card),
            "citations": len(citations), "segments": manifest,
            "lexicon": {"rows": lexicon.n_rows, "mean_length": lexicon.mean_length},
        }
        (self.tmp / "meta.json").write_text(json.dumps(full_meta, indent=2, ensure_ascii=False), encoding="utf-8")
        for f in ("meta.json", "store.sqlite"):
            fsync_path(self.tmp / f)
        fsync_tree(self.tmp / "lexicon")
        fsync_path(self.tmp)
        final = self.versions / self.name
        os.rename(self.tmp, final)
        fsync_path(self.versions)
        return self.name

    def _manifest(self, order: list[str], infos: dict[str, dict[str, Any]],
                  live: dict[str, np.ndarray]) -> list[dict[str, Any]]:
        out = []
        for s in order:
            edges = np.flatnonzero(np.diff(np.concatenate(([1], live[s].astype(np.int8), [1]))))
            dead = [[int(a), int(b)] for a, b in zip(edges[::2], edges[1::2], strict=True)]
            out.append({**{k: infos[s][k] for k in ("id", "rows", "sentences", "dim", "index_type")},
                        **({"hnsw": infos[s]["hnsw"]} if "hnsw" in infos[s] else {}),
                        "live": int(live[s].sum()), "deleted": dead})
        return out

    def _merge(self, placements: dict[str, Placement], infos: dict[str, dict[str, Any]],
               titles: dict[str, str]) -> tuple[dict[str, Placement], dict[str, dict[str, Any]]]:
        for group in merge_groups(infos, placements, self.segment_rows, self.ann_threshold):
            placements, info = self._merge_one(group, placements, titles)
            for s in group:
                infos.pop(s)
            infos[info["id"]] = info
        return placements, infos

    def _merge_one(self, group: list[str], placements: dict[str, Placement],
                   titles: dict[str, str]) -> tuple[dict[str, Placement], dict[str, Any]]:
        seg_id = new_segment_id()
        builder = SegmentBuilder(self.dim, self.tmp / "segments" / seg_id)
        moved: dict[str, Placement] = {}
        for s in group:
            seg = Segment(self.tmp / "segments" / s, self.name)
            try:
                for _, doc_id in sorted((p.first_row, d) for d, p in placements.items() if p.segment == s):
                    p = placements[doc_id]
                    rows = seg.chunk_range(p.first_row, p.n_chunks)
                    first, first_s = builder.add(
                        rows, [dense_text(titles[doc_id], c.section, c.text) for c in rows],
                        seg.block(p.first_row, p.n_chunks), seg.sentence_range(doc_id, p.first_sentence, p.n_sentences),
                        seg.sentence_codes(p.first_sentence, p.n_sentences))
                    moved[doc_id] = replace(p, segment=seg_id, first_row=first, first_sentence=first_s)
            finally:
                seg.close()
        info = builder.write(ann_threshold=self.ann_threshold, ivfpq_threshold=self.ivfpq_threshold)
        return {**placements, **moved}, info

    def _write_store(self, documents: Sequence[Document], placements: dict[str, Placement],
                     citations: Sequence[tuple[CitationLink, str]]) -> None:
        db = sqlite3.connect(str(self.tmp / "store.sqlite"))
        try:
            db.executescript(_SCHEMA)
            db.executemany(
                "INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(d.doc_id, d.url, d.source_url, d.title, d.kind, d.content_type,
                  json.dumps(list(d.authors), ensure_ascii=False), d.venue, d.year,
                  json.dumps(list(d.topics), ensure_ascii=False), int(d.is_card), d.sha256,
                  json.dumps(list(d.aliases), ensure_ascii=False), json.dumps(list(d.lists), ensure_ascii=False),
                  content_key(d), p.key, p.segment, p.first_row, p.n_chunks, p.first_sentence, p.n_sentences)
                 for d in documents for p in (placements[d.doc_id],)],
            )
            db.commit()
        finally:
            db.close()
        write_citations(self.tmp, citations)


def live_rows(infos: dict[str, dict[str, Any]], placements: dict[str, Placement]) -> dict[str, np.ndarray]:
    """Per segment, a bool per row: owned by a document of the version (one pass over the documents)."""
    live = {s: np.zeros(int(info["rows"]), dtype=bool) for s, info in infos.items()}
    for p in placements.values():
        if p.segment in live:
            live[p.segment][p.first_row : p.first_row + p.n_chunks] = True
    return live


def merge_groups(infos: dict[str, dict[str, Any]], placements: dict[str, Placement], segment_rows: int,
                 ann_threshold: int) -> list[list[str]]:
    """Which segments to merge (each group becomes one segment); segments no document holds are dropped.

    * a segment more than half deleted is rewritten;
    * exact (flat) segments holding more than ``ann_threshold`` rows together become one (it gets an
      approximate index): exact search stays bounded however many small builds there were;
    * segments written with fewer than ``segment_rows`` rows merge by tier (order of magnitude of their
      live rows) once a tier holds :data:`MERGE_FACTOR` segments, as in Lucene's tiered policy. Full
      segments only merge to drop their deleted rows, however many they lost.
    """
    live = {s: 0 for s in infos}
    for p in placements.values():
        if p.segment in live:
            live[p.segment] += p.n_chunks
    alive = [s for s in infos if live[s]]
    for s in set(infos) - set(alive):
        infos.pop(s)
    groups: list[list[str]] = []
    taken: set[str] = set()
    flat = [s for s in alive if infos[s]["index_type"] == "flat"]
    if len(flat) > 1 and sum(live[s] for s in flat) > ann_threshold:
        groups.append(sorted(flat))
        taken |= set(flat)
    tiers: dict[int, list[str]] = {}
    for s in alive:
        # by the rows written, not the rows left: a full segment that lost a few rows to changed documents is
        # not small (merging ten of those would rewrite the whole collection for a 1 % change)
        if s not in taken and int(infos[s]["rows"]) < segment_rows:
            tiers.setdefault(int(math.log10(max(live[s], 1))), []).append(s)
    for members in tiers.values():
        if len(members) >= MERGE_FACTOR:
            groups.append(sorted(members))
            taken |= set(members)
    groups += [[s] for s in alive if s not in taken and live[s] * 2 < int(infos[s]["rows"])]
    return groups
