"""A fast, deterministic stand-in for the embedding model, for benchmarks of everything but embedding.

The real encoder embeds ~40-100 passages/s on 2 cores, so a million-passage build would spend ~20
CPU-hours in the model and measure nothing else. This one hashes lower-cased word tokens and word
bigrams into 384 signed buckets (feature hashing) and L2-normalises: texts that share words get
close vectors, so dense retrieval still returns related passages, at ~0.1 ms a passage.

It lives in ``bench/`` and never in the product: :func:`install` swaps it in for
``dmlqa.index.embed.load_encoder`` inside a benchmark's own process only. The hash is ``zlib.crc32``,
not Python's ``hash()``, which is salted per process: a vector must not depend on the process
(the reader process queries the vectors the build process wrote).
"""

from __future__ import annotations

import re
import sys
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
    """Implements the product's ``Encoder`` protocol (``key``, ``dim``, ``max_tokens``, ``encode``)."""

    key = KEY
    dim = DIM
    max_tokens = 256  # as all-MiniLM-L6-v2, whose tokenizer still sizes the chunks

    def __init__(self) -> None:
        # feature -> signed bucket (bucket + 1, negated for a negative sign): crc32 once per feature
        self._memo: dict[str, int] = {}

    def _slot(self, feature: str) -> int:
        slot = self._memo.get(feature)
        if slot is None:
            h = zlib.crc32(feature.encode("utf-8"))
            slot = (h % DIM) + 1
            if (h >> 16) & 1:
                slot = -slot
            if len(self._memo) >= _MEMO_MAX:
                self._memo.clear()
            self._memo[feature] = slot
        return slot

    def vector(self, text: str) -> np.ndarray:
        words = _WORD.findall(text.lower())
        features = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
        if not features:
            out = np.zeros(DIM, dtype=np.float32)
            out[0] = 1.0  # a unit vector all the same: an empty text is like no other
            return out
        slots = np.fromiter((self._slot(f) for f in features), dtype=np.int64, count=len(features))
        vec = np.bincount(np.abs(slots) - 1, weights=np.sign(slots).astype(np.float64), minlength=DIM)
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # every feature cancelled out
            vec[0] = 1.0
            norm = 1.0
        return (vec / norm).astype(np.float32)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, **_: Any) -> np.ndarray:
        """One L2-normalised float32 row per text; ``batch_size`` is accepted and ignored (no batches)."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.stack([self.vector(t) for t in texts])


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
