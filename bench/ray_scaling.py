"""Benchmark: the Ray executor against the local one, and dense index types at scale.

    .venv/bin/python bench/ray_scaling.py --passages 256 --n 200000

1. Embedding throughput on the same passages (~200 tokens each, the build's chunk size): the local
   path (:func:`dmlqa.index.embed.embed_texts`) and the Ray path (:func:`dmlqa.pipeline.ray_executor.embed_on_ray`,
   an actor pool on a local ``ray.init(num_cpus=2)``), with 1 and 2 actors. Ray's time includes
   starting the actors and loading the model in each (what a build pays).
2. Synthetic scaling: ``--n`` generated 384-dim vectors with the cluster structure of text
   embeddings (as bench/ann_index.py), indexed as flat, HNSW and IVF-PQ (with and without the SQ8
   re-ranking store): build seconds, index MiB, one-query latency p50/p95, recall@10 against flat,
   and an nprobe sweep for IVF-PQ.

Writes bench/results/ray_scaling.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORDS = (
    "gradient allreduce pipeline stage micro batch optimizer state shard tensor parallel rank bandwidth "
    "latency memory activation checkpoint offload parameter server collective ring tree overlap compute "
    "communication bucket fusion sequence expert routing capacity throughput scaling efficiency cluster"
).split()


def passages(n: int, words: int = 150, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"Passage {i}. " + " ".join(rng.choice(WORDS) for _ in range(words)) + "." for i in range(n)]


def embedding_throughput(n: int) -> dict:
    from dmlqa.index.embed import embed_texts, load_encoder
    from dmlqa.pipeline import ray_executor as executor_ray
    from dmlqa.settings import Settings

    cache_dir = Path(os.environ.get("DMLQA_ENCODER_CACHE", Path.home() / ".cache" / "dmlqa" / "encoders"))
    settings = Settings(home=Path(tempfile.mkdtemp())).with_overrides(encoder_cache=str(cache_dir))
    texts = passages(n)
    encoder = load_encoder(settings.embed.model, settings.embed.encoder, settings.encoders_dir)
    embed_texts(texts[:16], encoder, None, batch_size=settings.embed.batch_size)  # warm-up
    t0 = time.perf_counter()
    local = embed_texts(texts, encoder, None, batch_size=settings.embed.batch_size).vectors
    local_s = time.perf_counter() - t0
    out = {"passages": n, "words_per_passage": 150, "encoder": encoder.key, "batch_size": settings.embed.batch_size,
           "local": {"seconds": round(local_s, 2), "passages_per_s": round(n / local_s, 1)}}

    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=f"/tmp/ray-bench-{os.getpid()}")
    out["ray_init_s"] = round(time.perf_counter() - t0, 2)
    executor_ray.quiet_data_context()
    try:
        for actors in (1, 2):
            t0 = time.perf_counter()
            vecs = executor_ray.embed_on_ray(
                ray, texts, settings=settings, encoder_key=encoder.key, dim=encoder.dim, actors=actors
            )
            s = time.perf_counter() - t0
            out[f"ray_{actors}_actor"] = {
                "seconds": round(s, 2), "passages_per_s": round(n / s, 1),
                "max_abs_diff_to_local": float(np.abs(vecs - local).max()),
            }
    finally:
        ray.shutdown()
    return out


def vectors(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(2000, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.03, size=(n, dim)).astype(np.float32)
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def _search(index, queries: np.ndarray, k: int = 10) -> tuple[list[float], np.ndarray]:  # noqa: ANN001
    times, found = [], []
    for q in queries:
        t = time.perf_counter()
        _, ids = index.search(q[None, :], k)
        times.append((time.perf_counter() - t) * 1000)
        found.append(ids[0])
    return times, np.array(found)


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True)]))


def scaling(n: int, n_queries: int) -> dict:
    import faiss

    from dmlqa.index import ann
    from dmlqa.index.versions import build_faiss
    from dmlqa.query.evaluate import percentile

    data = vectors(n + n_queries, seed=n)
    base, queries = data[:n], data[n:]
    rows, truth = [], None
    kinds = [("flat", lambda: build_faiss(base, "flat")), ("hnsw", lambda: build_faiss(base, "hnsw")),
             ("ivfpq", lambda: build_faiss(base, "ivfpq")),
             ("ivfpq-no-refine", lambda: ann.build_ivfpq(base, refine=""))]
    for kind, make in kinds:
        t0 = time.perf_counter()
        index = make()
        build_s = time.perf_counter() - t0
        times, found = _search(index, queries)
        if truth is None:
            truth = found
        size = len(faiss.serialize_index(index))
        row = {
            "index": kind, "vectors": n, "build_s": round(build_s, 1), "mib": round(size / 2**20, 1),
            "bytes_per_vector": round(size / n, 1), "p50_ms": round(percentile(times, 50), 3),
            "p95_ms": round(percentile(times, 95), 3), "recall_at_10": round(_recall(found, truth), 3),
        }
        if kind.startswith("ivfpq"):
            row["params"] = ann.params(index)
            sweep = []
            for nprobe in (8, 16, 32, 64):
                ann.set_search_params(index, {**ann.params(index), "nprobe": nprobe})
                t, f = _search(index, queries)
                sweep.append({"nprobe": nprobe, "p50_ms": round(percentile(t, 50), 3),
                              "recall_at_10": round(_recall(f, truth), 3)})
            row["nprobe_sweep"] = sweep
        rows.append(row)
        print(json.dumps(row), flush=True)
    return {"vectors": n, "queries": n_queries, "dim": 384, "results": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=256)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--skip-embed", action="store_true")
    ap.add_argument("--skip-scaling", action="store_true")
    args = ap.parse_args()
    out: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "date": time.strftime("%Y-%m-%d")}
    if not args.skip_embed:
        out["embedding"] = embedding_throughput(args.passages)
        print(json.dumps(out["embedding"], indent=2), flush=True)
    if not args.skip_scaling:
        out["scaling"] = scaling(args.n, args.queries)
    path = ROOT / "bench" / "results" / "ray_scaling.json"
    if path.is_file():  # a partial run keeps the other half's numbers
        old = json.loads(path.read_text(encoding="utf-8"))
        out = {**old, **out}
    path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
