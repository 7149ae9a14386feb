"""Fit the field check (:class:`dmlqa.query.topic.FieldCheck`) on the training questions and ship its weights.

    .venv/bin/python bench/train_topic.py --home /tmp/snaphome --cache /tmp/topic-items.pkl \
        --validate ../shared/eval/dev.jsonl

The off-topic cut reads how near a question its nearest sentences are. A question of a neighbouring field ("how do
I resolve a merge conflict in git?", "how do I interpret a p-value of 0.03?") meets sentences that share its words
and sits as near as a hard answerable one, so the cut lets it through and the answer quotes whatever shared a word.
The field check reads the question's own vector: a logistic regression fitted to tell the training set's off-topic
questions (``"kind": "off-topic"``) from the rest (answerable ones, and unanswerable ones of the field, which the
name check refuses).

Chosen by cross-validation on the training questions only (folds grouped by gold document, as the selector's): the
regularisation and the probability above which a question is refused, by how many questions the shipped checks
let through it refuses more, a false refusal costing ``train_selector.FALSE_REFUSAL_COST`` (ties go to the higher
cut, then the stronger regularisation). Its guard, the nearness at or above which it never refuses, is the median
nearness of the training set's answerable questions: a corpus of another field still answers the questions it
holds. The held-out set, ``--validate`` (dev.jsonl) and the unseen set are scored, never fitted on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_selector as ts  # noqa: E402 - beside this script

from dmlqa.api import KnowledgeBase  # noqa: E402
from dmlqa.index.versions import IndexVersion  # noqa: E402
from dmlqa.query.selector import default_selector  # noqa: E402
from dmlqa.query.topic import FieldCheck, names_a_work  # noqa: E402

ROOT = ts.ROOT
C_GRID = (1.0, 3.0, 10.0, 30.0)
ABOVE_GRID = (0.8, 0.9, 0.95)
GUARD_QUANTILE = 0.5


def _table(items: list[ts.Item], version: IndexVersion) -> dict[str, np.ndarray]:
    """Per question: its vector, whether it is off-topic (the label), answerable, and whether the shipped checks
    refuse it before the field check would be asked (by name, or under the off-topic cut)."""
    selector = default_selector()
    usable = [it for it in items if it.pool.qvec is not None and len(it.pool.cosines)]
    return {
        "x": np.array([it.pool.qvec for it in usable], np.float64),
        "off": np.array([it.q.get("kind") == "off-topic" for it in usable], bool),
        "answerable": np.array([it.q.get("answerable", True) for it in usable], bool),
        "refused": np.array([bool(it.absent) or selector.off_topic(it.near) for it in usable], bool),
        "near": np.array([it.near for it in usable], np.float64),
        # exempt, as the answerer exempts them: a question naming a work the index holds, and one asked after
        # another in a conversation (a follow-up question's "previous")
        "exempt": np.array([names_a_work(version, it.q["question"]) or bool(it.q.get("previous"))
                            for it in usable], bool),
        "group": np.array([it.group for it in usable]),
    }


def _fit(x: np.ndarray, y: np.ndarray, c: float) -> LogisticRegression:
    return LogisticRegression(C=c, class_weight="balanced", max_iter=5000).fit(x, y)


def _effect(t: dict[str, np.ndarray], p: np.ndarray, above: float, guard: float) -> dict:
    """What the field check adds to the shipped checks on one set: unanswerable questions it newly refuses and
    answerable ones it newly refuses (false refusals), with the totals before and after."""
    flagged = (p > above) & (t["near"] < guard) & ~t["exempt"]
    before, after = t["refused"], t["refused"] | flagged
    un, an = ~t["answerable"], t["answerable"]
    return {"refused_before": f"{int(before[un].sum())}/{int(un.sum())}",
            "refused_after": f"{int(after[un].sum())}/{int(un.sum())}",
            "false_refusals_before": f"{int(before[an].sum())}/{int(an.sum())}",
            "false_refusals_after": f"{int(after[an].sum())}/{int(an.sum())}",
            "gain": int((after & ~before)[un].sum()), "new_false_refusals": int((after & ~before)[an].sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, help="a built home over the snapshot (bench/build_snapshot.py)")
    ap.add_argument("--questions", default=str(ROOT / "bench/train/questions-*.jsonl"), help="glob of JSONL files")
    ap.add_argument("--heldout", default=str(ROOT / "bench/heldout/questions-*.jsonl"))
    ap.add_argument("--unseen", default=str(ROOT / "bench/unseen/questions-*.jsonl"))
    ap.add_argument("--validate", type=Path, help="a validation set (dev.jsonl), scored and never fitted on")
    ap.add_argument("--cache", type=Path, help="keep each set's gathered items here (one file per set)")
    ap.add_argument("--out", default=str(ROOT / "src/dmlqa/query/topic.json"))
    ap.add_argument("--results", default=str(ROOT / "bench/results/topic_check.json"))
    args = ap.parse_args()
    if "dev.jsonl" in args.questions:
        sys.exit("dev.jsonl is for validation only: the field check is never fitted on it")
    kb = KnowledgeBase(args.home)
    model = kb.asker.searcher.pin().meta["model"]
    sets = {"training": ts.question_set(args.questions), "heldout": ts.question_set(args.heldout),
            "unseen": ts.question_set(args.unseen),
            "validate": ts._questions(args.validate) if args.validate else []}
    tables = {}
    for name, questions in sets.items():
        if not questions:
            continue
        cache = args.cache.with_suffix(f".{name}{args.cache.suffix}") if args.cache else None
        # each question's pool (its vector, names found absent, nearness) gathered as the answerer does
        tables[name] = _table(ts.collect(kb, questions, cache), kb.asker.searcher.pin())
        print(f"{name}: {len(questions)} questions gathered", file=sys.stderr)
    train = tables["training"]
    x, y, groups = train["x"], train["off"], train["group"]
    guard = float(np.quantile(train["near"][train["answerable"]], GUARD_QUANTILE))
    folds = list(GroupKFold(n_splits=ts.FOLDS).split(x, groups=groups))
    grid = []
    for c in C_GRID:
        oof = np.zeros(len(y))
        for fit_idx, test_idx in folds:
            oof[test_idx] = _fit(x[fit_idx], y[fit_idx], c).predict_proba(x[test_idx])[:, 1]
        for above in ABOVE_GRID:
            effect = _effect(train, oof, above, guard)
            score = effect["gain"] - ts.FALSE_REFUSAL_COST * effect["new_false_refusals"]
            grid.append({"C": c, "above": above, "score": score, **effect})
    best = max(grid, key=lambda g: (g["score"], g["above"], -g["C"]))
    final = _fit(x, y, best["C"])
    check = FieldCheck(model, final.coef_[0].astype(np.float64), float(final.intercept_[0]), best["above"], guard)
    Path(args.out).write_text(json.dumps(check.to_json()) + "\n", encoding="utf-8")
    results = {"model": model, "guard": round(guard, 4), "chosen": {"C": best["C"], "above": best["above"]},
               "training (cross-validated)": {k: v for k, v in best.items() if k not in ("C", "above", "score")},
               "grid": grid}
    for name in ("heldout", "validate", "unseen"):
        if name in tables:
            t = tables[name]
            results[name] = _effect(t, final.predict_proba(t["x"])[:, 1], best["above"], guard)
    Path(args.results).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in results.items() if k != "grid"}, indent=1))


if __name__ == "__main__":
    main()
