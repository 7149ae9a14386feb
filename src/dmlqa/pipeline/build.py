"""Orchestration of one build: catalog → fetch → extract → chunk → embed → index → publish.

This is the only module that knows the whole order of the stages. Every resource is processed
independently: a failure in any stage becomes a row of the report and the resource falls back to
its previous text (from the document store) or to a catalog card, so one bad resource never
stops a build. The build exits with a published version whenever at least one could be written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dmlqa.errors import DmlqaError, ExtractError, FetchError, NothingToBuildError
from dmlqa.extract.sentences import Sentence
from dmlqa.index.docstore import DocStore
from dmlqa.index.versions import dense_text, prune, publish, write_version
from dmlqa.models import Chunk, Document, Failure, Resource
from dmlqa.pipeline.runs import Changes, diff_documents, new_documents, published_documents, recording
from dmlqa.pipeline.works import Duplicate, merge_works
from dmlqa.settings import Settings

log = logging.getLogger(__name__)


class Progress(Protocol):
    """Receives progress of the long stages; the CLI draws bars, a library caller may ignore it."""

    def start(self, stage: str, total: int) -> Callable[[int], None]: ...

    def done(self, stage: str) -> None: ...


class NoProgress:
    def start(self, stage: str, total: int) -> Callable[[int], None]:
        return lambda n: None

    def done(self, stage: str) -> None:
        return None


@dataclass
class BuildReport:
    resources: int = 0
    fetched: int = 0
    not_modified: int = 0
    from_archive: int = 0
    failed: list[Failure] = field(default_factory=list)
    documents: int = 0
    cards: int = 0
    chunks: int = 0
    embedded: int = 0
    reused_embeddings: int = 0
    index_version: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    # beyond the required keys: what changed since the previous build
    extracted: int = 0
    reused_documents: int = 0
    kept_previous: int = 0
    removed: list[str] = field(default_factory=list)
    local_documents: int = 0
    # doc ids that differ from the previously published version (what `dmlqa status` lists per run)
    changes: Changes = field(default_factory=Changes)
    # what --refresh-lists changed in the catalog (None when the lists were not refreshed)
    refresh: dict[str, Any] | None = None
    # catalog entries whose work another entry's document holds (one record per work)
    duplicates: list[Duplicate] = field(default_factory=list)
    # per list and per host: full text, abstract only, cards, and why (dmlqa.pipeline.coverage)
    coverage: dict[str, Any] = field(default_factory=dict)
    # one line a person must read (e.g. no network at all), else None
    notice: str | None = None
    # quotable sentences stored with their vectors (for extractive answers), and how many were new
    sentences: int = 0
    embedded_sentences: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "resources": self.resources,
            "fetched": self.fetched,
            "not_modified": self.not_modified,
            "from_archive": self.from_archive,
            "failed": [f.to_json() for f in self.failed],
            "documents": self.documents,
            "cards": self.cards,
            "chunks": self.chunks,
            "embedded": self.embedded,
            "reused_embeddings": self.reused_embeddings,
            "index_version": self.index_version,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "extracted": self.extracted,
            "reused_documents": self.reused_documents,
            "kept_previous": self.kept_previous,
            "removed": self.removed,
            "local_documents": self.local_documents,
            "changes": self.changes.to_json(),
            "refresh": self.refresh,
            "duplicates": [d.to_json() for d in self.duplicates],
            "coverage": self.coverage,
            "notice": self.notice,
            "sentences": self.sentences,
            "embedded_sentences": self.embedded_sentences,
        }


@dataclass(frozen=True)
class BuildOptions:
    archives: tuple[Path, ...] = ()
    offline: bool = False
    #: re-read the lists' upstreams into the catalog first (under the same writer lock)
    refresh_lists: bool = False
    #: who started the run, as the run history records it: "build" or "schedule"
    trigger: str = "build"
    #: "local" (this process) or "ray" (fetch, extract, chunk and embed on a Ray cluster: dmlqa.pipeline.ray_executor)
    executor: str = "local"


@contextmanager
def _timed(report: BuildReport, stage: str):  # noqa: ANN202
    t0 = time.perf_counter()
    try:
        yield
    finally:
        report.seconds[stage] = report.seconds.get(stage, 0.0) + time.perf_counter() - t0


# -- fetch ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Fetched:
    resource: Resource
    resolved: Any | None  # dmlqa.acquire.resolve.Resolved
    error: FetchError | None


async def _fetch_all(
    resources: Sequence[Resource], settings: Settings, options: BuildOptions, advance: Callable[[int], None]
) -> tuple[list[_Fetched], dict[str, int]]:
    from dmlqa.acquire.archive import ArchiveReplay, ArchiveWriter, Manifest
    from dmlqa.acquire.fetch import Fetcher
    from dmlqa.acquire.resolve import fetch_resource

    replay = ArchiveReplay(list(options.archives)) if options.archives else None
    writer = None if options.offline else ArchiveWriter(settings.archive_dir)
    manifest = Manifest(settings.corpus_dir / "manifest.sqlite")
    try:
        async with Fetcher(
            settings.fetch, archive=writer, manifest=manifest, replay=replay, offline=options.offline
        ) as fetcher:

            async def one(res: Resource) -> _Fetched:
                try:
                    # The address as listed, never the canonical identity: http stays http.
                    resolved = await fetch_resource(fetcher, res.address, aliases=res.aliases[1:])
                    return _Fetched(res, resolved, None)
                except FetchError as exc:
                    return _Fetched(res, None, exc)
                except Exception as exc:  # a bug in one resource's path must not stop the build
                    log.exception("unexpected error fetching %s", res.address)
                    return _Fetched(res, None, FetchError(res.address, f"unexpected error: {exc!r}"))
                finally:
                    advance(1)

            results = await asyncio.gather(*(one(r) for r in resources))
            return list(results), dict(fetcher.stats)
    finally:
        manifest.close()
        if writer is not None:
            writer.close()


# -- extract --------------------------------------------------------------------------------------


def _charset(content_type: str | None) -> str | None:
    """The charset parameter of a Content-Type header (FetchResult keeps only the sniffed media type)."""
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"')
    return None


def _is_url_like(title: str) -> bool:
    return not title.strip() or title.strip().startswith(("http://", "https://", "www."))


def _refresh_facts(doc: Document, res: Resource) -> Document:
    """A stored document with the catalog's current facts (titles and topics may be edited)."""
    from dmlqa.extract.documents import merge_facts

    title = doc.title if _is_url_like(res.title) else res.title
    # the stored year and authors may have come from the text itself: the same rule as to_document
    year, authors = merge_facts(res, year=doc.year, authors=doc.authors)
    return replace(
        doc, url=res.url, title=title, kind=res.kind, venue=res.venue, year=year,
        topics=res.topics, authors=authors,
    )


