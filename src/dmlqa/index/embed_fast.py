"""The pipelined path of ``encoder = "torch"``: length-sorted batches, tokenised ahead of the model.

Why it exists: on a GPU the tokenizer, not the model, is the limit. Measured on one H100 with
all-MiniLM-L6-v2 at 256 tokens (docs: PITFALLS.md), the model alone runs ~6,000 passages/s in fp32
and ~37,000–40,000 in fp16, but ``SentenceTransformer.encode`` tokenises each batch in the thread
that then waits for the GPU, which caps it at ~2,200/s. So :class:`PipelinedEncoder`

* runs the model in fp16 on CUDA (:func:`resolve_dtype`; "auto" keeps fp32 on CPU);
* sorts the texts by length (longest first, as sentence-transformers does), so a batch pads to
  the length of its own texts, and puts the vectors back in the caller's order;
* tokenises the batches in worker threads, at most ``prefetch`` batches ahead (a bounded queue,
  so memory stays flat however many texts a call has), while the calling thread runs the model.
  Batches go to the GPU from pinned memory with ``non_blocking`` copies, and vectors come back the
  same way, so the GPU never waits for the host between batches.

Tokenising goes through the model's own Rust tokenizer (``tokenizers.Tokenizer``, copied and set
to truncate and pad exactly as the model's Hugging Face tokenizer does), not through
``SentenceTransformer.preprocess``: measured on 2 cores, 256-token passages, the Rust
``encode_batch`` releases the GIL (two threads: 1,491 → 2,851 passages/s) while ``preprocess``
spends ~30% of its time building Python lists under the GIL and gains nothing from threads
(888/s on one thread, 859/s on two). A copy, because ``preprocess`` changes the shared tokenizer's
truncation and padding on the fly, which is a data race between threads. The copy is checked
against ``preprocess`` on probe texts when the encoder is built; a model whose tokenisation it does
not reproduce (a prompt, a chat template, unpadded flash-attention inputs) gets ``preprocess``
itself, in the same pipeline. The model's forward (transformer, pooling, normalisation modules)
is the model's own, so vectors equal ``SentenceTransformer.encode(normalize_embeddings=True)`` up
to float tolerance; they are always returned as L2-normalised float32.

This module imports nothing of :mod:`dmlqa.index.embed` (which imports it lazily, on first use of
the torch encoder), so torch stays off the start-up path.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from dmlqa.errors import EncoderError

__all__ = [
    "CUDA_MIN_BATCH", "PRECISIONS", "PipelinedEncoder", "length_order", "resolve_dtype",
]

log = logging.getLogger(__name__)

#: "auto": fp16 on CUDA, fp32 elsewhere (kept in step with dmlqa.settings.PRECISIONS).
PRECISIONS = ("auto", "fp32", "fp16", "bf16")
_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
#: Smallest batch on a GPU: the configured batch size is tuned for 2 CPU cores (16), where a GPU
#: idles; the H100 figures above were taken at 256–1024, and batch size moves vectors only by
#: float rounding (padding is masked out).
CUDA_MIN_BATCH = 256
#: Texts the tokenizer copy is checked on against ``preprocess``: empty, whitespace, accents, CJK,
#: and one far over any max_seq_length.
_PROBES = ("", "  padded  text ", "Ünïcödé straße, 東京 and émigré.", "ZeRO-3 " * 600, "a")


def resolve_dtype(precision: str, device: str) -> torch.dtype:
    """The torch dtype ``precision`` means on ``device``: "auto" is fp16 on CUDA and fp32 elsewhere.

    fp16 rather than bf16 for "auto": both keep the model on the GPU's tensor cores, and fp16 keeps 3
    more mantissa bits (the issue's bar is cosine >= 0.999 to fp32). CPUs without AMX gain nothing
    from either, so "auto" leaves CPU vectors exactly as they were.
    """
    if precision not in PRECISIONS:
        raise EncoderError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        return torch.float16 if str(device).startswith("cuda") else torch.float32
    return _DTYPES[precision]


def length_order(texts: Sequence[str]) -> np.ndarray:
    """Positions of ``texts`` longest first (by characters: free, and ~ tokens for one language).

    Batches of neighbours in this order pad little; stable, so equal lengths keep their order.
    """
    return np.argsort(-np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)), kind="stable")


Features = dict[str, Any]


class _RustFeaturizer:
    """The model's ``tokenizers.Tokenizer``, copied and set up as its HF wrapper tokenises for the model."""

    def __init__(self, hf: Any) -> None:
        from tokenizers import Tokenizer

        max_len = int(hf.model_max_length)
        if max_len > 1_000_000:  # "no limit" sentinel: the wrapper would warn and not truncate
            raise ValueError("the tokenizer has no maximum length")
        names = list(hf.model_input_names)
        if not set(names) <= {"input_ids", "attention_mask", "token_type_ids"} or "input_ids" not in names:
            raise ValueError(f"unexpected model inputs {names}")
        self._names = names
        self._tok = Tokenizer.from_str(hf.backend_tokenizer.to_str())
        self._tok.enable_truncation(max_length=max_len, stride=0, strategy="longest_first",
                                    direction=hf.truncation_side)
        self._tok.enable_padding(direction=hf.padding_side, pad_id=int(hf.pad_token_id),
                                 pad_type_id=int(hf.pad_token_type_id), pad_token=str(hf.pad_token))
        # encode_batch_fast skips character offsets, which nothing here reads.
        self._encode = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)

    def __call__(self, texts: list[str]) -> Features:
        encs = self._encode(texts)
        out: Features = {}
        for name, attr in (("input_ids", "ids"), ("attention_mask", "attention_mask"), ("token_type_ids", "type_ids")):
            if name in self._names:
                out[name] = torch.from_numpy(np.array([getattr(e, attr) for e in encs], dtype=np.int64))
        return out


