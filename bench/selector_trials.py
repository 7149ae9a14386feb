"""Trials of the sentence model against the shipped one, in seconds each instead of a 15-20 minute refit.

    .venv/bin/python bench/selector_trials.py --home /tmp/snaphome --cache /tmp/pools.pkl prepare
    .venv/bin/python bench/selector_trials.py --home /tmp/snaphome --cache /tmp/pools.pkl run lr gbt blend
    .venv/bin/python bench/selector_trials.py --home /tmp/snaphome --cache /tmp/pools.pkl curve

A refit (``train_selector.py``) spends its time retrieving (cached by its ``--cache``), tuning the question
encoder (cached beside it) and cross-fitting the question adapters inside each of the five folds. None of that
depends on which model reads the features, so ``prepare`` does it once, as the refit does, and keeps each fold's
feature matrices (training questions with adapters cross-fitted within the fold, test questions with the fold's
adapter), the final fit's, and the held-apart sets' as the shipped selector reads them (its adapter and tuned
question encoder: what the refit fits on all the training questions, byte for byte). ``run`` then fits each
named trial in place of the logistic regression and scores it as the refit does: cross-validated key term at
the shipped settings (add above, budget, reading on, diversity, focus), and on the held-out set, ``dev.jsonl`` and the
unseen set (scored only; nothing is chosen on them). ``lr`` reproduces the refit's own numbers
(``bench/results/selector.json``); ``--grid`` also scores each trial at the setting the refit's grid would
choose for it. ``curve`` asks where the shipped model's cross-validated key term is bounded: by the number of
training questions (a learning curve), by the fit (scored on its own training questions) or by the ranking (the
answers with each question's positive candidates ranked first). The cache must come from
``train_selector.py --cache`` on the same home.
"""

from __future__ import annotations

import argparse
import functools
import json
import pickle
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_selector as ts  # noqa: E402 - beside this script

from dmlqa.api import KnowledgeBase  # noqa: E402
from dmlqa.query.english import english_word  # noqa: E402
from dmlqa.query.features import ADAPTED, ASKED  # noqa: E402
from dmlqa.query.selector import load_selector  # noqa: E402
from dmlqa.query.tuning import question_encoder  # noqa: E402

HELD = {"validate": str(ts.ROOT.parent / "shared/eval/dev.jsonl"),
        "heldout": str(ts.ROOT / "bench/heldout/questions-*.jsonl"),
        "unseen": str(ts.ROOT / "bench/unseen/questions-*.jsonl")}


def _training(kb: KnowledgeBase, cache: Path) -> list[ts.Item]:
    return ts.collect(kb, ts.question_set(str(ts.ROOT / "bench/train/questions-*.jsonl")), cache)


def _held(kb: KnowledgeBase, cache: Path) -> dict[str, list[ts.Item]]:
    out = {}
    for name, pattern in HELD.items():
        out[name] = ts.collect(kb, ts.question_set(pattern), cache.with_suffix(f".{name}{cache.suffix}"))
    return out


def prepare(kb: KnowledgeBase, cache: Path, out: Path) -> None:
    """Each fold's feature matrices, the final fit's and the held-apart sets', as ``train_selector.main`` makes them."""
    items = _training(kb, cache)
    version = kb.asker.searcher.pin()
    workdir = Path(tempfile.mkdtemp(prefix="dmlqa-trials-"))
    tuned_q, tuning = ts.tuned_questions(kb, items, ts.asked_texts(items), workdir,
                                         cache.with_suffix(".tuned" + cache.suffix))
    tuned = [it.vectors @ tuned_q[i] if len(it.pool.candidates) else np.zeros(0, np.float32)
             for i, it in enumerate(items)]
    base = [it.pool.features for it in items]
    folds = [ts.fold_features(items, base, tuned, train, test)
             for train, test in GroupKFold(n_splits=ts.FOLDS).split(np.zeros(len(items)),
                                                                    groups=[it.group for it in items])]
    whole = ts.cross_fitted(items, list(range(len(items))))
    shipped = load_selector(ts.ROOT / "src/dmlqa/query/selector.json")
    encoder = question_encoder(tuning, version.meta["encoder"], workdir)
    held = {}
    for name, hitems in _held(kb, cache).items():
        text = ts.asked_texts(hitems)
        held[name] = []
        for it in hitems:  # the features as the answerer computes them with the shipped adapter and tuning
            shipped.score_pool(it.pool, version.meta["model"], encoder.encode([text[it.q["id"]]])[0])
            held[name].append(np.array(it.pool.features) if len(it.pool.candidates)
                              else np.zeros((0, len(ts.FEATURES))))
    out.write_bytes(pickle.dumps({"folds": folds, "final": [ts.with_asked(base[i], tuned[i], whole[i])
                                                             for i in range(len(items))],
                                  "held": held, "topic_cut": ts.off_topic_cut(items)}))


