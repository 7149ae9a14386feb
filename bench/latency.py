"""Benchmark: latency of search, ask (extractive) and related over a built home, and the dev-set
eval per retriever (BM25 only, dense only, hybrid).

    .venv/bin/python bench/latency.py --home /tmp/dmlqa-bench-home [--questions ../shared/eval/dev.jsonl]

No cross-encoder reranker is bundled by any package reachable here, so "hybrid + rerank" is not
measured. Writes bench/results/latency.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dmlqa.answer import Asker, AskOptions
from dmlqa.evaluate import percentile, read_questions, score_answers
from dmlqa.related import related
from dmlqa.search import Searcher, SearchOptions
from dmlqa.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]


def timed(fn, items) -> dict:  # noqa: ANN001
    times = []
    for x in items:
        t0 = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - t0) * 1000)
    return {"n": len(times), "p50_ms": round(percentile(times, 50), 2), "p95_ms": round(percentile(times, 95), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("/tmp/dmlqa-bench-home"))
    ap.add_argument("--questions", type=Path, default=ROOT.parent / "shared" / "eval" / "dev.jsonl")
    args = ap.parse_args()
    qs = read_questions(args.questions.read_text().splitlines(), str(args.questions))
    searcher = Searcher(load_settings(args.home))
    asker = Asker(searcher)
    asker.ask("warm up: how does zero partition optimizer states", AskOptions(use_llm=False))
    version = searcher.version
    doc_urls = [d.url for d in version.docs.values() if not d.is_card][:40]
    related(searcher, doc_urls[0])  # builds the document vectors once per version
    texts = [q.question for q in qs]
    result = {
        "index": {"chunks": version.size, "documents": len(version.docs)},
        "search_k10": timed(lambda q: searcher.search(q, SearchOptions(k=10)), texts),
        "search_k10_per_doc": timed(lambda q: searcher.search(q, SearchOptions(k=10, per_doc=True)), texts),
        "ask_extractive": timed(lambda q: asker.ask(q, AskOptions(use_llm=False)), texts),
        "related_by_url": timed(lambda u: related(searcher, u, k=10), doc_urls),
        "related_free_text": timed(lambda q: related(searcher, q, k=10), texts[:30]),
        "eval": {},
    }
    for mode in ("bm25", "dense", "hybrid"):
        answers = [asker.ask(q.question, AskOptions(use_llm=False, mode=mode)) for q in qs]
        result["eval"][mode] = score_answers(qs, answers)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "latency.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
