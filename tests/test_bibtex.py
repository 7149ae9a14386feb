"""BibTeX output, checked by parsing it back with a real BibTeX parser (bibtexparser 2)."""

from __future__ import annotations

import pytest

from dmlqa.query.bibtex import base_key, citation_keys, latex_accents, to_bibtex, venue_kind
from dmlqa.query.related import Related

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


def test_a_local_files_path_is_no_url_of_the_entry() -> None:
    """A PDF of your own (dmlqa add, a reference library without DOI or arXiv id) is cited without its path."""
    mine = item("local:lib/x.pdf", "Pipelines at Home", "file:///home/me/dmlqa/corpus/local/lib/x.pdf",
                authors=("Ana Smith", "Bo Chen"), year=2021, venue="SOSP")
    notes = item("local:notes.md", "My notes", "file:///home/me/notes.md", kind="article")
    entries = parse(to_bibtex([mine, notes])).entries
    assert [fields(e).get("url") for e in entries] == [None, None]
    assert "howpublished" not in fields(entries[1]) and "file:" not in to_bibtex([mine, notes])
    assert fields(entries[0])["author"] == ["Ana Smith", "Bo Chen"] and entries[0].entry_type == "inproceedings"


# -- any text gives BibTeX that strict parsers accept ----------------------------------------------

pybtex_database = pytest.importorskip("pybtex.database")
import pybtex.errors  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NASTY = [
    "lone { brace", "lone } brace", "} backwards {", "{{ nested } only", "back\\slash\\", "100% of #1 & co",
    "a ~ b ^ c _ d $ e", "Ünïcödé 学習 ΑΒΓ 🚀", "line\nbreak\r\nand\ttab", "email @misc{x, title = {y}}",
    "\\textbf{bold} \\", "quote \" mark", "%", "@", "}", "{", "\\", "", "   ", "ctrl \x00 \x0b \x1b char",
]
NASTY_AUTHORS = [
    ("Lone { Brace", "Back\\Slash", "A, B, C, D", "Ernst and Young", "Copyright", "et al."),
    ("Zoë Ødegård, Jr., Anna", "}", "{", "@", "%", "and", "others"),
    ("Yanping Huang et al.",),
    ("",),
]


def strict_pybtex(text: str):  # noqa: ANN201 - pybtex BibliographyData
    pybtex.errors.set_strict_mode(True)
    return pybtex_database.parse_string(text, "bibtex")


def nasty_item(title: str, authors: tuple[str, ...], venue: str, eprint: str, kind: str = "paper") -> Related:
    return item(f"arxiv:{eprint}", title, f"https://example.org/{eprint}", authors=authors, year=2021,
                venue=venue, kind=kind)


def letters(text: str) -> list[str]:
    """The letters of ``text`` (pylatexenc decodes ``\\textasciicircum{}`` to the letter-like "ˆ")."""
    return [c for c in text.replace("ˆ", "^") if c.isalpha()]


@pytest.mark.parametrize("ascii_only", [False, True])
def test_nasty_text_parses_with_pybtex_and_bibtexparser(ascii_only: bool) -> None:
    items = [
        nasty_item(NASTY[i], NASTY_AUTHORS[i % len(NASTY_AUTHORS)], NASTY[-1 - i], NASTY[(i + 3) % len(NASTY)],
                   kind=("paper", "repo", "docs")[i % 3])
        for i in range(len(NASTY))
    ]
    items += [nasty_item(t, (), v, "2201.12023") for t, v in [("x", "Trans. {on} }Stuff{"), ("y", "arXiv {")]]
    text = to_bibtex(items, ascii_only=ascii_only)
    bib = strict_pybtex(text)
    assert len(bib.entries) == len(items)
    lib = parse(text)
    assert len(lib.entries) == len(items)
    for e, it in zip(lib.entries, items, strict=True):  # bibtexparser decodes the title's letters back
        assert letters(str(fields(e)["title"])) == letters(" ".join(it.title.split()) or it.url), e.key
    first = bib.entries[citation_keys(items)[0]]
    assert [str(p) for p in first.persons["author"]][-1] == "others"  # "et al." became "and others"
    assert "{Ernst and Young}" in text and "{A, B, C, D}" in text  # one name each, not two people / an error


