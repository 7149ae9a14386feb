"""The build's fetch, extract, chunk and embed stages as Ray Data pipelines (``dmlqa build --executor ray``).

The local executor (:mod:`dmlqa.pipeline.build`) stays the default; this module is imported only when a
build asks for Ray, and needs the optional extra (``pip install "dmlqa[ray]"``).

Three datasets run one after the other, with the driver in between wherever the build needs state
that lives in one place (the home's document store, the embedding cache):

1. **fetch + extract**: the catalog's resources, in batches; each task fetches its batch with the
   project's own async :class:`~dmlqa.acquire.fetch.Fetcher` (replaying ``--archive`` files, writing its own
   WARC file and the shared manifest) and extracts each response with :func:`dmlqa.pipeline.build._extract_one`,
   so a resource gives exactly the document the local build would give. The previous text of each
   resource travels with it, so workers never open the document store.
2. **chunk**: every document (catalog and local files, in the local build's order) is cut by the same
   :class:`~dmlqa.index.chunk.Chunker`, loaded once per worker process.
3. **embed**: the texts the cache lacks, grouped into exactly the encoder batches the local build
   would use (dynamic int8 quantisation makes a vector depend slightly on its batch mates), through an
   actor pool in which each actor loads the encoder once; one GPU per actor when the cluster has GPUs.

Results are sorted back into document order and chunk ordinal on the driver, which then writes the
same index format through the same writer. The home (and any ``--archive`` file) must be on a file
system every node sees (NFS, EFS, Filestore) for stage 1; stages 2 and 3 need nothing but the model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from dmlqa.errors import DmlqaError
from dmlqa.index.docstore import DocStore
from dmlqa.index.versions import dense_text
from dmlqa.models import Chunk, Document, Failure, Resource
from dmlqa.pipeline.build import (
    BuildOptions,
    BuildReport,
    Progress,
    Staged,
    _extract_one,
    _fetch_all,
    _Fetched,
    _local_documents,
    _timed,
    one_per_work,
    sync_store,
)
from dmlqa.settings import Settings

log = logging.getLogger(__name__)

#: Resources per fetch task: enough for the async fetcher to overlap requests within one task.
FETCH_BATCH = 64
#: Fetch tasks in flight at once. Each has its own per-host limits, so politeness towards one host
#: is ``per_host * FETCH_TASKS`` requests: keep it small.
FETCH_TASKS = 2
#: Documents per chunk task.
CHUNK_BATCH = 32
#: Encoder batches handed to an embed actor per call.
EMBED_GROUPS_PER_CALL = 8
#: Texts between two writes of new vectors to the cache (as the local build, see embed_texts).
FLUSH_EVERY = 1024


class RayUnavailableError(DmlqaError):
    """Ray is not installed (the executor needs the optional extra)."""


def _import_ray():  # noqa: ANN202 - the ray module
    try:
        import ray
        import ray.data  # noqa: F401 - the Data library is a separate extra
    except ImportError:
        raise RayUnavailableError(
            'the Ray executor needs Ray Data: pip install "dmlqa[ray]" (or use --executor local)'
        ) from None
    return ray


def connect(address: str | None, *, temp_dir: Path | None = None) -> bool:
    """Join the cluster at ``address`` ("auto" = the one ``ray start`` made here), or start a local one.

    Returns True when this call started Ray (the caller then shuts it down). An already initialised
    Ray (a test, a notebook) is used as it is.
    """
    ray = _import_ray()
    if ray.is_initialized():
        return False
    # A library must not phone home or write credentials into ~/.ray on the user's behalf.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(_temp_dir=str(temp_dir) if temp_dir else None, **kwargs)
    return True


def cluster_gpus() -> int:
    ray = _import_ray()
    return int(ray.cluster_resources().get("GPU", 0))


def _tasks(ray: Any, n: int) -> dict[str, Any]:
    """At most ``n`` tasks of a stage at once (``concurrency=`` before Ray 2.51, ``compute=`` since)."""
    strategy = getattr(ray.data, "TaskPoolStrategy", None)
    try:
        return {"compute": strategy(size=n)} if strategy is not None else {"concurrency": n}
    except TypeError:  # older TaskPoolStrategy took no size
        return {"concurrency": n}


def _quiet_data_context() -> None:
    from ray.data import DataContext

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = False  # library code prints nothing; the build has its own progress
    ctx.verbose_stats_logs = False


# -- stage 1: fetch + extract -----------------------------------------------------------------------


class _PreviousStore:
    """The one method of :class:`DocStore` that ``_extract_one`` uses, over the text shipped with the row."""

    def __init__(self, previous: Document | None) -> None:
        self._previous = previous

    def get(self, doc_id: str) -> Document | None:
        return self._previous


def _fetch_extract_batch(batch: dict[str, np.ndarray], settings: Settings, options: BuildOptions) -> dict[str, list]:
    """One task: fetch a batch of resources asynchronously, then extract each (runs on a worker)."""
    resources = [Resource.from_json(json.loads(str(r))) for r in batch["res"]]
    previous = [Document.from_json(json.loads(str(p))) if str(p) else None for p in batch["prev"]]
    fetched, stats = asyncio.run(_fetch_all(resources, settings, options, lambda n: None))
    docs, reports, flags = [], [], []
    for item, prev in zip(fetched, previous, strict=True):
        report = BuildReport()
        doc = _extract_one(item, _PreviousStore(prev), report)  # type: ignore[arg-type]
        docs.append(json.dumps(doc.to_json(), ensure_ascii=False))
        reports.append(json.dumps(_counters(report)))
        flags.append(json.dumps(_fetch_flags(item)))
    return {
        "i": [int(i) for i in batch["i"]],
        "doc": docs,
        "counters": reports,
        "flags": flags,
        "stats": [json.dumps(stats)] + ["{}"] * (len(docs) - 1),
    }


def _counters(report: BuildReport) -> dict[str, Any]:
    return {
        "failed": [asdict(f) for f in report.failed],
        "extracted": report.extracted,
        "reused_documents": report.reused_documents,
        "kept_previous": report.kept_previous,
    }


def _fetch_flags(item: _Fetched) -> dict[str, bool]:
    doc = item.resolved.document if item.resolved is not None else None
    return {
        "ok": doc is not None,
        "from_archive": bool(doc is not None and doc.from_archive),
        "not_modified": bool(doc is not None and doc.not_modified),
    }


def _fetch_and_extract(
    ray: Any, settings: Settings, options: BuildOptions, resources: Sequence[Resource], store: DocStore,
    report: BuildReport, progress: Progress,
) -> tuple[list[Document], dict[str, int]]:
    if not resources:
        return [], {}
    rows = []
    for i, res in enumerate(resources):
        prev = store.get(res.id)
        rows.append({
            "i": i,
            "res": json.dumps(res.to_json(), ensure_ascii=False),
            "prev": json.dumps(prev.to_json(), ensure_ascii=False) if prev is not None else "",
        })
    ds = ray.data.from_items(rows, override_num_blocks=max(1, len(rows) // FETCH_BATCH)).map_batches(
        _fetch_extract_batch,
        batch_size=FETCH_BATCH,
        **_tasks(ray, FETCH_TASKS),
        fn_kwargs={"settings": settings, "options": options},
    )
    advance = progress.start("fetch", len(resources))
    out: list[dict[str, Any]] = []
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        n = len(batch["i"])
        out.extend({k: batch[k][j] for k in batch} for j in range(n))
        advance(n)
    progress.done("fetch")
    out.sort(key=lambda r: int(r["i"]))
    if len(out) != len(resources):
        raise DmlqaError(f"the Ray fetch stage returned {len(out)} of {len(resources)} resources")

    docs: list[Document] = []
    stats: dict[str, int] = {}
    for row in out:
        docs.append(Document.from_json(json.loads(str(row["doc"]))))
        c = json.loads(str(row["counters"]))
        report.failed.extend(Failure(**f) for f in c["failed"])
        report.extracted += c["extracted"]
        report.reused_documents += c["reused_documents"]
        report.kept_previous += c["kept_previous"]
        flags = json.loads(str(row["flags"]))
        report.from_archive += flags["from_archive"]
        report.not_modified += flags["not_modified"]
        report.fetched += flags["ok"] and not flags["from_archive"] and not flags["not_modified"]
        for k, v in json.loads(str(row["stats"])).items():
            stats[k] = stats.get(k, 0) + int(v)
    return docs, stats


# -- stage 2: chunk ------------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _chunker(model: str, chunk_tokens: int, overlap: int):  # noqa: ANN202 - dmlqa.index.chunk.Chunker
    """One chunker per worker process (loading the tokenizer is the expensive part)."""
    from dmlqa.index.chunk import Chunker, TokenCounter
    from dmlqa.index.embed import model_dir

    path = model_dir(model)
    counter = TokenCounter.from_model_dir(path) if path else None
    if counter is None:
        raise DmlqaError(f"model {model!r} has no local folder with tokenizer.json")
    return Chunker(counter, chunk_tokens=chunk_tokens, overlap=overlap)


def _chunk_batch(batch: dict[str, np.ndarray], model: str, chunk_tokens: int, overlap: int) -> dict[str, list]:
    chunker = _chunker(model, chunk_tokens, overlap)
    chunks_out, failures = [], []
    for raw in batch["doc"]:
        doc = Document.from_json(json.loads(str(raw)))
        try:
            chunks = chunker.chunk(doc)
            failures.append("")
        except Exception as exc:  # noqa: BLE001 - as the local build: one document never stops the build
            log.exception("chunking failed for %s", doc.url)
            chunks = []
            failures.append(json.dumps(asdict(Failure(doc.url, "chunk", f"unexpected error: {exc!r}"))))
        chunks_out.append(json.dumps([asdict(c) for c in chunks], ensure_ascii=False))
    return {"i": [int(i) for i in batch["i"]], "chunks": chunks_out, "failure": failures}


def _chunk_all(ray: Any, settings: Settings, docs: Sequence[Document], report: BuildReport) -> list[Chunk]:
    if not docs:
        return []
    model, tokens, overlap = settings.embed.model, settings.index.chunk_tokens, settings.index.chunk_overlap
    _chunker(model, tokens, overlap)  # fail early, on the driver
    rows = [{"i": i, "doc": json.dumps(d.to_json(), ensure_ascii=False)} for i, d in enumerate(docs)]
    ds = ray.data.from_items(rows, override_num_blocks=max(1, len(rows) // CHUNK_BATCH)).map_batches(
        _chunk_batch,
        batch_size=CHUNK_BATCH,
        fn_kwargs={"model": model, "chunk_tokens": tokens, "overlap": overlap},
    )
    out = sorted(ds.take_all(), key=lambda r: int(r["i"]))
    if len(out) != len(docs):
        raise DmlqaError(f"the Ray chunk stage returned {len(out)} of {len(docs)} documents")
    chunks: list[Chunk] = []
    for row in out:
        if row["failure"]:
            report.failed.append(Failure(**json.loads(row["failure"])))
        chunks.extend(Chunk(**c) for c in json.loads(row["chunks"]))
    return chunks


# -- stage 3: embed ----------------------------------------------------------------------------------


class EmbedActor:
    """Holds one encoder for its lifetime: the model is loaded once per actor, not per batch."""

    def __init__(self, model: str, encoder: str, cache_dir: str, batch_size: int, device: str = "cpu") -> None:
        from dmlqa.index.embed import load_encoder

        self.encoder = load_encoder(model, encoder, Path(cache_dir))
        self.batch_size = batch_size
        if device != "cpu":
            inner = getattr(self.encoder, "_model", None)  # sentence-transformers (encoder=torch)
            if inner is not None and hasattr(inner, "to"):
                inner.to(device)
            else:
                log.warning("encoder %s runs on CPU only; the GPU of this actor is idle", self.encoder.key)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        vecs = []
        for raw in batch["texts"]:
            texts = json.loads(str(raw))
            # One row is one encoder batch of the local build: the same batch mates, the same vectors.
            v = self.encoder.encode(texts, batch_size=self.batch_size)
            vecs.append(np.ascontiguousarray(v, dtype=np.float32).tobytes())
        return {"g": [int(g) for g in batch["g"]], "vecs": vecs, "key": [self.encoder.key] * len(vecs)}


def embed_groups(texts: Sequence[str], batch_size: int, flush_every: int = FLUSH_EVERY) -> list[list[int]]:
    """Positions of ``texts`` grouped as :func:`dmlqa.index.embed.embed_texts` batches them."""
    groups = []
    for s in range(0, len(texts), flush_every):
        part = range(s, min(s + flush_every, len(texts)))
        groups.extend(list(part[b : b + batch_size]) for b in range(0, len(part), batch_size))
    return groups


def embed_on_ray(
    ray: Any, texts: Sequence[str], *, settings: Settings, encoder_key: str, dim: int,
    actors: int = 0, progress: Any = None,
    on_vectors: Any = None,
) -> np.ndarray:
    """Vectors of ``texts`` (all of them: the caller leaves out what its cache holds) on an actor pool.

    ``actors`` = 0 picks one per GPU when the cluster has GPUs, else one per two CPUs.
    ``on_vectors(positions, vectors)`` is called as results arrive (to fill a cache as the local
    build does).
    """
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    groups = embed_groups(texts, settings.embed.batch_size)
    gpus = cluster_gpus()
    if actors <= 0:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        actors = gpus if gpus else max(1, cpus // 2)
    actors = max(1, min(actors, len(groups)))
    rows = [{"g": g, "texts": json.dumps([texts[i] for i in grp], ensure_ascii=False)} for g, grp in enumerate(groups)]
    ds = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows), actors * 4))).map_batches(
        EmbedActor,
        batch_size=EMBED_GROUPS_PER_CALL,
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_gpus=1 if gpus else 0,
        num_cpus=1,
        fn_constructor_kwargs={
            "model": settings.embed.model, "encoder": settings.embed.encoder, "cache_dir": str(settings.encoders_dir),
            "batch_size": settings.embed.batch_size, "device": "cuda" if gpus else "cpu",
        },
    )
    seen = 0
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        for g, blob, key in zip(batch["g"], batch["vecs"], batch["key"], strict=True):
            if str(key) != encoder_key:
                raise DmlqaError(
                    f"an embed actor loaded encoder {key}, the driver {encoder_key}: same model on every node?"
                )
            pos = groups[int(g)]
            vecs = np.frombuffer(blob, dtype=np.float32).reshape(len(pos), dim)
            out[pos] = vecs
            seen += 1
            if on_vectors is not None:
                on_vectors(pos, vecs)
            if progress is not None:
                progress(len(pos))
    if seen != len(groups):
        raise DmlqaError(f"the Ray embed stage returned {seen} of {len(groups)} batches")
    return out


# -- the stages together --------------------------------------------------------------------------------


def run_stages(
    settings: Settings,
    options: BuildOptions,
    resources: Sequence[Resource],
    report: BuildReport,
    progress: Progress,
) -> Staged:
    """Fetch, extract, chunk and embed on Ray; fill ``report`` as the local build does.

    Also updates the home's document store exactly as the local build does (drop what is no longer
    named, store fresh full texts) and the embedding cache.
    """
    from dmlqa.index.embed import EmbeddingCache, load_encoder, text_sha256

    ray = _import_ray()
    t0 = time.perf_counter()
    started = connect(settings.ray.address or None, temp_dir=settings.paths.ray_temp)
    report.seconds["ray_init"] = time.perf_counter() - t0
    try:
        _quiet_data_context()
        with DocStore(settings.corpus_dir / "documents.sqlite") as store:
            with _timed(report, "fetch+extract"):
                docs, stats = _fetch_and_extract(ray, settings, options, resources, store, report, progress)
            with _timed(report, "extract"):
                docs.extend(_local_documents(settings, store, report))
                sync_store(store, docs, report)
        docs = one_per_work(resources, docs, report)

        with _timed(report, "chunk"):
            chunks = _chunk_all(ray, settings, docs, report)
        report.chunks = len(chunks)

        with _timed(report, "embed"):
            # The driver loads the encoder too: its key names the index, and on one machine its
            # one-time ONNX export is done before the actors (which would race on it) start.
            encoder = load_encoder(settings.embed.model, settings.embed.encoder, settings.encoders_dir)
            titles = {d.doc_id: d.title for d in docs}
            texts = [dense_text(titles[c.doc_id], c.section, c.text) for c in chunks]
            hashes = [text_sha256(t) for t in texts]
            cache = EmbeddingCache(settings.paths.embeddings_cache)
            try:
                known = cache.get_many(encoder.key, hashes)
                todo: dict[str, str] = {}
                for h, t in zip(hashes, texts, strict=True):
                    if h not in known and h not in todo:
                        todo[h] = t
                pending = list(todo.items())

                def keep_vectors(pos: list[int], vecs: np.ndarray) -> None:
                    fresh = {pending[p][0]: v for p, v in zip(pos, vecs, strict=True)}
                    cache.put_many(encoder.key, fresh)
                    known.update(fresh)

                advance = progress.start("embed", len(pending))
                embed_on_ray(
                    ray, [t for _, t in pending], settings=settings, encoder_key=encoder.key, dim=encoder.dim,
                    actors=settings.ray.embed_actors, progress=advance, on_vectors=keep_vectors,
                )
                progress.done("embed")
            finally:
                cache.close()
            vectors = np.zeros((len(texts), encoder.dim), dtype=np.float32)
            for i, h in enumerate(hashes):
                vectors[i] = known[h]
        report.embedded = len(pending)
        report.reused_embeddings = len(texts) - len(pending)
        return Staged(docs, chunks, vectors, encoder.key, stats, encoder=encoder)
    finally:
        if started:
            ray.shutdown()
