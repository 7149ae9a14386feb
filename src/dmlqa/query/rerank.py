"""Optional cross-encoder reranking of the fused candidates.

A cross-encoder reads the query and a passage together, so it judges relevance better than
comparing two separately made vectors, at ~10–50 ms per passage on a CPU: it is applied only to
the first ``rerank_candidates`` fused results, and only when a model is configured
(``reranker`` = a sentence-transformers CrossEncoder name or local path). No package reachable
offline bundles one, so nothing is reranked by default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dmlqa.index.embed import EncoderError


class Reranker:
    def __init__(self, model: str) -> None:
        path = Path(model).expanduser()
        if path.exists():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import CrossEncoder

            device = "cuda" if torch.cuda.is_available() else "cpu"
            self._model = CrossEncoder(str(path if path.exists() else model), device=device)
        except Exception as exc:  # the library raises many types for a missing/offline model
            raise EncoderError(f"cannot load reranker {model!r}: {exc}") from None
        self.name = model
        self._lock = threading.Lock()

    def scores(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Relevance of each passage to the query (higher is better)."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        with self._lock:
            out = self._model.predict([(query, p) for p in passages], show_progress_bar=False)
        return np.asarray(out, dtype=np.float32).reshape(len(passages))