# -- the models tried -------------------------------------------------------------------------------------


class Logistic:
    """The shipped model: standardised features, L2-regularised logistic regression."""

    def __init__(self, c: float = ts.C, class_weight: str | None = None) -> None:
        self.c, self.class_weight = c, class_weight

    def fit(self, xs: list[np.ndarray], ys: list[np.ndarray]) -> Logistic:
        x = np.vstack(xs)
        self.scaler = StandardScaler().fit(x)
        self.scale = np.where(self.scaler.scale_ > 0, self.scaler.scale_, 1.0)
        self.model = LogisticRegression(C=self.c, max_iter=5000, class_weight=self.class_weight)
        self.model.fit((x - self.scaler.mean_) / self.scale, np.concatenate(ys))
        return self

    def score(self, x: np.ndarray) -> np.ndarray:
        z = ((x - self.scaler.mean_) / self.scale) @ self.model.coef_[0] + self.model.intercept_[0]
        return 1.0 / (1.0 + np.exp(-z))


class Trees:
    """Gradient-boosted trees (scikit-learn's histogram GBDT), shallow and strongly regularised."""

    def fit(self, xs: list[np.ndarray], ys: list[np.ndarray]) -> Trees:
        self.model = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15,
                                                    min_samples_leaf=100, l2_regularization=1.0, random_state=0)
        self.model.fit(np.vstack(xs), np.concatenate(ys))
        return self

    def score(self, x: np.ndarray) -> np.ndarray:
        return self.model.predict_proba(x)[:, 1]


class Blend:
    """The mean of the two models' probabilities."""

    def fit(self, xs: list[np.ndarray], ys: list[np.ndarray]) -> Blend:
        self.parts = (Logistic().fit(xs, ys), Trees().fit(xs, ys))
        return self

    def score(self, x: np.ndarray) -> np.ndarray:
        return np.mean([m.score(x) for m in self.parts], axis=0)


class Network:
    """A small neural network (one hidden layer of 32), on standardised features, stopping early on a tenth."""

    def fit(self, xs: list[np.ndarray], ys: list[np.ndarray]) -> Network:
        x = np.vstack(xs)
        self.scaler = StandardScaler().fit(x)
        self.model = MLPClassifier(hidden_layer_sizes=(32,), alpha=1e-2, max_iter=200, early_stopping=True,
                                   random_state=0).fit(self.scaler.transform(x), np.concatenate(ys))
        return self

    def score(self, x: np.ndarray) -> np.ndarray:
        return self.model.predict_proba(self.scaler.transform(x))[:, 1]


@functools.cache
def _strongest() -> tuple[int, ...]:
    """The shipped LR's ten features of largest weight."""
    coef = load_selector(ts.ROOT / "src/dmlqa/query/selector.json").coef
    return tuple(int(i) for i in np.argsort(-np.abs(coef))[:10])


def _pairs(x: np.ndarray) -> np.ndarray:
    """The features with the products of each pair of :func:`_strongest` (45 more columns)."""
    top = _strongest()
    return np.hstack([x, np.stack([x[:, i] * x[:, j] for a, i in enumerate(top) for j in top[a + 1:]], axis=1)])


