"""BibTeX output, checked by parsing it back with a real BibTeX parser (bibtexparser 2)."""

from __future__ import annotations

import pytest

from dmlqa.bibtex import base_key, citation_keys, latex_accents, to_bibtex, venue_kind
from dmlqa.related import Related

bibtexparser = pytest.importorskip("bibtexparser", minversion="2.0.0b1")
from bibtexparser import middlewares  # noqa: E402


def item(doc_id: str, title: str, url: str, *, authors: tuple[str, ...] = (), year: int | None = None,
         venue: str | None = None, kind: str = "paper") -> Related:
    return Related(doc_id=doc_id, title=title, url=url, score=0.5, reason="r", authors=authors, year=year,
                   venue=venue, kind=kind)


GPIPE = item("arxiv:1811.06965", "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism",
             "https://arxiv.org/abs/1811.06965", authors=("Yanping Huang", "et al."), year=2019, venue="NeurIPS")
SPECIAL = item("doi:10.1145/3458817.3476209", "Caching & Paging: 50% Faster {GPU} $Costs$ #1 a_b ~c ^d back\\slash",
               "https://doi.org/10.1145/3458817.3476209", authors=("Jörg Müller", "Zoë Ødegård"), year=2021,
               venue="IEEE Transactions on Parallel and Distributed Systems")
ALPA = item("arxiv:2201.12023", "Alpa: Automating Inter- and Intra-Operator Parallelism", "https://arxiv.org/abs/2201.12023",
            authors=("Lianmin Zheng et al.",), year=2022, venue="arxiv")
REPO = item("github:horovod/horovod", "Horovod", "https://github.com/horovod/horovod", authors=("Horovod",),
            kind="repo")
DOCS = item("web:x/1", "Elastic Horovod", "https://horovod.readthedocs.io/en/stable/elastic.html#a%20b",
            authors=("The Horovod Authors",), year=2022, kind="docs")
PIPE_A = item("doi:10.1145/1", "Pipelines for Training", "https://doi.org/10.1145/1", authors=("Ana Smith",), year=2020,
              venue="SOSP")
PIPE_B = item("doi:10.1145/2", "Pipelines, Again", "https://doi.org/10.1145/2", authors=("Bo Smith",), year=2020,
              venue="SOSP")
ITEMS = [GPIPE, SPECIAL, ALPA, REPO, DOCS, PIPE_A, PIPE_B]


def parse(text: str):  # noqa: ANN201 - bibtexparser.Library
    lib = bibtexparser.parse_string(
        text, append_middleware=[middlewares.LatexDecodingMiddleware(), middlewares.SeparateCoAuthors()]
    )
    assert not lib.failed_blocks, [b.error for b in lib.failed_blocks]
    return lib


def fields(entry) -> dict[str, object]:  # noqa: ANN001
    return {f.key: f.value for f in entry.fields}


@pytest.mark.parametrize("ascii_only", [False, True])
def test_every_entry_round_trips(ascii_only: bool) -> None:
    text = to_bibtex(ITEMS, ascii_only=ascii_only)
    if ascii_only:
        assert text.isascii()
    lib = parse(text)
    raw = bibtexparser.parse_string(text)  # URL fields are verbatim: read them without LaTeX decoding
    assert len(lib.entries) == len(raw.entries) == len(ITEMS)
    keys = [e.key for e in lib.entries]
    assert len(set(keys)) == len(keys)
    for e, r, it in zip(lib.entries, raw.entries, ITEMS, strict=True):
        f = fields(e)
        assert str(f["title"]).replace("ˆ", "^") == it.title, e.key  # braces protect the case, then decode away
        assert fields(r)["url"] == it.url
        assert f.get("year") == (str(it.year) if it.year else None)
    by_key = {e.key: e for e in lib.entries}
    assert fields(by_key["huang2019gpipe"])["author"] == ["Yanping Huang", "others"]
    assert fields(by_key["muller2021caching"])["author"] == ["Jörg Müller", "Zoë Ødegård"]


