"""The build's stages as functions: typed inputs in, a result out (:mod:`dmlqa.pipeline.report`).

catalog → fetch → extract (+ local documents) → store → merge works → citation graph → chunk → embed →
sentences → index.

No stage function edits shared state or the build report: each returns what it did, and the build
(:func:`dmlqa.pipeline.build.run_build`) adds the results to the report. Both executors call these
same functions: the local one in this process, the Ray one (:mod:`dmlqa.pipeline.ray_executor`) on
its workers for fetch, extract and chunk, so a resource gives exactly the document, passages and
vectors wherever it was processed.

Every resource is processed independently: a failure in any stage becomes a failure row and the
resource falls back to its previous text (from the document store) or to a catalog card, so one bad
resource never stops a build.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dmlqa.catalog.urls import is_url_title
from dmlqa.errors import EncoderError, ExtractError, FetchError, Interrupted
from dmlqa.extract.worker import TimedExtractor
from dmlqa.index.docstore import DocStore, with_text, without_text
from dmlqa.index.versions import dense_text
from dmlqa.media import charset
from dmlqa.models import Chunk, Document, Failure, Resource
from dmlqa.pipeline.report import (
    ChunkResult,
    ExtractResult,
    FetchBatch,
    Fetched,
    NoProgress,
    Progress,
    SentenceResult,
    WorksResult,
)
from dmlqa.pipeline.works import merge_works
from dmlqa.settings import Settings

if TYPE_CHECKING:
    from dmlqa.catalog.library import AttachedFile
    from dmlqa.index.chunk import Chunker
    from dmlqa.index.embed import EmbedResult, Encoder, VectorSource
    from dmlqa.pipeline.graph import GraphResult, PreviousGraph
    from dmlqa.pipeline.refresh import RefreshReport

__all__ = [
    "chunk", "chunk_texts", "citations", "embed", "encoder_for", "extract", "extract_one", "fetch", "fetch_async",
    "load_chunker", "local_documents", "merge_copies", "refresh", "sentences", "store_documents",
]

log = logging.getLogger(__name__)

Advance = Callable[[int], None]


def _nothing(n: int) -> None:
    return None


# -- refresh -----------------------------------------------------------------------------------------


def refresh(settings: Settings, *, archives: Sequence[Path] = (), offline: bool = False) -> RefreshReport:
    """Re-read the lists' upstreams into the catalog (the caller holds the writer lock).

    A list that fails is an entry of the result, never an exception: the build goes on with the
    catalog as it was for that list.
    """
    from dmlqa.pipeline.refresh import refresh_lists

    return refresh_lists(settings, archives=archives, offline=offline)


# -- fetch --------------------------------------------------------------------------------------------


async def fetch_async(
    resources: Sequence[Resource], settings: Settings, *, archives: Sequence[Path] = (), offline: bool = False,
    advance: Advance = _nothing,
) -> FetchBatch:
    """Fetch every resource at its listed address, concurrently under the fetcher's limits.

    Responses go to this process's own WARC file (none when ``offline``) and the home's manifest;
    ``archives`` are replayed first. A resource that fails is a :class:`Fetched` with its error.
    """
    from dmlqa.acquire import ArchiveReplay, ArchiveWriter, Fetcher, Manifest, fetch_resource
    from dmlqa.pipeline.graph import arxiv_hints

    # arXiv ids the last build's citing papers gave works the catalog lists elsewhere (open copies)
    hints = arxiv_hints(settings.index_dir) if settings.fetch.open_access else {}
    replay = ArchiveReplay(list(archives)) if archives else None
    writer = None if offline else ArchiveWriter(settings.archive_dir)
    manifest = Manifest(settings.paths.manifest)
    try:
        async with Fetcher(
            settings.fetch, archive=writer, manifest=manifest, replay=replay, offline=offline
        ) as fetcher:

            async def one(res: Resource) -> Fetched:
                try:
                    # The address as listed, never the canonical identity: http stays http.
                    resolved = await fetch_resource(fetcher, res.address, aliases=res.aliases[1:], title=res.title,
                                                    kind=res.kind, known_arxiv_ids=hints.get(res.id, ()))
                    return Fetched(res, resolved, None)
                except FetchError as exc:
                    return Fetched(res, None, exc)
                except Exception as exc:  # a bug in one resource's path must not stop the build
                    log.exception("unexpected error fetching %s", res.address)
                    return Fetched(res, None, FetchError(res.address, f"unexpected error: {exc!r}"))
                finally:
                    advance(1)

            results = await asyncio.gather(*(one(r) for r in resources))
            return FetchBatch.of(results, dict(fetcher.stats))
    finally:
        manifest.close()
        if writer is not None:
            writer.close()


def fetch(
    resources: Sequence[Resource], settings: Settings, *, archives: Sequence[Path] = (), offline: bool = False,
    advance: Advance = _nothing,
) -> FetchBatch:
    """:func:`fetch_async` from synchronous code (the local build, a Ray task); nothing to do, nothing started."""
    if not resources:
        return FetchBatch()
    return asyncio.run(fetch_async(resources, settings, archives=archives, offline=offline, advance=advance))


# -- extract ------------------------------------------------------------------------------------------


def _refresh_facts(doc: Document, res: Resource) -> Document:
    """A stored document with the catalog's current facts (titles and topics may be edited)."""
    from dmlqa.extract import merge_facts

    # A catalog title that only spells the URL (or is the catalog's placeholder) never replaces a real one.
    title = doc.title if is_url_title(res.title, res.url) else res.title
    # the stored year and authors may have come from the text itself: the same rule as to_document
    year, authors = merge_facts(res, year=doc.year, authors=doc.authors)
    return replace(
        doc, url=res.url, title=title, kind=res.kind, venue=res.venue, year=year,
        topics=res.topics, authors=authors,
    )


