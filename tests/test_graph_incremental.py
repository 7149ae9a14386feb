"""The citation graph in proportion to change (issue 20): fuzzy titles through a blocking index, parsed
reference lists kept by document, and fuzzy answers reused from the previous graph.

Each part is checked against the result it must equal: the blocking index against comparing every pair
(on generated titles and on the snapshot's real references), the cached and the incremental graph against a
full run on the same documents, step after step of random adds, removals, changes and retitles.
"""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmlqa.catalog.urls import title_key
from dmlqa.index.citation_table import CitationRecord
from dmlqa.models import Block, Document, Reference
from dmlqa.pipeline import graph_index
from dmlqa.pipeline.graph import GraphResult, PreviousGraph, Resolver, citation_graph
from dmlqa.pipeline.graph_index import TitleIndex


@dataclass(frozen=True)
class Parsed:
    """Stands in for dmlqa.extract.references.ParsedReferences (same fields)."""

    references: tuple[Reference, ...] = ()
    contexts: dict[int, str] = field(default_factory=dict)
    skipped: int = 0


# A field's vocabulary: a few words in nearly every title, many in few. Blocking on the common ones is what
# made every title a candidate of every reference; small enough here that near-duplicates are frequent.
COMMON = ["distributed", "training", "learning", "deep", "for", "of", "the", "with", "parallel", "models", "large",
          "scale", "a", "and", "neural", "networks"]
RARE = ["pipeline", "tensor", "sharding", "offload", "gradient", "compression", "allreduce", "parameter", "server",
        "sparse", "mixture", "experts", "zero", "memory", "optimizer", "checkpoint", "elastic", "federated",
        "asynchronous", "stochastic", "quantization", "scheduling", "cluster", "heterogeneous", "inference", "serving",
        "attention", "transformer", "collective", "bandwidth", "topology", "recommendation", "embedding", "graph"]


def gen_title(rng: random.Random) -> str:
    words = [rng.choice(RARE if rng.random() < 0.45 else COMMON) for _ in range(rng.randint(4, 9))]
    title = " ".join(words).capitalize()
    return f"{rng.choice(RARE).capitalize()}X: {title}" if rng.random() < 0.25 else title


def perturb(title: str, rng: random.Random) -> str:
    """What PDFs and preprints do to a title: a lost space, a dropped or doubled letter, a word swapped."""
    chars = list(title)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(chars))
        op = rng.random()
        if op < 0.4 and chars[i] == " ":
            del chars[i]
        elif op < 0.7:
            del chars[i]
        else:
            chars.insert(i, chars[i])
    out = "".join(chars)
    if rng.random() < 0.2:
        words = out.split()
        words[rng.randrange(len(words))] = rng.choice(COMMON)
        out = " ".join(words)
    return out


# -- the blocking index finds what all pairs find -------------------------------------------------------------


def test_blocking_finds_what_all_pairs_finds_on_generated_titles() -> None:
    rng = random.Random(20)
    titles = [gen_title(rng) for _ in range(600)]
    index = TitleIndex(k for t in titles if (k := title_key(t)))
    queries = [perturb(rng.choice(titles), rng) for _ in range(800)] + [gen_title(rng) for _ in range(400)]
    found = 0
    for q in queries:
        key = title_key(q)
        if key is None:
            continue
        best = index.best(key)
        assert best == index.best_all_pairs(key), q
        found += best is not None
        # candidates are a strict subset of all keys for most queries: the point of the index
    assert found >= 500  # most perturbed titles still match: the comparison is not between two Nones
    assert sum(len(index.candidates(title_key(q) or "x")) for q in queries) < 0.5 * len(queries) * len(index)


def test_ties_go_to_the_smaller_key_whatever_the_order() -> None:
    a, b = "alpha beta gamma delta epsilon zeta", "alpha beta gamma delta epsilon zetb"
    query = "alpha beta gamma delta epsilon zet"
    assert TitleIndex([a, b]).best(query) == TitleIndex([b, a]).best(query) == a


def _warc_pdfs(warc: Path) -> dict[str, bytes]:
    from warcio.archiveiterator import ArchiveIterator

    out = {}
    with warc.open("rb") as fh:
        for record in ArchiveIterator(fh):
            if record.rec_type == "response" and "pdf" in (record.http_headers.get_header("Content-Type") or ""):
                out[record.rec_headers.get_header("WARC-Target-URI")] = record.content_stream().read()
    return out


