"""Benchmark: exact (flat) vs approximate (HNSW) FAISS indexes by size, to pick `ann_threshold`.

Vectors are realistic rather than uniform noise: the snapshot home's real chunk vectors (if a
built home is given) are used as cluster centres and perturbed, then normalised, so neighbours
have the structure of real text embeddings. Queries are held-out perturbed vectors.

    .venv/bin/python bench/ann_index.py --home /tmp/dmlqa-bench-home --sizes 20000 100000 200000

Reports per size and index type: build seconds, index MiB, query latency p50/p95 (one query at a
time, as search does), and recall@10 of HNSW against the exact answer. Writes
bench/results/ann_index.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from dmlqa.index.versions import build_faiss, open_current
from dmlqa.query.evaluate import percentile

ROOT = Path(__file__).resolve().parents[1]


def vectors(home: Path | None, n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if home is not None:
        v = open_current(home / "index")
        centres = v.vectors(list(range(v.size)))
    else:
        centres = rng.normal(size=(2000, dim)).astype(np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.03, size=(n, dim)).astype(np.float32)
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def main() -> None:
    import faiss

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000, 200_000])
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    results = []
    for n in args.sizes:
        data = vectors(args.home, n + args.queries, seed=n)
        base, queries = data[:n], data[n:]
        truth = None
        for kind in ("flat", "hnsw"):
            faiss.omp_set_num_threads(2)  # building uses both cores; queries below use one, as search does
            t0 = time.perf_counter()
            index = build_faiss(base, kind)
            build_s = time.perf_counter() - t0
            faiss.omp_set_num_threads(1)
            times, found = [], []
            for q in queries:
                t1 = time.perf_counter()
                _, ids = index.search(q[None, :], 10)
                times.append((time.perf_counter() - t1) * 1000)
                found.append(ids[0])
            if kind == "flat":
                truth = found
                recall = 1.0
            else:
                recall = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth, strict=True)]))
            size_mib = len(faiss.serialize_index(index)) / 2**20
            row = {"vectors": n, "index": kind, "build_s": round(build_s, 2), "size_mib": round(size_mib, 1),
                   "p50_ms": round(percentile(times, 50), 3), "p95_ms": round(percentile(times, 95), 3),
                   "recall@10": round(recall, 4)}
            results.append(row)
            print(json.dumps(row), flush=True)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ann_index.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