def extract_one(item: Fetched, previous: Document | None, extractor: TimedExtractor | None = None) -> ExtractResult:
    """The document of one fetched resource, carrying the lists that name it and every address it has.

    ``previous`` is the resource's text from the last build (None for a new one): kept when the
    bytes are unchanged (304, same sha256), and when fetch or extraction fails this time.
    ``extractor`` runs the extraction under the build's time limit (None: here, without one).
    """
    result = _extract_resource(item, previous, extractor or TimedExtractor(0))
    res = item.resource
    doc = replace(result.documents[0], lists=res.lists, aliases=tuple(dict.fromkeys((res.url, *res.aliases))))
    return replace(result, documents=(doc,))


def _extract_resource(item: Fetched, previous: Document | None, extractor: TimedExtractor) -> ExtractResult:
    from dmlqa.extract import catalog_card, extract_bytes, to_document
    from dmlqa.pipeline.coverage import ABSTRACT_ONLY_NOTE

    res = item.resource
    had_text = previous is not None and not previous.is_card
    if item.error is not None:
        failed = (Failure(res.address, "fetch", item.error.reason),)
        if had_text:
            return ExtractResult((_refresh_facts(previous, res),), failed, kept_previous=1)
        return ExtractResult((catalog_card(res),), failed)
    resolved = item.resolved
    for note in resolved.notes:
        log.info("%s: %s", res.url, note)
    fetched = resolved.document
    if fetched.not_modified:
        if had_text:
            return ExtractResult((_refresh_facts(previous, res),), reused_documents=1)
        # A 304 for a document we no longer hold: treat as missing text this time.
        failed = (Failure(res.address, "fetch", "304 Not Modified but no stored text; rebuild later"),)
        return ExtractResult((catalog_card(res),), failed)
    if had_text and previous.sha256 == fetched.sha256:
        return ExtractResult((_refresh_facts(previous, res),), reused_documents=1)
    notes: list[Failure] = []
    pdf_failed = [n for n in resolved.notes if n.startswith("citation_pdf_url")]
    if pdf_failed and resolved.landing is None and fetched.content_type == "text/html":
        notes.append(Failure(res.address, "fetch", f"{ABSTRACT_ONLY_NOTE}: {pdf_failed[0]}"))
    candidates = [fetched] + ([resolved.landing] if resolved.landing is not None else [])
    errors: list[str] = []
    for cand in candidates:
        try:
            extracted = extractor.run(
                extract_bytes, cand.body, cand.content_type, url=cand.final_url,
                charset=charset(cand.headers.get("content-type")), where=cand.final_url,
            )
        except ExtractError as exc:
            errors.append(exc.reason)
            continue
        except Exception as exc:  # noqa: BLE001 - a parser bug on one file must not stop the build
            log.exception("unexpected extraction error for %s", cand.final_url)
            errors.append(f"unexpected error: {exc!r}")
            continue
        doc = to_document(res, extracted, source_url=cand.final_url, sha256=fetched.sha256)
        return ExtractResult((doc,), tuple(notes), extracted=1)
    failed = (*notes, Failure(res.address, "extract", "; ".join(errors)))
    if had_text:
        return ExtractResult((_refresh_facts(previous, res),), failed, kept_previous=1)
    return ExtractResult((catalog_card(res),), failed)