def _extract_one(item: _Fetched, store: DocStore, report: BuildReport) -> Document:
    """The document of one fetched resource, carrying the lists that name it and every address it has."""
    res = item.resource
    doc = _extract_resource(item, store, report)
    return replace(doc, lists=res.lists, aliases=tuple(dict.fromkeys((res.url, *res.aliases))))


def _extract_resource(item: _Fetched, store: DocStore, report: BuildReport) -> Document:
    from dmlqa.extract.documents import catalog_card, extract_bytes, to_document
    from dmlqa.pipeline.coverage import ABSTRACT_ONLY_NOTE

    res = item.resource
    previous = store.get(res.id)
    if item.error is not None:
        report.failed.append(Failure(res.address, "fetch", item.error.reason))
        if previous is not None and not previous.is_card:
            report.kept_previous += 1
            return _refresh_facts(previous, res)
        return catalog_card(res)
    resolved = item.resolved
    for note in resolved.notes:
        log.info("%s: %s", res.url, note)
    fetched = resolved.document
    if fetched.not_modified:
        if previous is not None and not previous.is_card:
            report.reused_documents += 1
            return _refresh_facts(previous, res)
        # A 304 for a document we no longer hold: treat as missing text this time.
        report.failed.append(Failure(res.address, "fetch", "304 Not Modified but no stored text; rebuild later"))
        return catalog_card(res)
    if previous is not None and not previous.is_card and previous.sha256 == fetched.sha256:
        report.reused_documents += 1
        return _refresh_facts(previous, res)
    pdf_failed = [n for n in resolved.notes if n.startswith("citation_pdf_url")]
    if pdf_failed and resolved.landing is None and fetched.content_type == "text/html":
        report.failed.append(Failure(res.address, "fetch", f"{ABSTRACT_ONLY_NOTE}: {pdf_failed[0]}"))
    candidates = [fetched] + ([resolved.landing] if resolved.landing is not None else [])
    errors: list[str] = []
    for cand in candidates:
        try:
            extracted = extract_bytes(
                cand.body, cand.content_type, url=cand.final_url, charset=_charset(cand.headers.get("content-type"))
            )
        except ExtractError as exc:
            errors.append(exc.reason)
            continue
        except Exception as exc:  # noqa: BLE001 - a parser bug on one file must not stop the build
            log.exception("unexpected extraction error for %s", cand.final_url)
            errors.append(f"unexpected error: {exc!r}")
            continue
        report.extracted += 1
        return to_document(res, extracted, source_url=cand.final_url, sha256=fetched.sha256)
    report.failed.append(Failure(res.address, "extract", "; ".join(errors)))
    if previous is not None and not previous.is_card:
        report.kept_previous += 1
        return _refresh_facts(previous, res)
    return catalog_card(res)


