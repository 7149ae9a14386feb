"""What a build is given and what its stages give back, and the report made from the results.

Each stage function (:mod:`dmlqa.pipeline.stages`) returns one of the result types below and
touches nothing shared; :class:`BuildReport` is filled from those results by its ``add_*``
methods, the one place that knows which result becomes which field of ``dmlqa build --json``.
The build adds each result as soon as it has it, so a build that fails half-way still records
what it got done (the run history reads the report).

Results that cross processes (the Ray executor's workers) have ``to_json``/``from_json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from dmlqa.errors import FetchError
from dmlqa.models import Chunk, Document, Failure, Resource
from dmlqa.pipeline.runs import Changes
from dmlqa.pipeline.works import Duplicate

if TYPE_CHECKING:
    from dmlqa.acquire.resolve import Resolved
    from dmlqa.extract.sentences import Sentence
    from dmlqa.index.docstore import DocStore
    from dmlqa.index.embed import Encoder, VectorSource
    from dmlqa.pipeline.graph import GraphResult
    from dmlqa.pipeline.refresh import RefreshReport

__all__ = [
    "BuildOptions", "BuildReport", "ChunkResult", "Executor", "ExtractResult", "FetchBatch", "Fetched", "NoProgress",
    "Progress", "SentenceResult", "Stopwatch", "WorksResult",
]


@dataclass(frozen=True)
class BuildOptions:
    """How one build runs, beyond the home's settings.

    Where the stages run is a setting (``build.executor``, which ``--executor`` overrides), not an
    option: a scheduled build and a manual one read it from the same place.
    """

    #: WARC files to replay instead of (or before) the network.
    archives: tuple[Path, ...] = ()
    offline: bool = False
    #: re-read the lists' upstreams into the catalog first (under the same writer lock)
    refresh_lists: bool = False
    #: who started the run, as the run history records it: "build" or "schedule"
    trigger: str = "build"


class Progress(Protocol):
    """Receives progress of the long stages; the CLI draws bars, a library caller may ignore it."""

    def start(self, stage: str, total: int) -> Callable[[int], None]: ...

    def done(self, stage: str) -> None: ...


class NoProgress:
    """A :class:`Progress` that shows nothing (library callers, tests, Ray workers)."""

    def start(self, stage: str, total: int) -> Callable[[int], None]:
        return lambda n: None

    def done(self, stage: str) -> None:
        return None


class Stopwatch:
    """Seconds per stage, added up: a stage may run in several parts (extract: fetched, then local)."""

    def __init__(self, seconds: dict[str, float] | None = None) -> None:
        self.seconds = seconds if seconds is not None else {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0


# -- stage results ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fetched:
    """One resource after the fetch stage: what resolving it gave (a document, maybe a landing page), or why not."""

    resource: Resource
    resolved: Resolved | None
    error: FetchError | None

    @property
    def from_archive(self) -> bool:
        return self.resolved is not None and self.resolved.document.from_archive

    @property
    def not_modified(self) -> bool:
        return self.resolved is not None and self.resolved.document.not_modified

    @property
    def downloaded(self) -> bool:
        """Fresh bytes from the network (neither replayed nor a 304)."""
        return self.resolved is not None and not self.from_archive and not self.not_modified


@dataclass(frozen=True)
class FetchBatch:
    """The fetch stage over a batch of resources: each resource's outcome, and the counts of the report.

    Batches add up (:meth:`combine`), so the Ray executor's per-row batches give the local build's counts.
    Only the counts cross processes (:meth:`to_json`); the items, which hold response bodies, stay
    where they were fetched.
    """

    items: tuple[Fetched, ...] = ()
    fetched: int = 0
    not_modified: int = 0
    from_archive: int = 0
    #: the fetcher's own counters (requests, retries, robots refusals, ...), for the debug log
    stats: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, items: Sequence[Fetched], stats: dict[str, int] | None = None) -> FetchBatch:
        return cls(
            items=tuple(items),
            fetched=sum(1 for f in items if f.downloaded),
            not_modified=sum(1 for f in items if f.not_modified),
            from_archive=sum(1 for f in items if f.from_archive),
            stats=dict(stats or {}),
        )

    @classmethod
    def combine(cls, parts: Sequence[FetchBatch]) -> FetchBatch:
        """The batches as one, items in the order given."""
        stats: dict[str, int] = {}
        for part in parts:
            for k, v in part.stats.items():
                stats[k] = stats.get(k, 0) + int(v)
        return cls(
            tuple(f for part in parts for f in part.items), sum(p.fetched for p in parts),
            sum(p.not_modified for p in parts), sum(p.from_archive for p in parts), stats,
        )

    def to_json(self) -> dict[str, Any]:
        return {"fetched": self.fetched, "not_modified": self.not_modified, "from_archive": self.from_archive,
                "stats": self.stats}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FetchBatch:
        return cls((), int(d["fetched"]), int(d["not_modified"]), int(d["from_archive"]),
                   {k: int(v) for k, v in d["stats"].items()})


@dataclass(frozen=True)
class ExtractResult:
    """Documents of the extract stage (in input order) and what happened on the way.

    A resource whose fetch or extraction failed still has a document: its previous text, or a
    catalog card; the failure is a row in ``failed``.
    """

    documents: tuple[Document, ...] = ()
    failed: tuple[Failure, ...] = ()
    extracted: int = 0  # texts extracted from fresh bytes this time
    reused_documents: int = 0  # unchanged (304 or same sha256): the stored text was kept
    kept_previous: int = 0  # fetch or extraction failed: the previous text was kept

    @classmethod
    def combine(cls, parts: Sequence[ExtractResult]) -> ExtractResult:
        """The results as one, documents and failures in the order given."""
        return cls(
            tuple(d for p in parts for d in p.documents), tuple(f for p in parts for f in p.failed),
            sum(p.extracted for p in parts), sum(p.reused_documents for p in parts),
            sum(p.kept_previous for p in parts),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "documents": [d.to_json() for d in self.documents], "failed": [f.to_json() for f in self.failed],
            "extracted": self.extracted, "reused_documents": self.reused_documents,
            "kept_previous": self.kept_previous,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ExtractResult:
        return cls(
            tuple(Document.from_json(x) for x in d["documents"]),
            tuple(Failure(x["url"], x["stage"], x["error"]) for x in d["failed"]),
            int(d["extracted"]), int(d["reused_documents"]), int(d["kept_previous"]),
        )


@dataclass(frozen=True)
class WorksResult:
    """One document per work (copies merged, :mod:`dmlqa.pipeline.works`) and what the build holds, and why."""

    documents: tuple[Document, ...]
    duplicates: tuple[Duplicate, ...] = ()
    #: per list and per host: full text, abstract only, cards, and why (:mod:`dmlqa.pipeline.coverage`)
    coverage: dict[str, Any] = field(default_factory=dict)
    #: one line a person must read (e.g. no network at all), else None
    notice: str | None = None

    @property
    def full_texts(self) -> int:
        return sum(1 for d in self.documents if not d.is_card)

    @property
    def cards(self) -> int:
        return sum(1 for d in self.documents if d.is_card)


@dataclass(frozen=True)
class ChunkResult:
    """Passages of the chunk stage, in document order then ordinal; a document that failed is a row in ``failed``."""

    chunks: tuple[Chunk, ...] = ()
    failed: tuple[Failure, ...] = ()

    @classmethod
    def combine(cls, parts: Sequence[ChunkResult]) -> ChunkResult:
        """The results as one, passages and failures in the order given."""
        return cls(tuple(c for p in parts for c in p.chunks), tuple(f for p in parts for f in p.failed))

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"chunks": [asdict(c) for c in self.chunks], "failed": [f.to_json() for f in self.failed]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ChunkResult:
        return cls(tuple(Chunk(**c) for c in d["chunks"]),
                   tuple(Failure(x["url"], x["stage"], x["error"]) for x in d["failed"]))


@dataclass(frozen=True)
class SentenceResult:
    """Quotable sentences of every document, as (ordinal in its document, sentence), with their vectors."""

    sentences: list[tuple[int, Sentence]]
    vectors: np.ndarray
    embedded: int = 0  # sentences that went through the model (the rest came from the cache)


@dataclass(frozen=True)
class IndexResult:
    """What the index stage wrote: the version, what it holds, and how much of it was new work."""

    version: str
    chunks: int  # passages the version holds
    sentences: int  # quotable sentences it holds
    embedded: int  # passages the model embedded for it (the rest came from the cache or the last version)
    embedded_sentences: int
    kept_documents: int  # documents whose rows were kept from the previous version as they were
    failed: tuple[Failure, ...] = ()


class Executor(Protocol):
    """Where the parallel part of a build runs: ``local`` (this process) or ``ray`` (a cluster).

    Both call the same stage functions of :mod:`dmlqa.pipeline.stages` and give the same results;
    the build (:func:`dmlqa.pipeline.build.run_build`) keeps the order of the stages and the report.
    """

    name: str

    def __enter__(self) -> Executor:
        """Start what the executor needs (a Ray connection); the build enters it once."""

    def __exit__(self, *exc: object) -> None:
        """Release it (a Ray this executor started is shut down)."""

    def fetch_extract(self, resources: Sequence[Resource], store: DocStore) -> tuple[FetchBatch, ExtractResult]:
        """Fetch the catalog's resources and extract each, the previous text read from ``store``."""

    def chunk(self, documents: Sequence[Document]) -> ChunkResult:
        """Cut every document into passages."""

    def vectors(self, encoder: Encoder) -> VectorSource | None:
        """Where the passages are embedded (None: by ``encoder``, in this process)."""


