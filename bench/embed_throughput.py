"""Benchmark: passages per second of each encoder on ~256-token passages, on this machine.

    .venv/bin/python bench/embed_throughput.py [--n 256] [--tokens 256]

Passages are real text (SciFact abstracts from ../shared when present, else generated prose)
cut to the target token count with the model's tokenizer. Also reports each encoder's mean and
minimum cosine to the sentence-transformers (torch) vectors. Writes bench/results/embed_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from dmlqa.index.chunk import TokenCounter
from dmlqa.index.embed import load_encoder, model_dir
from dmlqa.settings import BUNDLED_MODEL, load_settings

ROOT = Path(__file__).resolve().parents[1]


def passages(n: int, tokens: int) -> list[str]:
    counter = TokenCounter.from_model_dir(model_dir(BUNDLED_MODEL))
    source = ROOT.parent / "shared" / "eval" / "beir" / "scifact" / "corpus.jsonl"
    texts: list[str] = []
    if source.is_file():
        with source.open() as fh:
            for line in fh:
                rec = json.loads(line)
                texts.append(rec["title"] + ". " + rec["text"])
                if len(texts) >= n * 3:
                    break
    else:
        texts = [("Data parallel training replicates the model and averages gradients with all-reduce. " * 20)]
    out = []
    for t in texts:
        words = t.split()
        while words and counter.count(" ".join(words)) > tokens - 2:
            words = words[: int(len(words) * 0.9)]
        if counter.count(" ".join(words)) >= tokens * 0.8:
            out.append(" ".join(words))
        if len(out) == n:
            break
    while len(out) < n:
        out.append(out[len(out) % max(1, len(out))] if out else "x")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    settings = load_settings()
    texts = passages(args.n, args.tokens)
    result: dict = {"cpus": os.cpu_count(), "passages": len(texts), "tokens": args.tokens, "encoders": {}}
    reference = None
    for name in ("torch", "onnx", "onnx-int8"):
        enc = load_encoder(BUNDLED_MODEL, name, settings.encoders_dir)
        enc.encode(texts[:8])  # warm up
        t0 = time.perf_counter()
        vecs = enc.encode(texts, batch_size=args.batch_size)
        dt = time.perf_counter() - t0
        t1 = time.perf_counter()
        for q in texts[:50]:
            enc.encode([q[:80]])
        q_ms = (time.perf_counter() - t1) / 50 * 1000
        if reference is None:
            reference = vecs
        cos = (vecs * reference).sum(axis=1)
        result["encoders"][name] = {"passages_per_s": round(len(texts) / dt, 1), "query_ms": round(q_ms, 2),
                                    "cosine_to_torch_mean": round(float(cos.mean()), 4),
                                    "cosine_to_torch_min": round(float(cos.min()), 4)}
        print(name, result["encoders"][name], flush=True)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "embed_throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