def test_lone_braces_and_verbatim_fields_raw() -> None:
    it = item("arxiv:2201.12023} @x{", "a { b } c } d {", "https://e.org/a b{c}\\d", authors=("Ann {Lee",),
              year=2022, venue="Conf } X", kind="paper")
    text = to_bibtex([it])
    assert r"title = {{a \{ b \} c \textbraceright{} d \textbraceleft{}}}" in text
    assert r"author = {Ann \textbraceleft{}Lee}" in text
    assert r"booktitle = {Conf \textbraceright{} X}" in text
    assert "eprint = {2201.12023%7D%20@x%7B}" in text
    assert "url = {https://e.org/a%20b%7Bc%7D%5Cd}" in text
    (entry,) = strict_pybtex(text).entries.values()
    assert entry.fields["eprint"] == "2201.12023%7D%20@x%7B"


def test_doi_with_odd_characters_is_kept_encoded() -> None:
    it = item("doi:10.1000/a{b}c d", "T", "https://example.org/t", year=2020, venue="SOSP")
    text = to_bibtex([it])
    assert "doi = {10.1000/a%7Bb%7Dc%20d}" in text
    assert strict_pybtex(text).entries["t2020"].fields["doi"] == "10.1000/a%7Bb%7Dc%20d"


free_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
braces_and_specials = st.lists(
    st.sampled_from(list("{}\\%#&~^_$@\",= \n\tabcXYZéß学") + [" and ", " et al.", "others", "\\{"]), max_size=30,
).map("".join)
any_text = st.one_of(free_text, braces_and_specials)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(title=any_text, authors=st.lists(any_text, max_size=4), venue=any_text, eprint=any_text,
       kind=st.sampled_from(["paper", "repo", "docs"]), ascii_only=st.booleans())
def test_any_text_gives_bibtex_that_parses(title: str, authors: list[str], venue: str, eprint: str, kind: str,
                                           ascii_only: bool) -> None:
    it = item(f"arxiv:{eprint}", title, "https://example.org/" + eprint, authors=tuple(authors), year=2020,
              venue=venue, kind=kind)
    text = to_bibtex([it, GPIPE], ascii_only=ascii_only)
    bib = strict_pybtex(text)
    assert len(bib.entries) == 2
    lib = parse(text)
    assert len(lib.entries) == 2
    want = " ".join(title.split()) or it.url
    got = str(fields(lib.entries[0])["title"])
    if not ascii_only:  # accents written as commands decode to composed letters: compare NFC-insensitive
        assert letters(got) == letters(want)
    else:
        import unicodedata

        def norm(s: str) -> list[str]:
            return letters(unicodedata.normalize("NFC", s))

        assert norm(got) == norm(want) or len(norm(got)) >= len(norm(want)) - 2


def test_a_lists_et_al_reaches_bibtex_as_and_others() -> None:
    """"by Tal Ben-Nun et al., ACM Computing Surveys 2020" in a list: BibTeX must not claim one author."""
    from dmlqa.catalog.lists import parse_list

    res = parse_list("# L\n- [Demystifying Parallel and Distributed Deep Learning](https://arxiv.org/abs/1802.09941)"
                     " by Tal Ben-Nun et al., ACM Computing Surveys 2020\n", "l").resources[0]
    bib = to_bibtex([item(res.id, res.title, res.url, authors=res.authors, year=res.year, venue=res.venue)])
    assert "author = {Ben-Nun, Tal and others}" in bib or "author = {Tal Ben-Nun and others}" in bib, bib
