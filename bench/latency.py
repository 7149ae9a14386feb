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

from dmlqa.query.answer import Asker, AskOptions
from dmlqa.query.evaluate import percentile, read_questions, score_answers
from dmlqa.query.related import related
from dmlqa.query.search import Searcher, SearchOptions
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
    settings = load_settings(args.home)
    texts = [q.question for q in qs]

    def fresh(store: bool = True) -> tuple[Searcher, Asker]:
        """A new process's state: nothing in memory (queries are never in the store)."""
        searcher = Searcher(settings, vector_store=store)
        searcher.search("warm up: load the model and the index")
        return searcher, Asker(searcher)

    searcher, _ = fresh()
    version = searcher.pin()
    result: dict = {"index": {"chunks": version.size, "documents": len(version.docs)}}
    result["search_k10"] = timed(lambda q: searcher.search(q, SearchOptions(k=10)), texts)
    searcher, _ = fresh()
    result["search_k10_per_doc"] = timed(lambda q: searcher.search(q, SearchOptions(k=10, per_doc=True)), texts)
    _, asker = fresh(store=False)
    result["ask_extractive_cold"] = timed(lambda q: asker.ask(q, AskOptions(use_llm=False)), texts)
    _, asker = fresh()
    for q in texts:  # fill the home's vector store, as a first run or the app's warm-up does
        asker.ask(q, AskOptions(use_llm=False))
    _, asker = fresh()
    result["ask_extractive_warm_store"] = timed(lambda q: asker.ask(q, AskOptions(use_llm=False)), texts)
    searcher, asker = fresh()
    doc_urls = [d.url for d in version.docs.values() if not d.is_card][:40]
    t0 = time.perf_counter()
    related(searcher, doc_urls[0])
    result["related_document_vectors_s"] = round(time.perf_counter() - t0, 3)  # once per version
    result["related_by_url"] = timed(lambda u: related(searcher, u, k=10), doc_urls)
    result["related_free_text"] = timed(lambda q: related(searcher, q, k=10), texts[:30])
    result["eval"] = {}
    for mode in ("bm25", "dense", "hybrid"):
        answers = [asker.ask(q.question, AskOptions(use_llm=False, mode=mode)) for q in qs]
        result["eval"][mode] = score_answers(qs, answers)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "latency.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
