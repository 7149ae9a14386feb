"""The citation graph (issue 12, items 2-5): references resolved to documents, stored with the index
version, and put to work in ``cites``, ``cited-by``, ``suggest`` and ``related``.

The reference parser has its own tests (tests/test_references.py); here the parse is a stand-in that
returns references written by hand, so that resolution and everything after it is tested alone.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dmlqa.app.cli import app
from dmlqa.index.embed import embed_texts
from dmlqa.index.versions import IndexVersion, dense_text, publish, write_version
from dmlqa.models import Block, Chunk, Document, Reference
from dmlqa.pipeline.graph import Resolver, citation_graph
from dmlqa.query.graph import citation_graph as read_graph
from dmlqa.query.graph import cited_by, cites, relations, short_name, suggest
from dmlqa.query.related import related, resolve_target
from dmlqa.query.search import Searcher
from dmlqa.settings import load_settings

runner = CliRunner()


@dataclass(frozen=True)
class Parsed:
    """Stands in for dmlqa.extract.references.ParsedReferences (same fields)."""

    references: tuple[Reference, ...] = ()
    contexts: dict[int, str] = field(default_factory=dict)
    skipped: int = 0


def doc(doc_id: str, title: str, *, url: str = "", year: int | None = None, card: bool = False,
        text: str = "", aliases: tuple[str, ...] = (), kind: str = "paper", content_type: str = "pdf") -> Document:
    return Document(doc_id=doc_id, url=url or f"https://example.org/{doc_id}", title=title,
                    blocks=(Block(text=text or title),), content_type="card" if card else content_type, kind=kind,
                    year=year, is_card=card, aliases=aliases)


def ref(n: int, title: str = "", *, year: int | None = None, arxiv: str | None = None, doi: str | None = None,
        url: str | None = None, raw: str = "") -> Reference:
    return Reference(raw=raw or title or arxiv or doi or url or "?", ordinal=n, title=title, year=year,
                     arxiv_id=arxiv, doi=doi, url=url, marker=str(n))


GPIPE = "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism"
PIPEDREAM = "PipeDream: generalized pipeline parallelism for DNN training"
MEGATRON = "Megatron-LM: Training Multi-Billion Parameter Language Models Using Model Parallelism"
ZERO = "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models"
DISTBELIEF = "DistBelief: Large Scale Distributed Deep Networks"
ADAM = "Adam: A Method for Stochastic Optimization"
ATTENTION = "Attention Is All You Need"
COLOSSAL = "Colossal-AI: A Unified Deep Learning System For Large-Scale Parallel Training"


# -- resolution ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def resolver() -> Resolver:
    return Resolver([
        doc("arxiv:1811.06965", GPIPE, url="https://arxiv.org/abs/1811.06965", year=2019),
        doc("doi:10.1145/3341301.3359646", PIPEDREAM, url="https://dl.acm.org/doi/10.1145/3341301.3359646",
            year=2019),
        # merged copies: the arXiv address is an alias of the document kept under another id
        doc("web:proceedings.mlr.press/zero", ZERO, year=2020,
            aliases=("https://proceedings.mlr.press/zero.html", "http://arxiv.org/abs/1910.02054v3")),
        doc("web:research.google/distbelief", DISTBELIEF, year=2012, card=True),
        doc("github:nvidia/megatron-lm", "NVIDIA/Megatron-LM", url="https://github.com/nvidia/megatron-lm",
            kind="repo"),
        doc("arxiv:1909.08053", MEGATRON, url="https://arxiv.org/abs/1909.08053", year=2019),
        doc("github:dmlc/mxnet", "MXNet", url="https://github.com/dmlc/mxnet", kind="repo"),
        doc("web:aclanthology.org/seqpar", "Long Sequence Training from System Perspective", year=2023, card=True),
        # a repository whose page carries its paper's title, listed before the paper (a card here)
        doc("github:hpcaitech/colossalai", COLOSSAL, url="https://github.com/hpcaitech/colossalai", kind="repo"),
        doc("arxiv:2110.14883", COLOSSAL, url="https://arxiv.org/abs/2110.14883", year=2021, card=True),
        doc("web:cs.cmu.edu/ps", "Scaling Distributed Machine Learning with the Parameter Server", year=2014),
    ])


@pytest.mark.parametrize(("reference", "expected", "how"), [
    (ref(1, "whatever the parser made of it", arxiv="1811.06965v2"), "arxiv:1811.06965", "arxiv"),
    (ref(1, arxiv="arXiv:1910.02054"), "web:proceedings.mlr.press/zero", "arxiv"),  # through an alias
    (ref(1, doi="10.48550/arXiv.1909.08053"), "arxiv:1909.08053", "arxiv"),  # arXiv's own DOI
    (ref(1, doi="https://doi.org/10.1145/3341301.3359646."), "doi:10.1145/3341301.3359646", "doi"),
    (ref(1, "Megatron-LM", url="https://github.com/NVIDIA/Megatron-LM"), "github:nvidia/megatron-lm", "url"),
    (ref(1, "GPipe: efficient training of giant neural networks using pipeline parallelism."),
     "arxiv:1811.06965", "title"),
    (ref(1, "Large scale distributed deep networks", year=2012), "web:research.google/distbelief", "title"),
    # a word broken at a line end: the same letters without spaces
    (ref(1, "Mega- tron-LM: Training multi-billion parameter language models using model paral- lelism"),
     "arxiv:1909.08053", "title"),
    (ref(1, "Megatron-LM: Training multi-billion parameter language model using model parallelism"),
     "arxiv:1909.08053", "fuzzy"),
    # PDF text that lost its spaces (PipeDream's reference list)
    (ref(1, "Scaling distributedmachinelearningwiththeparameterserver", year=2014), "web:cs.cmu.edu/ps", "title"),
    # the paper, not the repository that shares its title
    (ref(1, "Colossal-ai: A unified deep learning system for large-scale parallel training"), "arxiv:2110.14883",
     "title"),
    (ref(1, "ZeRO: Memory optimization towards training trillion parameter models", year=2020),
     "web:proceedings.mlr.press/zero", "fuzzy"),
    (ref(1, "Sequence parallelism: Long sequence training from system perspective"), "web:aclanthology.org/seqpar",
     "title"),
    # the paper that introduced a system the knowledge base holds as its repository
    (ref(1, "Mxnet: A flexible and efficient machine learning library for heterogeneous distributed systems"),
     "github:dmlc/mxnet", "name"),
])
def test_references_resolve_by_arxiv_doi_url_and_title(resolver: Resolver, reference: Reference, expected: str,
                                                       how: str) -> None:
    assert resolver.resolve(reference) == (expected, how)


@pytest.mark.parametrize("reference", [
    ref(1, ADAM, year=2015),
    ref(1, "PipeDream: fast and efficient pipeline parallel DNN training", year=2018),  # another work, same name
    ref(1, "ZeRO: Memory optimization towards training trillion parameter models", year=2012),  # years disagree
    ref(1, "GPipe"),  # too short to be a title on its own
    ref(1, arxiv="2101.00001"),
    ref(1, "Exo: a name too short to resolve by"),
    ref(1, "Scaling distributed deep learning with Megatron-LM", year=2020),  # a name that is not the system's
])
def test_other_works_stay_unresolved(resolver: Resolver, reference: Reference) -> None:
    assert resolver.resolve(reference) == (None, "")


# -- the build's stage ----------------------------------------------------------------------------------

DOCS = [
    doc("arxiv:1811.06965", GPIPE, url="https://arxiv.org/abs/1811.06965", year=2019,
        text="GPipe splits each mini-batch into micro-batches and pipelines them across accelerators; the idle "
             "time at the start and the end of a step is the pipeline bubble."),
    doc("doi:10.1145/3341301.3359646", PIPEDREAM, url="https://dl.acm.org/doi/10.1145/3341301.3359646", year=2019,
        text="PipeDream keeps every pipeline stage busy with a one-forward-one-backward schedule and stashes weight "
             "versions so that pipelined training stays correct."),
    doc("arxiv:1909.08053", MEGATRON, url="https://arxiv.org/abs/1909.08053", year=2019,
        text="Megatron-LM splits the matrix multiplications of each transformer layer across GPUs, an intra-layer "
             "model parallelism that needs only a few all-reduce operations."),
    doc("arxiv:1910.02054", ZERO, url="https://arxiv.org/abs/1910.02054", year=2020,
        text="ZeRO partitions optimizer states, gradients and parameters across data-parallel processes instead of "
             "replicating them, so memory per device falls with the number of devices."),
    doc("web:research.google/distbelief", DISTBELIEF, year=2012, card=True),
    doc("web:example.org/blog", "Ring allreduce explained", kind="article", content_type="html",
        text="Ring allreduce passes chunks of a buffer around a ring of workers; every worker sends and receives "
             "the same amount of data."),
]
DOC_TEXT = {d.doc_id: d.blocks[0].text for d in DOCS}

PARSED = {
    "arxiv:1811.06965": Parsed((
        ref(1, DISTBELIEF.split(": ", 1)[1], year=2012),
        ref(2, ADAM, year=2015, arxiv="1412.6980"),
        ref(3, GPIPE, year=2019, arxiv="1811.06965"),  # its own preprint: a self-citation
        ref(4, "Megatron-LM: training multi-billion parameter language models using model parallelism", year=2019),
    ), {1: "Earlier systems such as DistBelief [1] partitioned models across machines."}),
    "doi:10.1145/3341301.3359646": Parsed((
        ref(1, GPIPE, year=2019),
        ref(2, "Adam: a method for stochastic optimization", year=2014),
        ref(3, ATTENTION, year=2017, arxiv="1706.03762"),
        ref(4, "Large scale distributed deep networks", year=2012),
    ), {1: "GPipe [1] flushes the pipeline after every mini-batch.", 3: "Transformers [3] are large."}, skipped=2),
    "arxiv:1909.08053": Parsed((
        ref(1, "GPipe: Efficient training of giant neural networks using pipeline parallelism", year=2019),
        ref(2, "PipeDream: Generalized Pipeline Parallelism for DNN Training", year=2019),
        ref(3, "Attention is all you need", year=2017),
        ref(4, ADAM, year=2015, doi="10.48550/arXiv.1412.6980"),
    ), {1: "Pipeline parallelism such as GPipe [1] splits layers into stages.",
        2: "PipeDream [2] avoids the flush."}),
    "arxiv:1910.02054": Parsed((
        ref(1, GPIPE, year=2019),
        ref(2, MEGATRON, year=2019, arxiv="1909.08053"),
        ref(3, "A title-only work that one paper cites", year=2018),
        ref(4, "Mixed precision training", year=2018, url="https://arxiv.org/abs/1710.03740"),
    ), {2: "Megatron-LM [2] uses tensor slicing."}),
}


@pytest.fixture(scope="module")
def graph():  # noqa: ANN201 - GraphResult
    return citation_graph(DOCS, parse=lambda d: PARSED.get(d.doc_id, Parsed()))


def test_stage_links_every_reference_and_counts(graph) -> None:  # noqa: ANN001
    assert graph.papers == 4  # the card and the non-PDF are not read
    assert graph.references == 16 and graph.self_citations == 1 and graph.skipped == 2
    assert len(graph.links) == len(graph.works) == 15
    assert graph.resolved == 8 and graph.by_how == {"title": 7, "arxiv": 1}
    pairs = {(link.citing, link.cited) for link in graph.links if link.cited}
    assert ("arxiv:1811.06965", "arxiv:1811.06965") not in pairs  # a paper citing itself is dropped
    assert ("arxiv:1811.06965", "arxiv:1909.08053") in pairs and ("arxiv:1909.08053", "arxiv:1811.06965") in pairs
    assert ("arxiv:1811.06965", "web:research.google/distbelief") in pairs  # a card is a valid target
    gpipe_in_pipedream = next(lk for lk in graph.links if lk.citing.startswith("doi:") and lk.reference.ordinal == 1)
    assert gpipe_in_pipedream.context == "GPipe [1] flushes the pipeline after every mini-batch."
    assert gpipe_in_pipedream.how == "title"


def test_unresolved_references_are_grouped_into_works(graph) -> None:  # noqa: ANN001
    work = {(lk.citing, lk.reference.ordinal): w for lk, w in graph.rows()}
    # Adam: an arXiv id, an arXiv DOI and a bare title (different years) are one work
    adam = {work[("arxiv:1811.06965", 2)], work[("doi:10.1145/3341301.3359646", 2)], work[("arxiv:1909.08053", 4)]}
    assert adam == {"arxiv:1412.6980"}
    assert work[("doi:10.1145/3341301.3359646", 3)] == work[("arxiv:1909.08053", 3)] == "arxiv:1706.03762"
    assert work[("arxiv:1910.02054", 4)] == "arxiv:1710.03740"
    assert work[("arxiv:1910.02054", 2)] == "doc:arxiv:1909.08053"


def test_a_parser_failure_never_stops_the_stage() -> None:
    def broken(d: Document) -> Parsed:
        if d.doc_id == "arxiv:1909.08053":
            raise RuntimeError("bad PDF")
        return PARSED.get(d.doc_id, Parsed())

    result = citation_graph(DOCS, parse=broken)
    assert result.papers == 3 and result.skipped == 3
    assert not any(lk.citing == "arxiv:1909.08053" for lk in result.links)


# -- a small index with the graph ------------------------------------------------------------------------


def write_home(home: Path, encoder, result) -> None:  # noqa: ANN001
    chunks = [Chunk(chunk_id=f"{d.doc_id}#0", doc_id=d.doc_id, url=d.url, title=d.title, text=DOC_TEXT[d.doc_id],
                    end=len(DOC_TEXT[d.doc_id])) for d in DOCS]
    vecs = embed_texts([dense_text(c.title, c.section, c.text) for c in chunks], encoder).vectors
    meta = {"model": "bundled:all-MiniLM-L6-v2", "encoder": "onnx-int8", "encoder_key": encoder.key}
    name = write_version(home / "index", DOCS, chunks, vecs, meta, ann_threshold=1000, citations=result.rows())
    publish(home / "index", name)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, encoder, graph) -> Path:  # noqa: ANN001
    home = tmp_path_factory.mktemp("graph-home")
    result = runner.invoke(app, ["--home", str(home), "init"])
    assert result.exit_code == 0, result.output
    write_home(home, encoder, graph)
    return home


@pytest.fixture(scope="module")
def searcher(home: Path) -> Searcher:
    return Searcher(load_settings(home))


def test_version_stores_and_reads_the_links(searcher: Searcher, graph) -> None:  # noqa: ANN001
    v = searcher.pin()
    assert v.has_citations and v.meta["citations"] == len(graph.links)
    stored = v.citations(citing="doi:10.1145/3341301.3359646")
    assert [r.link.reference.ordinal for r in stored] == [1, 2, 3, 4]
    assert stored[0].link == next(lk for lk in graph.links if lk.citing == "doi:10.1145/3341301.3359646")
    assert {r.link.citing for r in v.citations(cited="arxiv:1811.06965")} == {
        "doi:10.1145/3341301.3359646", "arxiv:1909.08053", "arxiv:1910.02054"}


def test_a_version_without_the_table_reads_as_empty(home: Path, tmp_path: Path) -> None:
    import shutil

    src = home / "index" / "versions" / (home / "index" / "CURRENT").read_text().strip()
    old = tmp_path / src.name
    shutil.copytree(src, old)
    db = sqlite3.connect(old / "store.sqlite")
    db.execute("DROP TABLE citations")
    db.commit()
    db.close()
    v = IndexVersion(old)
    assert not v.has_citations and v.citations() == [] and v.citations(cited="arxiv:1811.06965") == []
    assert cites(v, "arxiv:1909.08053").items == () and "before citations" in cites(v, "arxiv:1909.08053").notice
    assert suggest(v) == []
    v.close()


def test_cites_lists_documents_with_contexts_then_the_rest(searcher: Searcher) -> None:
    res = cites(searcher.pin(), "arxiv:1909.08053")
    assert [i.doc_id for i in res.items] == ["arxiv:1811.06965", "doi:10.1145/3341301.3359646"]
    assert res.items[0].context == "Pipeline parallelism such as GPipe [1] splits layers into stages."
    assert [(u.title, u.year) for u in res.unresolved] == [("Attention is all you need", 2017), (ADAM, 2015)]
    d = res.to_json()
    assert set(d) == {"target", "items", "unresolved"} and d["target"]["doc_id"] == "arxiv:1909.08053"
    assert set(d["items"][0]) == {"doc_id", "title", "url", "year", "context"}
    assert set(d["unresolved"][0]) == {"title", "year", "arxiv_id", "doi"}
    assert len(cites(searcher.pin(), "arxiv:1909.08053", k=1).items) == 1


def test_cited_by_lists_citing_papers_newest_first(searcher: Searcher) -> None:
    res = cited_by(searcher.pin(), "arxiv:1811.06965")
    assert [i.doc_id for i in res.items] == ["arxiv:1910.02054", "arxiv:1909.08053", "doi:10.1145/3341301.3359646"]
    assert res.items[2].context.startswith("GPipe [1]") and res.items[0].context == ""
    assert "unresolved" not in res.to_json()
    # a card is cited like any document
    assert {i.doc_id for i in cited_by(searcher.pin(), "web:research.google/distbelief").items} == {
        "arxiv:1811.06965", "doi:10.1145/3341301.3359646"}


def test_suggest_groups_works_and_ranks_by_citers_then_recency(searcher: Searcher) -> None:
    found = suggest(searcher.pin())
    assert [(s.title, s.cited_by) for s in found] == [
        (ADAM, ("arxiv:1811.06965", "arxiv:1909.08053", "doi:10.1145/3341301.3359646")),
        (ATTENTION, ("arxiv:1909.08053", "doi:10.1145/3341301.3359646")),
    ]
    adam, attention = found
    assert (adam.arxiv_id, adam.year, adam.url) == ("1412.6980", 2015, "https://arxiv.org/abs/1412.6980")
    assert attention.url == "https://arxiv.org/abs/1706.03762" and attention.year == 2017
    assert suggest(searcher.pin(), k=1) == found[:1]
    assert set(found[0].to_json()) == {"title", "year", "arxiv_id", "doi", "url", "cited_by"}


def test_coupling_and_cocitation_reasons(searcher: Searcher) -> None:
    g = read_graph(searcher.pin())
    titles = {d.doc_id: d.title for d in DOCS}
    rel = relations(g, ["arxiv:1811.06965"], titles)
    assert rel["doi:10.1145/3341301.3359646"].kind == "cites"
    pipedream = rel["doi:10.1145/3341301.3359646"]
    assert pipedream.reason == "cites it: “GPipe [1] flushes the pipeline after every mini-batch.”"
    assert rel["arxiv:1909.08053"].reason.startswith("cites it")  # a cycle: each cites the other
    rel = relations(g, ["arxiv:1910.02054"], titles)
    assert rel["arxiv:1909.08053"].reason == "cited by it: “Megatron-LM [2] uses tensor slicing.”"
    # PipeDream and ZeRO never cite each other, but both cite GPipe
    assert rel["doi:10.1145/3341301.3359646"].kind == "coupling"
    assert rel["doi:10.1145/3341301.3359646"].reason == "both cite GPipe"
    # GPipe and PipeDream are cited together by Megatron-LM
    score, n = g.cocitation("arxiv:1811.06965", "doi:10.1145/3341301.3359646")
    assert n == 1 and 0 < score < 1
    # a card has no references, but the papers citing it place it: GPipe cites DistBelief and Megatron-LM
    rel = relations(g, ["web:research.google/distbelief"], titles)
    assert rel["arxiv:1909.08053"].kind == "cocitation"
    assert rel["arxiv:1909.08053"].reason == "co-cited with it in 1 paper"
    assert short_name(GPIPE) == "GPipe" and short_name(ADAM) == "Adam"


def test_related_explains_by_citations_and_takes_several_targets(searcher: Searcher) -> None:
    res = related(searcher, "1811.06965", k=5)
    by_id = {r.doc_id: r for r in res.items}
    assert by_id["doi:10.1145/3341301.3359646"].relation == "cites"
    assert by_id["doi:10.1145/3341301.3359646"].reason.startswith("cites it")
    assert by_id["doi:10.1145/3341301.3359646"].to_json()["relation"] == "cites"
    several = related(searcher, ["GPipe", "https://arxiv.org/abs/1909.08053"], k=4)
    assert several.targets == ("arxiv:1811.06965", "arxiv:1909.08053") and several.target == "arxiv:1811.06965"
    got = {r.doc_id: r for r in several.items}
    assert not {"arxiv:1811.06965", "arxiv:1909.08053"} & set(got)
    assert got["arxiv:1910.02054"].reason.startswith("cites GPipe and Megatron-LM")  # ZeRO cites both
    assert got["doi:10.1145/3341301.3359646"].reason.startswith("cites GPipe")
    assert several.to_json()["targets"] == ["arxiv:1811.06965", "arxiv:1909.08053"]
    # words split by the shell that name nothing are one free text
    text = related(searcher, ["ring", "allreduce"], k=2)
    assert text.target is None and text.items[0].doc_id == "web:example.org/blog"


def test_titles_name_documents(searcher: Searcher) -> None:
    v = searcher.pin()
    assert resolve_target(v, "GPipe") == "arxiv:1811.06965"
    assert resolve_target(v, "megatron-lm") == "arxiv:1909.08053"
    assert resolve_target(v, "Large Scale Distributed Deep Networks") is None  # a subtitle is not a name
    assert resolve_target(v, "ZeRO: memory optimizations toward training trillion parameter model") == (
        "arxiv:1910.02054")
    assert resolve_target(v, "pipeline bubble") is None


# -- the commands ----------------------------------------------------------------------------------------


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_cites_cited_by_suggest(home: Path) -> None:
    code, out, _ = cli("--home", str(home), "cites", "Megatron-LM", "--json")
    assert code == 0
    data = json.loads(out)
    assert [i["doc_id"] for i in data["items"]] == ["arxiv:1811.06965", "doi:10.1145/3341301.3359646"]
    assert data["unresolved"][0]["title"] == "Attention is all you need"
    code, out, err = cli("--home", str(home), "cited-by", "https://arxiv.org/abs/1811.06965v1", "--json")
    assert code == 0 and len(json.loads(out)["items"]) == 3 and not err
    code, out, _ = cli("--home", str(home), "cited-by", "GPipe")
    assert code == 0 and "Cited by GPipe" in out and "flushes" in out
    code, out, _ = cli("--home", str(home), "suggest", "-k", "5", "--json")
    assert code == 0 and [s["arxiv_id"] for s in json.loads(out)["items"]] == ["1412.6980", "1706.03762"]
    code, out, _ = cli("--home", str(home), "suggest")
    assert code == 0 and "Adam" in out
    code, out, _ = cli("--home", str(home), "related", "GPipe", "Megatron-LM", "--json")
    items = {i["doc_id"]: i for i in json.loads(out)["items"]}
    assert code == 0 and items["arxiv:1910.02054"]["reason"].startswith("cites GPipe and Megatron-LM")
    assert items["arxiv:1910.02054"]["relation"] == "cites"


def test_cli_unknown_target_is_one_error_line(home: Path) -> None:
    code, out, err = cli("--home", str(home), "cites", "a paper nobody indexed")
    assert code == 1 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "names no document" in lines[0]
    code, _, err = cli("--home", str(home / "nowhere"), "cited-by", "GPipe")
    assert code == 1 and err.startswith("error: ")


def test_cli_suggest_add_puts_fetchable_works_in_the_catalog(tmp_path: Path, home: Path) -> None:
    import shutil

    copy = tmp_path / "kb"
    shutil.copytree(home, copy)
    code, out, _ = cli("--home", str(copy), "suggest", "--add", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["list"] == "suggested" and data["added"] == ["arxiv:1412.6980", "arxiv:1706.03762"]
    catalog = [json.loads(x) for x in (copy / "corpus" / "catalog.jsonl").read_text().splitlines()]
    adam = next(r for r in catalog if r["id"] == "arxiv:1412.6980")
    assert adam["url"] == "https://arxiv.org/abs/1412.6980" and adam["lists"] == ["suggested"]
    assert adam["title"] == ADAM and adam["kind"] == "paper"
    # again: nothing doubles
    cli("--home", str(copy), "suggest", "--add")
    again = [json.loads(x) for x in (copy / "corpus" / "catalog.jsonl").read_text().splitlines()]
    assert len(again) == len(catalog)


# -- open copies named by citing papers (issue 12 item 6) ---------------------------------------------------


def test_arxiv_ids_that_references_give_a_work_become_the_next_fetchs_hints(
    tmp_path: Path, encoder, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    import asyncio
    from types import SimpleNamespace

    import dmlqa.acquire
    from dmlqa.errors import FetchError
    from dmlqa.models import CitationLink, Resource
    from dmlqa.pipeline.graph import arxiv_hints
    from dmlqa.pipeline.stages import fetch_async

    assert arxiv_hints(tmp_path / "index") == {}  # no index yet: no hints, no error
    distbelief = "web:research.google/distbelief"
    links = [
        # resolved by its title to a card; the citing paper also gives an arXiv id: an open copy to try
        (CitationLink("arxiv:1909.08053", ref(1, "Large scale distributed deep networks", arxiv="1112.6209v2"),
                      distbelief, how="title"), f"doc:{distbelief}"),
        (CitationLink("arxiv:1910.02054", ref(2, DISTBELIEF, arxiv="arXiv:1112.6209"), distbelief, how="fuzzy"),
         f"doc:{distbelief}"),
        # resolved by the id itself, by a system's name, or not at all: nothing to learn
        (CitationLink("arxiv:1909.08053", ref(3, GPIPE, arxiv="1811.06965"), "arxiv:1811.06965", how="arxiv"),
         "doc:arxiv:1811.06965"),
        (CitationLink("arxiv:1909.08053", ref(4, "Mxnet: a flexible library", arxiv="1512.01274"),
                      "web:example.org/blog", how="name"), "doc:web:example.org/blog"),
        (CitationLink("arxiv:1909.08053", ref(5, ATTENTION, arxiv="1706.03762")), "arxiv:1706.03762"),
    ]
    write_home(tmp_path, encoder, SimpleNamespace(rows=lambda: links))
    assert arxiv_hints(tmp_path / "index") == {distbelief: ("1112.6209",)}

    asked: dict[str, tuple[str, ...]] = {}

    async def spy(fetcher, url, **kwargs):  # noqa: ANN001, ANN202 - records what the fetch stage passes
        asked[url] = tuple(kwargs.get("known_arxiv_ids", ()))
        raise FetchError(url, "HTTP 403 Forbidden")

    monkeypatch.setattr(dmlqa.acquire, "fetch_resource", spy)
    card = Resource(id=distbelief, url="https://research.google/pubs/distbelief/", title=DISTBELIEF, kind="paper",
                    aliases=("https://research.google/pubs/distbelief/",))
    other = Resource(id="web:example.org/x", url="https://example.org/x", title="X", aliases=("https://example.org/x",))
    settings = load_settings(tmp_path)
    batch = asyncio.run(fetch_async([card, other], settings.with_overrides(open_access=True), offline=True))
    assert asked == {card.url: ("1112.6209",), other.url: ()}
    assert all(item.error is not None for item in batch.items)
    asked.clear()
    asyncio.run(fetch_async([card], settings.with_overrides(open_access=False), offline=True))
    assert asked == {card.url: ()}  # --no-open-access: no open copies looked for
