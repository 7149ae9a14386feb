"""The build's fetch, extract, chunk and embed stages as Ray Data pipelines (``build.executor = "ray"``).

The local executor (:mod:`dmlqa.pipeline.local_executor`) stays the default; the build imports
this module only when asked for Ray, and it needs the optional extra (``pip install "dmlqa[ray]"``).
Workers run the very stage functions of :mod:`dmlqa.pipeline.stages` the local executor runs, so a
resource gives exactly the document, passages and vectors it would give locally.

Three datasets run one after the other, with the driver (the build) in between wherever the build
needs state that lives in one place (the home's document store, the embedding cache):

1. **fetch + extract**: the catalog's resources, in batches; each task fetches its batch with
   :func:`~dmlqa.pipeline.stages.fetch` (replaying ``--archive`` files, writing its own WARC file and
   the shared manifest) and extracts each response with :func:`~dmlqa.pipeline.stages.extract_one`.
   The previous text of each resource travels with it, so workers never open the document store.
2. **chunk**: every document (catalog and local files, in the local build's order) is cut by
   :func:`~dmlqa.pipeline.stages.chunk` with a chunker loaded once per worker process.
3. **embed**: a :data:`~dmlqa.index.embed.VectorSource` for :func:`dmlqa.index.embed.embed_texts`,
   the one embed-and-cache loop: the texts the cache lacks, in exactly the encoder batches the local
   build uses (dynamic int8 quantisation makes a vector depend slightly on its batch mates), go to
   an actor pool in which each actor loads the encoder once; one GPU per actor when the cluster has GPUs.

Results are put back into document order and chunk ordinal on the driver, which then writes the
same index format through the same writer. The home (and any ``--archive`` file) must be on a file
system every node sees (NFS, EFS, Filestore) for stage 1; stages 2 and 3 need nothing but the model.

Nothing here changes the process environment. A Ray that :func:`connect` starts is Ray's own
default: usage statistics off (Ray turns them off for clusters ``ray.init`` starts) and token
authentication on, its token kept in ``~/.ray/auth_token``; set ``RAY_AUTH_MODE=disabled`` in the
environment to opt out, or join a cluster you started (``ray.address``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dmlqa.errors import EncoderMismatchError, ExecutorError, RayUnavailableError
from dmlqa.extract.worker import TimedExtractor
from dmlqa.index.docstore import DocStore
from dmlqa.index.embed import GPU_TEXTS_PER_CALL, embed_groups
from dmlqa.models import Document, Resource
from dmlqa.pipeline import stages
from dmlqa.pipeline.report import BuildOptions, ChunkResult, ExtractResult, FetchBatch, Progress, Stopwatch
from dmlqa.settings import Settings

if TYPE_CHECKING:
    from dmlqa.index.chunk import Chunker
    from dmlqa.index.embed import Encoder, VectorSource

__all__ = [
    "CHUNK_BATCH", "EMBED_GROUPS_PER_CALL", "FETCH_BATCH", "FETCH_TASKS", "EmbedActor", "RayExecutor",
    "RayUnavailableError", "cluster_gpus", "connect", "embed_on_ray", "quiet_data_context", "ray_vectors",
]

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
    Ray (a test, a notebook) is used as it is. Ray's session files go under ``temp_dir`` (the
    home's ``ray/``), not a shared /tmp folder.
    """
    ray = _import_ray()
    if ray.is_initialized():
        return False
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


def quiet_data_context() -> None:
    """No progress bars or stats logs from Ray Data: library code prints nothing, the build has its own progress."""
    from ray.data import DataContext

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.verbose_stats_logs = False


# -- stage 1: fetch + extract -----------------------------------------------------------------------


def _fetch_extract_batch(batch: dict[str, np.ndarray], settings: Settings, options: BuildOptions) -> dict[str, list]:
    """One task: fetch a batch of resources asynchronously, then extract each (runs on a worker)."""
    resources = [Resource.from_json(json.loads(str(r))) for r in batch["res"]]
    previous = [Document.from_json(json.loads(str(p))) if str(p) else None for p in batch["prev"]]
    fetched = stages.fetch(resources, settings, archives=options.archives, offline=options.offline)
    extracted, fetch_rows = [], []
    with TimedExtractor(settings.build.extract_timeout_s) as extractor:
        for n, (item, prev) in enumerate(zip(fetched.items, previous, strict=True)):
            extracted.append(json.dumps(stages.extract_one(item, prev, extractor).to_json(), ensure_ascii=False))
            # One batch per row (the task's fetcher counters on its first row): they add up on the driver.
            row = FetchBatch.of([item], fetched.stats if n == 0 else None)
            fetch_rows.append(json.dumps(row.to_json()))
    return {"i": [int(i) for i in batch["i"]], "extracted": extracted, "fetched": fetch_rows}


