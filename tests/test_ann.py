"""Index types by size (dmlqa.index.ann): the choice, and an IVF-PQ version written, reopened and searched."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dmlqa.index import ann
from dmlqa.index.versions import IndexVersion, choose_index_type, write_version
from dmlqa.models import Block, Chunk, Document


def _vectors(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(200, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.03, size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_choose_index_type_by_size() -> None:
    assert ann.choose_index_type(100, 200_000, 5_000_000) == "flat"
    assert ann.choose_index_type(300_000, 200_000, 5_000_000) == "hnsw"
    assert ann.choose_index_type(6_000_000, 200_000, 5_000_000) == "ivfpq"
    assert ann.choose_index_type(500, 0, 0) == "hnsw"  # too few vectors to train IVF-PQ
    # Without an IVF-PQ threshold the index module behaves as it always did.
    assert choose_index_type(300_000, 200_000) == "hnsw" and choose_index_type(10, 200_000) == "flat"
    assert 16 <= ann.ivf_nlist(12_000) <= 512 and ann.ivf_nlist(10_000_000) == 16384


def test_ivfpq_version_roundtrip(tmp_path: Path) -> None:
    n = 12_000
    x = _vectors(n)
    doc = Document(doc_id="d", url="https://example.org/d", title="D", blocks=(Block("text"),))
    chunks = [Chunk(f"d#{i}", "d", doc.url, "D", f"passage {i}") for i in range(n)]
    name = write_version(tmp_path, [doc], chunks, x, {}, ann_threshold=1_000, ivfpq_threshold=10_000)
    version = IndexVersion(tmp_path / "versions" / name)
    try:
        import faiss

        assert version.meta["index_type"] == "ivfpq" and [s.index_type for s in version.segments] == ["ivfpq"]
        assert faiss.extract_index_ivf(version.segments[0].dense).nprobe == ann.IVFPQ_NPROBE  # kept in the file
        queries = x[:50]
        ids = [[r for r, _ in version.dense_search(q, 10)] for q in queries]
        exact = np.argsort(-(queries @ x.T), axis=1)[:, :10]
        recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, exact, strict=True)])
        assert recall >= 0.9, recall
        back = version.vectors([0, 1])  # approximate (SQ8) copies, good enough for related papers
        assert (back * x[:2]).sum(axis=1).min() > 0.99
    finally:
        version.close()