@pytest.fixture(scope="module")
def snapshot_papers(shared_dir: Path) -> list[tuple[Document, Parsed]]:
    """The snapshot's PDFs as documents (titled as the manifest titles them) with their parsed references."""
    from dmlqa.extract.pdf import extract_pdf
    from dmlqa.extract.references import parse_references

    titles = {}
    for line in (shared_dir / "websnap" / "manifest.jsonl").read_text().splitlines():
        rec = json.loads(line)
        titles[rec["url"]] = rec.get("title") or rec["url"]
    out = []
    for i, (url, body) in enumerate(sorted(_warc_pdfs(shared_dir / "websnap" / "snapshot.warc.gz").items())):
        extracted = extract_pdf(body, url=url)
        d = Document(doc_id=f"web:pdf{i}", url=url, title=titles.get(url, url), blocks=extracted.blocks,
                     content_type="pdf", kind="paper", sha256=f"{i:064x}")
        p = parse_references(d)
        out.append((d, Parsed(p.references, p.contexts, p.skipped)))
    if sum(len(p.references) for _, p in out) < 500:
        pytest.skip("the snapshot's PDFs give too few references to compare on")
    return out


@pytest.mark.snapshot
def test_blocking_finds_what_all_pairs_finds_on_the_snapshots_references(
        snapshot_papers: list[tuple[Document, Parsed]], monkeypatch: pytest.MonkeyPatch) -> None:
    # The knowledge base: the PDFs, and as cards the works that the first half of the papers cite (their
    # titles as those papers wrote them); the second half's references resolve against it, fuzzily where
    # another paper's PDF wrote the title differently.
    half = len(snapshot_papers) // 2
    cards = [Document(doc_id=f"web:card{i}-{r.ordinal}", url=f"https://example.org/c{i}/{r.ordinal}", title=r.title,
                      blocks=(Block(text=r.title),), content_type="card", kind="paper", is_card=True, year=r.year)
             for i, (_, p) in enumerate(snapshot_papers[:half]) for r in p.references if r.title]
    docs = [d for d, _ in snapshot_papers] + cards
    parsed = {d.doc_id: p for d, p in snapshot_papers}
    blocked = citation_graph(docs, parse=lambda d: parsed[d.doc_id])
    monkeypatch.setattr(TitleIndex, "best", TitleIndex.best_all_pairs)
    all_pairs = citation_graph(docs, parse=lambda d: parsed[d.doc_id])
    assert blocked.rows() == all_pairs.rows()
    assert blocked == all_pairs
    assert blocked.resolved >= 100 and blocked.by_how.get("fuzzy", 0) >= 1
    # Most of those resolve exactly. The fuzzy rule itself, on real titles: the second half's reference titles
    # (as written, and as a PDF might have mangled them) against the first half's; the index answers as all
    # pairs do.
    def keys(papers: list[tuple[Document, Parsed]]) -> list[str]:
        return sorted({k for _, p in papers for r in p.references if (k := title_key(r.title))})

    index = TitleIndex(keys(snapshot_papers[:half]))
    rng = random.Random(0)
    found = 0
    for key in keys(snapshot_papers[half:]):
        for query in (key, title_key(perturb(key, rng)) or key):
            best = index.best(query)
            assert best == index.best_all_pairs(query), query
            found += best is not None and best != query
    assert found >= 50


# -- parsed reference lists are kept -------------------------------------------------------------------------


def pdf(doc_id: str, title: str, *, sha: str, year: int | None = 2020, kind: str = "paper") -> Document:
    return Document(doc_id=doc_id, url=f"https://example.org/{doc_id}", title=title, blocks=(Block(text=title),),
                    content_type="pdf", kind=kind, year=year, sha256=sha)


def card(doc_id: str, title: str, *, year: int | None = 2020, kind: str = "paper") -> Document:
    return Document(doc_id=doc_id, url=f"https://example.org/{doc_id}", title=title, blocks=(Block(text=title),),
                    content_type="card", kind=kind, year=year, is_card=True)


