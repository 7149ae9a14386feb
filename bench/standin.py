"""A fast, deterministic stand-in for the embedding model, for benchmarks of everything but embedding.

The real encoder embeds ~40-100 passages/s on 2 cores, so a million-passage build would spend ~20
CPU-hours in the model and measure nothing else. This one hashes lower-cased word tokens and word
bigrams into 384 signed buckets (feature hashing) and L2-normalises: texts that share words get
close vectors, so dense retrieval still returns related passages, at ~0.03 ms a passage (vectorised over a batch).

It lives in ``bench/`` and never in the product: :func:`install` swaps it in for
``dmlqa.index.embed.load_encoder`` inside a benchmark's own process only. The hash is ``zlib.crc32``,
not Python's ``hash()``, which is salted per process: a vector must not depend on the process
(the reader process queries the vectors the build process wrote).
"""

from __future__ import annotations

import itertools
import re
import sys
import time
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["DIM", "KEY", "StandinEncoder", "install"]

DIM = 384
#: Recorded in the index version's meta as its encoder key; a reader's encoder must give the same key.
KEY = f"standin-hash-{DIM}"
_WORD = re.compile(r"\w+")
#: Bound on the memo of feature -> bucket: the vocabulary of generated papers is a few hundred thousand
#: words and bigrams, but a caller could feed unbounded text.
_MEMO_MAX = 2_000_000


class StandinEncoder:
    """Implements the product's ``Encoder`` protocol (``key``, ``dim``, ``max_tokens``, ``encode``).

    ``cpu_s`` counts the CPU time spent in :meth:`encode` (this thread's), so a benchmark can report a
    build's cost with and without embedding, as issue 20's targets are stated.
    """

    key = KEY
    dim = DIM
    max_tokens = 256  # as all-MiniLM-L6-v2, whose tokenizer still sizes the chunks

    def __init__(self) -> None:
        self._memo: dict[str, int] = {}  # word -> crc32: once per distinct word
        self.cpu_s = 0.0

    def _hashes(self, text: str) -> list[int]:
        memo = self._memo
        words = _WORD.findall(text.lower())
        out = [memo.get(w, -1) for w in words]
        for i, h in enumerate(out):
            if h < 0:
                if len(memo) >= _MEMO_MAX:
                    memo.clear()
                out[i] = memo[words[i]] = zlib.crc32(words[i].encode("utf-8"))
        return out

    def vector(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, **_: Any) -> np.ndarray:
        """One L2-normalised float32 row per text; ``batch_size`` is accepted and ignored (one pass).

        Features are the words' crc32 and, for each pair of neighbouring words, a mix of their two
        hashes; bucket ``h % DIM``, sign from bit 16. All texts are counted in one ``bincount``.
        """
        start = time.thread_time()
        n = len(texts)
        hashes = [self._hashes(t) for t in texts]
        lengths = np.fromiter((len(h) for h in hashes), dtype=np.int64, count=n)
        words = np.fromiter(itertools.chain.from_iterable(hashes), dtype=np.uint64, count=int(lengths.sum()))
        owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
        pair = owner[:-1] == owner[1:]  # neighbours within one text
        bigrams = (words[:-1][pair] * np.uint64(0x9E3779B1) + words[1:][pair] * np.uint64(0x85EBCA6B)) >> np.uint64(7)
        features = np.concatenate([words, bigrams & np.uint64(0xFFFFFFFF)])
        owners = np.concatenate([owner, owner[:-1][pair]])
        signs = np.where((features >> np.uint64(16)) & np.uint64(1), -1.0, 1.0)
        buckets = owners * DIM + (features % np.uint64(DIM)).astype(np.int64)
        out = np.bincount(buckets, weights=signs, minlength=n * DIM).reshape(n, DIM)
        norms = np.linalg.norm(out, axis=1)
        # an empty text, or one whose features all cancel, is the same unit vector: like no other text
        out[norms == 0, 0] = 1.0
        norms[norms == 0] = 1.0
        vectors = (out / norms[:, None]).astype(np.float32)
        self.cpu_s += time.thread_time() - start
        return vectors if n else np.zeros((0, DIM), dtype=np.float32)


def install() -> StandinEncoder:
    """Make every place in this process that loads an encoder get the stand-in.

    The settings keep the real model and encoder names: the chunker sizes passages with the model's
    tokenizer.json, and ``embed.encoder`` only admits the product's encoders. So the stand-in replaces
    ``load_encoder`` itself, whatever it is asked for, in ``dmlqa.index.embed`` and in every loaded
    dmlqa module that imported the name (``dmlqa.query.search`` does); modules imported later read it
    from ``dmlqa.index.embed``. One instance serves all callers, so its memo is shared.
    """
    import dmlqa.api  # noqa: F401 - load the modules that bind load_encoder at import, then rebind them
    import dmlqa.index.embed as embed
    import dmlqa.pipeline.build  # noqa: F401
    import dmlqa.query.answer  # noqa: F401
    import dmlqa.query.search  # noqa: F401

    encoder = StandinEncoder()
    original = embed.load_encoder
    if getattr(original, "standin", False):
        return original.encoder  # type: ignore[attr-defined]

    def load_encoder(*_args: Any, **_kwargs: Any) -> StandinEncoder:
        return encoder

    load_encoder.standin = True  # type: ignore[attr-defined]
    load_encoder.encoder = encoder  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if (name == "dmlqa" or name.startswith("dmlqa.")) and getattr(module, "load_encoder", None) is original:
            module.load_encoder = load_encoder
    return encoder
