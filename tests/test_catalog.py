"""The catalog stage: list dialects in, facts-only resources out, malformed lines reported not fatal."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from dmlqa.catalog.lists import ParsedList, list_name_for, parse_list
from dmlqa.catalog.markdown import repair_mojibake
from dmlqa.catalog.store import ImportReport, import_lists, merge, read_catalog, read_lists, write_catalog
from dmlqa.catalog.urls import canonicalize, resource_id
from dmlqa.errors import CatalogError
from dmlqa.models import KINDS, Resource

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared"
SEEDS = SHARED / "seeds"
WEBSNAP = SHARED / "websnap"


def by_url(pl: ParsedList) -> dict[str, Resource]:
    return {r.url: r for r in pl.resources}


# -- dialects ------------------------------------------------------------------------------------

def test_bullets_numbers_headings_and_toc() -> None:
    text = """# My Awesome List

[![Awesome](https://awesome.re/badge.svg)](https://awesome.re)

## Table of Contents
- [Frameworks](#frameworks)
- [Papers](#papers)

## Frameworks
1. [Ray](https://github.com/ray-project/ray) - A fast framework, 2017 and more prose.
2. [Horovod](https://github.com/horovod/horovod): distributed training for TensorFlow.

## Papers
### Pipeline Parallelism
* [GPipe](https://arxiv.org/abs/1811.06965)
+ [Ray cluster docs](https://docs.ray.io/en/latest/cluster/index.html)
"""
    pl = parse_list(text, "mine")
    assert pl.title == "My Awesome List"
    res = by_url(pl)
    assert list(res) == [
        "https://github.com/ray-project/ray",
        "https://github.com/horovod/horovod",
        "https://arxiv.org/abs/1811.06965",
        "https://docs.ray.io/en/latest/cluster/index.html",
    ]
    ray = res["https://github.com/ray-project/ray"]
    # Facts only: the description after " - " / ":" is prose and is not stored anywhere.
    assert ray.title == "Ray" and ray.year is None and ray.kind == "repo"
    assert ray.topics == ("Frameworks",) and ray.lists == ("mine",)
    stored = json.dumps([r.to_json() for r in pl.resources])
    assert "fast framework" not in stored and "distributed training" not in stored
    assert res["https://arxiv.org/abs/1811.06965"].topics == ("Papers", "Pipeline Parallelism")
    assert res["https://arxiv.org/abs/1811.06965"].kind == "paper"
    assert res["https://docs.ray.io/en/latest/cluster/index.html"].kind == "docs"
    assert pl.issues == ()
    assert any("image or badge" in s.reason for s in pl.skipped)


def test_author_venue_year_after_the_link() -> None:
    text = """# L
## Papers
- [Demystifying](https://arxiv.org/abs/1802.09941) by Tal Ben-Nun et al., ACM Computing Surveys 2020
- [PiPAD](https://dl.acm.org/doi/10.1145/3572848.3577487) Chunyang Wang et al., PPoPP 2023
- [Unity](https://www.usenix.org/conference/osdi22/presentation/unger) by Colin Unger, Zhihao Jia, et al., OSDI 2022
- [Survey](https://www.techrxiv.org/articles/preprint/x/19522414) by Peng Liang., techrxiv 2022
- [Ring](https://arxiv.org/abs/2310.01889) by Hao Liu et al., NeurIPS 2023 Workshop
- [Plain](https://example.com/plain) - a description, with commas, 2021
"""
    res = {r.title: r for r in parse_list(text, "l").resources}
    assert (res["Demystifying"].authors, res["Demystifying"].venue, res["Demystifying"].year) == (
        ("Tal Ben-Nun", "et al."), "ACM Computing Surveys", 2020)
    assert (res["PiPAD"].authors, res["PiPAD"].venue, res["PiPAD"].year) == (("Chunyang Wang", "et al."), "PPoPP", 2023)
    assert res["Unity"].authors == ("Colin Unger", "Zhihao Jia", "et al.") and res["Unity"].venue == "OSDI"
    assert (res["Survey"].authors, res["Survey"].venue, res["Survey"].year) == (("Peng Liang",), "techrxiv", 2022)
    assert (res["Ring"].venue, res["Ring"].year) == ("NeurIPS Workshop", 2023)
    assert (res["Plain"].authors, res["Plain"].venue, res["Plain"].year) == ((), None, None)
    assert all(r.kind == "paper" for r in res.values())  # a "Papers" section


def test_obsidian_tags_nesting_and_citations() -> None:
    text = """---
title: "Distributed notes"
---

## References
See [[AI/Other note#Section]]

- #PAPER [Demystifying Parallel (Tal Ben-Nun and Torsten Hoefler 2018)](http://arxiv.org/abs/1802.09941) ^bennun18
\t- #TALK [Hoefler 2018](https://www.youtube.com/watch?v=xtxxLWZznBI)
\t- Prose about the paper, no link.
- #PAPER [Mesh-TensorFlow (Shazeer 2018)](https://arxiv.org/abs/1811.02084v1) ^f86598
\t- #TALK https://www.youtube.com/watch?v=HgGyWS40g-g
\t- #CODE [Mesh-TensorFlow](https://github.com/tensorflow/mesh)
\t\t- Go beyond data-parallel training
\t\t- www.mesh-example.org/
- #PAPER [Channel and filter parallelism (Dryden 2019)](https://dl.acm.org/doi/10.1145/3295500.3356207)
\t- https://ndryden.com/data/papers/sc2019-chanfilt.pdf
- #CODE [Horovod](AI/DS%20and%20DataEng/Horovod.md)
- [Choosing a GPU (2020)](https://towardsdatascience.com/choosing-gpu)
"""
    pl = parse_list(text, "notes")
    assert pl.title == "Distributed notes"
    res = by_url(pl)
    paper = res["https://arxiv.org/abs/1802.09941"]
    assert paper.title == "Demystifying Parallel"
    assert paper.authors == ("Tal Ben-Nun", "Torsten Hoefler") and paper.year == 2018
    assert paper.topics == ("References",)

    talk = res["https://youtube.com/watch?v=xtxxLWZznBI"]
    # "Hoefler 2018" is a citation, not a title: the talk takes the paper's title, its own author/year.
    assert (talk.title, talk.authors, talk.year, talk.kind) == ("Demystifying Parallel", ("Hoefler",), 2018, "video")

    bare_talk = res["https://youtube.com/watch?v=HgGyWS40g-g"]
    assert (bare_talk.title, bare_talk.authors, bare_talk.kind) == ("Mesh-TensorFlow", ("Shazeer",), "video")
    assert res["https://github.com/tensorflow/mesh"].kind == "repo"
    # A scheme-less bare URL nested under #CODE: the code entry's site, titled like it.
    site = res["https://mesh-example.org"]
    assert (site.title, site.kind) == ("Mesh-TensorFlow", "docs")

    copy = res["https://ndryden.com/data/papers/sc2019-chanfilt.pdf"]
    assert (copy.title, copy.authors, copy.year, copy.kind) == (
        "Channel and filter parallelism", ("Dryden",), 2019, "paper")
    assert res["https://towardsdatascience.com/choosing-gpu"].year == 2020
    assert res["https://towardsdatascience.com/choosing-gpu"].title == "Choosing a GPU"

    assert len(pl.resources) == 9
    # The relative vault link is reported (line 18), the wiki links and the ^blockrefs are not resources.
    assert [(i.line_no, "relative link" in i.reason) for i in pl.issues] == [(18, True)]


def test_link_text_across_a_line_break_and_mojibake() -> None:
    text = """# Blogs
2. [Meet Horovod: Uberâ€™s Open Source Distributed Deep Learning Framework for TensorFlow
](https://eng.uber.com/horovod/)
3. [Next](https://example.com/next)
"""
    pl = parse_list(text, "b")
    assert [r.title for r in pl.resources] == [
        "Meet Horovod: Uber’s Open Source Distributed Deep Learning Framework for TensorFlow", "Next"]
    assert pl.resources[0].url == "https://eng.uber.com/horovod"
    assert pl.issues == ()


def test_repair_mojibake_keeps_good_text() -> None:
    assert repair_mojibake("Uberâ€™s") == "Uber’s"
    assert repair_mojibake("ì¹´ì¹´ì˜¤") == "카카오"
    for good in ("Café crème", "카카오스타일", "exo 📱💻 🖥️⌚", "plain ascii", "Ã alone"):
        assert repair_mojibake(good) == good


def test_korean_titles_preserved() -> None:
    text = """# Usecases
- [(카카오스타일) 카카오스타일의 Amazon SageMaker 분산 훈련](https://aws.amazon.com/ko/blogs/tech/x/)
- [(SK) 대용량 한글 자연어처리 모델 (2020)](https://example.com/AWS+Summit/%EB%8C%80%EC%9A%A9%EB%9F%89.pdf)
"""
    pl = parse_list(text, "k")
    assert [r.title for r in pl.resources] == [
        "(카카오스타일) 카카오스타일의 Amazon SageMaker 분산 훈련", "(SK) 대용량 한글 자연어처리 모델"]
    assert pl.resources[1].year == 2020 and pl.resources[1].kind == "slides"
    line = json.dumps(pl.resources[0].to_json(), ensure_ascii=False)
    assert "카카오스타일" in line


def test_bare_urls_page_chrome_and_upstream() -> None:
    text = """Ecosyste.ms: Awesome

https://github.com/Someone/awesome-thing

List: awesome-thing

# Awesome Thing

![Awesome](https://awesome.re/badge.svg)
[![PRs Welcome](https://img.shields.io/badge/PRs-welcome-brightgreen.svg)](https://github.com/someone/awesome-thing/pulls)

## Tools
- https://github.com/a/b
- see https://example.com/prose-link, it is good.

## Contribute
Open an [issue](https://github.com/someone/awesome-thing/issues) or a [PR](https://github.com/someone/awesome-thing/pulls).
See the [licence](https://creativecommons.org/publicdomain/zero/1.0/).
"""
    pl = parse_list(text, "thing")
    assert pl.title == "Awesome Thing"
    assert pl.upstream == "https://github.com/Someone/awesome-thing"
    ids = [r.id for r in pl.resources]
    assert ids == ["github:someone/awesome-thing", "github:a/b", resource_id("https://example.com/prose-link")]
    own = pl.resources[0]
    assert own.kind == "repo" and own.topics == () and own.title == "github.com/someone/awesome-thing"
    assert pl.issues == ()
    reasons = " | ".join(s.reason for s in pl.skipped)
    assert "issues page" in reasons and "pulls page" in reasons and "'Contribute' section" in reasons


def test_upstream_only_where_the_text_shows_it() -> None:
    assert parse_list("# L\n- [a](https://github.com/x/y)\n", "l").upstream is None
    fm = "---\ntitle: T\nupstream: https://github.com/me/list\n---\n- [a](https://a.org)\n"
    assert parse_list(fm, "t").upstream == "https://github.com/me/list"
    two = "# L\n[i](https://github.com/a/b/issues) [j](https://github.com/c/d/issues)\n"
    assert parse_list(two, "l").upstream is None  # ambiguous: never guess


def test_html_comments_code_blocks_and_html_tags() -> None:
    text = """# T
<p align="center">
  <img src="https://img.shields.io/badge/stars-0-brightgreen.svg"/>
</p>
<!--
### [Hidden](https://example.com/hidden)
-->
- <a href="https://example.org/page">The <b>Page</b></a>
```
- [in code](https://example.com/code)
```
- [after](https://example.com/after) <!-- [x](https://example.com/inline-comment) -->
"""
    pl = parse_list(text, "t")
    assert [r.url for r in pl.resources] == ["https://example.org/page", "https://example.com/after"]
    assert pl.resources[0].title == "The Page"


def test_unterminated_comment_is_reported() -> None:
    pl = parse_list("# T\n- [a](https://a.org/x)\n<!-- oops\n- [b](https://b.org/x)\n", "t")
    assert [r.url for r in pl.resources] == ["https://a.org/x"]
    assert pl.issues[0].line_no == 3 and "never closed" in pl.issues[0].reason


def test_malformed_lines_are_reported_not_fatal() -> None:
    text = """# T
## S
- [broken](
- [x](javascript:alert(1))
- [f](file:///etc/passwd)
- [e]()
- [g](http://)
- [unclosed https://example.com/zz
- [rel](../notes/x.md)
- [good](https://example.com/good)
"""
    pl = parse_list(text, "t")
    assert [r.url for r in pl.resources] == ["https://example.com/good"]
    got = {i.line_no: i.reason for i in pl.issues}
    assert set(got) == {3, 4, 5, 6, 7, 8, 9}
    assert "'(' at column" in got[3] and "never ends" in got[3]
    assert "unsupported URL scheme 'javascript'" in got[4]
    assert "unsupported URL scheme 'file'" in got[5]
    assert "empty target" in got[6]
    assert "no host" in got[7]
    assert "unclosed '['" in got[8]
    assert "relative link" in got[9]
    assert all(i.list_name == "t" and i.line.startswith("- [") for i in pl.issues)


def test_garbage_never_crashes() -> None:
    junk = "\x00[[[(((]]])))\n# \n- [](<>)\n* ![](\n" + "[" * 500 + "\n" + "[(" * 50_000 + "\n" + "\ufffd" * 10 + "\n- [a](https://a.org)\n"
    pl = parse_list(junk, "j")
    assert [r.url for r in pl.resources] == ["https://a.org"]


def test_same_resource_twice_in_one_list_is_one_entry() -> None:
    text = """# L
## A
- [GPipe](https://arxiv.org/abs/1811.06965)
## B
- [GPipe PDF](https://arxiv.org/pdf/1811.06965v5.pdf) by Yanping Huang et al., NeurIPS 2019
"""
    pl = parse_list(text, "l")
    assert len(pl.resources) == 1
    r = pl.resources[0]
    assert (r.title, r.topics, r.authors, r.year) == ("GPipe", ("A", "B"), ("Yanping Huang", "et al."), 2019)


def test_list_name_for() -> None:
    assert list_name_for(Path("000_x.txt"), "# awesome-distributed-ml\n") == "awesome-distributed-ml"
    assert list_name_for(Path("x.md"), "---\ntitle: \"Distributed Deep learning\"\n---\n## A\n") == (
        "distributed-deep-learning")
    assert list_name_for(Path("my list.md"), "# 카카오\n") == "my-list"  # no ASCII in the title
    assert list_name_for(Path("notes.md"), "- [a](https://a.org)\n") == "notes"
    # A list whose first heading is a section (a later heading is as high) has no title heading.
    assert list_name_for(Path("s.md"), "## Papers\n## Code\n") == "s"


# -- merging and files ---------------------------------------------------------------------------

def res(rid: str, **kw: object) -> Resource:
    base: dict = {"id": rid, "url": f"https://example.com/{rid}", "title": f"example.com/{rid}"}
    base.update(kw)
    return Resource(**base)


def test_merge_unions_topics_and_lists_and_keeps_better_facts() -> None:
    a = res("x", title="example.com/x", topics=("A",), lists=("one",), kind="article")
    b = res("x", title="Real Title", authors=("Ann Lee",), venue="SC", year=2021, topics=("B", "A"),
            lists=("two",), kind="paper")
    c = res("a", title="First")
    merged = merge([a, c], [b, res("a", title="Second", year=1999)])
    assert [r.id for r in merged] == ["a", "x"]  # sorted by id
    x = merged[1]
    assert x.title == "Real Title"  # a real title beats a URL title
    assert (x.authors, x.venue, x.year, x.kind) == (("Ann Lee",), "SC", 2021, "paper")
    assert x.topics == ("A", "B") and x.lists == ("one", "two")
    assert merged[0].title == "First" and merged[0].year == 1999  # first facts kept, gaps filled
    assert merge(merged, merged) == merged


def test_catalog_roundtrip_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "corpus" / "catalog.jsonl"
    assert read_catalog(path) == []
    items = [res("b", title="대용량 Ü", authors=("A B",), topics=("T",), lists=("l",), year=2020), res("a")]
    write_catalog(path, items)
    assert read_catalog(path) == items
    text = path.read_text(encoding="utf-8")
    assert "대용량" in text and len(text.splitlines()) == 2
    assert all(json.loads(line)["id"] for line in text.splitlines())


def test_bad_catalog_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "catalog.jsonl"
    good = json.dumps(res("a").to_json())
    path.write_text(f"{good}\n{{not json\n", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"catalog\.jsonl:2.*line 2"):
        read_catalog(path)
    path.write_text(f"{good}\n\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="line 3"):
        read_catalog(path)
    path.write_text('{"title": "no id"}\n', encoding="utf-8")
    with pytest.raises(CatalogError, match="line 1: missing field 'id'"):
        read_catalog(path)


def test_write_catalog_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "catalog.jsonl"
    write_catalog(path, [res("a")])
    before = path.read_bytes()

    def exploding():
        yield res("b")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_catalog(path, exploding())
    assert path.read_bytes() == before

    def failing_replace(src: str, dst: str) -> None:
        raise OSError("replace failed")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="replace failed"):
        write_catalog(path, [res("c")])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.jsonl"]  # no temp file left behind


LIST_A = """# List A
## Papers
- [ZeRO](https://arxiv.org/abs/1910.02054) by Samyam Rajbhandari et al., SC 2020
- [Horovod](https://github.com/Horovod/Horovod)
- [broken](
"""
LIST_B = """---
title: List B
---
## Code
- #CODE [Horovod](https://github.com/horovod/horovod/)
- #PAPER [ZeRO v3 (Rajbhandari 2019)](https://arxiv.org/pdf/1910.02054v3)
- https://example.com/only-in-b
"""


def test_import_lists_dedups_across_lists_and_is_idempotent(tmp_path: Path) -> None:
    a, b = tmp_path / "a.md", tmp_path / "b.txt"
    a.write_text(LIST_A, encoding="utf-8")
    b.write_text(LIST_B, encoding="utf-8")
    corpus = tmp_path / "corpus"
    report = import_lists([a, b], corpus)
    assert isinstance(report, ImportReport)
    assert report.lists == ("list-a", "list-b")
    assert (report.added, report.updated, report.total) == (3, 0, 3)
    assert [(i.list_name, i.line_no) for i in report.issues] == [("list-a", 5)]

    cat = {r.id: r for r in read_catalog(corpus / "catalog.jsonl")}
    assert list(cat) == sorted(cat)
    zero = cat["arxiv:1910.02054"]
    assert zero.lists == ("list-a", "list-b") and zero.topics == ("Papers", "Code")
    assert (zero.title, zero.authors, zero.venue, zero.year) == ("ZeRO", ("Samyam Rajbhandari", "et al."), "SC", 2020)
    assert cat["github:horovod/horovod"].lists == ("list-a", "list-b")

    lists = read_lists(corpus)
    assert lists["list-a"] == {"title": "List A", "file": "lists/list-a.md", "imported_from": "a.md"}
    assert lists["list-b"]["file"] == "lists/list-b.md" and "upstream" not in lists["list-b"]
    assert (corpus / "lists" / "list-a.md").read_text(encoding="utf-8") == LIST_A

    snapshot = {p.name: p.read_bytes() for p in corpus.rglob("*") if p.is_file()}
    again = import_lists([a, b], corpus)
    assert (again.added, again.updated, again.total) == (0, 0, 3)
    assert {p.name: p.read_bytes() for p in corpus.rglob("*") if p.is_file()} == snapshot
    # Re-importing from the stored copy is idempotent too.
    import_lists([corpus / "lists" / "list-a.md"], corpus)
    assert {p.name: p.read_bytes() for p in corpus.rglob("*") if p.is_file()} == snapshot


def test_import_replace_lists_withdraws_dropped_entries(tmp_path: Path) -> None:
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text(LIST_A, encoding="utf-8")
    b.write_text(LIST_B, encoding="utf-8")
    corpus = tmp_path / "corpus"
    import_lists([a, b], corpus)
    b.write_text(LIST_B.replace("- https://example.com/only-in-b\n", "").replace(
        "- #CODE [Horovod](https://github.com/horovod/horovod/)\n", ""), encoding="utf-8")

    kept = import_lists([b], corpus)  # plain import only adds
    assert kept.total == 3
    replaced = import_lists([b], corpus, replace_lists=True)
    cat = {r.id: r for r in read_catalog(corpus / "catalog.jsonl")}
    assert replaced.total == 2 and set(cat) == {"arxiv:1910.02054", "github:horovod/horovod"}
    assert cat["github:horovod/horovod"].lists == ("list-a",)
    assert cat["arxiv:1910.02054"].lists == ("list-a", "list-b")


def test_import_missing_file_fails_before_writing(tmp_path: Path) -> None:
    a = tmp_path / "a.md"
    a.write_text(LIST_A, encoding="utf-8")
    with pytest.raises(CatalogError, match="cannot read list file"):
        import_lists([a, tmp_path / "missing.md"], tmp_path / "corpus")
    assert not (tmp_path / "corpus").exists()


def test_same_title_in_one_import_gets_distinct_names(tmp_path: Path) -> None:
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("# Same\n- [a](https://a.org/x)\n", encoding="utf-8")
    b.write_text("# Same\n- [b](https://b.org/x)\n", encoding="utf-8")
    report = import_lists([a, b], tmp_path / "corpus")
    assert report.lists == ("same", "same-2")


def test_read_lists_errors(tmp_path: Path) -> None:
    assert read_lists(tmp_path) == {}
    (tmp_path / "lists.toml").write_text("[lists.a\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="lists.toml"):
        read_lists(tmp_path)


# -- the real seed lists ---------------------------------------------------------------------------

def _seeds() -> list[Path]:
    if not SEEDS.is_dir():
        pytest.skip(f"../shared/seeds not present (a user's clone): {SEEDS}")
    return sorted(SEEDS.glob("*.txt"))


def _parse(path: Path) -> ParsedList:
    text = path.read_text(encoding="utf-8")
    return parse_list(text, list_name_for(path, text))


# Counted by hand, reading each file (line numbers are the file's):
#  000 awesome-distributed-ml: links on lines 4-5 (2), 8-11 (4), 14 (1), 17 (1), 20 bare URL + 21 (2),
#      24-33 (10) = 20. No duplicates, no badges.
#  001 Awesome Distributed Deep Learning: 3 <img> badges (4-6) are not resources; the TOC (11-17) holds
#      anchors; 18-24 is an HTML comment. Frameworks 28-33 (6), Blogs 37, 38-39 (link text broken over
#      two lines), 40 (3), Papers 44-45 (2) = 11.
#  002 Distributed Machine Learning with Ray: the binder button (3) is not a resource. Resources
#      15-23 (9), References/Papers 27-34 (8) = 17.
#  003 ecosyste.ms page: the list's own repo as a bare URL in the page chrome (7, repeated on 10) = 1;
#      2 badges (29-30) and the Contents TOC (34-52) skipped; Open Source Projects 56-69 = 14 (59 is the
#      scheme-less www.oneflow.org); Papers: Survey 2, Pipeline 9, Sequence 5, MoE 8, GNN 3, Hybrid 5,
#      Memory 6, Tensor Movement 8, Auto Parallelization 10, Communication 7, Fault-tolerant 3,
#      Inference 9, Applications 5 = 80; the Contribute issues/pulls links (193) are not resources.
#      1 + 14 + 80 = 95.
#  004 Obsidian note: Resources 6-10 (3 bare + 2 links = 5), Talks 13-15 (3), Code 20, 22 (nested bare),
#      24, 26 (nested bare) = 4 (23 is a relative vault link → one issue; 18/25 are wiki links),
#      References: every link on 29-67 except prose bullets: 29,30,31,32,33,34,35,36,37,40,41,42,43,44,
#      45,46,47,48,49,50,52,53,54,55,57 (scheme-less www.deepspeed.ai/),58,59,62,64,65,66,67 = 32.
#      5 + 3 + 4 + 32 = 44.
#  Across lists: eng.uber.com/horovod (001, 002), arXiv 1802.09941 (001, 003, 004), tensorflow/mesh
#  (003, 004), arXiv 2110.14883 (003, 004), deepspeed.ai (003, 004) = 6 repeats: 187 - 6 = 181.
#  Cross-check with websnap/README.md: 190 unique URLs in the five files (a plain https?:// scan), minus
#  6 badge images, the binder button and the issues/pulls links (9) = 181; http/https of 1802.09941
#  collapse (-1); www.oneflow.org has no scheme so the scan misses it (+1): 181.
SEED_COUNTS = {
    "000_d9e30777713aaeb9.txt": ("awesome-distributed-ml", 20),
    "001_ef624429d3784be3.txt": ("awesome-distributed-deep-learning", 11),
    "002_831b4c1fbc0840df.txt": ("distributed-machine-learning-with-ray", 17),
    "003_4422ee2ee184c852.txt": ("awesome-distributed-machine-learning-system", 95),
    "004_a97a070ddd350f97.txt": ("distributed-deep-learning", 44),
}
SEED_TOTAL = 181
# extra-resources.md: 10 DeepSpeed + 9 Megatron-LM + 10 Colossal-AI + 12 Horovod + 6 Ray Train docs
# + 10 papers = 57, none of them already in the seeds.
EXTRA_COUNT = 57


def test_seed_counts_by_hand() -> None:
    paths = _seeds()
    assert [p.name for p in paths] == list(SEED_COUNTS)
    all_resources: list[Resource] = []
    for path in paths:
        pl = _parse(path)
        name, count = SEED_COUNTS[path.name]
        assert (pl.name, len(pl.resources)) == (name, count), path.name
        assert all(r.kind in KINDS and r.lists == (name,) for r in pl.resources)
        all_resources += pl.resources
    assert len(merge([], all_resources)) == SEED_TOTAL


def test_seed_details() -> None:
    paths = {p.name[:3]: p for p in _seeds()}
    p000 = _parse(paths["000"])
    assert Counter(r.kind for r in p000.resources)["repo"] == 7  # 6 repo roots + the tree/ folder
    korean = [r.title for r in p000.resources if re.search("[가-힣]", r.title)]
    assert len(korean) == 3

    p001 = _parse(paths["001"])
    assert p001.issues == () and len(p001.skipped) == 3
    uber = by_url(p001)["https://eng.uber.com/horovod"]
    assert uber.title.startswith("Meet Horovod: Uber’s Open Source")

    p003 = _parse(paths["003"])
    assert p003.title == "Awesome Distributed Machine Learning System"
    assert p003.upstream == "https://github.com/Shenggan/awesome-distributed-ml"
    assert p003.issues == ()
    assert "https://oneflow.org" in by_url(p003)
    topics = {t for r in p003.resources for t in r.topics}
    assert "Contents" not in topics and "Papers" in topics

    p004 = _parse(paths["004"])
    assert p004.title == "Distributed Deep learning" and p004.upstream is None
    assert [(i.line_no, "relative link" in i.reason) for i in p004.issues] == [(23, True)]

    for key in ("000", "001", "002"):
        assert _parse(paths[key]).upstream is None


def test_seed_urls_all_map_to_the_catalog() -> None:
    """Every http(s) URL in the seeds is a catalog entry after canonicalisation, or a known non-resource."""
    paths = _seeds()
    catalog = merge([], [r for p in paths for r in _parse(p).resources])
    ids = {r.id for r in catalog}
    raw = {u for p in paths for u in re.findall(r"https?://[^\s)>\"]+", p.read_text(encoding="utf-8"))}
    assert len(raw) == 190  # websnap/README.md: "the five awesome lists ... (190 unique URLs)"
    missing = sorted(u for u in raw if resource_id(canonicalize(u)) not in ids)
    badges = [u for u in missing if "badge" in u]
    assert len(badges) == 6  # "6 are badge images"
    assert sorted(set(missing) - set(badges)) == [
        "https://github.com/shenggan/awesome-distributed-ml/issues",
        "https://github.com/shenggan/awesome-distributed-ml/pulls",
        "https://mybinder.org/v2/git/https%3A%2F%2Fgit.sr.ht%2F~hyphaebeast%2Fray-live-training/master"
        "?filepath=notebook.ipynb",
    ]


def test_websnap_readme_and_manifest_cross_check() -> None:
    paths = _seeds()
    if not WEBSNAP.is_dir():
        pytest.skip(f"../shared/websnap not present (a user's clone): {WEBSNAP}")
    ids = {r.id for r in merge([], [r for p in paths for r in _parse(p).resources])}
    readme = (WEBSNAP / "README.md").read_text(encoding="utf-8")
    not_in_snapshot = [line[2:].strip() for line in readme.splitlines() if line.startswith("- http")]
    assert len(not_in_snapshot) == 119
    unmapped = {u for u in not_in_snapshot if resource_id(canonicalize(u)) not in ids}
    # The README counts the binder button and the list's issues/pulls pages as seed URLs; they are not resources.
    assert unmapped == {
        "https://github.com/shenggan/awesome-distributed-ml/issues",
        "https://github.com/shenggan/awesome-distributed-ml/pulls",
        "https://mybinder.org/v2/git/https%3A%2F%2Fgit.sr.ht%2F~hyphaebeast%2Fray-live-training/master"
        "?filepath=notebook.ipynb",
    }

    rows = [json.loads(line) for line in (WEBSNAP / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    seed_side = [r for r in rows if r.get("depth") != 1]
    unmapped_rows = sorted(r["url"] for r in seed_side if resource_id(canonicalize(r["url"])) not in ids)
    # Stored copies of seed papers under another URL (publisher/arXiv/project PDF of a landing page the
    # seed names), and the extra list's papers: none of these is a seed URL, so none is in the catalog.
    assert unmapped_rows == sorted([
        "http://www.vldb.org/pvldb/vol13/p3005-li.pdf",  # PyTorch DDP, extra-resources
        "https://arxiv.org/abs/1802.05799", "https://arxiv.org/abs/1806.03377",  # extra-resources papers
        "https://arxiv.org/abs/1909.08053", "https://arxiv.org/abs/2101.03961",
        "https://arxiv.org/abs/2101.06840", "https://arxiv.org/abs/2201.11990",
        "https://arxiv.org/abs/2205.05198", "https://arxiv.org/abs/2306.10209",
        "https://arxiv.org/abs/2006.16668", "https://arxiv.org/pdf/2006.16668",  # GShard: seed names OpenReview
        "https://arxiv.org/pdf/2104.04473",  # Megatron SC21: seed names the ACM DOI
        "https://dl.acm.org/doi/10.1145/3394486.3406703",  # DeepSpeed KDD, extra-resources
        "https://proceedings.mlsys.org/paper/2020/file/084b6fbb10729ed4da8c3d3f5a3ae7c9-Paper.pdf",  # Checkmate
        "https://raw.githubusercontent.com/LiuYingying0104/HM_Papers/637d9ac4e7cd231fa9a0a3b7cea27349c5305c98"
        "/FlexGen.pdf",
        "https://raw.githubusercontent.com/feifeibear/long-context-attention/5f80b4d70bcc5eb374eac16d8de6d3a532fd39a7"
        "/media/unified_seq_parallel_tech_report.pdf",
        "https://raw.githubusercontent.com/kvcache-ai/Mooncake/e6b405b12a6576163b7db2e7084b71651c8f11e9"
        "/Mooncake-v3.pdf",
        "https://www.usenix.org/system/files/atc21-ren-jie.pdf",  # ZeRO-Offload: seed names the USENIX page
    ])


def test_extra_resources_list() -> None:
    paths = _seeds()
    extra = WEBSNAP / "extra-resources.md"
    if not extra.is_file():
        pytest.skip(f"../shared/websnap not present (a user's clone): {extra}")
    pl = _parse(extra)
    assert (pl.name, len(pl.resources), pl.issues) == ("extra-resources", EXTRA_COUNT, ())
    kinds = Counter(r.kind for r in pl.resources)
    assert kinds == {"docs": 47, "paper": 10}
    seeds = [r for p in paths for r in _parse(p).resources]
    assert len(merge(seeds, pl.resources)) == SEED_TOTAL + EXTRA_COUNT


def test_committed_corpus_is_the_seed_import(tmp_path: Path) -> None:
    """corpus/ in the repository is exactly what importing the five seeds produces (so it is not stale)."""
    paths = _seeds()
    report = import_lists(paths, tmp_path)
    assert (report.total, report.added) == (SEED_TOTAL, SEED_TOTAL)
    committed = REPO / "corpus"
    assert (committed / "catalog.jsonl").read_bytes() == (tmp_path / "catalog.jsonl").read_bytes()
    assert (committed / "lists.toml").read_bytes() == (tmp_path / "lists.toml").read_bytes()
    for name, _count in SEED_COUNTS.values():
        assert (committed / "lists" / f"{name}.md").read_bytes() == (tmp_path / "lists" / f"{name}.md").read_bytes()
    upstreams = {k: v.get("upstream") for k, v in read_lists(committed).items()}
    assert upstreams == {name: None for name, _ in SEED_COUNTS.values()} | {
        "awesome-distributed-machine-learning-system": "https://github.com/Shenggan/awesome-distributed-ml"}