def _same_features(a: Features, b: Features) -> bool:
    tensors = {k for k, v in b.items() if isinstance(v, torch.Tensor)}
    return set(a) == tensors and all(torch.equal(a[k].cpu(), b[k].cpu().to(a[k].dtype)) for k in a)


def _featurizer(model: Any) -> tuple[Callable[[list[str]], Features], str]:
    """The fastest tokenisation that reproduces ``model.preprocess`` on the probes, and its name."""
    prompt = model.prompts.get(model.default_prompt_name) if getattr(model, "default_prompt_name", None) else None

    def preprocess(texts: list[str]) -> Features:
        return model.preprocess(texts, prompt=prompt) if prompt else model.preprocess(texts)

    reference = preprocess(list(_PROBES))  # also settles the shared tokenizer's state before threads use it
    hf = getattr(model[0], "tokenizer", None)
    if prompt is None and hf is not None and getattr(hf, "is_fast", False):
        try:
            rust = _RustFeaturizer(hf)
            if _same_features(rust(list(_PROBES)), reference):
                return rust, "rust"
            log.info("the model's Rust tokenizer differs from its preprocess(); tokenising with preprocess()")
        except (ValueError, TypeError, AttributeError, RuntimeError) as exc:
            log.info("tokenising with preprocess(): %s", exc)
    return preprocess, "preprocess"


class PipelinedEncoder:
    """Runs a loaded ``SentenceTransformer`` with length-sorted batches tokenised ahead in threads.

    ``workers`` tokenising threads (default: up to 4, one core left to the thread that drives the
    model) keep at most ``prefetch`` batches ready (default: two per worker). The model must already
    be on ``device`` in its final dtype. Safe to call from several threads at once: the tokenizer
    copy is never changed after construction, and each call has its own batches.
    """

    def __init__(self, model: Any, device: str, *, workers: int | None = None, prefetch: int | None = None) -> None:
        self.model = model.eval()  # dropout off, as encode() does
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        cpus = os.cpu_count() or 1
        self.workers = max(1, workers if workers is not None else min(4, cpus - 1))
        self.prefetch = max(1, prefetch if prefetch is not None else 2 * self.workers)
        self.min_batch = CUDA_MIN_BATCH if self.cuda else 1
        self._featurize, self.tokenizer_kind = _featurizer(model)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="dmlqa-tokenize")
            return self._pool

    def tokenize(self, texts: list[str]) -> Features:
        """Features of one batch, in pinned memory when the model is on a GPU (runs in a worker)."""
        feats = self._featurize(texts)
        if self.cuda:
            feats = {k: v.pin_memory() if isinstance(v, torch.Tensor) else v for k, v in feats.items()}
        return feats

    def forward(self, feats: Features) -> torch.Tensor:
        """Normalised float32 vectors of one tokenised batch, on the model's device (no host sync)."""
        moved = {k: v.to(self.device, non_blocking=True) if isinstance(v, torch.Tensor) else v
                 for k, v in feats.items()}
        emb = self.model(moved)["sentence_embedding"]
        return torch.nn.functional.normalize(emb.float(), p=2, dim=1)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """(len(texts), dim) L2-normalised float32 vectors, row i for ``texts[i]``."""
        texts = list(texts)
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        size = max(1, batch_size, self.min_batch)
        order = length_order(texts)
        starts = list(range(0, n, size))
        # Vectors land here in sorted order; pinned, so the device-to-host copies need not sync.
        sorted_out = torch.empty((n, self.dim), dtype=torch.float32, pin_memory=self.cuda)

        def batch(s: int) -> list[str]:
            return [texts[i] for i in order[s : s + size]]

        with torch.inference_mode():
            if len(starts) == 1:  # a query or a short list: no thread hand-off
                sorted_out.copy_(self.forward(self.tokenize(batch(0))))
            else:
                self._pipeline(starts, batch, sorted_out)
            if self.cuda:
                torch.cuda.current_stream(self.device).synchronize()
        out = np.empty((n, self.dim), dtype=np.float32)
        out[order] = sorted_out.numpy()
        return out

    def _pipeline(self, starts: list[int], batch: Callable[[int], list[str]], sorted_out: torch.Tensor) -> None:
        pool = self._executor()
        todo = iter(starts)
        pending: deque[tuple[int, Future[Features]]] = deque()

        def submit() -> None:
            s = next(todo, None)
            if s is not None:
                pending.append((s, pool.submit(self.tokenize, batch(s))))

        try:
            for _ in range(self.prefetch):
                submit()
            while pending:
                s, fut = pending.popleft()
                feats = fut.result()
                submit()
                vecs = self.forward(feats)
                sorted_out[s : s + vecs.shape[0]].copy_(vecs, non_blocking=self.cuda)
        finally:
            for _, fut in pending:
                fut.cancel()

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
