"""One build: catalog → fetch → extract → store → merge works → citation graph → (chunk → embed → sentences →
segment, per batch of new and changed documents) → index → publish.

This is the only module that knows the whole order of the stages, and the only one that fills the
:class:`~dmlqa.pipeline.report.BuildReport`: every stage function (:mod:`dmlqa.pipeline.stages`)
returns its result and the report is made from them here. Where fetch, extract, chunk and embed
run is the executor's business (``settings.build.executor``): :mod:`dmlqa.pipeline.local_executor`
in this process or :mod:`dmlqa.pipeline.ray_executor` on a cluster; both call the same stage
functions, and everything around them (the document store, the embedding cache, the index) is
done here, the same way for both.

A failure of one resource becomes a row of the report (see :mod:`dmlqa.pipeline.stages`), so the
build exits with a published version whenever at least one could be written.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from dmlqa.errors import ExecutorError, NoNetworkError, NothingToBuildError
from dmlqa.index.docstore import DocStore, with_text, without_text
from dmlqa.index.versions import prune
from dmlqa.models import Resource
from dmlqa.pipeline import indexing, stages
from dmlqa.pipeline.report import BuildOptions, BuildReport, Executor, NoProgress, Progress, Stopwatch
from dmlqa.pipeline.runs import diff_documents, new_documents, published_documents, recording
from dmlqa.settings import Settings

__all__ = ["BuildOptions", "BuildReport", "Progress", "make_executor", "run_build"]

log = logging.getLogger(__name__)


def _remove_stale_pointers(index_dir: Path) -> None:
    """Remove ``.CURRENT.<pid>.tmp`` files a build killed while publishing left behind.

    Only the holder of the writer lock publishes, so under the lock any such file is debris.
    """
    for tmp in index_dir.glob(".CURRENT.*.tmp"):
        tmp.unlink(missing_ok=True)
        log.info("removed %s left by an interrupted build", tmp.name)


def make_executor(settings: Settings, options: BuildOptions, progress: Progress, clock: Stopwatch) -> Executor:
    """The executor ``settings.build.executor`` names, not yet entered (use it as a context manager).

    The Ray executor is imported only here and only when asked for: it needs the optional extra.
    """
    if settings.build.executor == "local":
        from dmlqa.pipeline.local_executor import LocalExecutor

        return LocalExecutor(settings, options, progress, clock)
    if settings.build.executor == "ray":
        from dmlqa.pipeline.ray_executor import RayExecutor

        return RayExecutor(settings, options, progress, clock)
    raise ExecutorError(f"unknown executor {settings.build.executor!r}: choose local or ray")


def _read_catalog(settings: Settings) -> list[Resource]:
    """The catalog's resources; refuses a build with nothing at all to index."""
    from dmlqa.catalog.local import local_files
    from dmlqa.catalog.store import read_catalog

    resources = read_catalog(settings.catalog_path)
    if not resources and not local_files(settings.corpus_dir):
        raise NothingToBuildError(
            "nothing to build: the catalog is empty and corpus/local has no documents; "
            "run `dmlqa catalog import LIST.md` or `dmlqa add FILE`"
        )
    return resources


def _stop_without_network(settings: Settings, report: BuildReport, stats: dict[str, int]) -> None:
    """Raise :class:`NoNetworkError` when no fetch reached any server (see :func:`no_network`).

    Before anything is stored or embedded: the document store and the published version stay as they
    were, the run is recorded failed with its fetch failures, and the command exits non-zero.
    """
    from dmlqa.pipeline.coverage import no_network

    saved = len(list(settings.archive_dir.glob("*.warc.gz"))) if settings.archive_dir.is_dir() else 0
    reason = no_network(report.failed, report.fetched_ok, stats.get("responses", 0), saved)
    if reason is not None:
        raise NoNetworkError(reason)


def run_build(
    settings: Settings,
    options: BuildOptions | None = None,
    *,
    progress: Progress | None = None,
) -> BuildReport:
    """Build and publish a new index version of ``settings.home``; return the report.

    Raises :class:`~dmlqa.errors.DmlqaError` only when no version could be published at all, and
    :class:`~dmlqa.errors.NoNetworkError` when no fetch reached any server (nothing is published then).
    """
    from dmlqa.pipeline.lock import WriterLock

    options = options or BuildOptions()
    progress = progress or NoProgress()
    report = BuildReport()
    clock = Stopwatch(report.seconds)
    t_all = time.perf_counter()
    with WriterLock(settings.home, "build"), recording(settings.index_dir, report, trigger=options.trigger):
        settings.index_dir.mkdir(parents=True, exist_ok=True)
        prune(settings.index_dir, settings.index.keep_versions)  # clears debris of a crashed build first
        _remove_stale_pointers(settings.index_dir)
        previous = published_documents(settings.index_dir)

        if options.refresh_lists:
            with clock("refresh"):
                report.add_refresh(stages.refresh(settings, archives=options.archives, offline=options.offline))
        with clock("catalog"):
            resources = _read_catalog(settings)
        report.resources = len(resources)

        with make_executor(settings, options, progress, clock) as executor, \
                DocStore(settings.paths.documents) as store:
            fetched, extracted = executor.fetch_extract(resources, store)
            report.add_fetch(fetched)
            report.add_extract(extracted)
            _stop_without_network(settings, report, fetched.stats)
            with clock("extract"):
                local = stages.local_documents(settings, store)
                report.add_extract(local, local=True)
                documents = [*extracted.documents, *local.documents]
                report.add_removed(stages.store_documents(store, documents))
                # from here on the build holds every document's facts, and the texts of one batch at a time
                documents = [without_text(d) for d in documents]
            log.debug("fetch stats: %s", fetched.stats)
            works = stages.merge_copies(resources, documents, report.failed)
            report.add_works(works)
            with clock("graph"):
                graph = stages.citations(works, settings, store)
            report.add_graph(graph)

            with clock("embed"):
                # Loaded here even when the executor embeds elsewhere: its key names the index, and
                # on one machine its one-time ONNX export is done before any worker (which would race).
                encoder = stages.encoder_for(settings)
            meta = indexing.version_meta(settings, works, encoder_key=encoder.key, resources=report.resources,
                                         failed=report.failed, graph=graph)
            # chunk → embed → sentences → segment, a batch of new and changed documents at a time
            indexed = indexing.index_documents(settings, works.documents, executor, encoder, meta,
                                               citations=graph.rows(), progress=progress, clock=clock,
                                               load_text=lambda d: with_text(d, store))
        report.add_index(indexed)
        report.changes = diff_documents(previous, new_documents(works.documents))
        report.seconds["total"] = time.perf_counter() - t_all
    return report
