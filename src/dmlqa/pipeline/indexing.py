"""The index stage: new and changed documents, a batch at a time, into the segments of a new version.

chunk → embed → sentences → segment, for the documents whose rows the published version does not hold
under the same :func:`document_key`; the others keep their rows as they are (:mod:`dmlqa.index.writer`).
Kept apart from :mod:`dmlqa.pipeline.stages`, whose functions it calls for each batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dmlqa.errors import DiskFullError
from dmlqa.index.versions import prune, publish, remove_version
from dmlqa.models import Chunk, CitationLink, Document, Failure
from dmlqa.pipeline.report import Executor, IndexResult, NoProgress, Progress, SentenceResult, Stopwatch, WorksResult
from dmlqa.pipeline.stages import chunk_texts, embed, sentences
from dmlqa.settings import Settings

if TYPE_CHECKING:
    from dmlqa.index.embed import Encoder
    from dmlqa.index.writer import VersionWriter
    from dmlqa.pipeline.graph import GraphResult

__all__ = ["document_key", "index_documents", "version_meta"]


#: New and changed documents whose texts are read back, chunked, embedded and handed to the index writer at
#: a time (~13k passages of papers): with the writer's one segment, what bounds the build's memory, however
#: many documents the collection holds.
BATCH_DOCUMENTS = 256


def document_key(doc: Document, settings: Settings, encoder_key: str) -> str:
    """Everything a document's rows depend on: its text, its title (passages are embedded and BM25-indexed
    under it), the settings that cut passages, the encoder, the index format and how its text is split into
    sentences (:data:`~dmlqa.extract.sentences.SPLIT_VERSION`: a home built before a change of the roles would
    otherwise keep the old ones for every unchanged document). Rows whose key did not change are kept from the
    published version as they are: not chunked, split or embedded again."""
    import hashlib

    from dmlqa.extract.sentences import SPLIT_VERSION
    from dmlqa.index.writer import FORMAT, content_key

    s = settings.index
    parts = (FORMAT, SPLIT_VERSION, content_key(doc), doc.title, s.chunk_tokens, s.chunk_overlap, s.reference_chunks,
             settings.embed.model, encoder_key)
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


def version_meta(settings: Settings, works: WorksResult, *, encoder_key: str, resources: int,
                 failed: Sequence[Failure], graph: GraphResult | None) -> dict[str, Any]:
    """What a version's meta.json records about its build, so that ``dmlqa status`` can describe it alone."""
    meta: dict[str, Any] = {
        "model": settings.embed.model,
        "encoder": settings.embed.encoder,
        "encoder_key": encoder_key,
        "resources": resources,
        "failed": [f.to_json() for f in failed],
        "chunk_tokens": settings.index.chunk_tokens,
        "chunk_overlap": settings.index.chunk_overlap,
        "duplicates": [d.to_json() for d in works.duplicates],
        "coverage": works.coverage,
        "dense_text": "title — section\\ntext",
    }
    if graph is not None:
        meta["graph"] = {"papers": graph.papers, "references": graph.references, "resolved": graph.resolved,
                         "skipped": graph.skipped, "self_citations": graph.self_citations, "by": graph.by_how}
    return meta


def index_documents(
    settings: Settings, documents: Sequence[Document], executor: Executor, encoder: Encoder, meta: dict[str, Any],
    *, citations: Sequence[tuple[CitationLink, str]] = (), progress: Progress | None = None,
    clock: Stopwatch | None = None, load_text: Callable[[Document], Document] | None = None,
) -> IndexResult:
    """Write a new index version of ``documents``, publish it and prune old ones.

    A document whose :func:`document_key` the published version holds keeps its rows (shared segment
    files, nothing recomputed); the new and changed ones are chunked (by ``executor``), embedded (through
    the embedding cache) and split into quotable sentences a batch at a time, and each batch goes to the
    index writer, which writes a segment whenever it holds ``index.segment_rows`` passages. ``load_text`` gives a
    document its text back when the build let it go (:func:`dmlqa.index.docstore.with_text`).
    """
    from dmlqa.index.versions import current_version
    from dmlqa.index.writer import VersionWriter

    progress = progress or NoProgress()
    clock = clock or Stopwatch()
    failed: list[Failure] = []
    embedded = embedded_sentences = kept = 0
    with VersionWriter(settings.index_dir, current_version(settings.index_dir),
                       ann_threshold=settings.index.ann_threshold, ivfpq_threshold=settings.index.ivfpq_threshold,
                       segment_rows=settings.index.segment_rows, dim=encoder.dim) as writer:
        keys = {d.doc_id: document_key(d, settings, encoder.key) for d in documents}
        fresh = []
        for d in documents:
            if writer.reusable(d.doc_id, keys[d.doc_id]):
                writer.reuse(d.doc_id)
                kept += 1
            else:
                fresh.append(d)
        source = executor.vectors(encoder) if fresh else None
        for first in range(0, len(fresh), BATCH_DOCUMENTS):
            batch = fresh[first : first + BATCH_DOCUMENTS]
            if load_text is not None:
                batch = [load_text(d) for d in batch]
            with clock("chunk"):
                chunked = executor.chunk(batch)
            failed += chunked.failed
            with clock("embed"):
                texts = chunk_texts(batch, chunked.chunks)
                vectors = embed(settings, texts, encoder=encoder, progress=progress, source=source)
            with clock("sentences"):
                found = sentences(settings, batch, encoder=encoder, progress=progress)
            embedded += vectors.embedded
            embedded_sentences += found.embedded
            with clock("index"):
                _add_batch(writer, batch, keys, chunked.chunks, texts, vectors.vectors, found)
        with clock("index"):
            name = writer.finish(documents, meta, citations)
            counts = writer.counts
    try:
        publish(settings.index_dir, name)
    except DiskFullError:  # never published, so nobody reads it: its space is the user's again
        remove_version(settings.index_dir, name)
        raise
    prune(settings.index_dir, settings.index.keep_versions)
    return IndexResult(name, counts["chunks"], counts["sentences"], embedded, embedded_sentences, kept,
                       tuple(failed))


def _add_batch(writer: VersionWriter, batch: Sequence[Document], keys: dict[str, str], chunks: Sequence[Chunk],
               texts: Sequence[str], vectors: np.ndarray, found: SentenceResult) -> None:
    """Hand one batch's rows to the writer, document by document (each document's rows stay together)."""
    rows: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        rows.setdefault(c.doc_id, []).append(i)
    srows: dict[str, list[int]] = {}
    for i, (_, s) in enumerate(found.sentences):
        srows.setdefault(s.doc_id, []).append(i)
    dim = vectors.shape[1] if vectors.ndim == 2 else writer.dim
    empty = np.zeros((0, dim), dtype=np.float32)
    for d in batch:
        r, sr = rows.get(d.doc_id, []), srows.get(d.doc_id, [])
        writer.add(d.doc_id, keys[d.doc_id], [chunks[i] for i in r], [texts[i] for i in r],
                   vectors[r] if r else empty, [found.sentences[i] for i in sr],
                   found.vectors[sr] if sr else empty)