def _within_pool(x: np.ndarray) -> np.ndarray:
    """Every feature beside its z-score within the question's pool (a ranking's usual normalisation)."""
    sd = x.std(axis=0)
    return np.hstack([x, (x - x.mean(axis=0)) / np.where(sd > 1e-9, sd, 1.0)])


_STOP = frozenset("what which who how why when where does do is are the a an of in on for to with and or by from "
                  "that this it as at be can i my we you your use used using between than into about there their "
                  "its".split())


def _title_columns(it: ts.Item) -> np.ndarray:
    """The share of the question's words (and of its words no English dictionary holds: names) in the title and
    address of each candidate's document, and each share's gap to the pool's best."""
    import re

    def words(text: str) -> list[str]:
        return re.findall(r"[a-z0-9][a-z0-9+.\-]*[a-z0-9+]|[a-z0-9]", text.lower())
    asked = [w for w in dict.fromkeys(words(it.q["question"])) if w not in _STOP and len(w) >= 3]
    names = [w for w in asked if not english_word(w)]
    title = {h.doc_id: set(words(h.title + " " + h.url.replace("/", " ").replace("_", " ")))
             for h in reversed(it.pool.sources)}
    x = np.array([(sum(w in title.get(c.doc_id, set()) for w in asked) / max(len(asked), 1),
                   sum(w in title.get(c.doc_id, set()) for w in names) / max(len(names), 1))
                  for c in it.pool.candidates], float).reshape(-1, 2)
    return np.hstack([x, x - x.max(axis=0)]) if len(x) else np.zeros((0, 4))


#: How many of the nearest candidates by cosine :func:`_support_columns` reads as the others' say.
SUPPORT_TOP = 10


def _support_columns(it: ts.Item) -> np.ndarray:
    """How far the other near sentences repeat what a candidate adds to the question (an answer stated twice is more
    likely the answer): per candidate, the share of its terms outside the question that occur in the other
    candidates among the :data:`SUPPORT_TOP` nearest by cosine, and the same share among those of other documents."""
    from dmlqa.index.lexical import tokenize

    cands = it.pool.candidates
    asked = set(tokenize(it.q["question"]))
    toks = [set(t) - asked for t in (it.pool.tokens or [tokenize(c.text) for c in cands])]
    top = np.argsort(-np.asarray(it.pool.cosines))[:SUPPORT_TOP].tolist()
    out = np.zeros((len(cands), 2))
    for i, own in enumerate(toks):
        if not own:
            continue
        others = [j for j in top if j != i]
        near = set().union(*(toks[j] for j in others)) if others else set()
        far = set().union(*(toks[j] for j in others if cands[j].doc_id != cands[i].doc_id)) if others else set()
        out[i] = (len(own & near) / len(own), len(own & far) / len(own))
    return out


def _novelty_columns(it: ts.Item) -> np.ndarray:
    """What a candidate says beyond the question: the share of its terms the question does not hold, and their
    count (log): a sentence restating the question holds none."""
    from dmlqa.index.lexical import tokenize

    asked = set(tokenize(it.q["question"]))
    toks = it.pool.tokens or [tokenize(c.text) for c in it.pool.candidates]
    out = np.zeros((len(it.pool.candidates), 2))
    for i, t in enumerate(toks):
        new = [w for w in t if w not in asked]
        out[i] = (len(new) / len(t) if t else 0.0, np.log1p(len(set(new))))
    return out


def _by_kind(it: ts.Item, x: np.ndarray) -> np.ndarray:
    """The features again for each kind of answer the question asks for (number, name, code, comparison; the
    columns of the kinds it does not ask for are 0): a weight per kind, where one set of weights serves all."""
    from dmlqa.query.features import asked_kinds

    kinds = asked_kinds(it.q["question"])
    return np.hstack([x] + [x * (k in kinds) for k in ("number", "name", "code", "compare")])


