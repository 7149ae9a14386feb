"""Versioned index + hybrid search on a real small FAISS/BM25 index built here."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from dmlqa.errors import IndexMissingError
from dmlqa.index.embed import embed_texts
from dmlqa.index.versions import (
    BUILDING_PREFIX,
    choose_index_type,
    current_version,
    dense_text,
    list_versions,
    open_current,
    prune,
    publish,
    write_version,
)
from dmlqa.models import Block, Chunk, Document
from dmlqa.query.search import Filters, Searcher, SearchOptions, rrf
from dmlqa.settings import load_settings

CORPUS = {
    "arxiv:1910.02054": ("ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", "paper", 2020,
                         ("Memory Efficient Training",), [
        "ZeRO removes memory redundancies across data-parallel processes by partitioning the optimizer states, "
        "gradients and parameters instead of replicating them.",
        "Stage 3 of ZeRO partitions the parameters as well, so memory per device falls linearly with the "
        "data-parallel degree.",
    ]),
    "arxiv:1811.06965": ("GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism", "paper",
                         2019, ("Pipeline Parallelism",), [
        "GPipe splits a mini-batch into micro-batches and pipelines them across accelerators; the idle time "
        "at the start and end of each step is the pipeline bubble.",
    ]),
    "github:horovod/horovod": ("Horovod", "repo", None, ("Frameworks",), [
        "Horovod is a distributed deep learning training framework for TensorFlow, Keras, PyTorch, and MXNet "
        "using ring-allreduce.",
        "Horovod installs with pip install horovod and runs with horovodrun -np 4 python train.py.",
    ]),
    "web:docs.ray.io/abc": ("Ray Train: Distributed Deep Learning", "docs", 2023, ("Frameworks",), [
        "Ray Train scales model training code from a single machine to a cluster of GPUs with a TorchTrainer.",
    ]),
}
URLS = {
    "arxiv:1910.02054": "https://arxiv.org/abs/1910.02054",
    "arxiv:1811.06965": "https://arxiv.org/abs/1811.06965",
    "github:horovod/horovod": "https://github.com/horovod/horovod",
    "web:docs.ray.io/abc": "https://docs.ray.io/en/latest/train/train.html",
}


def make_docs_and_chunks(extra: str = "", corpus: dict | None = None,
                         fetched: dict[str, str] | None = None) -> tuple[list[Document], list[Chunk]]:
    """Documents of ``corpus`` (default :data:`CORPUS`) and their chunks, one per passage, as a build writes them;
    ``fetched`` gives a document the address its text was read from (by doc id; default: its identity)."""
    docs, chunks = [], []
    for doc_id, (title, kind, year, topics, passages) in (CORPUS if corpus is None else corpus).items():
        passages = passages + ([extra] if extra and doc_id.startswith("github") else [])
        blocks = tuple(Block(text=p, page=i + 1 if kind == "paper" else None) for i, p in enumerate(passages))
        doc = Document(doc_id=doc_id, url=URLS[doc_id], title=title, blocks=blocks, kind=kind, year=year,
                       topics=topics, content_type="pdf" if kind == "paper" else "html",
                       source_url=(fetched or {}).get(doc_id, ""))
        docs.append(doc)
        offset = 0
        for i, b in enumerate(blocks):
            chunks.append(Chunk(chunk_id=f"{doc_id}#{i}", doc_id=doc_id, url=doc.url, title=title, text=b.text,
                                page=b.page, section=None, start=offset, end=offset + len(b.text)))
            offset += len(b.text) + 2
    return docs, chunks


def build_index(home: Path, encoder, extra: str = "", *, sentences: bool = True,  # noqa: ANN001
                fetched: dict[str, str] | None = None) -> str:
    """A published version of the fixture documents, with their quotable sentences and vectors as a
    build stores them (``sentences=False``: a version from before sentences were stored; ``fetched``: see
    :func:`make_docs_and_chunks`)."""
    from dmlqa.extract.sentences import split_document

    docs, chunks = make_docs_and_chunks(extra, fetched=fetched)
    vecs = embed_texts([dense_text(c.title, c.section, c.text) for c in chunks], encoder).vectors
    meta = {"model": "bundled:all-MiniLM-L6-v2", "encoder": "onnx-int8", "encoder_key": encoder.key,
            "resources": len(docs), "failed": []}
    kept = [(o, x) for d in docs for o, x in enumerate(split_document(d)) if x.quotable] if sentences else []
    svecs = embed_texts([x.text for _, x in kept], encoder).vectors if kept else None
    name = write_version(home / "index", docs, chunks, vecs, meta, ann_threshold=1000, sentences=kept,
                         sentence_vectors=svecs)
    publish(home / "index", name)
    return name


@pytest.fixture()
def home(tmp_path: Path, encoder) -> Path:  # noqa: ANN001
    build_index(tmp_path, encoder)
    return tmp_path


def searcher(home: Path) -> Searcher:
    return Searcher(load_settings(home))


def test_rrf_rewards_agreement() -> None:
    fused = rrf([[1, 2, 3], [3, 1, 4]])
    assert max(fused, key=fused.get) == 1
    assert fused[3] > fused[2] and fused[4] < fused[2]


def test_hybrid_search_finds_the_right_passage(home: Path) -> None:
    hits = searcher(home).search("how does ZeRO partition optimizer states across GPUs", SearchOptions(k=3))
    assert hits[0].doc_id == "arxiv:1910.02054"
    assert hits[0].url == "https://arxiv.org/abs/1910.02054" and hits[0].page in (1, 2)
    assert [h.rank for h in hits] == [1, 2, 3]
    assert hits[0].to_json().keys() == {"rank", "score", "doc_id", "url", "title", "page", "section", "text"}


def test_modes_and_per_doc(home: Path) -> None:
    s = searcher(home)
    lex = s.search("horovodrun", SearchOptions(k=5, mode="bm25"))
    assert [h.doc_id for h in lex] == ["github:horovod/horovod"]  # only one chunk has the word
    dense = s.search("idle time in pipelined training", SearchOptions(k=1, mode="dense"))
    assert dense[0].doc_id == "arxiv:1811.06965"
    per_doc = s.search("ZeRO partitions parameters memory", SearchOptions(k=10, per_doc=True))
    ids = [h.doc_id for h in per_doc]
    assert len(ids) == len(set(ids)) == 4


def test_filters(home: Path) -> None:
    s = searcher(home)
    opts = SearchOptions(k=10, per_doc=True, filters=Filters(kinds=("repo",)))
    assert {h.doc_id for h in s.search("distributed training", opts)} == {"github:horovod/horovod"}
    opts = SearchOptions(k=10, per_doc=True, filters=Filters(since=2020))
    assert {h.doc_id for h in s.search("training", opts)} == {"arxiv:1910.02054", "web:docs.ray.io/abc"}
    opts = SearchOptions(k=10, per_doc=True, filters=Filters(topics=("pipeline parallelism",)))
    assert {h.doc_id for h in s.search("training", opts)} == {"arxiv:1811.06965"}
    opts = SearchOptions(k=10, per_doc=True, filters=Filters(hosts=("ray.io",)))
    assert {h.doc_id for h in s.search("training", opts)} == {"web:docs.ray.io/abc"}


def test_empty_query_and_no_index(tmp_path: Path, home: Path) -> None:
    assert searcher(home).search("   ") == []
    with pytest.raises(IndexMissingError, match="dmlqa build"):
        searcher(tmp_path / "nothing").search("zero")


def test_versions_publish_atomically_and_searcher_follows(home: Path, encoder) -> None:  # noqa: ANN001
    s = searcher(home)
    first = s.pin().name
    assert not s.search("elastic rendezvous with etcd", SearchOptions(k=1, mode="bm25"))
    second = build_index(home, encoder, extra="Elastic Horovod uses an etcd rendezvous to add workers.")
    assert second != first and current_version(home / "index") == second
    assert s.search("elastic rendezvous with etcd", SearchOptions(k=1, mode="bm25"))[0].doc_id == (
        "github:horovod/horovod")
    assert list_versions(home / "index") == sorted([first, second])


def test_reader_never_sees_a_half_written_version(home: Path, encoder) -> None:  # noqa: ANN001
    """Readers resolving CURRENT during many publishes always open a complete version."""
    index_dir = home / "index"
    errors: list[Exception] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                v = open_current(index_dir)
                assert v.meta["chunks"] == v.size > 0
                v.close()
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(5):
        build_index(home, encoder)
    stop.set()
    t.join()
    assert not errors


def test_prune_keeps_current_and_removes_debris(home: Path, encoder) -> None:  # noqa: ANN001
    index_dir = home / "index"
    names = [current_version(index_dir)] + [build_index(home, encoder) for _ in range(3)]
    dead = index_dir / "versions" / f"{BUILDING_PREFIX}v1-999999999"
    dead.mkdir()
    (dead / "dense.faiss").write_bytes(b"half")
    mine = index_dir / "versions" / f"{BUILDING_PREFIX}v2-{os.getpid()}"
    mine.mkdir()
    removed = prune(index_dir, keep=2, min_age_s=0)
    assert dead.name in removed and not dead.exists()
    assert mine.exists()  # a live writer's folder is left alone
    assert list_versions(index_dir) == names[-2:]
    assert current_version(index_dir) == names[-1]


def test_meta_records_encoder_and_index_type(home: Path, encoder) -> None:  # noqa: ANN001
    meta = json.loads((home / "index" / "versions" / current_version(home / "index") / "meta.json").read_text())
    assert meta["encoder_key"] == encoder.key and meta["index_type"] == "flat"
    assert meta["chunks"] == 6 and meta["documents"] == 4
    assert choose_index_type(10, 1000) == "flat" and choose_index_type(1001, 1000) == "hnsw"


def test_hnsw_index_is_used_past_the_threshold(tmp_path: Path, encoder) -> None:  # noqa: ANN001
    docs, chunks = make_docs_and_chunks()
    vecs = embed_texts([c.text for c in chunks], encoder).vectors
    meta = {"model": "bundled:all-MiniLM-L6-v2", "encoder": "onnx-int8", "encoder_key": encoder.key}
    name = write_version(tmp_path / "index", docs, chunks, vecs, meta, ann_threshold=2)
    publish(tmp_path / "index", name)
    v = open_current(tmp_path / "index")
    assert v.meta["index_type"] == "hnsw"
    hits = searcher(tmp_path).search("pipeline bubble micro-batches", SearchOptions(k=1, mode="dense"))
    assert hits[0].doc_id == "arxiv:1811.06965"
    # an HNSW segment keeps 8-bit codes of the vectors: read back within the quantisation step
    assert np.allclose(v.vectors([0])[0], vecs[0], atol=0.01) and float(v.vectors([0])[0] @ vecs[0]) > 0.999
