"""The citation map (issue 22, items 3 and 4): a paper's neighbourhood as nodes and edges, exported as
GraphML and DOT by ``dmlqa related TARGET --format graphml|dot`` and drawn in the app.

The index is real (FAISS, the citations table) and its citation links are written by hand below, so
every expected node and edge is read off :data:`CITES`, not off the product's output.
"""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import pytest
from typer.testing import CliRunner

from dmlqa.api import KnowledgeBase
from dmlqa.app.cli import app
from dmlqa.index.embed import embed_texts
from dmlqa.index.versions import dense_text, publish, write_version
from dmlqa.models import Block, Chunk, CitationLink, Document, Reference

runner = CliRunner()

#: A title a DOT or GraphML writer must carry as text: quotes, a backslash escape, markup, a control character.
HOSTILE = 'Yield "quoted" \\N <b>bold</b> & more\x01'
TITLES = {
    "T": "Target: Pipelines for Giant Models", "A": "Alpha: Older Work", "B": "Beta: Oldest Work",
    "C": "Gamma: A Citing Paper", "D": "Delta: Another Citing Paper", "E": "Epsilon: Third Citing Paper",
    "X": "Xi: The Common Baseline", "Y": HOSTILE, "Z": "Zeta: Rarely Cited", "F": "Phi: Cites Xi Only",
    "G": "Psi: Cites Y Only", "W": "Omega: Unconnected",
}
YEARS = {"T": 2019, "A": 2016, "B": 2012, "C": 2020, "D": 2021, "E": 2022, "X": 2015, "Y": 2017, "Z": 2018,
         "F": 2019, "G": 2020, "W": None}
#: Who cites whom (the fixture's reference lists, resolved).
CITES = {
    "T": ["A", "B"],
    "A": ["B"],
    "B": ["T"],  # a cycle: B is cited by T and cites it
    "C": ["T", "X", "A"],
    "D": ["T", "X", "Y"],
    "E": ["T", "Z"],
    "F": ["X"],
    "G": ["Y"],
}
# Read off CITES for T: it cites A and B; C, D, E (and B) cite it; of the documents not already there,
# the papers citing T also cite X (C and D: twice), Y (D) and Z (E); Y and Z tie on that, and Y is cited
# more in the knowledge base (D, G) than Z (E). F, G and W are not in T's neighbourhood.
EXPECTED_ROLES = {"T": "target", "A": "cites", "B": "cites", "C": "cited_by", "D": "cited_by", "E": "cited_by",
                  "X": "co_cited", "Y": "co_cited", "Z": "co_cited"}
CO_CITED_ORDER = ["X", "Y", "Z"]


def doc_id(key: str) -> str:
    return f"arxiv:2000.{ord(key):05d}"


def expected_edges(nodes: set[str]) -> set[tuple[str, str]]:
    return {(doc_id(a), doc_id(b)) for a, bs in CITES.items() for b in bs if a in nodes and b in nodes}


