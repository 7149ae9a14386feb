"""Cross-encoder reranking with a real (tiny, randomly initialised) CrossEncoder built here.

No cross-encoder model can be downloaded here, so the test makes one: a one-layer BERT sequence
classifier with the bundled MiniLM's tokenizer. Its scores are meaningless, which makes the check
sharp: the searcher's order must be exactly the cross-encoder's order, not the fused one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from test_index_search import build_index

from dmlqa.errors import EncoderError, SettingsError
from dmlqa.index.embed import model_dir
from dmlqa.query.search import Searcher, SearchOptions
from dmlqa.settings import BUNDLED_MODEL, load_settings


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    out = tmp_path_factory.mktemp("tiny-cross-encoder")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(out)
    src = model_dir(BUNDLED_MODEL)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / name, out / name)
    return out


def test_configured_reranker_orders_the_results(tmp_path: Path, encoder, tiny_cross_encoder: Path) -> None:  # noqa: ANN001
    from sentence_transformers import CrossEncoder

    build_index(tmp_path, encoder)
    plain = Searcher(load_settings(tmp_path, env={}))
    query = "how does ZeRO partition optimizer states"
    fused = plain.search(query, SearchOptions(k=6))
    settings = load_settings(tmp_path, env={}).with_overrides(reranker=str(tiny_cross_encoder), rerank_candidates=6)
    reranked = Searcher(settings).search(query, SearchOptions(k=6))
    assert {h.chunk_id for h in reranked} == {h.chunk_id for h in fused}  # same candidates
    expected = CrossEncoder(str(tiny_cross_encoder)).predict([(query, h.text) for h in fused])
    assert [h.chunk_id for h in reranked] == [fused[i].chunk_id for i in np.argsort(-expected, kind="stable")]
    assert [h.rank for h in reranked] == list(range(1, 7))
    off = Searcher(settings).search(query, SearchOptions(k=6, rerank=False))
    assert [h.chunk_id for h in off] == [h.chunk_id for h in fused]


def test_missing_reranker_is_a_clear_error(tmp_path: Path, encoder) -> None:  # noqa: ANN001
    build_index(tmp_path, encoder)
    with pytest.raises(SettingsError, match="no such path"):  # a path that is not there: refused on load
        load_settings(tmp_path, env={}).with_overrides(reranker=str(tmp_path / "no-such-model"))
    not_a_model = tmp_path / "not-a-model"  # a folder, but no model in it: refused when first used
    not_a_model.mkdir()
    settings = load_settings(tmp_path, env={}).with_overrides(reranker=str(not_a_model))
    with pytest.raises(EncoderError, match="cannot load reranker"):
        Searcher(settings).search("zero")