def test_an_unchanged_document_is_never_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "index" / "cache" / "references.sqlite"
    refs = {"a": (Reference(raw="r", ordinal=1, title="Sharding tensor pipeline offload gradient", year=2020),),
            "b": (Reference(raw="s", ordinal=1, title="Elastic cluster scheduling for deep learning", year=2019),)}
    calls: list[str] = []

    def parse(d: Document) -> Parsed:
        calls.append(d.doc_id)
        return Parsed(refs[d.sha256], {1: f"as {d.title} says [1]"}, skipped=2)

    docs = [pdf("p1", "One paper", sha="a"), pdf("p2", "Two paper", sha="b"), card("c", "Not parsed at all")]
    first = citation_graph(docs, parse=parse, cache=cache)
    assert sorted(calls) == ["p1", "p2"] and cache.is_file()
    calls.clear()
    again = citation_graph(docs, parse=parse, cache=cache)
    assert calls == [] and again == first  # contexts and skipped counts come back from the cache too
    changed = [replace(docs[0], sha256="b"), replace(docs[1], title="Two paper, retitled"), docs[2]]
    citation_graph(changed, parse=parse, cache=cache)
    assert sorted(calls) == ["p1", "p2"]  # new bytes, and a new title (the citing-sentence rule reads it)
    calls.clear()
    monkeypatch.setattr("dmlqa.extract.references.PARSER_VERSION", 10_000)
    citation_graph(docs, parse=parse, cache=cache)
    assert sorted(calls) == ["p1", "p2"]  # a new parser reads everything again


def test_a_damaged_cache_only_costs_parsing(tmp_path: Path) -> None:
    docs = [pdf("p1", "One paper", sha="a")]

    def parse(d: Document) -> Parsed:
        return Parsed((Reference(raw="r", ordinal=1, title="Elastic cluster scheduling for deep learning"),))

    bad = tmp_path / "references.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    assert citation_graph(docs, parse=parse, cache=bad) == citation_graph(docs, parse=parse)
    good = tmp_path / "ok.sqlite"
    citation_graph(docs, parse=parse, cache=good)
    db = sqlite3.connect(good)
    db.execute("UPDATE refs SET value='{broken'")
    db.commit()
    db.close()
    assert citation_graph(docs, parse=parse, cache=good) == citation_graph(docs, parse=parse)


# -- resolving only what changed equals resolving everything ------------------------------------------------


class World:
    """A small knowledge base that changes: documents, and the reference lists their bytes hold.

    Works are drawn from a pool larger than the knowledge base, so references name works that are added
    later (an old unresolved reference that a new document resolves) and works that are removed.
    """

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pool = [gen_title(self.rng) for _ in range(40)]
        self.docs: list[Document] = []
        self.refs: dict[str, tuple[Reference, ...]] = {}
        self.n = 0
        for _ in range(14):
            self.add()

    def new_refs(self) -> str:
        sha = f"{self.n:064x}"
        rng, out = self.rng, []
        for i in range(1, rng.randint(3, 9)):
            work = rng.randrange(len(self.pool))
            title = self.pool[work]
            how = rng.random()
            if how < 0.45:
                title = perturb(title, rng)
            elif how < 0.55:
                title = title.split(":")[-1]
            out.append(Reference(raw=f"[{i}] {title}", ordinal=i, title=title, marker=str(i),
                                 year=rng.choice([None, 2018, 2020, 2021, 2026]),
                                 arxiv_id=f"2001.{work:05d}" if rng.random() < 0.1 else None))
        self.refs[sha] = tuple(out)
        return sha

    def add(self) -> None:
        self.n += 1
        work = self.rng.randrange(len(self.pool))
        ident = f"arxiv:2001.{work:05d}" if self.rng.random() < 0.2 else f"web:d{self.n}"
        if any(d.doc_id == ident for d in self.docs):
            ident = f"web:d{self.n}"
        year = self.rng.choice([None, 2019, 2020, 2022])
        kind = "repo" if self.rng.random() < 0.1 else "paper"
        if self.rng.random() < 0.3:
            self.docs.insert(self.rng.randrange(len(self.docs) + 1),
                             card(ident, self.pool[work], year=year, kind=kind))
        else:
            self.docs.insert(self.rng.randrange(len(self.docs) + 1),
                             pdf(ident, self.pool[work], sha=self.new_refs(), year=year, kind=kind))

    def mutate(self, op: str) -> None:
        rng = self.rng
        if op == "add" or not self.docs:
            self.add()
            return
        i = rng.randrange(len(self.docs))
        d = self.docs[i]
        if op == "remove":
            del self.docs[i]
        elif op == "change" and not d.is_card:
            self.n += 1
            self.docs[i] = replace(d, sha256=self.new_refs())
        elif op == "retitle":
            self.docs[i] = replace(d, title=rng.choice([perturb(d.title, rng), rng.choice(self.pool)]))
        elif op == "year":
            self.docs[i] = replace(d, year=rng.choice([None, 2010, 2020, 2021]))
        elif op == "kind":
            self.docs[i] = replace(d, kind="repo" if d.kind == "paper" else "paper")
        elif op == "shuffle":
            rng.shuffle(self.docs)

    def parse(self, d: Document) -> Parsed:
        return Parsed(self.refs[d.sha256], {r.ordinal: f"cites [{r.ordinal}]" for r in self.refs[d.sha256][::2]})