def _local_documents(settings: Settings, store: DocStore, report: BuildReport) -> list[Document]:
    """The documents under corpus/local; every bad input is a ``local`` failure, never a stopped build.

    Files over ``fetch.max_bytes``, symlinks out of corpus/local, unreadable files and bad JSON
    Lines records are skipped and reported; the rest is indexed.
    """
    from dmlqa.catalog.local import file_doc_id, file_sha256, jsonl_documents, scan_local, too_large_reason
    from dmlqa.extract.documents import extract_file, to_document

    docs: list[Document] = []
    cap = settings.fetch.max_bytes
    files, problems = scan_local(settings.corpus_dir)
    for path, reason in problems:
        report.failed.append(Failure(path.relative_to(settings.corpus_dir).as_posix(), "local", reason))
    seen: dict[str, str] = {}  # doc_id -> the file that gave it, so that two files cannot share one
    for path in files:
        rel = path.relative_to(settings.corpus_dir).as_posix()
        try:
            size = path.stat().st_size
            if size > cap:
                report.failed.append(Failure(rel, "local", too_large_reason(size, cap)))
                continue
            if path.suffix.lower() == ".jsonl":
                for item in jsonl_documents(path, settings.corpus_dir, seen):
                    if isinstance(item, Failure):
                        report.failed.append(item)
                    else:
                        docs.append(item)
                continue
            doc_id = file_doc_id(settings.corpus_dir, path)
            sha = file_sha256(path)
        except OSError as exc:
            report.failed.append(Failure(rel, "local", f"cannot read file: {exc.strerror or exc}"))
            continue
        seen[doc_id] = rel
        previous = store.get(doc_id)
        if previous is not None and previous.sha256 == sha:
            report.reused_documents += 1
            docs.append(previous)
            continue
        try:
            extracted = extract_file(path, max_bytes=cap)
        except ExtractError as exc:
            report.failed.append(Failure(rel, "extract", exc.reason))
            if previous is not None:
                docs.append(previous)
            continue
        res = Resource(id=doc_id, url=path.resolve().as_uri(), title=extracted.title or path.stem, kind="article")
        docs.append(to_document(res, extracted, source_url=res.url, sha256=sha))
        report.extracted += 1
    report.local_documents = len(docs)
    return docs


# -- the build --------------------------------------------------------------------------------------


def _remove_stale_pointers(index_dir: Path) -> None:
    """Remove ``.CURRENT.<pid>.tmp`` files a build killed while publishing left behind.

    Only the holder of the writer lock publishes, so under the lock any such file is debris.
    """
    for tmp in index_dir.glob(".CURRENT.*.tmp"):
        tmp.unlink(missing_ok=True)
        log.info("removed %s left by an interrupted build", tmp.name)


def _refresh(settings: Settings, options: BuildOptions, report: BuildReport) -> None:
    """Re-read the lists into the catalog; a list that fails is a report row, never a failed build."""
    from dmlqa.pipeline.refresh import refresh_lists

    rep = refresh_lists(settings, archives=options.archives, offline=options.offline)
    report.refresh = rep.to_json()
    for item in rep.failed:
        report.failed.append(Failure(item.upstream or item.name, "refresh", f"list {item.name}: {item.error}"))