def _fetch_and_extract(
    ray: Any, settings: Settings, options: BuildOptions, resources: Sequence[Resource], store: DocStore,
    progress: Progress,
) -> tuple[FetchBatch, ExtractResult]:
    if not resources:
        return FetchBatch(), ExtractResult()
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
        raise ExecutorError(f"the Ray fetch stage returned {len(out)} of {len(resources)} resources; build again")
    fetched = FetchBatch.combine([FetchBatch.from_json(json.loads(str(r["fetched"]))) for r in out])
    extracted = ExtractResult.combine([ExtractResult.from_json(json.loads(str(r["extracted"]))) for r in out])
    return fetched, extracted


# -- stage 2: chunk ------------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _chunker(model: str, chunk_tokens: int, overlap: int, reference_chunks: bool) -> Chunker:
    """One chunker per worker process (loading the tokenizer is the expensive part)."""
    return stages.load_chunker(model, chunk_tokens, overlap, reference_chunks=reference_chunks)


def _chunk_batch(batch: dict[str, np.ndarray], model: str, chunk_tokens: int, overlap: int,
                 reference_chunks: bool) -> dict[str, list]:
    chunker = _chunker(model, chunk_tokens, overlap, reference_chunks)
    results = [stages.chunk([Document.from_json(json.loads(str(raw)))], chunker) for raw in batch["doc"]]
    return {"i": [int(i) for i in batch["i"]], "result": [json.dumps(r.to_json(), ensure_ascii=False) for r in results]}


def _chunk_all(ray: Any, settings: Settings, docs: Sequence[Document]) -> ChunkResult:
    if not docs:
        return ChunkResult()
    model, tokens, overlap = settings.embed.model, settings.index.chunk_tokens, settings.index.chunk_overlap
    refs = settings.index.reference_chunks
    _chunker(model, tokens, overlap, refs)  # fail early, on the driver
    rows = [{"i": i, "doc": json.dumps(d.to_json(), ensure_ascii=False)} for i, d in enumerate(docs)]
    ds = ray.data.from_items(rows, override_num_blocks=max(1, len(rows) // CHUNK_BATCH)).map_batches(
        _chunk_batch,
        batch_size=CHUNK_BATCH,
        fn_kwargs={"model": model, "chunk_tokens": tokens, "overlap": overlap, "reference_chunks": refs},
    )
    out = sorted(ds.take_all(), key=lambda r: int(r["i"]))
    if len(out) != len(docs):
        raise ExecutorError(f"the Ray chunk stage returned {len(out)} of {len(docs)} documents; build again")
    return ChunkResult.combine([ChunkResult.from_json(json.loads(r["result"])) for r in out])


# -- stage 3: embed ----------------------------------------------------------------------------------


class EmbedActor:
    """Holds one encoder for its lifetime: the model is loaded once per actor, not per batch.

    On a GPU the torch encoder runs its fast path (``embed.precision``, fp16 by default; texts
    tokenised ahead in threads) and gets all the rows of a call in one encode: its pipeline only
    keeps the GPU busy across a long call, and its vectors do not depend on their batch mates.
    """

    def __init__(self, model: str, encoder: str, cache_dir: str, batch_size: int, device: str = "cpu",
                 precision: str = "auto") -> None:
        from dmlqa.index.embed import load_encoder

        self.encoder = load_encoder(model, encoder, Path(cache_dir), precision=precision,
                                    device=device if encoder == "torch" else None)
        self.batch_size = batch_size
        self.joined = int(getattr(self.encoder, "texts_per_call", 0) or 0) > 0
        if device != "cpu" and encoder != "torch":
            log.warning("encoder %s runs on CPU only; the GPU of this actor is idle", self.encoder.key)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        groups = [json.loads(str(raw)) for raw in batch["texts"]]
        if self.joined:
            flat = self.encoder.encode([t for texts in groups for t in texts], batch_size=self.batch_size)
            bounds = np.cumsum([0] + [len(texts) for texts in groups])
            parts = [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        else:
            # One row is one encoder batch of the local build: the same batch mates, the same vectors.
            parts = [self.encoder.encode(texts, batch_size=self.batch_size) for texts in groups]
        vecs = [np.ascontiguousarray(v, dtype=np.float32).tobytes() for v in parts]
        return {"g": [int(g) for g in batch["g"]], "vecs": vecs, "key": [self.encoder.key] * len(vecs)}


def ray_vectors(ray: Any, settings: Settings, *, encoder_key: str, dim: int, actors: int = 0) -> VectorSource:
    """A :data:`~dmlqa.index.embed.VectorSource` on an actor pool: each encoder batch is one row.

    ``actors`` = 0 picks one per GPU when the cluster has GPUs, else one per two CPUs. Every actor
    must load the encoder the driver did (``encoder_key``): vectors of two encoders are never mixed.
    """

    def source(texts: Sequence[str], groups: Sequence[list[int]]) -> Iterator[tuple[list[int], np.ndarray]]:
        if not groups:
            return
        gpus = cluster_gpus()
        n_actors = actors
        if n_actors <= 0:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            n_actors = gpus if gpus else max(1, cpus // 2)
        n_actors = max(1, min(n_actors, len(groups)))
        rows = [{"g": g, "texts": json.dumps([texts[i] for i in grp], ensure_ascii=False)}
                for g, grp in enumerate(groups)]
        per_call = EMBED_GROUPS_PER_CALL  # GPU actors embed a call's rows together (EmbedActor)
        if gpus and settings.embed.encoder == "torch":
            per_call = max(per_call, GPU_TEXTS_PER_CALL // settings.embed.batch_size)
        ds = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows), n_actors * 4))).map_batches(
            EmbedActor,
            batch_size=per_call,
            compute=ray.data.ActorPoolStrategy(size=n_actors),
            num_gpus=1 if gpus else 0,
            num_cpus=1,
            fn_constructor_kwargs={
                "model": settings.embed.model, "encoder": settings.embed.encoder,
                "cache_dir": str(settings.encoders_dir), "batch_size": settings.embed.batch_size,
                "device": "cuda" if gpus else "cpu", "precision": settings.embed.precision,
            },
        )
        seen = 0
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            for g, blob, key in zip(batch["g"], batch["vecs"], batch["key"], strict=True):
                if str(key) != encoder_key:
                    raise EncoderMismatchError(
                        f"an embed actor loaded encoder {key}, the driver {encoder_key}: same model on every node?",
                        expected=encoder_key, found=str(key),
                    )
                pos = groups[int(g)]
                seen += 1
                yield pos, np.frombuffer(blob, dtype=np.float32).reshape(len(pos), dim)
        if seen != len(groups):
            raise ExecutorError(f"the Ray embed stage returned {seen} of {len(groups)} batches; build again")

    return source


