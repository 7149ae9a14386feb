"""The default executor: fetch, extract, chunk and embed in this process (``build.executor = "local"``).

It only strings the stage functions of :mod:`dmlqa.pipeline.stages` together; the Ray executor
(:mod:`dmlqa.pipeline.ray_executor`) calls the same functions on a cluster. Fetching is concurrent
(asyncio, under the fetcher's per-host limits); the rest runs one document at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dmlqa.index.docstore import DocStore
from dmlqa.models import Document, Resource
from dmlqa.pipeline import stages
from dmlqa.pipeline.report import BuildOptions, ChunkResult, ExtractResult, FetchBatch, Progress, Stopwatch
from dmlqa.settings import Settings

if TYPE_CHECKING:
    from dmlqa.index.chunk import Chunker
    from dmlqa.index.embed import Encoder, VectorSource

__all__ = ["LocalExecutor"]


class LocalExecutor:
    """:class:`dmlqa.pipeline.report.Executor` in this process."""

    name = "local"

    def __init__(self, settings: Settings, options: BuildOptions, progress: Progress, clock: Stopwatch) -> None:
        self.settings = settings
        self.options = options
        self.progress = progress
        self.clock = clock
        self._chunker: Chunker | None = None  # loaded by the first chunk() and kept for the build

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def fetch_extract(self, resources: Sequence[Resource], store: DocStore) -> tuple[FetchBatch, ExtractResult]:
        with self.clock("fetch"):
            advance = self.progress.start("fetch", len(resources))
            fetched = stages.fetch(
                resources, self.settings, archives=self.options.archives, offline=self.options.offline,
                advance=advance,
            )
            self.progress.done("fetch")
        with self.clock("extract"):
            advance = self.progress.start("extract", len(fetched.items))
            extracted = stages.extract(fetched.items, store, advance,
                                       time_limit_s=self.settings.build.extract_timeout_s)
            self.progress.done("extract")
        return fetched, extracted

    def chunk(self, documents: Sequence[Document]) -> ChunkResult:
        # one chunker for the whole build: its tokenizer and its memo of token counts serve every batch
        if self._chunker is None:
            s = self.settings
            self._chunker = stages.load_chunker(s.embed.model, s.index.chunk_tokens, s.index.chunk_overlap,
                                                reference_chunks=s.index.reference_chunks)
        return stages.chunk(documents, self._chunker)

    def vectors(self, encoder: Encoder) -> VectorSource | None:
        return None  # the encoder the build loaded, in this process