def one_per_work(resources: Sequence[Resource], docs: Sequence[Document], report: BuildReport) -> list[Document]:
    """Merge copies of one work (:mod:`dmlqa.pipeline.works`), then count what the build holds and why (coverage).

    Runs after :func:`sync_store`, so every copy's text stays in the document store and an
    unchanged copy is not extracted again next time.
    """
    from dmlqa.pipeline.coverage import coverage, network_notice

    merged, report.duplicates = merge_works(docs)
    merged_into = {d.doc_id: d.of for d in report.duplicates}
    report.documents = sum(1 for d in merged if not d.is_card)
    report.cards = sum(1 for d in merged if d.is_card)
    report.coverage = coverage(resources, merged, report.failed, merged_into)
    report.notice = network_notice(report.failed, report.fetched + report.from_archive + report.not_modified)
    return merged


def sync_store(store: DocStore, docs: Sequence[Document], report: BuildReport) -> None:
    """Keep only what the catalog and corpus/local still name; store this build's full texts."""
    gone = sorted(store.ids() - {d.doc_id for d in docs})
    store.delete(gone)
    report.removed = gone
    store.put_many(d for d in docs if not d.is_card)


@dataclass
class Staged:
    """What the stages before the index hand to the index writer (from either executor)."""

    documents: list[Document]
    chunks: list[Chunk]
    vectors: np.ndarray
    encoder_key: str
    fetch_stats: dict[str, int] = field(default_factory=dict)
    encoder: Any = None  # the loaded encoder, when the executor has one in this process (not loaded twice)


def _local_stages(
    settings: Settings, options: BuildOptions, resources: Sequence[Resource], report: BuildReport, progress: Progress
) -> Staged:
    """fetch → extract → chunk → embed in this process (the default executor)."""
    from dmlqa.index.chunk import Chunker, TokenCounter
    from dmlqa.index.embed import EmbeddingCache, embed_texts, load_encoder, model_dir

    with _timed(report, "fetch"):
        advance = progress.start("fetch", len(resources))
        fetched, stats = (
            asyncio.run(_fetch_all(resources, settings, options, advance)) if resources else ([], {})
        )
        progress.done("fetch")
    report.from_archive = sum(
        1 for f in fetched if f.resolved is not None and f.resolved.document.from_archive
    )
    report.not_modified = sum(
        1 for f in fetched if f.resolved is not None and f.resolved.document.not_modified
    )
    report.fetched = sum(
        1 for f in fetched if f.resolved is not None and not f.resolved.document.from_archive
        and not f.resolved.document.not_modified
    )

    with DocStore(settings.corpus_dir / "documents.sqlite") as store, _timed(report, "extract"):
        advance = progress.start("extract", len(fetched))
        docs: list[Document] = []
        for item in fetched:
            docs.append(_extract_one(item, store, report))
            advance(1)
        docs.extend(_local_documents(settings, store, report))
        progress.done("extract")
        sync_store(store, docs, report)
    docs = one_per_work(resources, docs, report)

    with _timed(report, "chunk"):
        path = model_dir(settings.embed.model)
        counter = TokenCounter.from_model_dir(path) if path else None
        if counter is None:
            raise DmlqaError(f"model {settings.embed.model!r} has no local folder with tokenizer.json")
        chunker = Chunker(counter, chunk_tokens=settings.index.chunk_tokens, overlap=settings.index.chunk_overlap)
        chunks: list[Chunk] = []
        for d in docs:
            try:
                chunks.extend(chunker.chunk(d))
            except Exception as exc:  # noqa: BLE001
                log.exception("chunking failed for %s", d.url)
                report.failed.append(Failure(d.url, "chunk", f"unexpected error: {exc!r}"))
    report.chunks = len(chunks)

    with _timed(report, "embed"):
        encoder = load_encoder(settings.embed.model, settings.embed.encoder, settings.encoders_dir)
        cache = EmbeddingCache(settings.paths.embeddings_cache)
        titles = {d.doc_id: d.title for d in docs}
        texts = [dense_text(titles[c.doc_id], c.section, c.text) for c in chunks]
        try:
            advance = progress.start("embed", len(texts))
            result = embed_texts(texts, encoder, cache, batch_size=settings.embed.batch_size, progress=advance)
            progress.done("embed")
        finally:
            cache.close()
    report.embedded = result.embedded
    report.reused_embeddings = result.reused
    vectors = result.vectors if len(texts) else np.zeros((0, encoder.dim), dtype=np.float32)
    return Staged(docs, chunks, vectors, encoder.key, stats, encoder=encoder)