def extract(
    items: Sequence[Fetched], store: DocStore, advance: Advance = _nothing, *, time_limit_s: float = 0
) -> ExtractResult:
    """:func:`extract_one` for every fetched resource, in order, the previous texts read from ``store``;
    each document's extraction stopped after ``time_limit_s`` seconds (0: no limit)."""
    parts = []
    with TimedExtractor(time_limit_s) as extractor, _Storing(store) as storing:
        for item in items:
            result = extract_one(item, store.get(item.resource.id), extractor)
            parts.append(replace(result, documents=tuple(storing.add(d) for d in result.documents)))
            advance(1)
    return ExtractResult.combine(parts)


#: Documents written to the document store at a time during extraction.
STORE_BATCH = 64


class _Storing:
    """Writes extracted documents to the store in batches and hands back copies without their text
    (:func:`~dmlqa.index.docstore.without_text`): an extraction holds one batch of texts, never the
    collection's, and the index stage reads each batch's texts back (:func:`~dmlqa.index.docstore.with_text`)."""

    def __init__(self, store: DocStore) -> None:
        self.store = store
        self.pending: list[Document] = []

    def add(self, doc: Document) -> Document:
        if doc.is_card or not doc.blocks:
            return doc
        self.pending.append(doc)
        if len(self.pending) >= STORE_BATCH:
            self.flush()
        return without_text(doc)

    def flush(self) -> None:
        if self.pending:
            self.store.put_many(self.pending)
            self.pending = []

    def __enter__(self) -> _Storing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()


def local_documents(settings: Settings, store: DocStore) -> ExtractResult:
    """The documents under corpus/local; every bad input is a ``local`` failure, never a stopped build.

    Files over ``fetch.max_bytes``, symlinks out of corpus/local, unreadable files and bad JSON
    Lines records are skipped and reported; the rest is indexed. An unchanged file (same sha256)
    keeps its stored text. A file a reference library attached (``dmlqa add library.bib``) carries
    the library's metadata (:func:`_with_library`), re-applied on every build so an edited entry
    shows at once.
    """
    from dmlqa.catalog.library import library_metadata
    from dmlqa.catalog.local import file_doc_id, file_sha256, jsonl_documents, safe_id, scan_local, too_large_reason
    from dmlqa.extract import extract_file, to_document

    corpus = settings.corpus_dir
    docs: list[Document] = []
    failed: list[Failure] = []
    extracted = reused = 0
    cap = settings.fetch.max_bytes
    files, problems = scan_local(corpus)
    for path, reason in problems:
        failed.append(Failure(path.relative_to(corpus).as_posix(), "local", reason))
    attached, unreadable = library_metadata(corpus)
    failed += [Failure(where, "local", f"{reason}; its files are indexed without the library's metadata")
               for where, reason in unreadable]
    seen: dict[str, str] = {}  # doc_id -> the file that gave it, so that two files cannot share one
    with TimedExtractor(settings.build.extract_timeout_s) as extractor, _Storing(store) as storing:
        for path in files:
            rel = safe_id(path.relative_to(corpus).as_posix())  # shown in the report: one line
            try:
                size = path.stat().st_size
                if size > cap:
                    failed.append(Failure(rel, "local", too_large_reason(size, cap)))
                    continue
                if path.suffix.lower() == ".jsonl":
                    for item in jsonl_documents(path, corpus, seen):
                        if isinstance(item, Failure):
                            failed.append(item)
                        else:
                            docs.append(storing.add(item))
                    continue
                doc_id = file_doc_id(corpus, path)
                sha = file_sha256(path)
            except OSError as exc:
                failed.append(Failure(rel, "local", f"cannot read file: {exc.strerror or exc}"))
                continue
            if doc_id in seen:  # only a name spelling another's escapes (a%0Ab.txt beside "a\nb.txt")
                failed.append(Failure(rel, "local", f"its doc id {doc_id} is already {seen[doc_id]}'s: rename it"))
                continue
            seen[doc_id] = rel
            entry = attached.get(doc_id.removeprefix("local:"))
            file_url = path.resolve().as_uri()
            previous = store.get(doc_id)
            # a stored text made with a library's metadata is not reused once the library no longer names it
            if previous is not None and previous.sha256 == sha and (entry is not None or not previous.lists):
                reused += 1
                docs.append(storing.add(_with_library(previous, entry, file_url)))
                continue
            try:
                text = extractor.run(extract_file, path, max_bytes=cap, where=rel)
            except Exception as exc:  # noqa: BLE001 - a parser bug on one local file must not stop the build
                if not isinstance(exc, ExtractError):
                    log.exception("unexpected extraction error for %s", rel)
                reason = exc.reason if isinstance(exc, ExtractError) else f"unexpected error: {exc!r}"
                failed.append(Failure(rel, "extract", reason))
                if previous is not None:
                    docs.append(storing.add(_with_library(previous, entry, file_url)))
                continue
            title = text.title or safe_id(" ".join(path.stem.split()))  # a name's newline: not in the title
            res = Resource(id=doc_id, url=file_url, title=title, kind="article")
            doc = to_document(res, text, source_url=res.url, sha256=sha)
            docs.append(storing.add(_with_library(doc, entry, file_url)))
            extracted += 1
    return ExtractResult(tuple(docs), tuple(failed), extracted=extracted, reused_documents=reused)


