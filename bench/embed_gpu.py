"""Benchmark: the GPU fast path of ``--encoder torch`` against plain sentence-transformers.

    .venv/bin/python bench/embed_gpu.py [--device cuda|cpu] [--n N] [--tokens 256] [--batch-size B]
                                        [--workers 1 2 4 8]

On a machine without CUDA, ``--device cuda`` (the default) prints "no CUDA device: skipping the GPU
benchmark" and exits 0. ``--device cpu`` runs the same measurements on CPU at a small N (fp32 and
bf16 there, as CPUs have no fast fp16), which is how the code path is exercised without a GPU.

Passages are real text when ``../shared/websnap`` is present (the snapshot's HTML pages, tags
stripped, cut into windows of ``--tokens`` words, so every passage fills the model's 256 tokens;
repeated to N), else generated prose. Measured, in passages per second:

* ``tokenize``: the fast path's tokenizer alone, one thread and the worker pool;
* ``model_only``: the model on batches tokenised beforehand and already on the device, fp32 and
  reduced precision (fp16 on CUDA, bf16 on CPU): the ceiling;
* ``end_to_end``: ``SentenceTransformer.encode`` in fp32 (the reference, tokenising in the thread
  that drives the model), and :class:`dmlqa.index.embed.TorchEncoder`'s pipelined path in fp32
  and in reduced precision for each ``--workers`` count;

and the cosine of each path's vectors to the reference's (min and mean). Writes
bench/results/embed_gpu.json (``embed_gpu_cpu.json`` for ``--device cpu``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEBSNAP = ROOT.parent / "shared" / "websnap" / "snapshot.warc.gz"
SKIP = "no CUDA device: skipping the GPU benchmark"


def websnap_texts() -> list[str]:
    """Visible text of the snapshot's HTML pages (PDFs are left out: parsing them takes minutes)."""
    import lxml.html
    from warcio.archiveiterator import ArchiveIterator

    texts = []
    with WEBSNAP.open("rb") as fh:  # warcio reads gzip per record itself
        for rec in ArchiveIterator(fh):
            if rec.rec_type != "response" or "html" not in (rec.http_headers.get_header("Content-Type") or ""):
                continue
            body = rec.content_stream().read()
            try:
                doc = lxml.html.fromstring(body)
            except (ValueError, lxml.etree.ParserError):
                continue
            for el in doc.xpath("//script|//style|//nav|//header|//footer"):
                el.drop_tree()
            texts.append(" ".join(doc.text_content().split()))
    return texts


def passages(n: int, words: int) -> tuple[list[str], str]:
    if WEBSNAP.is_file():
        windows = []
        for text in websnap_texts():
            w = text.split()
            windows += [" ".join(w[s : s + words]) for s in range(0, len(w) - words + 1, words)]
        source = f"websnap HTML, {len(windows)} distinct windows of {words} words"
    else:
        base = ("Data parallel training replicates the model on every worker and averages gradients with "
                "all-reduce; pipeline parallelism splits the layers into stages; ZeRO shards optimizer state. ")
        windows = [" ".join((f"[{i}] " + base * 20).split()[:words]) for i in range(64)]
        source = f"generated prose, {len(windows)} distinct windows of {words} words"
    return [windows[i % len(windows)] for i in range(n)], source


def rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def cosines(vecs, reference) -> dict[str, float]:  # noqa: ANN001
    cos = (vecs * reference).sum(axis=1)
    return {"cosine_min": round(float(cos.min()), 6), "cosine_mean": round(float(cos.mean()), 6)}