_NUM = r"\d[\d.,]*\s*"
#: What a numeric question measures, by its words, and the figure with its unit a sentence stating one holds.
_UNITS = [
    (re.compile(r"(?i)\bmemory|\bram\b|\bstorage|\bcapacity|\bgib?\b|\bgb\b"),
     re.compile(_NUM + r"(?:[KMGT]i?B|bytes?)\b")),
    (re.compile(r"(?i)\bhow long\b|\bhow much time\b|\btime\b|\blatency|\bduration|\bseconds?\b|\bminutes?\b|"
                r"\bhours?\b"),
     re.compile(r"(?i)" + _NUM + r"(?:ms|µs|us|s|sec|secs|seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?)\b")),
    (re.compile(r"(?i)\bfaster\b|\bspeed-?ups?\b|\bhow many times\b|\bx\b|\bslower\b|\bimprove"),
     re.compile(r"(?i)" + _NUM + r"(?:×|x\b|times\b)|" + _NUM + "%")),
    (re.compile(r"(?i)\bpercent|\bpercentage|\bfraction\b|\bshare\b|\butili[sz]ation|\bmfu\b|\befficiency|\baccuracy"),
     re.compile(_NUM + r"%|(?i:" + _NUM + r"percent)")),
    (re.compile(r"(?i)\bhow (?:big|large)\b|\bparameters?\b|\bmodel size"),
     re.compile(r"(?i)" + _NUM + r"(?:[MBT]\b|billion|million|trillion)|" + _NUM + r"(?:B|M)-param")),
    (re.compile(r"(?i)\bbandwidth|\bgbps\b|\bnetwork speed"),
     re.compile(r"(?i)" + _NUM + r"(?:[GMT]b(?:it)?/?p?s|[GMT]B/s|Gbps)")),
    (re.compile(r"(?i)\bflops\b|\bthroughput\b|\bteraflops|\bpetaflops"),
     re.compile(r"(?i)" + _NUM + r"(?:[TPG]FLOPs?|(?:tera|peta|giga)-?flops|tokens?/s|samples?/s|images?/s)")),
]
_HOW_MANY = re.compile(r"(?i)\bhow many ([a-z][\w-]*)")


def _stated_columns(it: ts.Item, states: Callable[[str], bool] | None) -> np.ndarray:
    """Per candidate, whether it states what the question asks for (``states`` of its text) and whether it does not;
    both 0 for every candidate where the question asks for no such thing (``states`` None)."""
    out = np.zeros((len(it.pool.candidates), 2))
    if states is not None:
        for i, c in enumerate(it.pool.candidates):
            hit = states(c.text)
            out[i] = (float(hit), float(not hit))
    return out


def _unit_columns(it: ts.Item) -> np.ndarray:
    """Whether a numeric question's measure is stated: the question asks how much memory, time, speed-up, share,
    size, bandwidth or throughput (or how many of something), and the candidate holds a figure with that unit (or
    that noun); and whether it asks one and the candidate holds none."""
    q = it.q["question"]
    asked = [unit for words, unit in _UNITS if words.search(q)]
    if (m := _HOW_MANY.search(q)) is not None:
        noun = re.escape(m.group(1).rstrip("s"))
        asked.append(re.compile(r"(?i)" + _NUM + r"(?:[\w-]+\s+){0,2}" + noun + r"|\b" + noun + r"s?\s*[:=]\s*\d"))
    return _stated_columns(it, (lambda text: any(u.search(text) for u in asked)) if asked else None)


_WHY = re.compile(r"(?i)^\W*why\b|\bwhat (?:is|was|are) the (?:reason|motivation|rationale)|\bwhat motivate|"
                  r"\bhow come\b")
_BECAUSE = re.compile(r"(?i)\b(?:because|since|due to|owing to|as a result|therefore|thus|hence|so that|in order to|"
                      r"motivated by|the reason|this is why|which is why|consequently|leads? to|caus(?:e|es|ed|ing))\b")


def _reason_columns(it: ts.Item) -> np.ndarray:
    """For a question asking why: whether the candidate gives a reason (a causal connective), and whether it gives
    none."""
    return _stated_columns(it, (lambda text: _BECAUSE.search(text) is not None) if _WHY.search(it.q["question"])
                           else None)


