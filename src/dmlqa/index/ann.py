"""Dense index types by size: exact (flat), graph (HNSW) and compressed inverted lists (IVF-PQ).

Measured on this machine (2 busy cores, 200k generated 384-dim vectors with the cluster structure
of text embeddings, one query at a time; ``bench/ray_scaling.py``, ``bench/results/ray_scaling.json``):

=================  ========  ========  ===========  ==========  ===========
index              build s   MiB       B / vector   p50 ms      recall@10
=================  ========  ========  ===========  ==========  ===========
flat               0.2       293       1536         69          1.0
HNSW (M=32)        45        345       1808         0.47        1.0
IVF-PQ48 + SQ8     22        87        458          0.20        0.957
IVF-PQ48 alone     22        14        74           0.15        0.379
=================  ========  ========  ===========  ==========  ===========

HNSW keeps the full vectors plus its graph; IVF-PQ keeps a 48-byte code per vector and re-ranks
``k_factor`` × k candidates by their 8-bit scalar-quantised copies (``Refine(SQ8)``): a third of flat's
memory at recall ≈ 0.96. Without the re-ranking store PQ distances alone lose most of the exact
top 10 (0.38), so the store is kept. nprobe 8–64 gave the same recall on these vectors (the
candidates, not the lists probed, limit it); 32 is kept as a margin for less clustered data.

So: flat up to ``ann_threshold``, HNSW up to ``ivfpq_threshold``, IVF-PQ past it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: PQ sub-quantisers (bytes per code): 384 dims / 48 = 8 dims per sub-quantiser.
IVFPQ_M = 48
#: Re-ranking store for IVF-PQ candidates ("" for none: PQ distances alone lose recall@10).
IVFPQ_REFINE = "SQ8"
#: Inverted lists probed per query and candidates re-ranked per result (k_factor), tuned on the bench
#: for recall@10 ≥ 0.9 against the exact answer.
IVFPQ_NPROBE = 32
IVFPQ_K_FACTOR = 8
#: k-means needs a few dozen points per centroid; more costs training time and gains nothing.
TRAIN_POINTS_PER_LIST = 64
MAX_TRAIN = 500_000


#: Fewer vectors than this never get IVF-PQ (too few to train its lists and codebooks).
MIN_IVFPQ_VECTORS = 10_000


def choose_index_type(n_vectors: int, ann_threshold: int, ivfpq_threshold: int | None = None) -> str:
    """``flat`` up to ``ann_threshold`` vectors, ``hnsw`` up to ``ivfpq_threshold``, ``ivfpq`` past it.

    An exact scan costs ~0.6 ms per query at 10k vectors, ~15 ms at 100k and ~140 ms at 1M (one
    thread); HNSW stays ~1 ms at 1M with recall ≥ 0.95 but builds slowly. ``ivfpq_threshold=None``
    never compresses.
    """
    if ivfpq_threshold is not None and n_vectors > ivfpq_threshold and n_vectors >= MIN_IVFPQ_VECTORS:
        return "ivfpq"
    return "hnsw" if n_vectors > ann_threshold else "flat"


def ivf_nlist(n_vectors: int) -> int:
    """About 4·√n inverted lists (FAISS's rule of thumb), a power of two, at least 16."""
    return max(16, 2 ** round(math.log2(max(1.0, 4 * math.sqrt(n_vectors)))))


def ivfpq_factory(n_vectors: int, dim: int, *, m: int = IVFPQ_M, refine: str = IVFPQ_REFINE) -> str:
    if dim % m:
        m = math.gcd(dim, m)  # PQ needs sub-quantisers that divide the dimension
    spec = f"IVF{ivf_nlist(n_vectors)},PQ{m}x8"
    return f"{spec},Refine({refine})" if refine else spec


def build_ivfpq(
    vectors: np.ndarray,
    *,
    m: int = IVFPQ_M,
    refine: str = IVFPQ_REFINE,
    nprobe: int = IVFPQ_NPROBE,
    k_factor: int = IVFPQ_K_FACTOR,
    seed: int = 0,
):  # noqa: ANN201 - faiss.Index
    """An inner-product IVF-PQ index over ``vectors``, trained on a fixed-seed sample of them.

    The same vectors give the same index (the sample and k-means are seeded).
    """
    import faiss

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = x.shape
    factory = ivfpq_factory(n, dim, m=m, refine=refine)
    index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.extract_index_ivf(index)
    ivf.cp.seed = seed
    # Polysemous training (on by default) re-orders the PQ codes for Hamming filtering, which we do
    # not use; it took 75 of 77 s of training at 20k vectors here.
    faiss.downcast_index(ivf).do_polysemous_training = False
    want = min(n, MAX_TRAIN, max(ivf.nlist * TRAIN_POINTS_PER_LIST, 10_000))
    sample = x if want >= n else x[np.sort(np.random.default_rng(seed).choice(n, want, replace=False))]
    index.train(sample)
    index.add(x)
    set_search_params(index, {"nprobe": nprobe, "k_factor": k_factor})
    return index


def params(index: Any) -> dict[str, Any]:
    """What an index's meta records about it, to set the same search parameters when it is opened."""
    import faiss

    ivf = faiss.extract_index_ivf(index)
    out: dict[str, Any] = {"nlist": int(ivf.nlist), "nprobe": int(ivf.nprobe)}
    refine = faiss.try_extract_index_refine(index) if hasattr(faiss, "try_extract_index_refine") else None
    if refine is None and isinstance(faiss.downcast_index(index), faiss.IndexRefine):
        refine = faiss.downcast_index(index)
    if refine is not None:
        out["k_factor"] = float(refine.k_factor)
    return out


def set_search_params(index: Any, meta: dict[str, Any]) -> None:
    """Apply ``nprobe`` (and the refine ``k_factor``) recorded in an index's meta."""
    import faiss

    faiss.extract_index_ivf(index).nprobe = int(meta.get("nprobe", IVFPQ_NPROBE))
    outer = faiss.downcast_index(index)
    if isinstance(outer, faiss.IndexRefine):
        outer.k_factor = float(meta.get("k_factor", IVFPQ_K_FACTOR))


def enable_reconstruct(index: Any) -> None:
    """Let ``reconstruct(row)`` work (related papers and re-ranking read stored vectors back).

    A refined index reconstructs from its SQ8 copy; a bare IVF needs its direct map (8 B a vector).
    """
    import faiss

    if not isinstance(faiss.downcast_index(index), faiss.IndexRefine):
        faiss.extract_index_ivf(index).make_direct_map()