def timed(fn, sync, warm) -> tuple[object, float]:  # noqa: ANN001
    """``fn()`` and its seconds, after ``warm()`` (the same work on a few batches: kernels, allocator, threads)."""
    warm()
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--n", type=int, default=0, help="passages (default 20000 on CUDA, 256 on CPU)")
    ap.add_argument("--tokens", type=int, default=256, help="words per passage window (fills 256 tokens)")
    ap.add_argument("--batch-size", type=int, default=0, help="default 512 on CUDA, 32 on CPU")
    ap.add_argument("--workers", type=int, nargs="*", default=None, help="tokenizer threads to try")
    args = ap.parse_args()

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(SKIP)
        return 0
    import numpy as np

    from dmlqa.index.embed import TorchEncoder
    from dmlqa.index.embed_fast import PipelinedEncoder
    from dmlqa.settings import BUNDLED_MODEL

    cuda = args.device == "cuda"
    n = args.n or (20000 if cuda else 256)
    batch = args.batch_size or (512 if cuda else 32)
    reduced = "fp16" if cuda else "bf16"
    workers = args.workers or sorted({1, 2, 4, min(8, max(1, (os.cpu_count() or 2) - 1))})
    texts, source = passages(n, args.tokens)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    result: dict = {
        "device": torch.cuda.get_device_name(0) if cuda else f"cpu ({os.cpu_count()} cores)",
        "torch": torch.__version__, "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "passages": n, "text": source, "batch_size": batch, "reduced_precision": reduced,
    }
    encoders = {p: TorchEncoder(BUNDLED_MODEL, precision=p, device=args.device, pipelined=True)
                for p in ("fp32", reduced)}
    fast32 = encoders["fp32"]._fast
    lengths = fast32.tokenize(texts[:256])["attention_mask"].sum(dim=1).float()
    result["tokens_per_passage_mean"] = round(float(lengths.mean()), 1)
    print(json.dumps(result), flush=True)

    # The tokenizer alone: one thread, then the pool (the pipeline's feed).
    chunks = [texts[s : s + batch] for s in range(0, n, batch)]
    few = chunks[:2]
    _, dt = timed(lambda: [fast32.tokenize(c) for c in chunks], lambda: None, lambda: [fast32.tokenize(c) for c in few])
    tok = {"one_thread": rate(n, dt)}
    for w in workers:
        pipe = PipelinedEncoder(fast32.model, args.device, workers=w)
        _, dt = timed(lambda pipe=pipe: list(pipe._executor().map(pipe.tokenize, chunks)), lambda: None,
                      lambda pipe=pipe: list(pipe._executor().map(pipe.tokenize, few)))
        tok[f"{w}_threads"] = rate(n, dt)
        pipe.close()
    result["tokenize"] = tok
    print("tokenize", tok, flush=True)

    # The model alone, on batches already tokenised and on the device.
    model_only = {}
    for p, enc in encoders.items():
        feats = [{k: v.to(args.device) for k, v in enc._fast.tokenize(c).items()} for c in chunks]

        def run(enc=enc, feats=feats) -> None:
            with torch.inference_mode():
                for f in feats:
                    enc._fast.model(dict(f))["sentence_embedding"]

        _, dt = timed(run, sync, lambda enc=enc, feats=feats: run(enc, feats[:2]))
        model_only[p] = rate(n, dt)
        del feats
    result["model_only"] = model_only
    print("model_only", model_only, flush=True)

    # End to end: the reference, then the pipelined path.
    plain = encoders["fp32"]._model
    warm = texts[: 2 * batch]
    reference, dt = timed(lambda: plain.encode(texts, batch_size=batch, normalize_embeddings=True,
                                               convert_to_numpy=True), sync,
                          lambda: plain.encode(warm, batch_size=batch))
    reference = np.asarray(reference, dtype=np.float32)
    e2e: dict = {"sentence_transformers_fp32": {"passages_per_s": rate(n, dt)}}
    print("sentence_transformers_fp32", e2e["sentence_transformers_fp32"], flush=True)
    for p, enc in encoders.items():
        for w in workers:
            pipe = PipelinedEncoder(enc._model, args.device, workers=w)
            vecs, dt = timed(lambda pipe=pipe: pipe.encode(texts, batch_size=batch), sync,
                             lambda pipe=pipe: pipe.encode(warm, batch_size=batch))
            e2e[f"pipelined_{p}_{w}_workers"] = {"passages_per_s": rate(n, dt), **cosines(vecs, reference)}
            print(f"pipelined_{p}_{w}_workers", e2e[f"pipelined_{p}_{w}_workers"], flush=True)
            pipe.close()
    result["end_to_end"] = e2e
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    name = "embed_gpu.json" if cuda else "embed_gpu_cpu.json"
    (out / name).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
