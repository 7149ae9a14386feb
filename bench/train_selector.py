"""Refit the extractive answer's sentence selector (src/dmlqa/query/selector.json) on bench/train/.

    .venv/bin/python bench/train_selector.py --home /tmp/snaphome

For every training question (``bench/train/questions-*.jsonl``; never the validation set
``dev.jsonl``) it retrieves as the answerer does, gathers the candidate sentences with their
features (:func:`dmlqa.query.extractive.gather`) and labels each: positive when it overlaps an
evidence sentence of the question or states one of its key terms. A question adapter
(``question_adapter.py``: a low-rank map of the question's vector) and a logistic regression are fitted,
cross-validated with folds grouped by the gold document (a question never trains on its own
document), and the two cuts are chosen on the out-of-fold scores. The LR's adapted-cosine features come
from adapters cross-fitted within its training folds (ADAPTER_FOLDS), so it learns how far to trust them on
questions the adapter did not see; the cross-validation nests that inside each fold (~4 min on 2 cores).

* ``add_above``, ``max_words``, ``read_on``, ``diversity`` and ``focus``: the probability a further sentence
  needs to join the answer, the answer's word budget, how many sentences after the best come with it, how much a
  further sentence's likeness to those already in the answer counts against it (maximal marginal
  relevance) and the share of the best sentence's score a document's best must reach to lend the answer more
  sentences, from one grid: among the settings whose median answer is at most MAX_MEDIAN_WORDS, those
  stating a key term within ADD_TOLERANCE of the best, the shortest budget, highest cut, most focus, least
  reading on and least diversity;
* ``refuse_below``: the best sentence's probability under which the answer is refused, the cut making
  the fewest mistakes on the questions the unknown-name check lets through, midway in its gap of
  scores (the name check refuses most unanswerable questions before: the cut is a backstop for
  off-topic ones).

The cross-validated answer scores (key term stated, keyword hit, refusal, false refusal, median words,
and how often the answer cites a gold source: a gold URL or another copy of the work holding an
evidence sentence) and how often the evidence sentence is among the candidates (the retrieved
passages' sentences alone, and with the sentence index) go to ``bench/results/selector.json``; the
final model is fitted on all questions and written deterministically (LBFGS, no randomness; folds in
a fixed order).

``--cache FILE`` keeps the gathered candidates (retrieval is most of the run) so that a refit after a
change of features or model reuses them; ``--validate dev.jsonl`` scores the fitted selector on a
validation set beside the cross-validation, fitting nothing on it. ``--heldout`` (by default
``bench/heldout/questions-*.jsonl``) does the same for training-style questions written after the fit's own and
kept out of it: what the selector does on questions it never saw, with their evidence sentences (so the best
sentence and the gold source are scored too) and kind by kind. ``--unseen`` (by default
``bench/unseen/questions-*.jsonl``) is a second such set, written after the held-out set's misses had been read
and rules changed for some of them; nothing is changed for its own misses, so it stays unseen.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import glob
import json
import math
import pickle
import re
import shutil
import statistics
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

from dmlqa.api import KnowledgeBase
from dmlqa.index.embed import model_dir
from dmlqa.query.answer import AskOptions, candidate_cosines, is_follow_up, retrieve
from dmlqa.query.compose import compose
from dmlqa.query.evaluate import answer_words, normalize_url
from dmlqa.query.extractive import Candidate, Pool, asked_text, gather, unindented
from dmlqa.query.features import ASKED, FEATURES, asked_columns
from dmlqa.query.names import unknown_names
from dmlqa.query.quotes import choose
from dmlqa.query.selector import Selector
from dmlqa.query.spelling import corrected
from dmlqa.query.topic import nearness
from dmlqa.query.tuning import QuestionTuning, question_encoder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from question_adapter import PENALTY, RANK, STEPS, adapted_cosines, fit_adapter  # noqa: E402 - beside this script
from question_tuning import EPOCHS, LEARNING_RATE  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ADD_GRID = (0.0, 0.02, 0.05, 0.1)
#: The highest add_above stating a key term within this of the best is kept: sentences the model rates
#: near zero pad an answer without making it better.
ADD_TOLERANCE = 0.005
#: Budgets over 90 words gave medians over MAX_MEDIAN_WORDS in every refit (95: 91-93, 100: 96-98), reading on two
#: sentences never beat one: the grid leaves them out to try diversity with the rest in the same time.
WORDS_GRID = (85, 90)
READ_ON_GRID = (0, 1)
#: How much a further sentence's cosine with one already chosen counts against its probability
#: (:func:`dmlqa.query.quotes.choose`).
DIVERSITY_GRID = (0.0, 0.1, 0.2, 0.3)
#: The share of the best sentence's score a document's best must reach for the answer to take more of its sentences
#: (:func:`dmlqa.query.quotes.choose`); 0: any document's.
FOCUS_GRID = (0.0, 0.1, 0.2)
#: The issue asks for a median answer of at most 90 words; two words are left for other question sets.
MAX_MEDIAN_WORDS = 88
#: Inverse regularisation of the logistic regression (chosen by cross-validation: 0.1 and 1 score alike).
C = 0.1
FOLDS = 5
#: Folds of the question adapter's cross-fit within a training set (the LR's adapted features), and of the tuned
#: question encoder's over the training set (its tuned features).
ADAPTER_FOLDS = 4
#: What the question encoder tunes (bench/question_tuning.py): biases and layer norms only. Tuning every weight
#: scored no better on the held-out set (bench/README, fourteenth round) and would ship 22.7 M numbers, not 31 k.
TUNING = "bitfit"
#: What refusing an answerable question costs against answering an unanswerable one, for both refusal cuts: the
#: issue allows false refusals of 0.03 and unanswerable questions answered of 0.03-0.05, and an unseen answerable
#: question about a thin corner of the corpus must not be refused for a cut fitted tightly to these.
FALSE_REFUSAL_COST = 3.0
#: How far each question's value is smeared, as a share of the values' standard deviation, when a cut is fitted.
CUT_BANDWIDTH = 0.05


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", _norm(text))


def evidence_match(sentence: str, evidence: list[str]) -> bool:
    """Does the candidate hold (or sit inside) an evidence sentence? Compared by word sequence and word
    overlap, since the index's text and the question writer's extraction differ in small ways."""
    cw = _words(sentence)
    cs, cj = set(cw), " ".join(cw)
    for e in evidence:
        ew = _words(e)
        ej = " ".join(ew)
        if ej and (ej in cj or (len(cw) >= 5 and cj in ej)):
            return True
        inter = len(cs & set(ew))
        if inter >= 4 and inter >= 0.7 * min(len(cs), len(set(ew))):
            return True
    return False


def states_keyword(text: str, keywords: list[str]) -> bool:
    t = _norm(text)
    return any(_norm(k) in t for k in keywords)


@dataclass
class Item:
    q: dict
    pool: Pool
    labels: np.ndarray
    evidence: np.ndarray  # per candidate: overlaps an evidence sentence
    absent: list[str]
    group: str
    near: float  # the question's nearness over the version's background (dmlqa.query.topic.nearness)
    vectors: np.ndarray  # the candidates' stored sentence vectors (what the question adapter is fitted on)


def _neighbours(version):  # noqa: ANN001, ANN202 - IndexVersion
    def neighbour(c: Candidate, step: int) -> Candidate | None:
        s = version.sentence_by_ordinal(c.doc_id, c.ordinal + step)
        if s is None:
            return None
        text, indent = unindented(s.text)
        return Candidate(c.hit, s.doc_id, s.ordinal, text, s.role, s.page, s.row, s.section, indent)
    return neighbour


def collect(kb: KnowledgeBase, questions: list[dict], cache: Path | None = None) -> list[Item]:
    """Each question's candidate pool, gathered as the answerer does (a follow-up with the question it
    follows), its labels, its group and its nearness; read from ``cache`` when it holds the same questions."""
    searcher = kb.asker.searcher
    version = searcher.pin()
    # read as the answerer reads them: a typo in a plain word corrected (none of bench/'s questions has one)
    questions = [dict(q, question=corrected(version, q["question"])[0]) for q in questions]
    pools, absent = _pools(searcher, version, questions, cache)
    cosines_of = functools.partial(candidate_cosines, searcher, version)
    return [_item(q, p, a, nearness(version, p.cosines, cosines_of),
                  version.sentence_vectors([c.row for c in p.candidates]) if p.candidates
                  else np.zeros((0, version.dim), np.float32))
            for q, p, a in zip(questions, pools, absent, strict=True)]


def follow_up_context(q: dict, by_id: dict[str, dict]) -> str | None:
    """The question a follow-up leans on (its ``previous``), as the answerer reads it with it; None for the rest."""
    before = by_id.get(q.get("previous") or "", {}).get("question")
    return before if before and is_follow_up(q["question"]) else None


def _pools(searcher, version, questions: list[dict], cache: Path | None) -> tuple[list[Pool], list[list[str]]]:  # noqa: ANN001
    """The questions' pools and the names the name check finds absent, from ``cache`` when it matches."""
    ids = [q["id"] for q in questions]
    if cache is not None and cache.exists():
        saved = pickle.loads(cache.read_bytes())
        if saved["ids"] == ids and saved["version"] == version.name and all(p.qvec is not None for p in saved["pools"]):
            pools = saved["pools"]
            for p in pools:
                p.neighbour = _neighbours(version)
                p.cosines_for = functools.partial(version.sentence_cosines, [c.row for c in p.candidates])
            # the name check is cheap and changes apart from the features: run it again (the pool's sources
            # begin with the retrieved passages it reads first; the names it reports do not depend on them)
            return pools, [[u.name for u in unknown_names(version, q["question"], p.sources)]
                           for q, p in zip(questions, pools, strict=True)]
    options = AskOptions(use_llm=False)
    by_id = {q["id"]: q for q in questions}
    pools, absent = [], []
    t0 = time.perf_counter()
    for n, q in enumerate(questions, 1):
        text = q["question"]
        context = follow_up_context(q, by_id)
        hits = retrieve(searcher, version, asked_text(text, context), options)
        absent.append([u.name for u in unknown_names(version, text, hits)])  # refused before the selector
        pools.append(gather(searcher, version, text, hits, options, previous=context))
        if n % 100 == 0:
            print(f"{n}/{len(questions)} questions gathered ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if cache is not None:
        kept = [dataclasses.replace(p, neighbour=None, cosines_for=None, vectors_for=None, adapted=None, _features=None)
                for p in pools]
        cache.write_bytes(pickle.dumps({"ids": ids, "version": version.name, "pools": kept, "absent": absent}))
    return pools, absent


def _item(q: dict, pool: Pool, absent: list[str], near: float, vectors: np.ndarray) -> Item:
    evidence = q.get("evidence") or []
    evidence = [evidence] if isinstance(evidence, str) else evidence  # dev.jsonl gives one sentence as a string
    ev = np.array([evidence_match(c.text, evidence) for c in pool.candidates], bool)
    kw = np.array([states_keyword(c.text, q.get("keywords") or []) for c in pool.candidates], bool)
    labels = (ev | kw) if q.get("answerable", True) else np.zeros(len(pool.candidates), bool)
    gold = q.get("gold_urls") or []
    group = normalize_url(gold[0]) if gold and q.get("answerable", True) else f"none:{q['id']}"
    return Item(q, pool, labels, ev, absent, group, near, vectors)


def _fits(it: Item) -> bool:
    """Is the question one the models are fitted on: answerable, with candidates to choose among?"""
    return it.q.get("answerable", True) and bool(len(it.pool.candidates))


def fit(items: list[Item], xs: list[np.ndarray]) -> Selector:
    """The sentence model, fitted on the answerable questions' candidates (``xs``: each one's feature matrix):
    which sentence answers is a choice within a question; whether to answer at all is the cuts' (their
    candidates are all negatives, and the easy ones of an off-topic question would teach the model about
    questions, not sentences)."""
    keep = [i for i, it in enumerate(items) if _fits(it)]
    x = np.vstack([xs[i] for i in keep])
    y = np.concatenate([items[i].labels for i in keep])
    scaler = StandardScaler().fit(x)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    model = LogisticRegression(C=C, max_iter=5000)
    model.fit((x - scaler.mean_) / scale, y)
    return Selector(FEATURES, scaler.mean_, scale, model.coef_[0], float(model.intercept_[0]), 0.0, 0.5)


def compact_lists(text: str) -> str:
    """Indented JSON with each list of numbers on one line: the adapter's 384 x 32 numbers would take a line
    each, and a refit's diff shows which weights moved either way."""
    return re.sub(r"\[\s+([-0-9.e,\s]+?)\s+\]", lambda m: "[" + " ".join(m[1].split()) + "]", text)


def _question(it: Item) -> np.ndarray:
    return it.pool.qvec


def _stored(it: Item) -> np.ndarray:
    return it.vectors


#: What an adapter reads of an item: the question's vector, or its candidates' vectors (one row each).
Vectors = Callable[[Item], np.ndarray]


def fit_items(items: list[Item], question: Vectors = _question, vectors: Vectors = _stored) -> tuple[np.ndarray,
                                                                                                       np.ndarray]:
    """The question adapter fitted on the answerable ones of ``items`` (bench/question_adapter.py); by default on
    the embedder's own vectors (another encoder's for bench/encoder_features.py)."""
    keep = [it for it in items if _fits(it)]
    return fit_adapter([question(it) for it in keep], [vectors(it) for it in keep], [it.labels for it in keep])


def cross_fitted(items: list[Item], idx: list[int], question: Vectors = _question,
                 vectors: Vectors = _stored) -> dict[int, np.ndarray]:
    """For each item of ``idx``, its candidates' cosines with the question turned by an adapter fitted on the
    other folds of ``idx`` (grouped by gold document): the LR learns how far to trust the adapted cosine
    from questions the adapter did not see, as every question it answers will be."""
    out: dict[int, np.ndarray] = {}
    split = GroupKFold(n_splits=ADAPTER_FOLDS).split(np.zeros(len(idx)), groups=[items[i].group for i in idx])
    for train, test in split:
        u, v = fit_items([items[idx[j]] for j in train], question, vectors)
        for j in test:
            it = items[idx[j]]
            out[idx[j]] = adapted_cosines(u, v, question(it), vectors(it))
    return out


def with_asked(features: np.ndarray, tuned: np.ndarray, adapted: np.ndarray) -> np.ndarray:
    """A feature matrix with its tuned and adapted columns measured with ``tuned`` and ``adapted`` cosines."""
    return np.hstack([features[:, : -len(ASKED)], asked_columns(tuned, adapted)]) if len(features) else features


def asked_texts(items: list[Item]) -> dict[str, str]:
    """What the answerer embeds for each question, by id: a follow-up after the question it follows (``collect``)."""
    by_id = {it.q["id"]: it.q for it in items}
    return {it.q["id"]: asked_text(it.q["question"], follow_up_context(it.q, by_id)) for it in items}


def tune(kb: KnowledgeBase, items: list[Item], text: dict[str, str], bert, tokenizer) -> QuestionTuning:  # noqa: ANN001
    """The question encoder's tuning (bench/question_tuning.py, BitFit) fitted on the answerable ones of ``items``."""
    import question_tuning as qt

    keep = [it for it in items if _fits(it)]
    tuned = qt.tune(bert, tokenizer, [text[it.q["id"]] for it in keep], [it.vectors for it in keep],
                    [it.labels for it in keep], mode=TUNING)
    return QuestionTuning(kb.asker.searcher.pin().meta["model"], qt.deltas(tuned, bert))


def tuned_questions(kb: KnowledgeBase, items: list[Item], text: dict[str, str], workdir: Path,
                    cache: Path | None) -> tuple[dict[int, np.ndarray], QuestionTuning]:
    """Each item's question vector by the tuned question encoder fitted on the other ADAPTER_FOLDS folds (grouped
    by gold document), run as the answerer runs it (:func:`dmlqa.query.tuning.question_encoder`, the index's
    encoder kind); and the tuning fitted on all of them, which ships. Kept in ``cache`` for the same questions.

    Not nested inside the LR's folds as the adapter is: that would be 25 fits (~25 min on 2 cores) where this is
    five. A training question's vector still comes from a tuning that never saw its document; the held-out set
    and dev, which no fit saw, are scored through the shipped tuning."""
    ids = [it.q["id"] for it in items]
    if cache is not None and cache.exists():
        saved = pickle.loads(cache.read_bytes())
        if saved["ids"] == ids and saved["mode"] == TUNING and saved["version"] == kb.asker.searcher.pin().name:
            return saved["vectors"], QuestionTuning.from_json(saved["tuning"])
    import question_tuning as qt

    version = kb.asker.searcher.pin()
    bert, tokenizer = qt.load_bert(str(model_dir(version.meta["model"])))
    out: dict[int, np.ndarray] = {}
    t0 = time.perf_counter()
    split = GroupKFold(n_splits=ADAPTER_FOLDS).split(np.zeros(len(items)), groups=[it.group for it in items])
    for fit_on, scored in split:
        tuning = tune(kb, [items[i] for i in fit_on], text, bert, tokenizer)
        encoder = question_encoder(tuning, version.meta["encoder"], workdir)
        out.update(zip(scored.tolist(), encoder.encode([text[ids[i]] for i in scored]), strict=True))
        print(f"question encoder tuned on {len(fit_on)} questions ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    tuning = tune(kb, items, text, bert, tokenizer)
    if cache is not None:
        cache.write_bytes(pickle.dumps({"ids": ids, "mode": TUNING, "version": version.name, "vectors": out,
                                        "tuning": tuning.to_json()}))
    return out, tuning


def fold_features(items: list[Item], base: list[np.ndarray], tuned: list[np.ndarray], train: Sequence[int],
                  test: Sequence[int]) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """One cross-validation fold's feature matrices, by item: the training questions' with adapted cosines
    cross-fitted within the fold (nested: the LR learns how far to trust them from questions their adapter did not
    see), the test questions' with the adapter fitted on the whole training part."""
    inner = cross_fitted(items, list(train))
    u, v = fit_items([items[i] for i in train])
    return ({int(i): with_asked(base[i], tuned[i], inner[i]) for i in train},
            {int(i): with_asked(base[i], tuned[i], adapted_cosines(u, v, items[i].pool.qvec, items[i].vectors))
             for i in test})


class Setting(NamedTuple):
    """How an answer is written from its sentences' scores (:func:`dmlqa.query.quotes.choose`): the grid's axes, in
    the order the results name them. Passed whole, so that a script scoring answers cannot drop one by position."""

    add_above: float
    max_words: int
    read_on: int
    diversity: float = 0.0
    focus: float = 0.0

    @classmethod
    def of(cls, selector: Selector) -> Setting:
        """The setting a fitted selector answers with."""
        return cls(selector.add_above, selector.max_words, selector.read_on, selector.diversity, selector.focus)


def settings_grid(items: list[Item], scores: list[np.ndarray], refuse_below: float,
                  topic_cut: float) -> dict[Setting, dict]:
    """The answers' scores at every setting of the grid."""
    grid = (Setting(a, w, r, d, f) for a in ADD_GRID for w in WORDS_GRID for r in READ_ON_GRID
            for d in DIVERSITY_GRID for f in FOCUS_GRID)
    return {k: evaluate(items, scores, k, refuse_below, topic_cut) for k in grid}


def pick_setting(grid: dict[Setting, dict]) -> Setting:
    """The grid's choice: among the settings whose median answer is at most MAX_MEDIAN_WORDS, those stating a key
    term within ADD_TOLERANCE of the best, the shortest budget, highest cut, most focus, least reading on and least
    diversity."""
    ok = [k for k in grid if grid[k]["median_words"] <= MAX_MEDIAN_WORDS] or [
        Setting(max(ADD_GRID), min(WORDS_GRID), 0, 0.0, max(FOCUS_GRID))]
    top = max(grid[k]["key_term_stated"] for k in ok)
    return min((k for k in ok if grid[k]["key_term_stated"] >= top - ADD_TOLERANCE),
               key=lambda k: (k.max_words, -k.add_above, -k.focus, k.read_on, k.diversity))


def answer_text(it: Item, scores: np.ndarray, setting: Setting) -> tuple[str, int, set[str]]:
    """The answer's text, its length in words and the (normalised) addresses it cites."""
    chosen = choose(it.q["question"], it.pool.candidates, scores, neighbour=it.pool.neighbour,
                    **setting._asdict(), vectors=it.vectors.__getitem__, titles=it.pool.titles)
    if not chosen:
        return "", 0, set()
    body, citations = compose(chosen, it.pool.sources, question=it.q["question"])
    return body, answer_words(body), {normalize_url(c.url) for c in citations}


def gold_sources(it: Item) -> set[str]:
    """The addresses whose citation counts as citing the gold source: the gold URLs, and every
    document of the pool holding an evidence sentence (the training set lists one record of a work
    where an arXiv and a proceedings copy, or a landing page and its PDF, say the same)."""
    gold = {normalize_url(u) for u in it.q.get("gold_urls") or []}
    url = {h.doc_id: h.url for h in reversed(it.pool.sources)}
    return gold | {normalize_url(url[c.doc_id]) for c, e in zip(it.pool.candidates, it.evidence, strict=True)
                   if e and c.doc_id in url}


def evaluate(items: list[Item], scores: list[np.ndarray], setting: Setting, refuse_below: float,
             topic_cut: float) -> dict:
    """The answers' scores: key term stated, keyword share, refusals, median length, gold cited, best sentence."""
    stated, kw_share, words, refused_ans, refused_un, top1, cited = [], [], [], [], [], [], []
    for it, s in zip(items, scores, strict=True):
        best = float(s.max()) if len(s) else 0.0
        body, n_words, urls = answer_text(it, s, setting) if len(s) else ("", 0, set())
        refused = not body or best < refuse_below or bool(it.absent) or off_topic(it, topic_cut)
        if not it.q.get("answerable", True):
            refused_un.append(refused)
            continue
        refused_ans.append(refused)
        if len(s):
            top1.append(bool(it.labels[int(np.argmax(s))]))
        kws = it.q.get("keywords") or []
        text = "" if refused else _norm(body)
        stated.append(any(_norm(k) in text for k in kws))
        kw_share.append(sum(_norm(k) in text for k in kws) / len(kws) if kws else 0.0)
        cited.append(not refused and bool(urls & gold_sources(it)))
        if not refused:
            words.append(n_words)
    def share(flags: list) -> float | None:  # None where there is nothing to count (no answerable question)
        return round(statistics.mean(flags), 4) if flags else None

    return {
        "key_term_stated": share(stated),
        "keyword_hit_rate": share(kw_share),
        "refusal_accuracy": share(refused_un),
        "false_refusal_rate": share(refused_ans),
        "median_words": statistics.median(words) if words else 0,
        "gold_cited": share(cited),
        "top1_positive": share(top1),
    }


def best_cut(best: list[tuple[float, bool]], false_refusal_cost: float = FALSE_REFUSAL_COST) -> float:
    """The value under which a question is refused, from (its best value, answerable) pairs: the cut making
    the fewest mistakes (answerable questions refused, each costing ``false_refusal_cost``, plus
    unanswerable ones answered), each question's value smeared by CUT_BANDWIDTH of the values' spread.

    Counted hard, the fewest mistakes may sit in a gap a few thousandths wide between one unanswerable
    question and the lowest answerable ones; a refit's or another question set's small shifts of the
    values cross such a cut (one fitted so refused two of the validation set's answerable questions). Smeared,
    a cut pays for every question near it, so it settles where few questions of either kind are."""
    if not best:
        return 0.0
    values = np.array([b for b, _ in best], np.float64)
    answerable = np.array([a for _, a in best], bool)
    width = max(CUT_BANDWIDTH * float(values.std()), 1e-9)
    ordered = np.unique(values)
    below_all = min(0.0, float(ordered[0]) - 1e-6)  # 0 for a probability; a nearness may be negative
    cuts = np.concatenate([[below_all], (ordered[:-1] + ordered[1:]) / 2])  # then between neighbours
    erf = np.vectorize(math.erf)
    refused = 0.5 * (1.0 + erf((cuts[:, None] - values[None, :]) / (width * math.sqrt(2.0))))  # P(value < cut)
    mistakes = np.where(answerable[None, :], false_refusal_cost * refused, 1.0 - refused).sum(axis=1)
    return float(cuts[int(np.argmin(mistakes))])


def off_topic_cut(items: list[Item]) -> float:
    """The nearness (:func:`dmlqa.query.topic.nearness`) under which a question is off-topic, fitted on the
    questions the name check lets through: off-topic ones ("who won the world cup?") name nothing the check
    could miss, and every sentence they meet shares a word with them at best. A false refusal costs FALSE_REFUSAL_COST
    mistakes."""
    return best_cut([(it.near, it.q.get("answerable", True)) for it in items
                     if not it.absent and len(it.pool.candidates)])


def off_topic(it: Item, cut: float) -> bool:
    return bool(len(it.pool.cosines)) and it.near < cut


def refuse_cut(items: list[Item], scores: list[np.ndarray], topic_cut: float) -> float:
    """The best-sentence probability under which an answer is refused, among the questions the name
    check and the off-topic cut let through (:func:`best_cut`).

    Unanswerable questions are nearly all refused by name or as off-topic before; a cut fitted to refuse
    a share of the answerable ones (as one was) refuses those and nothing else."""
    return best_cut([(float(s.max()) if len(s) else 0.0, it.q.get("answerable", True))
                     for it, s in zip(items, scores, strict=True) if not it.absent and not off_topic(it, topic_cut)])


def _questions(path: Path) -> list[dict]:
    """The questions of a JSON Lines file, one object a line (blank lines skipped)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def question_set(pattern: str) -> list[dict]:
    """The questions of every JSON Lines file ``pattern`` matches, in the files' numbered order (none for "")."""
    return [q for f in sorted(glob.glob(pattern), key=_numbered) for q in _questions(Path(f))]


def _numbered(name: str) -> list:
    """A file name's sort key with its numbers as numbers: questions-10 after questions-9."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, help="a built home over the snapshot (bench/build_snapshot.py)")
    ap.add_argument("--questions", default=str(ROOT / "bench/train/questions-*.jsonl"), help="glob of JSONL files")
    ap.add_argument("--out", default=str(ROOT / "src/dmlqa/query/selector.json"))
    ap.add_argument("--results", default=str(ROOT / "bench/results/selector.json"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions (a quick trial)")
    ap.add_argument("--cache", type=Path, help="keep the gathered candidates here, and reuse them when they match")
    ap.add_argument("--validate", type=Path, help="a validation set (dev.jsonl) scored beside the cross-validation")
    ap.add_argument("--heldout", default=str(ROOT / "bench/heldout/questions-*.jsonl"),
                    help="glob of held-out training-style questions, scored and never fitted on ('' for none)")
    ap.add_argument("--unseen", default=str(ROOT / "bench/unseen/questions-*.jsonl"),
                    help="glob of a second held-out set, whose misses no rule was changed for ('' for none)")
    args = ap.parse_args()
    # in the files' numbered order: questions-10 after questions-9
    files = sorted(glob.glob(args.questions), key=_numbered)
    if any(Path(f).name == "dev.jsonl" for f in files):
        sys.exit("dev.jsonl is for validation only: the selector is never fitted on it")
    sourced = [(Path(f).name, q) for f in files for q in _questions(Path(f))]
    if args.limit:
        sourced = sourced[:: max(1, len(sourced) // args.limit)][: args.limit]
    questions = [q for _, q in sourced]
    kb = KnowledgeBase(args.home)
    items = collect(kb, questions, args.cache)

    version = kb.asker.searcher.pin()
    model, encoder_kind = version.meta["model"], version.meta["encoder"]
    # the fold encoders' model folders and ONNX exports (~200 MB each): not the user's encoder cache
    workdir = Path(tempfile.mkdtemp(prefix="dmlqa-tuned-"))
    tuned_q, tuning = tuned_questions(kb, items, asked_texts(items), workdir,
                                      args.cache.with_suffix(".tuned" + args.cache.suffix) if args.cache else None)
    tuned = [it.vectors @ tuned_q[i] if len(it.pool.candidates) else np.zeros(0, np.float32)
             for i, it in enumerate(items)]

    groups = [it.group for it in items]
    oof: list[np.ndarray] = [np.zeros(0)] * len(items)
    folds = list(GroupKFold(n_splits=FOLDS).split(np.zeros(len(items)), groups=groups))
    base = [it.pool.features for it in items]
    t0 = time.perf_counter()
    for train, test in folds:
        xtrain, xtest = fold_features(items, base, tuned, train, test)
        sel = fit([items[i] for i in train], [xtrain[i] for i in train])
        for i in test:
            oof[i] = sel.scores(xtest[i])
    print(f"cross-validated with question adapters ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    topic_cut = off_topic_cut(items)
    refuse_below = refuse_cut(items, oof, topic_cut)
    grid = settings_grid(items, oof, refuse_below, topic_cut)
    setting = pick_setting(grid)

    answerable = [it for it in items if it.q.get("answerable", True) and it.q.get("evidence")]
    answering = [it for it in items if _fits(it)]
    in_passages = [bool(np.any(it.evidence & np.array([c.hit is not None for c in it.pool.candidates], bool)))
                   if len(it.evidence) else False for it in answerable]
    in_pool = [bool(np.any(it.evidence)) for it in answerable]

    whole = cross_fitted(items, list(range(len(items))))
    final = fit(items, [with_asked(base[i], tuned[i], whole[i]) for i in range(len(items))])
    u, v = fit_items(items)
    final = Selector(final.features, final.mean, final.scale, final.coef, final.intercept, refuse_below=refuse_below,
                     off_topic_margin=topic_cut, adapter_u=u, adapter_v=v, adapter_model=model, tuning=tuning,
                     **setting._asdict())
    Path(args.out).write_text(compact_lists(json.dumps(final.to_json(), indent=1)) + "\n", encoding="utf-8")
    # the held-apart sets' questions as the answerer reads them: by the tuning that ships, run as it runs
    shipped_encoder = question_encoder(tuning, encoder_kind, workdir)

    def scores_of(its: list[Item]) -> list[np.ndarray]:
        text = asked_texts(its)
        return [final.score_pool(it.pool, model, shipped_encoder.encode([text[it.q["id"]]])[0]) for it in its]
    validation = None
    if args.validate:  # scored only: nothing above saw these questions
        held = _questions(args.validate)
        cache = args.cache.with_suffix(".validate" + args.cache.suffix) if args.cache else None
        vitems = collect(kb, held, cache)
        validation = evaluate(vitems, scores_of(vitems), setting, refuse_below, topic_cut)
        validation.pop("top1_positive")  # its labels need evidence sentences, which a validation set lacks
        validation.pop("gold_cited")  # dmlqa eval's citation_hit_rate is the measure there (gold URLs only)
    def held_apart(pattern: str, suffix: str) -> dict | None:  # scored only, as the validation set
        held_files = sorted(glob.glob(pattern), key=_numbered) if pattern else []
        if not held_files:
            return None
        hq = [q for f in held_files for q in _questions(Path(f))]
        cache = args.cache.with_suffix(f".{suffix}" + args.cache.suffix) if args.cache else None
        hitems = collect(kb, hq, cache)
        hscores = scores_of(hitems)

        def scored(keep: Callable[[dict], bool]) -> dict:
            chosen = [i for i, it in enumerate(hitems) if keep(it.q)]
            return evaluate([hitems[i] for i in chosen], [hscores[i] for i in chosen], setting, refuse_below,
                            topic_cut)
        return {"files": [Path(f).name for f in held_files], "questions": len(hitems),
                "answerable": sum(1 for q in hq if q.get("answerable", True)), **scored(lambda q: True),
                "key_term_stated_by_kind": {kind: scored(lambda q, k=kind: q.get("kind") == k)["key_term_stated"]
                                            for kind in dict.fromkeys(q.get("kind") for q in hq
                                                                      if q.get("answerable", True))},
                "refusal_by_kind": {kind: scored(lambda q, k=kind: q.get("kind") == k)["refusal_accuracy"]
                                    for kind in dict.fromkeys(q.get("kind") for q in hq
                                                              if not q.get("answerable", True))}}
    heldout = held_apart(args.heldout, "heldout")  # the fit above read none of these
    unseen = held_apart(args.unseen, "unseen")  # nor these, and no rule was changed for their misses
    results = {
        "questions": len(items),
        "answerable": sum(1 for it in items if it.q.get("answerable", True)),
        "files": [str(Path(f).relative_to(ROOT)) if Path(f).is_relative_to(ROOT) else f for f in files],
        "folds": FOLDS,
        "evidence_among_candidates": {"passages_only": round(statistics.mean(in_passages), 4),
                                      "with_sentence_index": round(statistics.mean(in_pool), 4),
                                      "questions": len(answerable)},
        "positives_per_question": round(statistics.mean(float(it.labels.sum()) for it in items), 2),
        # how often the best sentence by cosine answers, with the question as it is and turned by an adapter
        # not fitted on it (the final fit's cross-fitted cosines)
        "best_by_cosine_answers": {
            "question": round(statistics.mean(bool(it.labels[int(np.argmax(it.pool.cosines))]) for it in answering), 4),
            "adapted_question": round(statistics.mean(bool(it.labels[int(np.argmax(whole[i]))])
                                                      for i, it in enumerate(items) if it in answering), 4),
            "tuned_question": round(statistics.mean(bool(it.labels[int(np.argmax(tuned[i]))])
                                                    for i, it in enumerate(items) if it in answering), 4),
            "adapter": {"rank": RANK, "penalty": PENALTY, "steps": STEPS},
            "tuning": {"mode": TUNING, "parameters": tuning.size, "epochs": EPOCHS,
                       "learning_rate": LEARNING_RATE[TUNING]}},
        **setting._asdict(),
        "refuse_below": round(refuse_below, 4),
        "off_topic_margin": round(topic_cut, 4),
        "cross_validation": grid[setting],
        # the spread a held-apart set of this size may show: each fold's questions scored alone
        "key_term_stated_by_fold": [evaluate([items[i] for i in test], [oof[i] for i in test], setting, refuse_below,
                                             topic_cut)["key_term_stated"] for _, test in folds],
        # each file's questions alone (files written later ask other things: facts deep in a paper's body)
        "key_term_stated_by_file": {name: evaluate(
            [items[i] for i, (f, _) in enumerate(sourced) if f == name], [oof[i] for i, (f, _) in enumerate(sourced)
                                                                         if f == name],
            setting, refuse_below, topic_cut)["key_term_stated"]
            for name in dict.fromkeys(f for f, q in sourced if q.get("answerable", True))},
        "validation": {"file": args.validate.name, **validation} if validation else None,
        "heldout": heldout,
        "unseen": unseen,
        "cross_validation_by_add_above_max_words_read_on_diversity_focus": {" ".join(map(str, k)): v
                                                                            for k, v in grid.items()},
        "weights": dict(zip(FEATURES, [round(float(c), 4) for c in final.coef], strict=True)),
    }
    Path(args.results).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    shown = ("evidence_among_candidates", "add_above", "max_words", "read_on", "diversity", "focus", "refuse_below",
             "off_topic_margin",
             "cross_validation",
             "validation", "heldout", "unseen")
    print(json.dumps({k: results[k] for k in shown}, indent=1))
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
