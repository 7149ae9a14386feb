"""End to end over the real web snapshot (../shared/websnap), built once per test session.

Skipped with a reason in a user's clone, where ../shared does not exist.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dmlqa.app.cli import app

pytestmark = pytest.mark.snapshot
runner = CliRunner()


def dmlqa(*args: str) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def built(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    home = tmp_path_factory.mktemp("snapshot-home")
    snapshot = shared_dir / "websnap" / "snapshot.warc.gz"
    dmlqa("--home", str(home), "init")
    lists = sorted((shared_dir / "seeds").glob("*")) + [shared_dir / "websnap" / "extra-resources.md"]
    dmlqa("--home", str(home), "catalog", "import", *map(str, lists))
    args = ("--home", str(home), "build", "--offline", "--archive", str(snapshot), "--json")
    first = json.loads(dmlqa(*args))
    second = json.loads(dmlqa(*args))
    return home, first, second


# -- what the snapshot supports, derived from the WARC and the list files (never from the product) -------

_URL_IN_LIST = re.compile(r"(?:https?://|www\.)[^\s<>()\[\]\"'`|]+")
_PDF_META = re.compile(rb'<meta[^>]+name="citation_pdf_url"[^>]+content="([^"]+)"')


def _norm(url: str) -> str:
    """The snapshot's own URL matching rule (../shared/eval/README.md), plus fragments dropped."""
    u = re.sub(r"^https?://", "", url.strip().lower())
    u = re.sub(r"^www\.", "", u).split("#")[0].rstrip("/")
    m = re.match(r"arxiv\.org/(abs|pdf)/(\d{4}\.\d{4,5})(v\d+)?(\.pdf)?$", u)
    return "arxiv.org/abs/" + m.group(2) if m else u


