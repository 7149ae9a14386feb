"""Trials of a learned answerability model against the shipped off-topic cut, on ``selector_trials.py``'s features.

    .venv/bin/python bench/selector_trials.py --home /tmp/snaphome --cache /tmp/pools.pkl prepare
    .venv/bin/python bench/refusal_trials.py --home /tmp/snaphome --cache /tmp/pools.pkl

The shipped answerer refuses a question that names something no document mentions, and one whose nearness
(:func:`dmlqa.query.topic.nearness`) falls under a cut fitted on the training questions; the best sentence's
probability has a cut too, which refits put at 0. Could the question's other signals, read together, refuse more
of the unanswerable questions the name check lets through? Each trial fits a logistic regression on
question-level values (its nearness, the best sentence's probability and the mean of the best three, the best
cosine, the best idf overlap, whether a candidate holds the question's rarest term, ...) over the training
questions the name check passes, with the refit's own cut rule (a false refusal costs three,
``train_selector.best_cut``). It is cross-validated by the refit's groups and scored on the held-out set,
``dev.jsonl`` and the unseen set (scored only). The sentence model is the shipped one: the refit's logistic
regression on the prepared features, out of fold on the training questions.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import selector_trials as st  # noqa: E402 - beside this script
import train_selector as ts  # noqa: E402

from dmlqa.api import KnowledgeBase  # noqa: E402

#: The question-level values a trial may read, each from the question's item, its sentence probabilities and
#: its candidates' features.
VALUES = ("nearness", "best", "best_three", "best_cosine", "best_overlap", "top_overlap", "rarest_held",
          "top_rarest", "best_local_overlap", "doc_best_cosine", "candidates_over_0.2", "log_candidates")
TRIALS = {
    "nearness": ("nearness",),
    "nearness+best": ("nearness", "best"),
    "nearness+best+best_three": ("nearness", "best", "best_three"),
    "nearness+best_cosine": ("nearness", "best_cosine"),
    "nearness+overlap": ("nearness", "best_overlap", "top_overlap"),
    "nearness+rarest": ("nearness", "rarest_held", "top_rarest"),
    "nearness+best+overlap+rarest": ("nearness", "best", "best_overlap", "top_overlap", "rarest_held", "top_rarest"),
    "all": VALUES,
}


def question_values(it: ts.Item, s: np.ndarray, x: np.ndarray) -> list[float]:
    column = {name: i for i, name in enumerate(ts.FEATURES)}
    order = np.argsort(-s)
    return [it.near, float(s.max()), float(s[order[:3]].mean()), float(np.max(it.pool.cosines)),
            float(x[:, column["overlap"]].max()), float(x[order[0], column["overlap"]]),
            float(x[:, column["rarest_term"]].max()), float(x[order[0], column["rarest_term"]]),
            float(x[:, column["local_overlap"]].max()), float(x[:, column["doc_best_cosine"]].max()),
            float((s > 0.2).sum()), float(np.log1p(len(s)))]


def _table(items: list[ts.Item], scores: list[np.ndarray], xs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray,
                                                                                          list[int]]:
    """The values and answerability of the questions the name check lets through and that have candidates."""
    rows, answerable, kept = [], [], []
    for i, (it, s, x) in enumerate(zip(items, scores, xs, strict=True)):
        if it.absent or not len(s):
            continue
        rows.append(question_values(it, s, x))
        answerable.append(bool(it.q.get("answerable", True)))
        kept.append(i)
    return np.array(rows).reshape(-1, len(VALUES)), np.array(answerable, bool), kept


def _fit(x: np.ndarray, y: np.ndarray, columns: list[int]):  # noqa: ANN202 - a scoring function
    scaler = StandardScaler().fit(x[:, columns])
    model = LogisticRegression(C=1.0, max_iter=5000).fit(scaler.transform(x[:, columns]), y)
    return lambda z: model.predict_proba(scaler.transform(z[:, columns]))[:, 1]


def _refused(items: list[ts.Item], scores: list[np.ndarray], refuse: set[int]) -> dict:
    """Refusal of the unanswerable questions and false refusals, the name check and empty pools included."""
    def refused(i: int, it: ts.Item) -> bool:
        return bool(it.absent) or not len(scores[i]) or i in refuse
    un = [refused(i, it) for i, it in enumerate(items) if not it.q.get("answerable", True)]
    an = [refused(i, it) for i, it in enumerate(items) if it.q.get("answerable", True)]
    return {"refused": f"{sum(un)}/{len(un)}", "false_refusals": f"{sum(an)}/{len(an)}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, help="the built snapshot home train_selector.py read")
    ap.add_argument("--cache", type=Path, required=True, help="train_selector.py's --cache file (its pools)")
    ap.add_argument("--prepared", type=Path, help="selector_trials.py's prepared features (default: beside the cache)")
    ap.add_argument("--results", type=Path, default=ts.ROOT / "bench/results/refusal_trials.json")
    args = ap.parse_args()
    prepared_path = args.prepared or args.cache.with_suffix(".trials" + args.cache.suffix)
    if not prepared_path.exists():
        sys.exit(f"{prepared_path} does not exist: run selector_trials.py's prepare step first")
    kb = KnowledgeBase(args.home)
    prepared = pickle.loads(prepared_path.read_bytes())
    items, held = st._training(kb, args.cache), st._held(kb, args.cache)
    fitted = [i for i, it in enumerate(items) if ts._fits(it)]
    fits = set(fitted)
    oof: list[np.ndarray] = [np.zeros(0)] * len(items)
    for train, test in prepared["folds"]:
        model = st.Logistic().fit([train[i] for i in train if i in fits], [items[i].labels for i in train if i in fits])
        for i, x in test.items():
            oof[i] = model.score(x) if len(x) else np.zeros(0)
    final = st.Logistic().fit([prepared["final"][i] for i in fitted], [items[i].labels for i in fitted])
    scores = {n: [final.score(x) if len(x) else np.zeros(0) for x in prepared["held"][n]] for n in held}
    x_train, y_train, kept = _table(items, oof, prepared["final"])
    groups = [items[i].group for i in kept]

    cut = prepared["topic_cut"]
    results = [{"trial": "shipped: the nearness cut", "cut": round(cut, 4),
                "training": _refused(items, oof, {i for i, it in enumerate(items) if it.near < cut}),
                **{n: _refused(hitems, scores[n], {i for i, it in enumerate(hitems) if it.near < cut})
                   for n, hitems in held.items()}}]
    print(json.dumps(results[0]), flush=True)
    for name, values in TRIALS.items():
        columns = [VALUES.index(v) for v in values]
        oof_p = np.zeros(len(y_train))
        for train, test in GroupKFold(n_splits=ts.FOLDS).split(x_train, y_train, groups):
            oof_p[test] = _fit(x_train[train], y_train[train], columns)(x_train[test])
        cv_cut = ts.best_cut(list(zip(oof_p.tolist(), y_train.tolist(), strict=True)))
        row: dict = {"trial": name, "training (cross-validated)": _refused(
            items, oof, {kept[j] for j in range(len(kept)) if oof_p[j] < cv_cut})}
        model = _fit(x_train, y_train, columns)
        final_cut = ts.best_cut(list(zip(model(x_train).tolist(), y_train.tolist(), strict=True)))
        for n, hitems in held.items():
            x, _, hkept = _table(hitems, scores[n], prepared["held"][n])
            p = model(x) if len(x) else np.zeros(0)
            row[n] = _refused(hitems, scores[n], {hkept[j] for j in range(len(hkept)) if p[j] < final_cut})
        results.append(row)
        print(json.dumps(row), flush=True)
    args.results.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