def sentence_stage(
    settings: Settings, docs: Sequence[Document], report: BuildReport, progress: Progress, *, encoder: Any = None
) -> tuple[list[tuple[int, Sentence]], np.ndarray]:
    """The quotable sentences of every document (as (ordinal, sentence)) and their vectors.

    Embedded here, through the same cache as chunks (an unchanged sentence is never embedded
    twice), so that the answerer embeds nothing but the question: answers are fast from the
    first question of a fresh index, in the CLI and the app alike.
    """
    from dmlqa.extract.sentences import split_document
    from dmlqa.index.embed import EmbeddingCache, embed_texts, load_encoder

    kept = [(o, s) for d in docs for o, s in enumerate(split_document(d)) if s.quotable]
    report.sentences = len(kept)
    encoder = encoder or load_encoder(settings.embed.model, settings.embed.encoder, settings.encoders_dir)
    if not kept:
        return [], np.zeros((0, encoder.dim), dtype=np.float32)
    cache = EmbeddingCache(settings.paths.embeddings_cache)
    try:
        advance = progress.start("sentences", len(kept))
        result = embed_texts([s.text for _, s in kept], encoder, cache, batch_size=settings.embed.batch_size,
                             progress=advance)
        progress.done("sentences")
    finally:
        cache.close()
    report.embedded_sentences = result.embedded
    return kept, result.vectors


def run_build(
    settings: Settings,
    options: BuildOptions | None = None,
    *,
    progress: Progress | None = None,
) -> BuildReport:
    """Build and publish a new index version of ``settings.home``; return the report.

    Raises :class:`DmlqaError` only when no version could be published at all.
    """
    from dmlqa.catalog.store import read_catalog
    from dmlqa.pipeline.lock import WriterLock

    options = options or BuildOptions()
    progress = progress or NoProgress()
    report = BuildReport()
    t_all = time.perf_counter()
    with WriterLock(settings.home, "build"), recording(settings.index_dir, report, trigger=options.trigger):
        settings.index_dir.mkdir(parents=True, exist_ok=True)
        prune(settings.index_dir, settings.index.keep_versions)  # clears debris of a crashed build first
        _remove_stale_pointers(settings.index_dir)
        previous = published_documents(settings.index_dir)

        if options.refresh_lists:
            with _timed(report, "refresh"):
                _refresh(settings, options, report)

        with _timed(report, "catalog"):
            resources = read_catalog(settings.catalog_path)
        report.resources = len(resources)
        if not resources:
            from dmlqa.catalog.local import local_files

            if not local_files(settings.corpus_dir):
                raise NothingToBuildError(
                    "nothing to build: the catalog is empty and corpus/local has no documents; "
                    "run `dmlqa catalog import LIST.md` or `dmlqa add FILE`"
                )

        if options.executor == "ray":
            from dmlqa.pipeline.ray_executor import run_stages

            staged = run_stages(settings, options, resources, report, progress)
        elif options.executor == "local":
            staged = _local_stages(settings, options, resources, report, progress)
        else:
            raise DmlqaError(f"unknown executor {options.executor!r}: choose local or ray")
        docs, chunks, vectors = staged.documents, staged.chunks, staged.vectors
        with _timed(report, "sentences"):
            sentences, sentence_vectors = sentence_stage(settings, docs, report, progress, encoder=staged.encoder)
        report.changes = diff_documents(previous, new_documents(docs, chunks))

        with _timed(report, "index"):
            meta = {
                "model": settings.embed.model,
                "encoder": settings.embed.encoder,
                "encoder_key": staged.encoder_key,
                "resources": report.resources,
                "failed": [f.to_json() for f in report.failed],
                "chunk_tokens": settings.index.chunk_tokens,
                "chunk_overlap": settings.index.chunk_overlap,
                "duplicates": [d.to_json() for d in report.duplicates],
                "coverage": report.coverage,
                "dense_text": "title — section\\ntext",
            }
            name = write_version(
                settings.index_dir, docs, chunks, vectors, meta, ann_threshold=settings.index.ann_threshold,
                ivfpq_threshold=settings.index.ivfpq_threshold, sentences=sentences, sentence_vectors=sentence_vectors,
            )
            publish(settings.index_dir, name)
            prune(settings.index_dir, settings.index.keep_versions)
        report.index_version = name
        report.seconds["total"] = time.perf_counter() - t_all
    log.debug("fetch stats: %s", staged.fetch_stats)
    return report