@pytest.fixture(scope="module")
def expected(shared_dir: Path) -> dict:
    """Works the snapshot holds for the lists: status-200 WARC records a listed URL leads to (through
    a manifest alias line, a redirect record or a landing page's citation_pdf_url), grouped by body."""
    from warcio.archiveiterator import ArchiveIterator

    records: dict[str, tuple[int, bytes, str | None]] = {}
    with open(shared_dir / "websnap" / "snapshot.warc.gz", "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "response":
                records[rec.rec_headers.get_header("WARC-Target-URI")] = (
                    int(rec.http_headers.get_statuscode()), rec.content_stream().read(),
                    rec.http_headers.get_header("Location"))
    manifest = [json.loads(x) for x in (shared_dir / "websnap" / "manifest.jsonl").read_text().splitlines()]
    alias = {_norm(m["url"]): m["alias_of"] for m in manifest if m.get("alias_of")}
    by_norm: dict[str, list[str]] = {}
    for u in records:
        by_norm.setdefault(_norm(u), []).append(u)

    def reach(url: str, depth: int = 0) -> list[str]:
        out = []
        for rec_url in by_norm.get(_norm(url)) or ([alias[_norm(url)]] if _norm(url) in alias else []):
            status, body, location = records[rec_url]
            if 300 <= status < 400 and location and depth < 3:
                out += reach(location, depth + 1)
            elif status == 200:
                m = _PDF_META.search(body)
                pdf = m.group(1).decode() if m else None
                out.append(pdf if pdf in records and records[pdf][0] == 200 else rec_url)
        return out

    lists = sorted((shared_dir / "seeds").glob("*")) + [shared_dir / "websnap" / "extra-resources.md"]
    listed = {m.group(0).rstrip(".,;:!?*_") for p in lists for m in _URL_IN_LIST.finditer(p.read_text())}
    groups: dict[str, dict[str, set[str]]] = {}  # sha256 of the body -> {"records", "listed"}
    for url in listed:
        for rec_url in reach(url):
            g = groups.setdefault(hashlib.sha256(records[rec_url][1]).hexdigest(), {"records": set(), "listed": set()})
            g["records"].add(rec_url)
            g["listed"].add(url)
    return groups


def test_every_archived_work_the_lists_name_is_a_document_or_a_named_duplicate(built, expected) -> None:
    home, first, _ = built
    assert first["resources"] == 238  # 181 from the five seeds (tests/test_catalog.py) + 57 extra resources
    version = (home / "index" / "CURRENT").read_text().strip()
    db = sqlite3.connect(home / "index" / "versions" / version / "store.sqlite")
    docs = {r[0]: r for r in db.execute("SELECT doc_id, url, source_url, is_card FROM documents")}
    sources = {_norm(r[2]) for r in docs.values() if not r[3]}
    dup_urls = {_norm(d["url"]): d for d in first["duplicates"]}
    merged_groups = 0
    for g in expected.values():
        held = any(_norm(u) in sources for u in g["records"])
        named = [dup_urls[_norm(u)] for u in g["listed"] if _norm(u) in dup_urls]
        assert held or named, f"archived work {sorted(g['records'])} is neither a document nor a named duplicate"
        if not held:
            merged_groups += 1
            assert all(d["of"] in docs and d["reason"] for d in named)
    # Each distinct archived body is one document, except copies merged by title (other versions of a paper).
    assert first["documents"] == len(expected) - merged_groups
    assert first["documents"] >= 112 and merged_groups <= 3
    assert first["documents"] + first["cards"] + len(first["duplicates"]) == first["resources"]
    assert first["from_archive"] >= first["documents"] and first["fetched"] == 0
    # ~2.9 M characters at ≤200 tokens a chunk; the exact number moves with chunking changes.
    assert 4000 <= first["chunks"] <= 6000
    assert first["embedded"] + first["reused_embeddings"] == first["chunks"]
    reasons = {f["error"] for f in first["failed"]}
    assert "HTTP 404 Not Found" in reasons and "not in the archive (offline)" in reasons
    assert all(set(f) == {"url", "stage", "error"} for f in first["failed"])
    # Addresses are fetched as listed: the case-sensitive GitHub pages and http links are documents.
    urls = " ".join(r[1] for r in docs.values() if not r[3])
    for must in ("github.com/nvidia/megatron-lm", "github.com/microsoft/deepspeed", "github.com/flexflow/flexflow"):
        assert must in urls
    cov = first["coverage"]["total"]
    assert cov["resources"] == 238 and cov["full_text"] + cov["abstract_only"] + cov["cards"] == 238
    assert cov["reasons"]["offline (not in the archive)"] >= 100


def test_one_record_per_work(built) -> None:
    home, first, _ = built
    dups = {d["doc_id"]: d for d in first["duplicates"]}
    # ZeRO's ACM DOI page names the arXiv PDF as its citation_pdf_url: one work, under the arXiv id.
    assert dups["doi:10.5555/3433701.3433727"]["of"] == "arxiv:1910.02054"
    hits = json.loads(dmlqa("--home", str(home), "search", "ZeRO memory optimizations toward training trillion "
                            "parameter models", "-k", "20", "--per-doc", "--json"))
    assert not any(h["doc_id"] == "doi:10.5555/3433701.3433727" for h in hits)
    answer = json.loads(dmlqa("--home", str(home), "ask", "How does ZeRO partition optimizer states?", "--json"))
    cited = [(c["url"], c["page"]) for c in answer["citations"]]
    assert len(cited) == len(set(cited))


def test_years_from_arxiv_ids_keep_the_best_match_for_since(built) -> None:
    home, _, _ = built
    out = json.loads(dmlqa("--home", str(home), "related", "activation recomputation", "--since", "2020",
                           "--format", "json"))
    assert any("2205.05198" in (i.get("url") or "") for i in out["items"])


def test_rebuild_reembeds_nothing(built: tuple[Path, dict, dict]) -> None:
    _, first, second = built
    assert second["embedded"] == 0 and second["reused_embeddings"] == second["chunks"] == first["chunks"]
    # Every text extracted the first time is reused (copies merged into one work included).
    assert second["documents"] == first["documents"] and second["reused_documents"] == first["extracted"] > 0
    assert second["index_version"] != first["index_version"]


def test_zero_query_ranks_a_zero_source_top5(built: tuple[Path, dict, dict]) -> None:
    home, _, _ = built
    hits = json.loads(dmlqa("--home", str(home), "search",
                            "ZeRO stages partition optimizer states gradients parameters", "-k", "5", "--json"))
    assert len(hits) == 5
    assert any("zero" in (h["title"] + h["url"]).lower() or "deepspeed" in h["url"] for h in hits)
    assert all(set(h) == {"rank", "score", "doc_id", "url", "title", "page", "section", "text"} for h in hits)


def test_a_question_of_a_neighbouring_field_is_refused_while_the_fields_own_is_answered(built) -> None:
    """Over the snapshot a question about Python unit tests meets sentences on testing and Python code and sits
    above the off-topic cut; the field check, which reads what the question is about, refuses it."""
    home, _, _ = built
    other = json.loads(dmlqa("--home", str(home), "ask", "How do I write a unit test in Python?", "--json",
                             "--no-llm"))
    assert other["refused"] and other["notice"] == "the question is about another field"
    own = json.loads(dmlqa("--home", str(home), "ask", "How do I pin each Horovod process to one GPU?", "--json",
                           "--no-llm"))
    assert not own["refused"] and own["citations"]


def test_a_question_naming_a_project_is_answered_from_its_terse_readme(built) -> None:
    """JetLag's README lists what its generic app does in items of a few words ("2. unpacks and executes
    run_dir/runapp.sh ..."), as far from the question's vector as an everyday question sits from the corpus; the
    question names the project and shares its words, so it is answered from it. Naming a work by the way does
    not make an everyday question one of the field."""
    home, _, _ = built
    a = json.loads(dmlqa("--home", str(home), "ask", "What does JetLag's generic app execute after it unpacks "
                         "input.tgz?", "--json", "--no-llm"))
    assert not a["refused"] and "run_dir/runapp.sh" in a["answer"]
    assert any("jetlag" in c["url"].lower() for c in a["citations"])
    other = json.loads(dmlqa("--home", str(home), "ask", "Which recipe does GPipe's cookbook recommend for banana "
                             "bread?", "--json", "--no-llm"))
    assert other["refused"] and other["notice"] == "no passage is about this question"


def test_pdf_hits_carry_pages_and_fetched_addresses(built: tuple[Path, dict, dict], expected, shared_dir) -> None:
    home, _, _ = built
    hits = json.loads(dmlqa("--home", str(home), "search", "GPipe micro-batches pipeline bubble re-materialization",
                            "-k", "10", "--per-doc", "--json"))
    gpipe = [h for h in hits if "gpipe" in h["title"].lower()]
    assert gpipe and isinstance(gpipe[0]["page"], int) and gpipe[0]["page"] >= 1
    assert len({h["doc_id"] for h in hits}) == len(hits)
    # what a link shows: the address its text was read from, or a card's address as its list wrote it
    fetched = {u for g in expected.values() for u in g["records"]}
    lists = sorted((shared_dir / "seeds").glob("*")) + [shared_dir / "websnap" / "extra-resources.md"]
    listed = {m.group(0).rstrip(".,;:!?*_") for p in lists for m in _URL_IN_LIST.finditer(p.read_text())}
    assert {h["url"] for h in hits} <= fetched | listed
    assert {h["url"] for h in hits} & fetched - listed  # some hits show an address no list wrote (a PDF read)


def test_status(built: tuple[Path, dict, dict]) -> None:
    home, _, second = built
    st = json.loads(dmlqa("--home", str(home), "status", "--json"))
    assert st["index_version"] == second["index_version"]
    assert (st["resources"], st["documents"], st["cards"], st["chunks"]) == (
        238, second["documents"], second["cards"], second["chunks"])
    assert st["failed"] == second["failed"]
    g = st["graph"]  # the citation graph's counts, as the build reported them
    assert (g["references"], g["resolved"], g["skipped"]) == (
        second["references"], second["references_resolved"], second["references_skipped"])
    assert sum(g["by"].values()) == g["resolved"] and g["papers"] >= 20
    assert f"{g['papers']} papers" in dmlqa("--home", str(home), "status")


# -- the citation graph (issue 12) -------------------------------------------------------------------------


def _words(text: str) -> str:
    """Lower-case words of a PDF's text, hyphenation at line ends undone (for finding titles in it)."""
    return " ".join(re.findall(r"[a-z0-9]+", re.sub(r"-\s*\n\s*", "", text.lower())))


@pytest.fixture(scope="module")
def paper_texts(built) -> dict[str, str]:
    """Indexed PDF documents → the words of their full text, read from the document store (not the graph)."""
    home, _, _ = built
    version = (home / "index" / "CURRENT").read_text().strip()
    index = sqlite3.connect(home / "index" / "versions" / version / "store.sqlite")
    pdfs = {r[0] for r in index.execute("SELECT doc_id FROM documents WHERE content_type='pdf' AND is_card=0")}
    store = sqlite3.connect(home / "corpus" / "documents.sqlite")
    out = {}
    for doc_id, body in store.execute("SELECT doc_id, document FROM documents"):
        if doc_id in pdfs:
            out[doc_id] = _words("\n\n".join(b["text"] for b in json.loads(body)["blocks"]))
    return out


def test_build_reads_and_resolves_references(built) -> None:
    _, first, second = built
    assert first["references"] >= 1000 and first["references_resolved"] >= 150  # 27 papers, ~45 references each
    assert first["references_skipped"] <= first["references"] // 20
    assert "graph" in first["seconds"] and second["references"] == first["references"]


def test_cited_by_gpipe_matches_the_papers_that_name_it(built, paper_texts) -> None:
    home, _, _ = built
    out = json.loads(dmlqa("--home", str(home), "cited-by", "1811.06965", "--json"))
    got = {i["doc_id"] for i in out["items"]}
    # Papers whose text names GPipe's title (in their reference list), found without the product's parser.
    truth = {d for d, words in paper_texts.items() if "training of giant neural networks" in words} - {
        "arxiv:1811.06965"}
    assert len(truth) >= 10
    assert len(got & truth) >= 0.8 * len(truth), sorted(truth - got)
    assert got <= truth, sorted(got - truth)
    assert any(i["context"] for i in out["items"])


def test_cites_zero_offload_names_zero_and_megatron(built) -> None:
    home, _, _ = built
    out = json.loads(dmlqa("--home", str(home), "cites", "ZeRO-Offload", "--json"))
    assert out["target"]["doc_id"] == "arxiv:2101.06840"
    titles = [i["title"] for i in out["items"]]
    assert any(t.startswith("ZeRO: ") for t in titles) and any(t.startswith("Megatron-LM: ") for t in titles)
    assert out["unresolved"] and all(set(u) == {"title", "year", "arxiv_id", "doi"} for u in out["unresolved"])


def test_related_gpipe_explains_a_result_by_a_citation(built) -> None:
    home, _, _ = built
    out = json.loads(dmlqa("--home", str(home), "related", "1811.06965", "--json"))
    cited = [i for i in out["items"] if i.get("relation")]
    assert cited and any(i["reason"].startswith(("cites it", "cited by it")) for i in cited)
    several = json.loads(dmlqa("--home", str(home), "related", "1811.06965", "1910.02054", "--json"))
    assert several["targets"] == ["arxiv:1811.06965", "arxiv:1910.02054"]
    assert not {"arxiv:1811.06965", "arxiv:1910.02054"} & {i["doc_id"] for i in several["items"]}


def test_suggest_finds_works_several_papers_cite_and_no_list_names(built, paper_texts, shared_dir) -> None:
    home, _, _ = built
    out = json.loads(dmlqa("--home", str(home), "suggest", "-k", "15", "--json"))["items"]
    assert len(out) >= 10
    lists = _words(" ".join(p.read_text() for p in sorted((shared_dir / "seeds").glob("*"))
                            + [shared_dir / "websnap" / "extra-resources.md"]))
    good = 0
    for s in out:
        title = _words(s["title"])
        citing = [d for d, words in paper_texts.items() if title in words]
        in_lists = title in lists or any(x and _words(x) in lists for x in (s["arxiv_id"], s["doi"]))
        good += len(citing) >= 2 and not in_lists and set(s["cited_by"]) <= set(paper_texts)
    assert good >= 0.8 * len(out)


# -- links as fetched (issue 18) and the evidence and the map (issue 22) -----------------------------------


def _warc_bodies(shared_dir: Path) -> dict[str, bytes]:
    """Status-200 response bodies of the snapshot, by the exact URL that was fetched."""
    from warcio.archiveiterator import ArchiveIterator

    out = {}
    with open(shared_dir / "websnap" / "snapshot.warc.gz", "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "response" and rec.http_headers.get_statuscode() == "200":
                out[rec.rec_headers.get_header("WARC-Target-URI")] = rec.content_stream().read()
    return out


def test_every_link_shown_is_an_address_that_was_fetched(built, expected) -> None:
    import dmlqa as api

    home, _, _ = built
    docs = [d for d in api.KnowledgeBase(home).documents().values() if not d.is_card]
    fetched = {u for g in expected.values() for u in g["records"]}
    assert len(docs) >= 100
    assert [(d.doc_id, d.link) for d in docs if d.link not in fetched] == []
    # the address as fetched, not the identity: hosts keep their www. (the identity drops it)
    assert any("://www." in d.link for d in docs) and any("://www." not in d.url and "://www." in d.link for d in docs)


def test_show_locates_a_quote_on_a_pdf_page_and_on_a_docs_page(built, shared_dir) -> None:
    import io

    from pypdf import PdfReader

    home, _, _ = built
    bodies = _warc_bodies(shared_dir)
    gpipe = json.loads(dmlqa("--home", str(home), "show", "1811.06965", "--json"))
    reader = PdfReader(io.BytesIO(bodies[gpipe["url"]]))
    words = reader.pages[2].extract_text().split()  # page 3, read with pypdf from the archived bytes
    quote = " ".join(words[60:72])
    out = json.loads(dmlqa("--home", str(home), "show", "1811.06965", "--page", "3", "--quote", quote, "--json"))
    assert (out["doc_id"], out["page"], out["quote_found"]) == ("arxiv:1811.06965", 3, True)
    # a docs page: a phrase of the archived HTML of Horovod's Tensor Fusion page
    [fusion_url] = [u for u in bodies if "tensor-fusion" in u]
    phrase = "batch small allreduce operations"
    assert phrase in bodies[fusion_url].decode("utf-8", "replace")
    page = json.loads(dmlqa("--home", str(home), "show", fusion_url, "--quote", phrase, "--json"))
    assert page["quote_found"] and phrase in page["text"] and page["url"] == fusion_url


def test_citation_map_of_gpipe_holds_its_citers(built, paper_texts) -> None:
    import networkx as nx

    home, _, _ = built
    graph = nx.read_graphml(io_of(dmlqa("--home", str(home), "related", "1811.06965", "--format", "graphml")))
    citers = {a for a, b in graph.edges if b == "arxiv:1811.06965"}
    truth = {d for d, words in paper_texts.items() if "training of giant neural networks" in words} - {
        "arxiv:1811.06965"}
    assert len(citers & truth) >= 0.8 * len(truth) and citers <= truth
    cited = {b for a, b in graph.edges if a == "arxiv:1811.06965"}
    assert cited and graph.number_of_nodes() >= 21 and graph.number_of_edges() >= 20
    dot = dmlqa("--home", str(home), "related", "1811.06965", "--format", "dot")
    assert dot.count(" -> ") == graph.number_of_edges()


def io_of(text: str):  # noqa: ANN201 - a file object networkx reads
    import io

    return io.BytesIO(text.encode("utf-8"))
