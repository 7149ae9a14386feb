"""Answer quality of `dmlqa ask` in process, per question set: what the extractive answer states.

Beyond `dmlqa eval` (retrieval, citation hit, refusals), this reports what the issue on answers is
held to: keyword hit (share of a question's keywords the answer states), the share of keywords the
retrieved passages held at all (the ceiling), median answer words, citations that name a gold
document, stray [n] markers that are no citation, refusals, and in-process latency.

    .venv/bin/python bench/eval_answers.py --home /tmp/dmlqa-bench-home [--questions ../shared/eval/dev.jsonl]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dmlqa.query.answer import Asker, AskOptions  # noqa: E402
from dmlqa.query.evaluate import answer_words, by_identity, gold_identities, normalize_url  # noqa: E402
from dmlqa.settings import load_settings  # noqa: E402


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--home", required=True)
    ap.add_argument("--questions", default=str(ROOT.parent / "shared" / "eval" / "dev.jsonl"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "answers_dev.json"))
    args = ap.parse_args()

    asker = Asker.from_settings(load_settings(args.home))
    questions = [json.loads(line) for line in Path(args.questions).read_text().splitlines() if line.strip()]
    asker.ask("warm up", AskOptions(use_llm=False))
    kw, held, words, cited, refused_ok, false_refused, latency = [], [], [], [], [], [], []
    stray = 0
    said = {}  # answers by id: a follow-up (its "previous") is asked after the one it follows, as dmlqa eval does
    docs = asker.searcher.pin().docs
    identify = gold_identities(docs)  # gold URLs name works by any of their addresses: match their identities
    for q in questions:
        t0 = time.perf_counter()
        a = asker.ask(q["question"], AskOptions(use_llm=False), previous=said.get(q.get("previous") or ""))
        latency.append(time.perf_counter() - t0)
        said[q.get("id")] = a
        numbers = {c.n for c in a.citations}
        stray += sum(1 for m in re.findall(r"\[(\d+)\]", a.answer) if int(m) not in numbers)
        if not q.get("answerable", True):
            refused_ok.append(a.refused)
            continue
        false_refused.append(a.refused)
        text = nfkc(a.answer)
        keywords = q.get("keywords") or []
        if keywords:
            kw.append(sum(nfkc(k) in text for k in keywords) / len(keywords))
            passages = nfkc(" ".join(h.text for h in a.retrieved))
            held.append(sum(nfkc(k) in passages for k in keywords) / len(keywords))
        if not a.refused:  # as `dmlqa eval` counts: refusals left out, the [n] markers are no words
            words.append(answer_words(a.answer))
        gold = {normalize_url(u) for u in identify(q.get("gold_urls", []))}
        cited.append(any(normalize_url(c.url) in gold for c in by_identity(a.citations, docs)))
    ms = sorted(1000 * x for x in latency)
    result = {
        "questions": len(questions),
        "keyword_hit": round(statistics.mean(kw), 4) if kw else None,
        "keywords_in_passages": round(statistics.mean(held), 4) if held else None,
        "median_words": statistics.median(words) if words else None,
        "citation_hit": round(statistics.mean(cited), 4) if cited else None,
        "refusal_accuracy": round(statistics.mean(refused_ok), 4) if refused_ok else None,
        "false_refusal_rate": round(statistics.mean(false_refused), 4) if false_refused else None,
        "stray_markers": stray,
        "ask_ms_p50": round(statistics.median(ms), 1),
        "ask_ms_p95": round(ms[int(0.95 * (len(ms) - 1))], 1),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