def test_entry_types_and_fields() -> None:
    lib = parse(to_bibtex(ITEMS))
    by_key = {e.key: e for e in lib.entries}
    gpipe = by_key["huang2019gpipe"]
    assert gpipe.entry_type == "inproceedings"
    assert fields(gpipe)["booktitle"] == "NeurIPS"
    assert fields(gpipe)["eprint"] == "1811.06965" and fields(gpipe)["archivePrefix"] == "arXiv"
    special = by_key["muller2021caching"]
    assert special.entry_type == "article"
    assert fields(special)["journal"] == "IEEE Transactions on Parallel and Distributed Systems"
    assert fields(special)["doi"] == "10.1145/3458817.3476209"
    alpa = by_key["zheng2022alpa"]
    assert alpa.entry_type == "misc" and fields(alpa)["eprint"] == "2201.12023"
    assert fields(alpa)["author"] == ["Lianmin Zheng", "others"]
    repo = by_key["horovodhorovod"]
    assert repo.entry_type == "misc" and "eprint" not in fields(repo)
    assert fields(repo)["note"] == "Code repository"
    docs = next(e for e in lib.entries if e.key.endswith("elastic"))
    assert fields(docs)["author"] == ["The Horovod Authors"]  # an institution stays one name


def test_raw_text_escapes_and_protection() -> None:
    text = to_bibtex([SPECIAL, REPO, DOCS])
    assert r"Caching \& Paging: 50\% Faster \{GPU\} \$Costs\$ \#1 a\_b \textasciitilde{}c" in text
    assert r"\textbackslash{}slash" in text
    assert "title = {{Caching" in text  # the whole title is protected from re-casing
    assert "author = {Jörg Müller and Zoë Ødegård}" in text
    assert r"howpublished = {\url{https://horovod.readthedocs.io/en/stable/elastic.html\#a\%20b}}" in text
    assert "url = {https://horovod.readthedocs.io/en/stable/elastic.html#a%20b}" in text
    assert r"author = {{The Horovod Authors}}" in text
    assert latex_accents("Jörg Müller, Ødegård") == r'J{\"o}rg M{\"u}ller, {\O}deg{\aa}rd'


def test_keys_are_ascii_and_deduplicated() -> None:
    assert base_key(SPECIAL) == "muller2021caching"
    assert base_key(item("x", "The Art of Scaling", "https://e.org", authors=("Huang, Yanping",), year=2019)) == (
        "huang2019art")
    assert base_key(item("x", "", "https://e.org")) == "ref"
    assert base_key(item("x", "ZeRO-Offload", "https://e.org", year=2021)) == "zerooffload2021"
    assert base_key(item("x", "2 Bit Training", "https://e.org", year=2021)) == "bit2021"
    assert base_key(item("x", "1000", "https://e.org", year=2021)) == "ref2021"
    keys = citation_keys([PIPE_A, PIPE_B, GPIPE, PIPE_A])
    assert keys == ["smith2020pipelinesa", "smith2020pipelinesb", "huang2019gpipe", "smith2020pipelinesc"]
    lib = parse(to_bibtex([PIPE_A, PIPE_B]))
    assert [e.key for e in lib.entries] == ["smith2020pipelinesa", "smith2020pipelinesb"]
    assert all(k.isascii() and k.isalnum() for k in citation_keys(ITEMS))


def test_venue_kinds() -> None:
    assert venue_kind("OSDI") == "conference" and venue_kind("NeurIPS Workshop") == "conference"
    assert venue_kind("ACM Computing Surveys") == "journal" and venue_kind("TPDS") == "journal"
    assert venue_kind("VLDB") == "journal" and venue_kind("arxiv") == "preprint" and venue_kind(None) == "preprint"
    assert venue_kind("techrxiv") == "preprint"


def test_empty_list() -> None:
    assert to_bibtex([]) == ""