def build_home(home: Path, encoder) -> None:  # noqa: ANN001
    docs = [Document(doc_id=doc_id(k), url=f"https://arxiv.org/abs/2000.{ord(k):05d}", title=t,
                     blocks=(Block(text=f"{t}. A paper about distributed training."),), content_type="pdf",
                     kind="paper", year=YEARS[k]) for k, t in TITLES.items()]
    chunks = [Chunk(chunk_id=f"{d.doc_id}#0", doc_id=d.doc_id, url=d.url, title=d.title, text=d.blocks[0].text,
                    end=len(d.blocks[0].text)) for d in docs]
    rows = [(CitationLink(doc_id(a), Reference(raw=TITLES[b], ordinal=i, title=TITLES[b], marker=str(i)),
                          doc_id(b), how="title"), f"doc:{doc_id(b)}")
            for a, bs in CITES.items() for i, b in enumerate(bs, start=1)]
    vecs = embed_texts([dense_text(c.title, c.section, c.text) for c in chunks], encoder).vectors
    meta = {"model": "bundled:all-MiniLM-L6-v2", "encoder": "onnx-int8", "encoder_key": encoder.key}
    name = write_version(home / "index", docs, chunks, vecs, meta, ann_threshold=1000, citations=rows)
    publish(home / "index", name)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, encoder) -> Path:  # noqa: ANN001
    home = tmp_path_factory.mktemp("citemap-home")
    assert runner.invoke(app, ["--home", str(home), "init"]).exit_code == 0
    build_home(home, encoder)
    return home


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_neighbourhood_holds_target_cites_cited_by_and_most_co_cited(home: Path) -> None:
    cmap = KnowledgeBase(home).citation_map("Target: Pipelines for Giant Models", k=10)
    roles = {n.doc_id: n.role for n in cmap.nodes}
    assert roles == {doc_id(k): r for k, r in EXPECTED_ROLES.items()}
    assert cmap.nodes[0].doc_id == doc_id("T") == cmap.target
    assert [n.doc_id for n in cmap.nodes if n.role == "co_cited"] == [doc_id(k) for k in CO_CITED_ORDER]
    assert set(cmap.edges) == expected_edges(set(EXPECTED_ROLES)) and len(cmap.edges) == len(set(cmap.edges))
    by_id = {n.doc_id: n for n in cmap.nodes}
    # size: documents of the knowledge base citing it, counted from CITES
    for key in EXPECTED_ROLES:
        assert by_id[doc_id(key)].citations == sum(key in bs for bs in CITES.values())
    assert by_id[doc_id("X")].cocited == 2 and by_id[doc_id("T")].label == "Target (2019)"
    assert by_id[doc_id("X")].url == "https://arxiv.org/abs/2000.00088"
    assert cmap.notice and cmap.notice.startswith("read ")  # named by its title: which document it was read as
    # k bounds the co-cited only
    small = KnowledgeBase(home).citation_map(doc_id("T"), k=2)
    assert [n.doc_id for n in small.nodes if n.role == "co_cited"] == [doc_id("X"), doc_id("Y")]
    assert small.count("cites") == 2 and small.count("cited_by") == 3


def test_cli_graphml_reads_back_with_networkx(home: Path, tmp_path: Path) -> None:
    code, out, err = cli("--home", str(home), "related", "https://arxiv.org/abs/2000.00084", "--format", "graphml")
    assert code == 0 and not err
    path = tmp_path / "map.graphml"
    path.write_text(out, encoding="utf-8")
    g = nx.read_graphml(path)
    nodes = set(EXPECTED_ROLES)
    assert set(g.nodes) == {doc_id(k) for k in nodes}
    assert set(g.edges) == expected_edges(nodes) and g.is_directed()
    assert g.nodes[doc_id("T")]["role"] == "target" and g.nodes[doc_id("X")]["role"] == "co_cited"
    assert g.nodes[doc_id("Y")]["title"] == HOSTILE.replace("\x01", "")  # markup kept as text, control char gone
    assert g.nodes[doc_id("T")]["year"] == 2019 and g.nodes[doc_id("C")]["citations"] == 0


def test_cli_dot_has_the_same_edges_and_escaped_labels(home: Path) -> None:
    code, out, _ = cli("--home", str(home), "related", doc_id("T"), "--format", "dot", "-k", "1")
    assert code == 0 and out.startswith("digraph ") and out.rstrip().endswith("}")
    nodes = set(EXPECTED_ROLES) - {"Y", "Z"}  # -k 1: only the most co-cited, X
    edges = set(re.findall(r'^  "([^"]+)" -> "([^"]+)";$', out, re.M))
    assert edges == expected_edges(nodes)
    assert len(re.findall(r"^  \"[^\"]+\" \[", out, re.M)) == len(nodes)
    # every statement is one line: a DOT string with an unescaped quote or newline would break that
    assert all(line.startswith(("  ", "digraph", "}")) for line in out.splitlines())
    code, out, _ = cli("--home", str(home), "related", doc_id("G"), "--format", "dot")
    assert code == 0 and r'tooltip="Yield \"quoted\" \\N <b>bold</b> & more"' in out


def test_cli_map_formats_refuse_what_does_not_apply(home: Path) -> None:
    code, out, err = cli("--home", str(home), "related", doc_id("T"), "--format", "graphml", "--since", "2019")
    assert code == 1 and not out and err.startswith("error: ") and "--since" in err
    code, out, err = cli("--home", str(home), "related", "a paper nobody indexed", "--format", "dot")
    assert code == 1 and not out and "names no document" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("--home", str(home), "related", doc_id("T"), "--format", "svg")
    assert code == 1 and "graphml or dot" in err


def test_a_document_without_links_maps_alone(home: Path) -> None:
    cmap = KnowledgeBase(home).citation_map(doc_id("W"))
    assert [(n.doc_id, n.role, n.label) for n in cmap.nodes] == [(doc_id("W"), "target", "Omega")]
    assert cmap.edges == () and cmap.to_json()["edges"] == []