def _novel_kind_columns(it: ts.Item) -> np.ndarray:
    """Whether a candidate holds an asked-for kind of answer (a number, a name, a year) that the question does not
    itself hold ("512" in "on 512 GPUs" answers no "how much"), and whether the question asks for one and the
    candidate holds none such."""
    from dmlqa.query.features import KINDS, asked_kinds

    q = it.q["question"]
    # a number is read whole ("512", "1.5x"), not digit by digit
    kinds = [re.compile(r"\d[\w.]*") if KINDS[k].pattern == r"\d" else KINDS[k] for k in asked_kinds(q) if k in KINDS]

    def held(text: str) -> set[str]:
        return {m.group().lower() for rx in kinds for m in rx.finditer(text)}
    asked = held(q)
    return _stated_columns(it, (lambda text: bool(held(text) - asked)) if kinds else None)


#: name -> (model, a change of each item's feature matrix or None, which labels it is fitted on)
TRIALS: dict[str, tuple[Callable[[], object], Callable[[ts.Item, np.ndarray], np.ndarray] | None, str]] = {
    "lr": (Logistic, None, "both"),
    "gbt": (Trees, None, "both"),
    "blend": (Blend, None, "both"),
    "lr-c0.01": (functools.partial(Logistic, 0.01), None, "both"),
    "lr-c0.03": (functools.partial(Logistic, 0.03), None, "both"),
    "lr-c1": (functools.partial(Logistic, 1.0), None, "both"),
    "lr-balanced": (functools.partial(Logistic, ts.C, "balanced"), None, "both"),
    "network": (Network, None, "both"),
    "pairs": (Logistic, lambda it, x: _pairs(x), "both"),
    "within-pool": (Logistic, lambda it, x: _within_pool(x), "both"),
    "doc-title": (Logistic, lambda it, x: np.hstack([x, _title_columns(it)]), "both"),
    "support": (Logistic, lambda it, x: np.hstack([x, _support_columns(it)]), "both"),
    "novelty": (Logistic, lambda it, x: np.hstack([x, _novelty_columns(it)]), "both"),
    "all-three": (Logistic, lambda it, x: np.hstack([x, _support_columns(it), _unit_columns(it), _novelty_columns(it)]),
                  "both"),
    "by-kind": (Logistic, _by_kind, "both"),
    "by-kind-c0.03": (functools.partial(Logistic, 0.03), _by_kind, "both"),
    "units": (Logistic, lambda it, x: np.hstack([x, _unit_columns(it)]), "both"),
    "reason": (Logistic, lambda it, x: np.hstack([x, _reason_columns(it)]), "both"),
    "novel-kind": (Logistic, lambda it, x: np.hstack([x, _novel_kind_columns(it)]), "both"),
    "no-tuned": (Logistic, lambda it, x: x[:, :-len(ASKED)], "both"),
    "no-adapted": (Logistic, lambda it, x: x[:, :-len(ADAPTED)], "both"),
    "no-tuned-only": (Logistic, lambda it, x: np.hstack([x[:, :-len(ASKED)], x[:, -len(ADAPTED):]]), "both"),
    "evidence-labels": (Logistic, None, "evidence"),
    "key-term-labels": (Logistic, None, "key term"),
}


def _labels(it: ts.Item, which: str) -> np.ndarray:
    """What a trial is fitted on: the refit's labels (an evidence sentence or a key term), or only one of the two
    where the question has such a candidate."""
    if which == "evidence" and it.evidence.any():
        return it.evidence
    if which == "key term":
        stated = np.array([ts.states_keyword(c.text, it.q.get("keywords") or []) for c in it.pool.candidates], bool)
        if stated.any():
            return stated
    return it.labels


