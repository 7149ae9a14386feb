"""The selector's tuned question encoder (:mod:`dmlqa.query.tuning`): its weights file, the model folder it is
written as, the encoder that runs it, and the features it gives, on models and pools made here."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from benchload import bench_script
from safetensors.numpy import load_file, save_file

from dmlqa.extract.sentences import PROSE
from dmlqa.index.embed import load_encoder, model_dir
from dmlqa.query.extractive import Candidate, Pool
from dmlqa.query.features import FEATURES, Place, QuestionFacts
from dmlqa.query.search import Searcher
from dmlqa.query.selector import default_selector, load_selector
from dmlqa.query.tuning import QuestionTuning, TuningError, materialise, prepare, question_encoder
from dmlqa.settings import BUNDLED_MODEL, load_settings


def _tiny_model(path: Path) -> Path:
    """A model folder as materialise reads one: weights, a tokenizer and a pooling folder."""
    path.mkdir()
    save_file({"layer.bias": np.zeros(3, np.float32), "layer.weight": np.ones((2, 3), np.float32)},
              str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "tokenizer.json").write_text("{}", encoding="utf-8")
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}', encoding="utf-8")
    return path


def test_a_tuning_round_trips_and_its_digest_follows_its_numbers() -> None:
    t = QuestionTuning("m", {"a.bias": np.array([0.1, -0.2], np.float32)})
    again = QuestionTuning.from_json(json.loads(json.dumps(t.to_json())))
    assert again.model == "m" and again.deltas["a.bias"] == pytest.approx([0.1, -0.2]) and again.size == 2
    assert again.digest == t.digest
    assert QuestionTuning("m", {"a.bias": np.array([0.1, -0.3], np.float32)}).digest != t.digest
    assert QuestionTuning("other", t.deltas).digest != t.digest
    with pytest.raises(ValueError, match="lists of numbers"):
        QuestionTuning.from_json({"model": "m", "deltas": {}})
    with pytest.raises(ValueError, match="lists of numbers"):
        QuestionTuning.from_json({"model": "m", "deltas": {"w": [[1.0, 2.0]]}})


def test_materialise_writes_the_model_with_the_deltas_added_once(tmp_path: Path) -> None:
    base = _tiny_model(tmp_path / "base")
    tuning = QuestionTuning("m", {"layer.bias": np.array([1.0, 2.0, 3.0], np.float32),
                                  "layer.weight": np.full(6, 0.5, np.float32)})
    folder = materialise(tuning, base, tmp_path / "cache")
    weights = load_file(str(folder / "model.safetensors"))
    assert weights["layer.bias"].tolist() == [1.0, 2.0, 3.0]
    assert weights["layer.weight"].shape == (2, 3) and np.all(weights["layer.weight"] == 1.5)  # flat, reshaped
    assert (folder / "tokenizer.json").is_file() and (folder / "1_Pooling" / "config.json").is_file()
    assert load_file(str(base / "model.safetensors"))["layer.bias"].tolist() == [0.0, 0.0, 0.0]  # base untouched
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert materialise(tuning, base, tmp_path / "cache") == folder  # written once, then reused
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [folder.name]  # no temporary folder left


def test_a_tuning_for_other_weights_is_refused_by_name(tmp_path: Path) -> None:
    base = _tiny_model(tmp_path / "base")
    with pytest.raises(TuningError, match="'layer.gamma' is missing"):
        materialise(QuestionTuning("m", {"layer.gamma": np.zeros(3, np.float32)}), base, tmp_path / "cache")
    with pytest.raises(TuningError, match="of 3 numbers, not 4"):
        materialise(QuestionTuning("m", {"layer.bias": np.zeros(4, np.float32)}), base, tmp_path / "cache")
    (base / "model.safetensors").unlink()
    with pytest.raises(TuningError, match="has no model.safetensors"):
        materialise(QuestionTuning("m", {"layer.bias": np.zeros(3, np.float32)}), base, tmp_path / "cache")
    assert not any((tmp_path / "cache").glob("tuned-*"))


def test_a_pools_tuned_features_are_its_cosines_with_the_tuned_question() -> None:
    """The pool measures its candidates again with the tuned question's vector; without one (another embedder,
    or none to be had) the tuned columns repeat the cosine columns, so the selector still reads them."""
    vectors = np.eye(3, dtype=np.float32)
    q = np.array([0.8, 0.6, 0.0], np.float32)
    texts = ["Stage one holds the optimizer states.", "Stage two holds the gradients.", "Stage three holds all."]
    pool = Pool([Candidate(0, "d", i, t, PROSE, 1) for i, t in enumerate(texts)],
                [Place(PROSE, 0, 0, 0.1 * i, False) for i in range(3)], vectors @ q,
                QuestionFacts({"stage": 1.0}, frozenset(), frozenset()), [], lambda c, step: None, qvec=q,
                cosines_for=lambda v: vectors @ v)
    cos, gap = FEATURES.index("tuned_cosine"), FEATURES.index("tuned_gap")
    assert pool.features[:, cos] == pytest.approx([0.8, 0.6, 0.0])
    assert pool.features[:, gap] == pytest.approx([0.0, -0.2, -0.8])
    pool.adapt(None, np.array([0.0, 0.6, 0.8], np.float32))
    assert pool.features[:, cos] == pytest.approx([0.0, 0.6, 0.8])
    assert pool.features[:, gap] == pytest.approx([-0.8, -0.2, 0.0])
    assert pool.features[:, FEATURES.index("adapted_cosine")] == pytest.approx([0.8, 0.6, 0.0])  # not turned
    assert pool.features[:, FEATURES.index("cosine")] == pytest.approx([0.8, 0.6, 0.0])  # the cosines stay
    # the selector reads a tuned vector only for the embedder its tuning was made from
    sel = default_selector()
    assert sel.tuning is not None and sel.tuned_for(BUNDLED_MODEL) is sel.tuning
    assert sel.tuned_for("sentence-transformers/all-mpnet-base-v2") is None
    tuned = np.array([0.0, 0.6, 0.8], np.float32)
    sel.score_pool(pool, "sentence-transformers/all-mpnet-base-v2", tuned)
    assert pool.features[:, cos] == pytest.approx([0.8, 0.6, 0.0])
    sel.score_pool(pool, BUNDLED_MODEL, tuned)
    assert pool.features[:, cos] == pytest.approx([0.0, 0.6, 0.8])


def test_the_shipped_tuning_round_trips_and_reads_questions_its_own_way(tmp_path: Path) -> None:
    """The shipped tuning moves only biases and layer norms of the bundled model; run as the answerer runs it
    (the int8 ONNX encoder, exported once into the session's encoder cache), it reads a question close to, but
    not as, the bundled model does."""
    sel = default_selector()
    tuning = sel.tuning
    assert tuning is not None and tuning.model == BUNDLED_MODEL
    assert all(n.endswith(".bias") or "LayerNorm" in n for n in tuning.deltas) and 10_000 < tuning.size < 50_000
    path = tmp_path / "sel.json"
    path.write_text(json.dumps(sel.to_json()), encoding="utf-8")
    assert load_selector(path).tuning.digest == tuning.digest
    cache = Path(os.environ["DMLQA_ENCODER_CACHE"])
    folder = prepare(tuning, "onnx-int8", cache)  # as a build does: written and exported, not loaded
    exported = list(cache.glob(f"{folder.name}-*/model-int8-pc.onnx"))
    assert folder.name == f"tuned-{tuning.digest}" and len(exported) == 1
    stamp = exported[0].stat().st_mtime_ns
    tuned = question_encoder(tuning, "onnx-int8", cache)
    assert exported[0].stat().st_mtime_ns == stamp  # loaded, not exported again
    plain = load_encoder(BUNDLED_MODEL, "onnx-int8", cache)
    assert tuned.key != plain.key and tuned.key.startswith(f"tuned-{tuning.digest}@")
    questions = ["How does ZeRO-3 partition optimizer state?", "Which papers reduce pipeline bubbles?"]
    a, b = tuned.encode(questions), plain.encode(questions)
    agree = (a * b).sum(axis=1)
    assert np.all(agree > 0.5) and np.all(agree < 0.999)
    assert np.linalg.norm(a, axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    assert tuned.encode(questions[:1])[0] == pytest.approx(a[0], abs=1e-6)  # a question alone, the same vector


def test_a_searcher_answers_without_a_tuned_encoder_it_cannot_have(tmp_path: Path, caplog) -> None:  # noqa: ANN001
    settings = load_settings(tmp_path)
    searcher = Searcher(settings)
    version = SimpleNamespace(meta={"model": BUNDLED_MODEL, "encoder": "onnx-int8"})
    bad = QuestionTuning(BUNDLED_MODEL, {"no.such.bias": np.zeros(4, np.float32)})
    with caplog.at_level(logging.WARNING, logger="dmlqa.query.search"):
        assert searcher.embed_tuned("What is ZeRO?", version, bad) is None
        assert searcher.embed_tuned("What is ZeRO?", version, bad) is None
    warned = [r for r in caplog.records if "tuned question encoder is unavailable" in r.getMessage()]
    assert len(warned) == 1 and "no.such.bias" in warned[0].getMessage()  # said once, not tried again


@pytest.mark.parametrize("how", ["build", "schedule"])
def test_a_build_writes_and_exports_the_tuned_question_encoder(tmp_path: Path, monkeypatch, how: str) -> None:  # noqa: ANN001
    """`dmlqa build` and `dmlqa schedule` leave the tuned question encoder ready in the encoder cache: the first
    question does not wait for it to be written and exported."""
    import dmlqa

    shared = Path(os.environ["DMLQA_ENCODER_CACHE"])
    load_encoder(BUNDLED_MODEL, "onnx-int8", shared)  # the embedder's own export, shared rather than redone
    cache = tmp_path / "encoders"
    cache.mkdir()
    for d in shared.glob("all-MiniLM-L6-v2-*"):
        (cache / d.name).symlink_to(d)
    monkeypatch.setenv("DMLQA_ENCODER_CACHE", str(cache))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "zero.md").write_text("# ZeRO\n\nZeRO stage 1 partitions optimizer states across data parallel "
                                   "ranks, and stage 3 partitions the parameters as well.\n", encoding="utf-8")
    kb = dmlqa.KnowledgeBase(tmp_path / "kb", create=True)
    kb.add([notes])
    assert not list(cache.glob("tuned-*"))
    if how == "build":
        assert kb.build(offline=True).index_version
    else:
        assert kb.schedule(every="24h", run_now=True, max_runs=1, offline=True, handle_signals=False) is None
        assert kb.published_version()
    digest = default_selector().tuning.digest
    assert (cache / f"tuned-{digest}" / "model.safetensors").is_file()
    assert len(list(cache.glob(f"tuned-{digest}-*/model-int8-pc.onnx"))) == 1


def test_a_build_that_cannot_prepare_the_tuned_encoder_says_so_and_goes_on(tmp_path: Path, caplog) -> None:  # noqa: ANN001
    from dmlqa.query.selector import prepare_question_encoder

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the encoder cache should be", encoding="utf-8")
    settings = load_settings(tmp_path, env={"DMLQA_ENCODER_CACHE": str(blocked)})
    with caplog.at_level(logging.WARNING, logger="dmlqa.query.selector"):
        prepare_question_encoder(settings)  # does not raise: answers do without it
    assert any("tuned question encoder could not be prepared" in r.getMessage() for r in caplog.records)


def test_bench_deltas_rebuild_the_tuned_model_from_the_installed_one(tmp_path: Path) -> None:
    """bench/question_tuning.py's BitFit moves only biases and layer norms, and the deltas it reports, added to
    the installed model (materialise) and loaded as any model is, give the vectors the tuned model gives."""
    qt = bench_script("question_tuning")
    bert, tokenizer = qt.load_bert(str(model_dir(BUNDLED_MODEL)))
    rng = np.random.default_rng(0)
    texts = ["How does ZeRO-3 partition optimizer state?", "What does pipeline parallelism split?"]
    vectors = [rng.normal(size=(4, 384)).astype(np.float32) for _ in texts]
    vectors = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in vectors]
    labels = [np.array([True, False, False, False]), np.array([False, True, False, False])]
    tuned = qt.tune(bert, tokenizer, texts, vectors, labels, mode="bitfit", epochs=2)
    deltas = qt.deltas(tuned, bert)
    assert deltas and all(n.endswith("bias") or "LayerNorm" in n for n in deltas)
    encoder = question_encoder(QuestionTuning(BUNDLED_MODEL, deltas), "torch", tmp_path)
    expected = qt.vectors_of(tuned, tokenizer, texts)
    assert encoder.encode(texts) == pytest.approx(expected, abs=1e-4)
    before = qt.vectors_of(bert, tokenizer, texts)
    assert not np.allclose(expected, before, atol=1e-4)  # the tuning moved them