def _with_library(doc: Document, attached: AttachedFile | None, file_url: str) -> Document:
    """``doc`` (a local file's text) with the facts of the library entry that attached the file.

    The library's title, year, venue and kind win over what the extractor read from the file; its
    authors too, all of them, unless the library itself wrote "and others" (then the extractor's
    longer list may complete it, as for catalog entries). The work's URL (arXiv, else DOI, else the
    entry's url) becomes the document's ``url``, so citations, BibTeX and ``related`` know it by its
    identifiers; its PDF address becomes ``source_url``, the address its text stands for, so that
    :func:`dmlqa.pipeline.works.merge_works` merges the file with a catalog copy of the same work
    (an arXiv id is also listed by another list or library) instead of keeping two documents. The
    file's own location stays among the ``aliases``.
    """
    from dmlqa.extract.facts import merge_authors
    from dmlqa.models import is_et_al

    if attached is None:
        return doc
    entry = attached.entry
    complete = entry.authors and not any(is_et_al(a) for a in entry.authors)
    urls = entry.identity_urls
    # the address as the entry wrote it (http stays http): it is the link users are shown
    addresses = entry.addresses
    source = f"https://arxiv.org/pdf/{entry.arxiv_id}" if entry.arxiv_id else (addresses[0] if addresses else file_url)
    return replace(
        doc, title=entry.title or doc.title, kind=entry.kind, venue=entry.venue or doc.venue,
        year=entry.year or doc.year, url=urls[0] if urls else file_url, source_url=source,
        authors=entry.authors if complete else merge_authors(entry.authors, doc.authors),
        lists=(attached.list_name,), aliases=tuple(dict.fromkeys((*urls, file_url))),
    )


# -- store and works -----------------------------------------------------------------------------------


def store_documents(store: DocStore, documents: Sequence[Document]) -> list[str]:
    """Keep only what the catalog and corpus/local still name, store the full texts not stored yet (extraction
    stores as it goes; an executor elsewhere hands them over whole); the ids removed."""
    gone = sorted(store.ids() - {d.doc_id for d in documents})
    store.delete(gone)
    store.put_many(d for d in documents if not d.is_card)
    return gone


def merge_copies(
    resources: Sequence[Resource], documents: Sequence[Document], failed: Sequence[Failure]
) -> WorksResult:
    """Merge copies of one work (:mod:`dmlqa.pipeline.works`), then count what the build holds and why.

    ``failed`` (the failures so far) feeds the coverage table. Runs after :func:`store_documents`, so
    every copy's text stays in the document store and an unchanged copy is not extracted again next time.
    """
    from dmlqa.pipeline.coverage import coverage

    merged, duplicates = merge_works(documents)
    merged_into = {d.doc_id: d.of for d in duplicates}
    return WorksResult(
        documents=tuple(merged),
        duplicates=tuple(duplicates),
        coverage=coverage(resources, merged, list(failed), merged_into),
    )


def citations(works: WorksResult, settings: Settings | None = None, store: DocStore | None = None) -> GraphResult:
    """The citation graph of the merged works (:mod:`dmlqa.pipeline.graph`): after the merge, so that a
    reference to any copy of a work lands on the one document that holds it. Never raises for a paper.

    With ``settings``, parsed reference lists come from the home's cache and the published version's graph
    is reused where nothing that could change it changed: the cost follows what changed, the links are those
    of a full resolution.
    """
    from dmlqa.extract.references import parse_references
    from dmlqa.pipeline.graph import citation_graph

    if settings is None:
        return citation_graph(works.documents)
    # a paper's text is read back from the store only when its parsed references are not in the cache
    parse = (lambda d: parse_references(with_text(d, store))) if store is not None else None
    return citation_graph(works.documents, parse=parse, cache=settings.paths.references_cache,
                          previous=_previous_graph(settings.index_dir))