def stored(result: GraphResult) -> list[CitationRecord]:
    """The records as the published version gives them back (references through their JSON form)."""
    return [CitationRecord(replace(link, reference=Reference.from_json(json.loads(json.dumps(
        link.reference.to_json())))), work) for link, work in result.rows()]


OPS = ["add", "remove", "change", "retitle", "year", "kind", "shuffle"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=8))
def test_incremental_graph_equals_a_full_one_after_any_changes(seed: int, ops: list[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(seed)
    fuzzy_calls = [0]
    real = Resolver.fuzzy

    def counted(self: Resolver, key: str, year: int | None = None) -> str | None:
        fuzzy_calls[0] += 1
        return real(self, key, year)

    monkeypatch.setattr(Resolver, "fuzzy", counted)
    before = list(world.docs)
    result = citation_graph(before, parse=world.parse)
    full_calls = inc_calls = 0
    for op in ops:
        world.mutate(op)
        fuzzy_calls[0] = 0
        full = citation_graph(world.docs, parse=world.parse)
        full_calls += fuzzy_calls[0]
        fuzzy_calls[0] = 0
        # the previous documents in another order than their build's: the version store need not keep it
        random.Random(seed).shuffle(before)
        result = citation_graph(world.docs, parse=world.parse, previous=PreviousGraph(before, stored(result)))
        inc_calls += fuzzy_calls[0]
        assert result.rows() == full.rows(), op
        assert result == full, op
        before = list(world.docs)
    assert inc_calls <= full_calls


def test_a_new_document_resolves_old_references_and_a_removed_one_unresolves_them() -> None:
    title = "Elastic sharding of gradient compression for heterogeneous clusters"
    refs = {"a": (Reference(raw="r1", ordinal=1, title=title.replace("gradient", "gradlent"), year=2020),
                  Reference(raw="r2", ordinal=2, title="Sparse mixture of experts serving at scale", year=2021))}
    citing = pdf("p", "A citing paper", sha="a")
    other = pdf("q", "Another paper entirely about something else", sha="a")

    def parse(d: Document) -> Parsed:
        return Parsed(refs[d.sha256])

    def step(before: list[Document], prev: GraphResult, after: list[Document]) -> GraphResult:
        inc = citation_graph(after, parse=parse, previous=PreviousGraph(before, stored(prev)))
        assert inc == citation_graph(after, parse=parse)
        return inc

    g0 = citation_graph([citing, other], parse=parse)
    assert [link.cited for link in g0.links if link.citing == "p"] == [None, None]
    target = card("t", title, year=2020)
    g1 = step([citing, other], g0, [citing, other, target])
    assert [(link.cited, link.how) for link in g1.links if link.citing == "p"] == [("t", "fuzzy"), (None, "")]
    g2 = step([citing, other, target], g1, [citing, other, replace(target, year=2010)])  # years now disagree
    assert [link.cited for link in g2.links if link.citing == "p"] == [None, None]
    g3 = step([citing, other, replace(target, year=2010)], g2, [citing, other, replace(target, year=2020)])
    assert g3 == g1
    g4 = step([citing, other, target], g3, [citing, other])
    assert g4 == g0


def test_reuse_reads_the_previous_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A no-change rebuild matches no title afresh, and a stale previous answer would show in the result:
    the reuse is real, which is why the equality tests above mean something."""
    title = "Elastic sharding of gradient compression for heterogeneous clusters"
    ref = Reference(raw="r1", ordinal=1, title=title.replace("gradient", "gradlent"), year=2020)
    docs = [pdf("p", "A citing paper", sha="a"), card("t", title, year=2020)]
    first = citation_graph(docs, parse=lambda d: Parsed((ref,)))
    monkeypatch.setattr(Resolver, "fuzzy", lambda *a: pytest.fail("matched afresh"))
    same = citation_graph(docs, parse=lambda d: Parsed((ref,)), previous=PreviousGraph(docs, stored(first)))
    assert same == first
    fake = [CitationRecord(replace(r.link, cited="elsewhere"), r.work) for r in stored(first)]
    assert citation_graph(docs, parse=lambda d: Parsed((ref,)),
                          previous=PreviousGraph(docs, fake)).links[0].cited == "elsewhere"


def test_the_cache_module_keys_only_documents_with_a_source_hash() -> None:
    assert graph_index.parse_key(pdf("p", "T", sha="")) is None
    assert graph_index.parse_key(pdf("p", "T", sha="a")) != graph_index.parse_key(pdf("p", "T2", sha="a"))