def embed_on_ray(
    ray: Any, texts: Sequence[str], *, settings: Settings, encoder_key: str, dim: int, actors: int = 0
) -> np.ndarray:
    """Vectors of all ``texts`` on an actor pool, no cache (the benchmark's view of :func:`ray_vectors`)."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    source = ray_vectors(ray, settings, encoder_key=encoder_key, dim=dim, actors=actors)
    for pos, vecs in source(texts, embed_groups(len(texts), settings.embed.batch_size)):
        out[pos] = vecs
    return out


# -- the executor ------------------------------------------------------------------------------------------


class RayExecutor:
    """:class:`dmlqa.pipeline.report.Executor` on Ray: joins (or starts) a cluster when entered."""

    name = "ray"

    def __init__(self, settings: Settings, options: BuildOptions, progress: Progress, clock: Stopwatch) -> None:
        self.settings = settings
        self.options = options
        self.progress = progress
        self.clock = clock
        self._ray: Any = None
        self._started = False

    def __enter__(self) -> RayExecutor:
        self._ray = _import_ray()
        with self.clock("ray_init"):
            self._started = connect(self.settings.ray.address or None, temp_dir=self.settings.paths.ray_temp)
        try:
            quiet_data_context()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False

    def fetch_extract(self, resources: Sequence[Resource], store: DocStore) -> tuple[FetchBatch, ExtractResult]:
        with self.clock("fetch+extract"):
            return _fetch_and_extract(self._ray, self.settings, self.options, resources, store, self.progress)

    def chunk(self, documents: Sequence[Document]) -> ChunkResult:
        return _chunk_all(self._ray, self.settings, documents)

    def vectors(self, encoder: Encoder) -> VectorSource:
        return ray_vectors(
            self._ray, self.settings, encoder_key=encoder.key, dim=encoder.dim, actors=self.settings.ray.embed_actors
        )
