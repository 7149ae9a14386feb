"""Would a cross-encoder re-ranking the selector's best candidates make the answers state the key term more often?

    .venv/bin/python bench/cross_encoder_rerank.py gather --home /tmp/h --set train --out /tmp/ce-train.pkl
    .venv/bin/python bench/cross_encoder_rerank.py train --pools /tmp/ce-train.pkl --out /tmp/ce.pt   # ~25 min
    .venv/bin/python bench/cross_encoder_rerank.py score --home /tmp/h --model /tmp/ce.pt --set held

``cross_encoder_cv.py`` asked this of a cross-encoder as three more features of the selector (2026-11-26: not
shipped). This asks it of one that re-ranks what today's selector ranks best, as a reranker would sit in the
product: the bundled MiniLM read over question and sentence together (mean-pooled, one linear head), fine-tuned on
``bench/train/`` (never dev.jsonl) with a listwise softmax over each question's :data:`TOP` best candidates by the
shipped selector (the evidence or key-term sentences among them the positives; questions with none, or with
nothing but, left out), one epoch, AdamW 3e-5 (the head 1e-3), two questions a step.

``score`` asks each answerable question of a set alone (follow-ups left out), re-scores the selector's TOP best
as ``logit(p) + w * (ce - mean)`` (the cross-encoder's logits centred over the question's TOP), writes the
answer from those scores as the answerer does, and counts the answers stating a key term and the best sentences
that are positives, for each weight ``w`` (0: the shipped answer; refusals by name or topic are not made here,
so the counts differ slightly from ``kb.ask``'s).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import pickle
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_selector import evidence_match, states_keyword  # noqa: E402

from dmlqa.query.answer import Asker, AskOptions, extractive_answer, retrieve, scored_pool  # noqa: E402
from dmlqa.settings import load_settings  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOP = 20
SETS = {"train": [*sorted(glob.glob(str(ROOT / "bench/train/questions-*.jsonl"))),
                  str(ROOT / "bench/train/which-resource-20.jsonl")],
        "held": sorted(glob.glob(str(ROOT / "bench/heldout/questions-*.jsonl"))),
        "unseen": sorted(glob.glob(str(ROOT / "bench/unseen/questions-*.jsonl"))),
        "dev": [str(ROOT.parent / "shared/eval/dev.jsonl")]}


def questions(name: str) -> list[dict]:
    """The answerable questions of a set that are asked alone and have key terms."""
    out = []
    for fn in SETS[name]:
        for line in Path(fn).read_text().splitlines():
            q = json.loads(line) if line.strip() else {}
            if q and q.get("answerable", True) and not q.get("previous") and q.get("keywords"):
                out.append(q)
    return out


def positive(text: str, q: dict) -> bool:
    evidence = q.get("evidence") or []
    return evidence_match(text, [evidence] if isinstance(evidence, str) else evidence) or states_keyword(
        text, q["keywords"])


def asked(home: str, name: str):  # noqa: ANN201 - yields (question, hits, pool, scores, top)
    asker = Asker.from_settings(load_settings(home))
    version, options = asker.searcher.pin(), AskOptions(use_llm=False)
    for q in questions(name):
        hits = retrieve(asker.searcher, version, q["question"], options)
        pool, scores = scored_pool(asker.searcher, version, q["question"], hits, options) if hits else (None, [])
        top = np.argsort(-np.asarray(scores), kind="stable")[:TOP]
        yield q, (asker.searcher, version, hits, options), pool, np.asarray(scores), top


def gather(args: argparse.Namespace) -> None:
    recs = [{"question": q["question"], "texts": [pool.candidates[j].text for j in top],
             "labels": [positive(pool.candidates[j].text, q) for j in top]}
            for q, _, pool, scores, top in asked(args.home, args.set) if len(scores)]
    Path(args.out).write_bytes(pickle.dumps(recs))
    print(args.set, len(recs), "questions;", sum(any(r["labels"]) for r in recs), "with a positive in the top", TOP)


def model():  # noqa: ANN201 - (tokenizer, encoder, head)
    import torch
    from transformers import AutoModel, AutoTokenizer

    from dmlqa.index.embed import model_dir
    from dmlqa.settings import BUNDLED_MODEL

    path = model_dir(BUNDLED_MODEL)
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path), torch.nn.Linear(384, 1)


def logits(tok, enc, head, question: str | list[str], texts: list[str]):  # noqa: ANN001, ANN201
    qs = question if isinstance(question, list) else [question] * len(texts)
    b = tok(qs, texts, padding=True, truncation="only_second", max_length=128, return_tensors="pt")
    mask = b["attention_mask"].unsqueeze(-1).float()
    return head((enc(**b).last_hidden_state * mask).sum(1) / mask.sum(1)).squeeze(-1)


def train(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(2)
    torch.manual_seed(0)
    rnd = random.Random(0)
    recs = [r for r in pickle.loads(Path(args.pools).read_bytes()) if any(r["labels"]) and not all(r["labels"])]
    tok, enc, head = model()
    opt = torch.optim.AdamW([{"params": enc.parameters(), "lr": 3e-5}, {"params": head.parameters(), "lr": 1e-3}],
                            weight_decay=0.01)
    steps = args.epochs * math.ceil(len(recs) / 2)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / max(1, steps - warm)))
    t0 = time.time()
    for _ in range(args.epochs):
        rnd.shuffle(recs)
        for i in range(0, len(recs), 2):
            batch = recs[i : i + 2]
            z = logits(tok, enc, head, [r["question"] for r in batch for _ in r["texts"]],
                       [t for r in batch for t in r["texts"]])
            loss, at = 0.0, 0
            for r in batch:  # listwise: the positives' share of the softmax over the question's candidates
                zz, at = z[at : at + len(r["texts"])], at + len(r["texts"])
                loss = loss - (torch.logsumexp(zz[torch.tensor(r["labels"])], 0) - torch.logsumexp(zz, 0))
            (loss / len(batch)).backward()
            torch.nn.utils.clip_grad_norm_(enc.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
    torch.save({"enc": enc.state_dict(), "head": head.state_dict()}, args.out)
    print(f"{len(recs)} questions, {steps} steps, {time.time() - t0:.0f} s")


def score(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(2)
    tok, enc, head = model()
    state = torch.load(args.model)
    enc.load_state_dict(state["enc"])
    head.load_state_dict(state["head"])
    enc.eval()
    weights = [float(w) for w in args.weights.split(",")]
    stated, best, spread, n = dict.fromkeys(weights, 0), dict.fromkeys(weights, 0), [], 0
    for q, (searcher, version, hits, options), pool, scores, top in asked(args.home, args.set):
        n += 1
        if not len(scores):
            continue
        with torch.no_grad():
            ce = logits(tok, enc, head, q["question"], [pool.candidates[j].text for j in top]).numpy()
        spread += ce.tolist()
        p = np.clip(scores[top], 1e-6, 1 - 1e-6)
        for w in weights:
            s = scores.copy()
            s[top] = 1 / (1 + np.exp(-(np.log(p / (1 - p)) + w * (ce - ce.mean()))))
            best[w] += positive(pool.candidates[int(np.argmax(s))].text, q)
            body, _, refused, _ = extractive_answer(searcher, version, q["question"], hits, options, scored=(pool, s))
            stated[w] += not refused and states_keyword(body, q["keywords"])
    print(json.dumps({"set": args.set, "questions": n, "ce_sd": round(float(np.std(spread)), 3),
                      "key_term_stated": stated, "best_is_positive": best}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    g = sub.add_parser("gather")
    g.add_argument("--home", required=True)
    g.add_argument("--set", choices=SETS, default="train")
    g.add_argument("--out", required=True)
    t = sub.add_parser("train")
    t.add_argument("--pools", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--epochs", type=int, default=1)
    s = sub.add_parser("score")
    s.add_argument("--home", required=True)
    s.add_argument("--model", required=True)
    s.add_argument("--set", choices=SETS, default="held")
    s.add_argument("--weights", default="0,0.37,0.75,1.5")
    args = ap.parse_args()
    {"gather": gather, "train": train, "score": score}[args.step](args)


if __name__ == "__main__":
    main()