# -- the report -------------------------------------------------------------------------------------------


@dataclass
class BuildReport:
    """What ``dmlqa build`` did (its ``--json`` output), filled from the stages' results."""

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
    # documents whose passages, sentences and vectors were kept from the previous version unchanged
    kept_documents: int = 0
    # the citation graph (dmlqa.pipeline.graph): references read from the PDFs, and how many name another
    # document of the knowledge base; skipped: entries the parser could not read (and papers it failed on)
    references: int = 0
    references_resolved: int = 0
    references_skipped: int = 0
    self_citations: int = 0

    @property
    def fetched_ok(self) -> int:
        """Resources the fetch stage got bytes (or a 304) for, from the network or an archive."""
        return self.fetched + self.from_archive + self.not_modified

    # -- from the stages' results (the one place that maps results to fields) ------------------------------

    def add_refresh(self, refreshed: RefreshReport) -> None:
        """A list that failed to refresh is a failure row, never a failed build."""
        self.refresh = refreshed.to_json()
        for item in refreshed.failed:
            self.failed.append(Failure(item.upstream or item.name, "refresh", f"list {item.name}: {item.error}"))

    def add_fetch(self, batch: FetchBatch) -> None:
        self.fetched += batch.fetched
        self.not_modified += batch.not_modified
        self.from_archive += batch.from_archive

    def add_extract(self, result: ExtractResult, *, local: bool = False) -> None:
        """Extraction of fetched resources, or (``local``) of the documents under corpus/local."""
        self.failed.extend(result.failed)
        self.extracted += result.extracted
        self.reused_documents += result.reused_documents
        self.kept_previous += result.kept_previous
        if local:
            self.local_documents = len(result.documents)

    def add_removed(self, doc_ids: Sequence[str]) -> None:
        self.removed = list(doc_ids)

    def add_works(self, works: WorksResult) -> None:
        self.duplicates = list(works.duplicates)
        self.documents = works.full_texts
        self.cards = works.cards
        self.coverage = works.coverage
        self.notice = works.notice

    def add_index(self, result: IndexResult) -> None:
        self.failed.extend(result.failed)
        self.index_version = result.version
        self.chunks = result.chunks
        self.embedded = result.embedded
        self.reused_embeddings = result.chunks - result.embedded
        self.sentences = result.sentences
        self.embedded_sentences = result.embedded_sentences
        self.kept_documents = result.kept_documents

    def add_graph(self, result: GraphResult) -> None:
        self.references = result.references
        self.references_resolved = result.resolved
        self.references_skipped = result.skipped
        self.self_citations = result.self_citations

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
            "kept_documents": self.kept_documents,
            "references": self.references,
            "references_resolved": self.references_resolved,
            "references_skipped": self.references_skipped,
            "self_citations": self.self_citations,
        }
