"""Optional cross-encoder reranking of the fused candidates.

A cross-encoder reads the query and a passage together, so it judges relevance better than
comparing two separately made vectors, at ~10–50 ms per passage on a CPU: it is applied only to
the first ``rerank_candidates`` fused results, and only when a model is configured
(``reranker`` = a sentence-transformers CrossEncoder name or local path). No package reachable
offline bundles one, so nothing is reranked by default.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dmlqa.errors import EncoderError


class Reranker:
    """One cross-encoder, loaded once; scores are computed one query at a time (a lock per model)."""

    def __init__(self, model: str) -> None:
        path = Path(model).expanduser()
        local = path.exists()
        try:
            import torch
            from sentence_transformers import CrossEncoder

            device = "cuda" if torch.cuda.is_available() else "cpu"
            # A local folder never needs the hub (asking blocks ~70 s on DNS when offline); said per
            # call, so the process environment stays the caller's.
            self._model = CrossEncoder(str(path if local else model), device=device, local_files_only=local)
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
