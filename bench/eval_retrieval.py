"""Benchmark retrieval quality and latency per retriever (bm25, dense, hybrid).

Dev questions (needs a home built from the snapshot, e.g. by bench/build_snapshot.py):
    .venv/bin/python bench/eval_retrieval.py dev --home /tmp/dmlqa-bench-home

BEIR SciFact (adds its corpus to a fresh home, builds it, runs the test queries per document):
    .venv/bin/python bench/eval_retrieval.py scifact --home /tmp/dmlqa-scifact

Results go to bench/results/<name>.json and stdout.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

from dmlqa.query.evaluate import (
    by_identity,
    first_relevant_rank,
    gold_identities,
    ndcg_at_k,
    percentile,
    retrieval_scores,
)
from dmlqa.query.search import Searcher, SearchOptions
from dmlqa.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
MODES = ("bm25", "dense", "hybrid")


def _save(name: str, result: dict) -> None:
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def dev(args: argparse.Namespace) -> None:
    questions = [json.loads(line) for line in args.questions.open() if line.strip()]
    answerable = [q for q in questions if q.get("answerable", True)]
    searcher = Searcher(load_settings(args.home))
    searcher.search("warm up")  # load model and index before timing
    result: dict = {"questions": len(answerable), "modes": {}}
    docs = searcher.pin().docs
    identify = gold_identities(docs)  # gold URLs name works by any of their addresses: match their identities
    for mode in MODES:
        ranks, times = [], []
        for q in answerable:
            t0 = time.perf_counter()
            hits = searcher.search(q["question"], SearchOptions(k=10, per_doc=True, mode=mode))
            times.append((time.perf_counter() - t0) * 1000)
            ranks.append(first_relevant_rank([h.url for h in by_identity(hits, docs)], identify(q["gold_urls"])))
        scores = retrieval_scores(ranks).to_json()
        scores.update({"p50_ms": round(percentile(times, 50), 2), "p95_ms": round(percentile(times, 95), 2)})
        result["modes"][mode] = scores
    _save("retrieval_dev", result)


def scifact(args: argparse.Namespace) -> None:
    data = args.shared / "eval" / "beir" / "scifact"
    if not data.is_dir():
        sys.exit(f"skipped: {data} not found")
    home = args.home
    if not (home / "index" / "CURRENT").exists() or args.rebuild:
        dmlqa = [sys.executable, "-m", "dmlqa.app.cli", "--home", str(home)]
        subprocess.run([*dmlqa, "init"], check=True, capture_output=True)
        subprocess.run([*dmlqa, "add", str(data / "corpus.jsonl")], check=True, capture_output=True)
        t0 = time.perf_counter()
        subprocess.run([*dmlqa, "build", "--offline", "--json"], check=True, stdout=subprocess.DEVNULL)
        print(f"built SciFact home in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    qrels: dict[str, dict[str, int]] = {}
    with (data / "qrels" / "test.tsv").open(newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels.setdefault(row["query-id"].strip(), {})[row["corpus-id"].strip()] = int(row["score"])
    queries = {}
    for line in (data / "queries.jsonl").open():
        q = json.loads(line)
        if q["_id"] in qrels:
            queries[q["_id"]] = q["text"]
    # Through the CLI's batch mode, as a user runs it: one process per retriever loads once.
    qfile = home / "test-queries.jsonl"
    qfile.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    result: dict = {"queries": len(queries), "modes": {}}
    for mode in MODES:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "dmlqa.app.cli", "--home", str(home), "search", "--queries", str(qfile), "-k", "10",
             "--per-doc", "--mode", mode], check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        scores = []
        for line in proc.stdout.splitlines():
            row = json.loads(line)
            scores.append(ndcg_at_k([h["doc_id"] for h in row["hits"]], qrels[row["query_id"]], 10))
        result["modes"][mode] = {"ndcg@10": round(sum(scores) / len(scores), 4), "queries": len(scores),
                                 "batch_wall_s": round(wall, 1)}
    _save("retrieval_scifact", result)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    d = sub.add_parser("dev")
    d.add_argument("--home", type=Path, default=Path("/tmp/dmlqa-bench-home"))
    d.add_argument("--questions", type=Path, default=ROOT.parent / "shared" / "eval" / "dev.jsonl")
    s = sub.add_parser("scifact")
    s.add_argument("--home", type=Path, default=Path("/tmp/dmlqa-scifact"))
    s.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    s.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()
    {"dev": dev, "scifact": scifact}[args.what](args)


if __name__ == "__main__":
    main()