def _previous_graph(index_dir: Path) -> PreviousGraph | None:
    """The published version's documents (ids, titles, kinds, years) and links; None without a readable one."""
    import sqlite3

    from dmlqa.index.citation_table import published_citations
    from dmlqa.index.versions import VERSIONS, current_version
    from dmlqa.pipeline.graph import PreviousGraph

    name = current_version(index_dir)
    store = index_dir / VERSIONS / name / "store.sqlite" if name else None
    if store is None or not store.is_file():
        return None
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT doc_id, url, title, kind, is_card, year FROM documents").fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    docs = [Document(doc_id=r[0], url=r[1] or "", title=r[2] or "", blocks=(), kind=r[3] or "article",
                     is_card=bool(r[4]), year=r[5]) for r in rows]
    return PreviousGraph(documents=docs, records=published_citations(index_dir, name))


# -- chunk ---------------------------------------------------------------------------------------------


def load_chunker(model: str, chunk_tokens: int, overlap: int, *, reference_chunks: bool = False) -> Chunker:
    """The chunker of the embedding model ``model`` (sizes in its own tokens: it needs its tokenizer.json)."""
    from dmlqa.index.chunk import Chunker, TokenCounter
    from dmlqa.index.embed import model_dir

    path = model_dir(model)
    counter = TokenCounter.from_model_dir(path) if path else None
    if counter is None:
        raise EncoderError(
            f"model {model!r} has no local folder with tokenizer.json: passages are sized in the model's "
            "tokens, so the build needs a local model folder"
        )
    return Chunker(counter, chunk_tokens=chunk_tokens, overlap=overlap, reference_chunks=reference_chunks)


def chunk(documents: Sequence[Document], chunker: Chunker) -> ChunkResult:
    """Every document's passages, in order; a document the chunker fails on is a failure row (no passages)."""
    chunks: list[Chunk] = []
    failed: list[Failure] = []
    for d in documents:
        try:
            chunks.extend(chunker.chunk(d))
        except Exception as exc:  # noqa: BLE001 - one document never stops the build
            log.exception("chunking failed for %s", d.link)
            failed.append(Failure(d.link, "chunk", f"unexpected error: {exc!r}"))
    return ChunkResult(tuple(chunks), tuple(failed))


def chunk_texts(documents: Sequence[Document], chunks: Sequence[Chunk]) -> list[str]:
    """The texts the dense index embeds: each passage under its document title and section."""
    titles = {d.doc_id: d.title for d in documents}
    return [dense_text(titles[c.doc_id], c.section, c.text) for c in chunks]


# -- embed ---------------------------------------------------------------------------------------------


def encoder_for(settings: Settings) -> Encoder:
    """The encoder the settings name (``embed.model`` run by ``embed.encoder``); its key names the index."""
    from dmlqa.index.embed import load_encoder

    return load_encoder(settings.embed.model, settings.embed.encoder, settings.encoders_dir,
                        precision=settings.embed.precision)


def embed(
    settings: Settings, texts: Sequence[str], *, encoder: Encoder, stage: str = "embed",
    progress: Progress | None = None, source: VectorSource | None = None,
) -> EmbedResult:
    """Vectors of ``texts`` through the home's embedding cache: an unchanged text is never embedded twice.

    ``source`` says where the model runs (None: here, with ``encoder``); ``stage`` names the
    progress bar.
    """
    from dmlqa.index.embed import EmbeddingCache, embed_texts

    progress = progress or NoProgress()
    cache = EmbeddingCache(settings.paths.embeddings_cache)
    try:
        advance = progress.start(stage, len(texts))
        result = embed_texts(
            texts, encoder, cache, batch_size=settings.embed.batch_size, progress=advance, source=source,
            flush_seconds=settings.embed.flush_seconds,
        )
        progress.done(stage)
    except Interrupted as exc:  # embed_texts counted what it kept; the stage's name says of what
        exc.stage = exc.stage or stage
        raise
    finally:
        cache.close()
    return result


def sentences(
    settings: Settings, documents: Sequence[Document], *, encoder: Encoder, progress: Progress | None = None
) -> SentenceResult:
    """The quotable sentences of every document and their vectors.

    Embedded here, through the same cache as passages, so that the answerer embeds nothing but the
    question: answers are fast from the first question of a fresh index, in the CLI and the app alike.
    """
    from dmlqa.extract.sentences import split_document

    kept = [(o, s) for d in documents for o, s in enumerate(split_document(d)) if s.quotable]
    if not kept:
        return SentenceResult([], np.zeros((0, encoder.dim), dtype=np.float32))
    result = embed(settings, [s.text for _, s in kept], encoder=encoder, stage="sentences", progress=progress)
    return SentenceResult(kept, result.vectors, embedded=result.embedded)
