"""Benchmark: the HNSW graph of a large segment, build cost against recall, on a home's real vectors.

Segments past ``ann_threshold`` rows keep an 8-bit scalar-quantised HNSW graph (``dmlqa.index.segments``);
its ``efConstruction`` sets what a build pays per vector and how good the graph is. This measures both on
every vector in a built home's embedding cache (passages and quotable sentences of the real encoder), with
300 of them held out as queries and exact inner-product search as the truth.

    .venv/bin/python bench/ann_index.py --home /tmp/snaphome [--m 16 12] [--ef-construction 80 48 40 32] [--save]

Prints, per M and efConstruction: CPU µs to add a vector (one thread) and recall@10 at efSearch 128, 96, 80 and 64
(the version's first probe of each segment uses 64); ``--save`` writes ``bench/results/ann_index.json``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from pathlib import Path

import numpy as np

from dmlqa.index.segments import HNSW_M

ROOT = Path(__file__).resolve().parents[1]
EF_SEARCH = (128, 96, 80, 64)


def cached_vectors(home: Path) -> np.ndarray:
    db = sqlite3.connect(f"file:{home / 'index' / 'cache' / 'embeddings.sqlite'}?mode=ro", uri=True)
    rows = db.execute("SELECT vector FROM embeddings").fetchall()
    if not rows:
        raise SystemExit(f"error: {home} has no cached vectors: build it first (dmlqa build --home {home})")
    return np.stack([np.frombuffer(blob, dtype=np.float32) for (blob,) in rows])


def measure(x: np.ndarray, queries: np.ndarray, ef_construction: int, m: int = HNSW_M) -> dict:
    import faiss

    faiss.omp_set_num_threads(1)
    flat = faiss.IndexFlatIP(x.shape[1])
    flat.add(x)
    _, truth = flat.search(queries, 10)
    index = faiss.IndexHNSWSQ(x.shape[1], faiss.ScalarQuantizer.QT_8bit, m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.train(x)
    c = time.process_time()
    index.add(x)
    add_s = time.process_time() - c
    recall = {}
    for ef in EF_SEARCH:
        index.hnsw.efSearch = ef
        _, got = index.search(queries, 10)
        recall[str(ef)] = round(float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, truth, strict=True)])), 4)
    return {"M": m, "ef_construction": ef_construction, "add_us_per_vector": round(add_s / len(x) * 1e6, 1),
            "recall_at_10_by_ef_search": recall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--ef-construction", type=int, nargs="+", default=[80, 48, 40, 32])
    ap.add_argument("--m", type=int, nargs="+", default=[16, HNSW_M], help="HNSW links per vector (M) to try")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    vectors = cached_vectors(args.home)
    order = np.random.default_rng(0).permutation(len(vectors))
    queries, x = vectors[order[:300]], np.ascontiguousarray(vectors[order[300:]])
    results = [measure(x, queries, efc, m) for m in dict.fromkeys(args.m) for efc in args.ef_construction]
    out = {"vectors": len(x), "queries": len(queries), "M_kept": HNSW_M, "quantizer": "SQ8", "results": results,
           "date": time.strftime("%Y-%m-%d")}
    print(json.dumps(out, indent=1))
    if args.save:
        (ROOT / "bench" / "results" / "ann_index.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
