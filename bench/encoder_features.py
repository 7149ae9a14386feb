"""Would a second dense look at each candidate sentence make the answer's sentence selector better?

    .venv/bin/python bench/encoder_features.py --home /tmp/snaphome --cache /tmp/ts.pkl --model /tmp/all-mpnet-base-v2
    .venv/bin/python bench/encoder_features.py --home /tmp/snaphome --cache /tmp/ts.pkl --context
    .venv/bin/python bench/encoder_features.py --home /tmp/snaphome --cache /tmp/ts.pkl --tune full --vectors /tmp/q.pkl

The selector's dense signals are the bundled MiniLM's cosine of the question with the bare sentence, and that
cosine with the question turned by its adapter. This adds another look as two more features (the cosine and its
gap to the best among the question's candidates), optionally with a question adapter of its own fitted as the
shipped one is (two more):

* ``--model``: another sentence-transformers model (a local path or a name), reading the question and each
  candidate. all-mpnet-base-v2 (110 M parameters against MiniLM's 23 M) is the one a user could have offline;
* ``--context``: the home's own encoder reading each candidate under its document title and section, as the
  passages are embedded (:func:`dmlqa.index.writer.dense_text`).
* ``--tune full|bitfit``: the home's own encoder with its question side fine-tuned on the training pools
  (``question_tuning.py``; every weight, or only biases and layer norms), the candidates keeping their stored
  vectors. A training question is read by a copy tuned on the other adapter folds, the rest by one tuned on all
  of them (the five fits take ~6 min on 2 cores for ``full``, ~4 for ``bitfit``; the whole run ~18 and ~12).

The baseline is the shipped features with the tuned question encoder's columns measured with the question as
it is (the selector before the tuning shipped): ``--tune bitfit`` is what ``train_selector.py`` now ships.
The logistic regression is cross-validated on ``bench/train/`` (five folds grouped by gold document; the shipped
adapter's columns cross-fitted once over all the training questions), then fitted on all of them and scored on
``bench/heldout/`` and ``--validate`` (dev.jsonl), without and with the new columns, at the shipped selector's
settings. ``bench/unseen/`` is not scored: no trial is chosen on it. The pools come from ``train_selector.py``'s
``--cache`` (made when missing); the vectors are kept in ``--vectors`` (encoding every candidate with
all-mpnet-base-v2 takes ~12 min on 2 cores). Results are merged into ``bench/results/encoder_features.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_selector as ts  # noqa: E402 - the selector's own pools, folds and answer scoring

from dmlqa.api import KnowledgeBase  # noqa: E402
from dmlqa.index.embed import model_dir  # noqa: E402
from dmlqa.query.selector import load_selector  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def load(kb: KnowledgeBase, pattern: str, cache: Path | None) -> list[ts.Item]:
    return ts.collect(kb, ts.question_set(pattern), cache)


def encode_all(texts: list[str], encode, store: Path | None) -> dict[str, np.ndarray]:  # noqa: ANN001
    """Vectors of ``texts`` (normalised), from ``store`` where it has them."""
    have: dict[str, np.ndarray] = pickle.loads(store.read_bytes()) if store and store.exists() else {}
    todo = sorted({t for t in texts if t not in have}, key=len)
    if todo:
        t0 = time.perf_counter()
        vecs = np.asarray(encode(todo), np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        have.update(zip(todo, vecs, strict=True))
        print(f"encoded {len(todo)} texts in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if store:
            store.write_bytes(pickle.dumps(have))
    return have


def tuned_questions(kb: KnowledgeBase, train: list[ts.Item], rest: list[ts.Item], mode: str,
                    store: Path | None, seed: int = 0) -> dict[str, np.ndarray]:
    """Each question's vector from the encoder with its question side fine-tuned (``question_tuning.py``): for a
    training question, by a copy tuned on the other adapter folds (grouped by gold document); for the rest, by
    one tuned on all of them. Kept in ``store``, by question id, with the mode and seed they were tuned with (a
    store from another tuning is tuned over)."""
    tuning = {"mode": mode, "seed": seed}
    if store and store.exists():
        saved = pickle.loads(store.read_bytes())
        if saved.get("tuning") == tuning:
            return saved["vectors"]
    import question_tuning as qt

    bert, tokenizer = qt.load_bert(str(model_dir(kb.settings.embed.model)))
    text = ts.asked_texts(train + rest)

    def fitted(items: list[ts.Item]):  # noqa: ANN202 - a BertModel
        keep = [it for it in items if ts._fits(it)]
        return qt.tune(bert, tokenizer, [text[it.q["id"]] for it in keep], [it.vectors for it in keep],
                       [it.labels for it in keep], mode=mode, seed=seed)

    out: dict[str, np.ndarray] = {}
    t0 = time.perf_counter()
    split = GroupKFold(n_splits=ts.ADAPTER_FOLDS).split(np.zeros(len(train)), groups=[it.group for it in train])
    for fit_on, scored in [([train[i] for i in a], [train[i] for i in b]) for a, b in split] + [(train, rest)]:
        model = fitted(fit_on)
        out.update(zip([it.q["id"] for it in scored],
                       qt.vectors_of(model, tokenizer, [text[it.q["id"]] for it in scored]), strict=True))
        print(f"tuned on {len(fit_on)} questions ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if store:
        store.write_bytes(pickle.dumps({"tuning": tuning, "vectors": out}))
    return out


def columns(c: np.ndarray) -> np.ndarray:
    return np.stack([c, c - c.max()], 1).astype(np.float32) if len(c) else np.zeros((0, 2), np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, help="a built home over the snapshot (bench/build_snapshot.py)")
    ap.add_argument("--cache", type=Path, required=True, help="train_selector.py's pool cache (made when missing)")
    look = ap.add_mutually_exclusive_group(required=True)
    look.add_argument("--model", help="another sentence-transformers model: a local path or a name")
    look.add_argument("--context", action="store_true", help="the home's encoder on title, section and sentence")
    look.add_argument("--tune", choices=("full", "bitfit"),
                      help="the home's encoder with its question side fine-tuned on the training pools")
    ap.add_argument("--seed", type=int, default=0, help="--tune: the fine-tuning's seed (its batches' order)")
    ap.add_argument("--vectors", type=Path, help="keep the encoded texts here, and reuse them")
    ap.add_argument("--validate", type=Path, default=ROOT.parent / "shared/eval/dev.jsonl")
    ap.add_argument("--results", type=Path, default=ROOT / "bench/results/encoder_features.json")
    args = ap.parse_args()

    kb = KnowledgeBase(args.home)
    version = kb.asker.searcher.pin()
    train = load(kb, str(ROOT / "bench/train/questions-*.jsonl"), args.cache)
    held = load(kb, str(ROOT / "bench/heldout/questions-*.jsonl"), args.cache.with_suffix(".heldout.pkl"))
    dev = ts.collect(kb, ts._questions(args.validate), args.cache.with_suffix(".validate.pkl")) \
        if args.validate.exists() else []
    items = train + held + dev

    if args.context:
        from dmlqa.index.writer import dense_text
        from dmlqa.pipeline.stages import encoder_for

        encoder = encoder_for(kb.settings)
        text = {(c.doc_id, c.text): dense_text(version.docs[c.doc_id].title or "", c.section, c.text)
                for it in items for c in it.pool.candidates}
        vectors = encode_all(list(text.values()), encoder.encode, args.vectors)
        label = "context"

        def question(it: ts.Item) -> np.ndarray:
            return it.pool.qvec
    elif args.tune:
        tuned = tuned_questions(kb, train, held + dev, args.tune, args.vectors, args.seed)
        label = f"tuned:{args.tune}" + (f":seed{args.seed}" if args.seed else "")

        def question(it: ts.Item) -> np.ndarray:
            return tuned[it.q["id"]]
    else:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(args.model, device="cpu")
        text = {(c.doc_id, c.text): c.text for it in items for c in it.pool.candidates}
        vectors = encode_all(list(text.values()) + [it.q["question"] for it in items],
                             lambda t: model.encode(t, batch_size=32), args.vectors)
        label = f"model:{Path(args.model).name}"

        def question(it: ts.Item) -> np.ndarray:
            return vectors[it.q["question"]]

    def cand(it: ts.Item) -> np.ndarray:  # one row per candidate, none for a question without any
        if args.tune:
            return it.vectors  # the question alone is read anew: the candidates keep the index's vectors
        rows = [vectors[text[(c.doc_id, c.text)]] for c in it.pool.candidates]
        return np.array(rows, np.float32).reshape(len(rows), len(question(it)))

    shipped = load_selector(ROOT / "src/dmlqa/query/selector.json")
    idx = list(range(len(train)))
    whole = ts.cross_fitted(train, idx)  # the shipped adapter's columns, cross-fitted once
    u, v = ts.fit_items(train)

    # the new look's cosines with the question turned by an adapter of its own, fitted as the shipped one is: out of
    # fold for the training questions, on all of them for the rest
    oof_adapted = ts.cross_fitted(train, idx, question, cand)
    a, b = ts.fit_items(train, question, cand)
    fitted_adapted = {id(it): ts.adapted_cosines(a, b, question(it), cand(it)) for it in held + dev}

    def extra(it: ts.Item, i: int | None, adapted: bool) -> np.ndarray:
        if not len(it.pool.candidates):
            return np.zeros((0, 4 if adapted else 2), np.float32)
        cols = [columns(cand(it) @ question(it))]
        if adapted:
            cols.append(columns(oof_adapted[i] if i is not None else fitted_adapted[id(it)]))
        return np.hstack(cols)

    def score(items_: list[ts.Item], scores: list[np.ndarray]) -> dict:
        r = ts.evaluate(items_, scores, ts.Setting.of(shipped), 0.0, shipped.off_topic_margin)
        return {k: r[k] for k in ("key_term_stated", "top1_positive", "median_words") if k in r}

    def trial(columns_: int) -> dict:
        def x_of(it: ts.Item, i: int | None, adapted: np.ndarray) -> np.ndarray:
            base = ts.with_asked(it.pool.features, it.pool.cosines, adapted)  # no tuned question: its columns plain
            return base if columns_ == 0 else np.hstack([base, extra(it, i, columns_ == 4)])
        xs = [x_of(it, i, whole[i]) for i, it in enumerate(train)]
        oof = [np.zeros(0)] * len(train)
        for tr, te in GroupKFold(ts.FOLDS).split(np.zeros(len(train)), groups=[it.group for it in train]):
            sel = ts.fit([train[i] for i in tr], [xs[i] for i in tr])
            for i in te:
                oof[i] = sel.scores(xs[i]) if len(xs[i]) else np.zeros(0)
        sel = ts.fit(train, xs)

        def scored(its: list[ts.Item]) -> list[np.ndarray]:
            return [sel.scores(x_of(it, None, ts.adapted_cosines(u, v, it.pool.qvec, it.vectors)))
                    if len(it.pool.candidates) else np.zeros(0) for it in its]
        return {"cross_validation": score(train, oof), "heldout": score(held, scored(held)),
                "validation": score(dev, scored(dev)) if dev else None,
                "new_weights": [round(float(c), 3) for c in sel.coef[len(ts.FEATURES):]]}

    runs = {"baseline": trial(0), label: trial(2), f"{label}+adapter": trial(4)}
    results = json.loads(args.results.read_text()) if args.results.exists() else {}
    results.update(runs)
    args.results.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