def out_of_fold(items: list[ts.Item], prepared: dict, factory: Callable[[], object] = Logistic,
                x_of: Callable[[ts.Item, np.ndarray], np.ndarray] = lambda it, x: x,
                labels: Callable[[ts.Item], np.ndarray] = lambda it: it.labels, share: float = 1.0,
                rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Each training question's scores by the fold model that did not see it. ``share`` < 1: each fold's model
    is fitted on that share of its training works only (drawn with ``rng`` by gold source, the unit the folds
    are split by, so that no work is half seen)."""
    fits = {i for i, it in enumerate(items) if ts._fits(it)}
    oof: list[np.ndarray] = [np.zeros(0)] * len(items)
    for train, test in prepared["folds"]:
        keep = [i for i in train if i in fits]
        if share < 1.0:
            keep = works_share(keep, [items[i].group for i in keep], share, rng or np.random.default_rng(0))
        model = factory().fit([x_of(items[i], train[i]) for i in keep], [labels(items[i]) for i in keep])
        for i, x in test.items():
            oof[i] = model.score(x_of(items[i], x)) if len(x) else np.zeros(0)
    return oof


def works_share(idx: list[int], groups: list[str], share: float, rng: np.random.Generator) -> list[int]:
    """The questions (``idx``, each of the work ``groups`` names) of a random ``share`` of the works, at least one."""
    works = sorted(set(groups))
    chosen = set(rng.choice(works, max(1, round(share * len(works))), replace=False).tolist())
    return [i for i, g in zip(idx, groups, strict=True) if g in chosen]


def first_positive(scores: np.ndarray, labels: np.ndarray) -> int:
    """The rank (0 for the best) of the best-scored positive candidate, or -1 where the pool holds none."""
    ranked = labels[np.argsort(-np.asarray(scores), kind="stable")]
    return int(np.argmax(ranked)) if ranked.any() else -1


#: The bins :func:`curve` counts first-positive ranks in: (label, lowest rank, highest rank).
RANK_BINS = (("1", 0, 0), ("2", 1, 1), ("3", 2, 2), ("4-5", 3, 4), ("6-10", 5, 9), ("11-20", 10, 19),
             ("over 20", 20, 10**9), ("none", -1, -1))

#: The shares of the training works :func:`curve` fits the fold models on, and the draws of each.
CURVE_SHARES = (0.25, 0.5, 0.75)
CURVE_DRAWS = 3


def curve(items: list[ts.Item], prepared: dict, setting: ts.Setting) -> dict:
    """Whether more training questions, a closer fit or a better ranking would raise the cross-validated key term:
    the learning curve (each fold's model on a share of its works), the model scored on the questions it was
    fitted on, the answers with each question's positives ranked first (the ceiling of a perfect ranking of these
    candidates), and where the best positive ranks, among all answerable questions and among those whose answer
    states no key term."""
    topic_cut = prepared["topic_cut"]

    def scored(scores: list[np.ndarray]) -> dict:
        e = ts.evaluate(items, scores, setting, ts.refuse_cut(items, scores, topic_cut), topic_cut)
        return {k: e[k] for k in ("key_term_stated", "top1_positive", "median_words")}
    oof = out_of_fold(items, prepared)
    learning = [{"share": s, "draws": [scored(out_of_fold(items, prepared, share=s, rng=np.random.default_rng(d)))
                                       for d in range(CURVE_DRAWS)]} for s in CURVE_SHARES]
    learning.append({"share": 1.0, "draws": [scored(oof)]})
    fitted = [i for i, it in enumerate(items) if ts._fits(it)]
    whole = Logistic().fit([prepared["final"][i] for i in fitted], [items[i].labels for i in fitted])
    in_sample = [whole.score(x) if len(x) else np.zeros(0) for x in prepared["final"]]
    first = [s + 10.0 * it.labels if len(s) else s for it, s in zip(items, oof, strict=True)]
    ranks: dict[str, dict[str, int]] = {"answerable": {}, "no key term": {}}
    for it, s in zip(items, oof, strict=True):
        if not it.q.get("answerable", True) or not len(s):
            continue
        r = first_positive(s, it.labels)
        label = next(b for b, lo, hi in RANK_BINS if lo <= r <= hi)
        body, _, _ = ts.answer_text(it, s, setting)
        for kind in ("answerable",) + (() if ts.states_keyword(body, it.q.get("keywords") or []) else ("no key term",)):
            ranks[kind][label] = ranks[kind].get(label, 0) + 1
    return {"setting": setting._asdict(), "learning_curve": learning, "in_sample": scored(in_sample),
            "positives_first": scored(first),
            "first_positive_rank": {k: {b: v.get(b, 0) for b, _, _ in RANK_BINS} for k, v in ranks.items()}}


def run(name: str, items: list[ts.Item], held: dict[str, list[ts.Item]], prepared: dict, grid: bool) -> dict:
    factory, change, which = TRIALS[name]

    def x_of(it: ts.Item, x: np.ndarray) -> np.ndarray:
        return change(it, x) if change is not None and len(x) else x
    fitted = [i for i, it in enumerate(items) if ts._fits(it)]
    oof = out_of_fold(items, prepared, factory, x_of, lambda it: _labels(it, which))
    final = factory().fit([x_of(items[i], prepared["final"][i]) for i in fitted],
                          [_labels(items[i], which) for i in fitted])
    scores = {n: [final.score(x_of(it, x)) if len(x) else np.zeros(0) for it, x in zip(hitems, prepared["held"][n],
                                                                                          strict=True)]
              for n, hitems in held.items()}
    topic_cut = prepared["topic_cut"]
    refuse = ts.refuse_cut(items, oof, topic_cut)
    shipped = load_selector(ts.ROOT / "src/dmlqa/query/selector.json")
    settings = [ts.Setting.of(shipped)]
    if grid:  # the setting train_selector.py's grid would choose for this model
        settings.append(ts.pick_setting(ts.settings_grid(items, oof, refuse, topic_cut)))
    rows = []
    for setting in dict.fromkeys(settings):
        row: dict = {"trial": name, **setting._asdict()}
        cv = ts.evaluate(items, oof, setting, refuse, topic_cut)
        row["cross_validation"] = {k: cv[k] for k in ("key_term_stated", "keyword_hit_rate", "median_words",
                                                      "top1_positive")}
        for n, hitems in held.items():
            e = ts.evaluate(hitems, scores[n], setting, refuse, topic_cut)
            row[n] = {k: e[k] for k in ("key_term_stated", "keyword_hit_rate", "median_words", "refusal_accuracy")}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return {"trial": name, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, help="the built snapshot home train_selector.py read")
    ap.add_argument("--cache", type=Path, required=True, help="train_selector.py's --cache file (its pools)")
    ap.add_argument("--prepared", type=Path, help="where prepare writes the features (default: beside the cache)")
    ap.add_argument("--grid", action="store_true", help="also score each trial at the setting the grid picks for it")
    ap.add_argument("--results", type=Path, help="where run (or curve) writes its JSON (default: "
                    "bench/results/selector_trials.json, or selector_curve.json)")
    ap.add_argument("step", choices=["prepare", "run", "curve"])
    ap.add_argument("trials", nargs="*", help=f"run's trials, of {', '.join(TRIALS)} (default: all)")
    args = ap.parse_args()
    if args.trials and args.step != "run":
        ap.error(f"{args.step} takes no trial names (it reads the shipped model's features): {' '.join(args.trials)}")
    args.trials = args.trials or list(TRIALS)
    prepared_path = args.prepared or args.cache.with_suffix(".trials" + args.cache.suffix)
    kb = KnowledgeBase(args.home)
    if args.step == "prepare":
        prepare(kb, args.cache, prepared_path)
        return
    results_path = args.results or ts.ROOT / "bench/results" / (
        "selector_curve.json" if args.step == "curve" else "selector_trials.json")
    unknown = [t for t in args.trials if t not in TRIALS]
    if unknown:
        sys.exit(f"no trial named {', '.join(unknown)}; known: {', '.join(TRIALS)}")
    if not prepared_path.exists():
        sys.exit(f"{prepared_path} does not exist: run this script's prepare step first")
    prepared = pickle.loads(prepared_path.read_bytes())
    items = _training(kb, args.cache)
    if args.step == "curve":
        shipped = ts.Setting.of(load_selector(ts.ROOT / "src/dmlqa/query/selector.json"))
        results_path.write_text(json.dumps(curve(items, prepared, shipped), indent=1) + "\n", encoding="utf-8")
        print(results_path.read_text(encoding="utf-8"))
        return
    held = _held(kb, args.cache)
    results = [run(t, items, held, prepared, args.grid) for t in args.trials]
    results_path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
