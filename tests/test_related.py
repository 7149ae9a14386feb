"""`dmlqa related`: document-level recommendations on a real small index (real encoder, FAISS, BM25)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dmlqa.catalog.urls import canonicalize, resource_id
from dmlqa.index.embed import embed_texts
from dmlqa.index.versions import dense_text, publish, write_version
from dmlqa.models import Block, Chunk, Document
from dmlqa.query.docvectors import doc_vectors
from dmlqa.query.related import Related, RelatedResult, identify, related, resolve_target
from dmlqa.query.relatedness import looks_like_references
from dmlqa.query.search import Searcher
from dmlqa.settings import load_settings

PIPE, MEM, HVD = "Pipeline Parallelism", "Memory Efficient Training", "Horovod documentation"
ELASTIC_URL = canonicalize("https://horovod.readthedocs.io/en/stable/elastic_include.html")

#: doc_id → (url, title, kind, year, venue, topics, passages); three topics, one catalog card, and a
#: second copy of the ZeRO paper (its proceedings version) that must never be recommended for ZeRO.
CORPUS: dict[str, tuple] = {
    "arxiv:1910.02054": ("https://arxiv.org/abs/1910.02054",
                         "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", "paper", 2019, None,
                         ("Papers", MEM), [
        "ZeRO removes the memory redundancies of data-parallel training by partitioning the optimizer states, "
        "gradients and parameters across data-parallel processes instead of replicating them.",
        "With all three stages of ZeRO the memory per GPU falls linearly with the data-parallel degree, so a "
        "trillion-parameter model fits in aggregate device memory.",
    ]),
    "doi:10.5555/3433701.3433727": ("https://dl.acm.org/doi/10.5555/3433701.3433727",
                                    "ZeRO: memory optimizations toward training trillion parameter models", "paper",
                                    2020, "SC", ("Papers", MEM), [
        "ZeRO eliminates memory redundancies in data- and model-parallel training while retaining low "
        "communication volume and high computational granularity.",
    ]),
    "arxiv:2101.06840": ("https://arxiv.org/abs/2101.06840",
                         "ZeRO-Offload: Democratizing Billion-Scale Model Training", "paper", 2021, "ATC",
                         ("Papers", MEM), [
        "ZeRO-Offload offloads optimizer states and gradients to CPU memory and runs the Adam optimizer step on "
        "the CPU, so a single GPU can train a model with 13 billion parameters.",
        "Building on ZeRO-2 partitioning of optimizer states, offloading keeps GPU memory for parameters and "
        "activations only.",
    ]),
    "doi:10.1145/3373376.3378505": ("https://doi.org/10.1145/3373376.3378505",
                                    "Capuchin: Tensor-based GPU Memory Management for Deep Learning", "paper", 2020,
                                    "ASPLOS", ("Papers", MEM), [
        "Capuchin reduces GPU memory footprint during training by swapping tensors to host memory and "
        "recomputing activations, choosing per tensor from its access pattern.",
    ]),
    "arxiv:1811.06965": ("https://arxiv.org/abs/1811.06965",
                         "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism", "paper", 2019,
                         "NeurIPS", ("Papers", PIPE), [
        "GPipe partitions a network into stages on different accelerators and splits each mini-batch into "
        "micro-batches that flow through the pipeline.",
        "The idle time at the start and end of each step is the pipeline bubble; more micro-batches shrink it.",
    ]),
    "doi:10.1145/3341301.3359646": ("https://dl.acm.org/doi/10.1145/3341301.3359646",
                                    "PipeDream: generalized pipeline parallelism for DNN training", "paper", 2019,
                                    "SOSP", ("Papers", PIPE), [
        "PipeDream keeps every pipeline stage busy with a one-forward-one-backward schedule of micro-batches "
        "and stashes weight versions so that pipelined training stays correct.",
        "Pipeline-parallel training communicates only activations between consecutive stages.",
    ]),
    "doi:10.1145/3437801.3441593": ("https://doi.org/10.1145/3437801.3441593",
                                    "DAPPLE: a pipelined data parallel approach for training large models", "paper",
                                    2021, "PPoPP", ("Papers", PIPE), None),  # a catalog card
    "github:horovod/horovod": ("https://github.com/horovod/horovod", "Horovod", "repo", None, None,
                               ("Frameworks",), [
        "Horovod is a distributed deep learning training framework for TensorFlow, Keras and PyTorch built on "
        "ring-allreduce.",
        "Install with pip install horovod and launch with horovodrun -np 4 python train.py.",
    ]),
    resource_id(ELASTIC_URL): (ELASTIC_URL, "Elastic Horovod", "docs", 2022, None, (HVD,), [
        "Elastic Horovod adds and removes workers during training without restarting the job; a rendezvous "
        "reassigns ranks and the allreduce ring is rebuilt.",
    ]),
    "web:horovod.readthedocs.io/tensor-fusion": ("https://horovod.readthedocs.io/en/stable/tensor-fusion.html",
                                                 "Tensor Fusion", "docs", 2020, None, (HVD,), [
        "Tensor Fusion batches small allreduce operations into one buffer so that Horovod's ring-allreduce "
        "runs fewer, larger collectives.",
    ]),
    # In the catalog, but no text was indexed for it (no chunks at all).
    "web:example.org/empty": ("https://example.org/pipeline-tutorial", "A Tutorial on Pipeline Parallelism", "docs",
                              2023, None, (PIPE,), []),
}
NO_TEXT = "web:example.org/empty"
MEMORY_DOCS = {"arxiv:2101.06840", "doi:10.1145/3373376.3378505"}
PIPELINE_DOCS = {"arxiv:1811.06965", "doi:10.1145/3341301.3359646", "doi:10.1145/3437801.3441593"}
HOROVOD_DOCS = {"github:horovod/horovod", resource_id(ELASTIC_URL), "web:horovod.readthedocs.io/tensor-fusion"}


def card_text(title: str, year: int, venue: str, topics: tuple[str, ...], url: str) -> str:
    return f"{title}. Shiqing Fan. {venue} {year}. Paper. Topics: {', '.join(topics)}. URL: {url}"


def build(home: Path, encoder) -> None:  # noqa: ANN001
    docs, chunks = [], []
    for doc_id, (url, title, kind, year, venue, topics, passages) in CORPUS.items():
        is_card = passages is None
        if is_card:
            passages = [card_text(title, year, venue, topics, url)]
        blocks = tuple(Block(text=p) for p in passages)
        doc = Document(doc_id=doc_id, url=url, title=title, blocks=blocks, kind=kind, year=year, venue=venue,
                       topics=topics, is_card=is_card, authors=("Shiqing Fan",) if is_card else (),
                       content_type="card" if is_card else "html")
        docs.append(doc)
        offset = 0
        for i, b in enumerate(blocks):
            chunks.append(Chunk(chunk_id=f"{doc_id}#{i}", doc_id=doc_id, url=url, title=title, text=b.text,
                                start=offset, end=offset + len(b.text)))
            offset += len(b.text) + 2
    vecs = embed_texts([dense_text(c.title, c.section, c.text) for c in chunks], encoder).vectors
    meta = {"model": "bundled:all-MiniLM-L6-v2", "encoder": "onnx-int8", "encoder_key": encoder.key}
    publish(home / "index", write_version(home / "index", docs, chunks, vecs, meta, ann_threshold=1000))


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory, encoder) -> Searcher:  # noqa: ANN001
    home = tmp_path_factory.mktemp("related")
    build(home, encoder)
    return Searcher(load_settings(home))


def ids(result: RelatedResult) -> list[str]:
    return [r.doc_id for r in result.items]


# -- resolving what the query names -------------------------------------------------------------------


@pytest.mark.parametrize("query", [
    "https://arxiv.org/abs/1910.02054", "http://arxiv.org/abs/1910.02054", "https://www.arxiv.org/pdf/1910.02054v2",
    "arxiv.org/abs/1910.02054v3/", "1910.02054", "arXiv:1910.02054v2", "arxiv: 1910.02054", "arxiv:1910.02054",
    " <https://arxiv.org/abs/1910.02054> ",
])
def test_arxiv_forms_resolve(searcher: Searcher, query: str) -> None:
    assert resolve_target(searcher.pin(), query) == "arxiv:1910.02054"


@pytest.mark.parametrize("query", [
    "10.1145/3341301.3359646", "doi:10.1145/3341301.3359646", "https://doi.org/10.1145/3341301.3359646",
    "http://dx.doi.org/10.1145/3341301.3359646", "https://dl.acm.org/doi/abs/10.1145/3341301.3359646",
    "https://dl.acm.org/doi/10.1145/3341301.3359646",
])
def test_doi_forms_resolve(searcher: Searcher, query: str) -> None:
    assert resolve_target(searcher.pin(), query) == "doi:10.1145/3341301.3359646"


def test_web_and_github_urls_resolve_through_canonical_form(searcher: Searcher) -> None:
    v = searcher.pin()
    elastic = resource_id(ELASTIC_URL)
    for q in ("http://www.horovod.readthedocs.io/en/stable/elastic_include.html/",
              "https://horovod.readthedocs.io/en/stable/elastic_include.html#rendezvous",
              "horovod.readthedocs.io/en/stable/elastic_include.html", elastic):
        assert resolve_target(v, q) == elastic, q
    assert resolve_target(v, "https://GitHub.com/Horovod/Horovod.git") == "github:horovod/horovod"
    # The catalog URL of a doc whose id is not derived from it still resolves (by URL).
    assert resolve_target(v, "http://horovod.readthedocs.io/en/stable/tensor-fusion.html") == (
        "web:horovod.readthedocs.io/tensor-fusion")


def test_free_text_and_unknown_identifiers_do_not_resolve(searcher: Searcher) -> None:
    v = searcher.pin()
    assert resolve_target(v, "pipeline bubble") is None
    assert resolve_target(v, "2501.00001") is None and identify("2501.00001") is not None
    assert resolve_target(v, "https://example.com/post") is None and identify("https://example.com/post")
    assert identify("how does ZeRO work?") is None
    assert identify("10.48550/arXiv.1910.02054").ids[-1] == "arxiv:1910.02054"
    assert resolve_target(v, "https://doi.org/10.48550/arXiv.1910.02054") == "arxiv:1910.02054"


# -- recommendations for an indexed resource ----------------------------------------------------------


def test_related_to_a_paper_excludes_itself_and_ranks_its_topic_first(searcher: Searcher) -> None:
    res = related(searcher, "http://www.arxiv.org/pdf/1910.02054v2", k=10)
    assert res.target == "arxiv:1910.02054" and res.notice is None
    got = ids(res)
    assert "arxiv:1910.02054" not in got
    assert "doi:10.5555/3433701.3433727" not in got  # the same paper under its proceedings DOI
    assert len(got) == len(set(got)) == len(CORPUS) - 3  # nor a doc without any vector
    assert set(got[:2]) == MEMORY_DOCS
    assert max(got.index(d) for d in MEMORY_DOCS) < min(got.index(d) for d in HOROVOD_DOCS | PIPELINE_DOCS)
    scores = [r.score for r in res.items]
    assert scores == sorted(scores, reverse=True)
    assert all(r.reason.strip() for r in res.items)
    top = res.items[0]
    assert top.reason.rstrip("…") in " ".join(CORPUS[top.doc_id][-1])  # a passage of the recommended doc
    assert "optimizer states" in top.reason or "memory" in top.reason.lower()


def test_related_to_pipeline_paper_and_card_reason(searcher: Searcher) -> None:
    res = related(searcher, "https://arxiv.org/abs/1811.06965", k=4)
    got = ids(res)
    assert set(got[:2]) == PIPELINE_DOCS - {"arxiv:1811.06965"}
    card = next(r for r in res.items if r.doc_id == "doi:10.1145/3437801.3441593")
    assert card.reason == f"shared topic: {PIPE}"
    assert card.venue == "PPoPP" and card.year == 2021 and card.kind == "paper" and card.authors == ("Shiqing Fan",)
    pipedream = next(r for r in res.items if r.doc_id == "doi:10.1145/3341301.3359646")
    assert "pipeline" in pipedream.reason.lower() and len(pipedream.reason) <= 161


def test_a_card_can_be_the_query(searcher: Searcher) -> None:
    res = related(searcher, "10.1145/3437801.3441593", k=3)
    assert res.target == "doi:10.1145/3437801.3441593"
    assert set(ids(res)[:2]) == PIPELINE_DOCS - {res.target}


def test_related_to_a_docs_page(searcher: Searcher) -> None:
    res = related(searcher, "http://horovod.readthedocs.io/en/stable/elastic_include.html", k=3)
    assert set(ids(res)[:2]) == HOROVOD_DOCS - {res.target}


def test_since_and_kind_filters(searcher: Searcher) -> None:
    res = related(searcher, "1910.02054", since=2021)
    assert res.items and all(r.year is not None and r.year >= 2021 for r in res.items)
    assert "github:horovod/horovod" not in ids(res)  # unknown year is excluded when --since is given
    assert ids(res)[0] == "arxiv:2101.06840"
    res = related(searcher, "1910.02054", kinds=("docs",))
    assert set(ids(res)) == HOROVOD_DOCS - {"github:horovod/horovod"}
    res = related(searcher, "ring allreduce", kinds=("repo",))
    assert ids(res) == ["github:horovod/horovod"]


def test_k_limits_results(searcher: Searcher) -> None:
    assert len(related(searcher, "1910.02054", k=2).items) == 2


# -- free text and fallbacks ----------------------------------------------------------------------------


def test_free_text_ranks_whole_documents(searcher: Searcher) -> None:
    res = related(searcher, "ring allreduce with horovodrun", k=len(CORPUS))
    assert res.target is None and res.notice is None
    got = ids(res)
    assert got[0] in HOROVOD_DOCS and set(got[:3]) == HOROVOD_DOCS
    assert "doi:10.5555/3433701.3433727" in got or "arxiv:1910.02054" in got  # nothing is excluded
    assert all(r.reason for r in res.items)
    top = res.items[0]
    assert "allreduce" in top.reason.lower()


def test_unknown_identifier_falls_back_to_text_with_a_notice(searcher: Searcher) -> None:
    res = related(searcher, "https://example.com/blog/pipeline-parallelism-micro-batches", k=3)
    assert res.target is None and res.notice and "not in the index" in res.notice
    assert set(ids(res)) & PIPELINE_DOCS
    res = related(searcher, "arXiv:2501.00001v1", k=3)
    assert res.target is None and "arXiv id" in (res.notice or "") and len(res.items) == 3


def test_a_resource_without_text_is_compared_by_title(searcher: Searcher) -> None:
    res = related(searcher, "http://example.org/pipeline-tutorial/", k=3)
    assert res.target == NO_TEXT and "no indexed text" in (res.notice or "")
    assert NO_TEXT not in ids(res) and set(ids(res)[:2]) <= PIPELINE_DOCS


def test_empty_query(searcher: Searcher) -> None:
    res = related(searcher, "   ")
    assert res.items == () and res.notice


def test_json_shape(searcher: Searcher) -> None:
    res = related(searcher, "1811.06965", k=2)
    d = res.to_json()
    assert d["target"] == "arxiv:1811.06965" and len(d["items"]) == 2
    assert set(d["items"][0]) == {"doc_id", "title", "url", "score", "reason", "authors", "year", "venue", "kind"}
    assert isinstance(d["items"][0]["authors"], list) and isinstance(d["items"][0]["score"], float)
    assert isinstance(res.items[0], Related)


# -- document vectors ---------------------------------------------------------------------------------


def test_doc_vectors_pool_chunk_vectors_once_per_version(searcher: Searcher) -> None:
    v = searcher.pin()
    dv = doc_vectors(v)
    assert doc_vectors(v) is dv  # cached for the version
    rows = v.doc_rows("arxiv:1811.06965")
    mean = v.vectors(rows).mean(axis=0)
    assert np.allclose(dv.mean[dv.pos["arxiv:1811.06965"]], mean / np.linalg.norm(mean), atol=1e-5)
    assert np.allclose(dv.first[dv.pos["arxiv:1811.06965"]], v.vectors(rows[:1])[0], atol=1e-5)
    assert dv.has_vector.sum() == len(CORPUS) - 1 and not dv.has_vector[dv.pos[NO_TEXT]]
    assert np.allclose(np.linalg.norm(dv.rep[dv.has_vector], axis=1), 1.0, atol=1e-5)


def test_reference_lists_are_not_reasons() -> None:
    assert looks_like_references(
        "2011. [14] P. Goyal, P. Dollár, R. Girshick, P. Noordhuis. Accurate, Large Minibatch SGD. arXiv preprint "
        "arXiv:1706.02677, 2017. [15] Yanping Huang, Youlong Cheng. GPipe. In Advances in Neural Information "
        "Processing Systems, pages 103–112, 2019."
    )
    assert looks_like_references("@inproceedings{li2023colossal, title = {Colossal-AI}, doi = {10.1145/3605573}}")
    assert not looks_like_references(
        "GPipe partitions a network into stages on different accelerators and splits each mini-batch into "
        "micro-batches that flow through the pipeline; the idle time is the bubble."
    )


def test_bibtex_of_real_results_parses(searcher: Searcher) -> None:
    bibtexparser = pytest.importorskip("bibtexparser", minversion="2.0.0b1")
    from dmlqa.query.bibtex import to_bibtex

    res = related(searcher, "1910.02054")
    lib = bibtexparser.parse_string(to_bibtex(res.items))
    assert not lib.failed_blocks and len(lib.entries) == len(res.items)
    types = {e.key: e.entry_type for e in lib.entries}
    assert len(types) == len(res.items)
    assert types["zerooffload2021"] == "inproceedings"  # ATC
    assert types["capuchin2020"] == "inproceedings" and types["horovod"] == "misc"
