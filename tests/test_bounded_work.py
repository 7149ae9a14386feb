"""Bounded work per input (issue 19, item 5): list parsing is linear, extraction has a time limit.

Timings are not asserted here (a busy machine would fail them at random): ``bench/hostile_inputs.py``
measures the CPU seconds. These tests assert that the hostile inputs give the right result: every
entry of a list full of unclosed ``<a href>`` tags, the same links as the regular expressions the
linear scanners replace, and a page past the extraction limit reported as a failed resource with
the reason while the build goes on.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from fixtures_docs import html_page, prose
from httpserver import LocalServer, Reply
from typer.testing import CliRunner

from dmlqa.app.cli import app
from dmlqa.catalog.lists import parse_list
from dmlqa.catalog.markdown import _before_last, _html_anchors, clean_inline, unlink
from dmlqa.catalog.store import write_catalog
from dmlqa.errors import ExtractError
from dmlqa.extract.documents import extract_bytes
from dmlqa.extract.html import FALLBACK_MAX_BLOCKS, GLUED_CANDIDATES, extract_html
from dmlqa.extract.pdf import footnotes_apart, join_page_breaks
from dmlqa.extract.text import strip_links
from dmlqa.extract.worker import TimedExtractor, timeout_reason
from dmlqa.models import Resource

# -- list parsing ------------------------------------------------------------------------------------

#: The one regex the ``<a href>`` scanner replaces: it rescanned the line for ``</a>`` after every ``<a``.
OLD_HTML_A = re.compile(r"<a\b[^>]*?\bhref\s*=\s*[\"'](?P<href>[^\"']*)[\"'][^>]*>(?P<text>.*?)</a\s*>",
                        re.IGNORECASE | re.DOTALL)


def test_list_of_20000_unclosed_anchors_keeps_every_entry() -> None:
    n = 20_000
    hostile = "".join(f'<a href="https://example.org/p{i}">' for i in range(n))
    text = (
        "# Hostile list\n\n## Papers\n\n"
        f"- {hostile}\n"
        "- [GPipe](https://arxiv.org/abs/1811.06965) - pipeline parallelism.\n"
        '- <a href="https://example.org/closed">Closed anchor</a>\n'
    )
    parsed = parse_list(text, "hostile")
    urls = {r.url for r in parsed.resources}
    # Each unclosed tag's href is still a bare URL on the line, the other items are read as usual.
    assert {f"https://example.org/p{i}" for i in range(n)} <= urls
    assert {"https://arxiv.org/abs/1811.06965", "https://example.org/closed"} <= urls
    titles = {r.url: r.title for r in parsed.resources}
    assert titles["https://example.org/closed"] == "Closed anchor"
    assert titles["https://arxiv.org/abs/1811.06965"] == "GPipe"


def test_one_item_per_line_with_unclosed_anchors() -> None:
    lines = [f'- <a href="https://example.org/paper-{i}">Paper {i}' for i in range(2000)]
    parsed = parse_list("# L\n\n## Section\n\n" + "\n".join(lines) + "\n", "l")
    assert sorted(r.url for r in parsed.resources) == sorted(f"https://example.org/paper-{i}" for i in range(2000))


def _random_markup(rng: random.Random, tokens: list[str]) -> str:
    return "".join(rng.choice(tokens) for _ in range(rng.randint(0, 16)))


def test_anchor_scanner_finds_what_the_regex_found() -> None:
    rng = random.Random(19)
    tokens = ["<a ", "<A ", "<a", "<ab ", "href=", "HREF =", ' href="', "href='", '"', "'", ">", "</a>",
              "</A >", "</a", "x", " ", "\n", 'data-href="', '<img src="y">', 'zhref="']
    for _ in range(20_000):
        s = _random_markup(rng, tokens)
        expected = [(m.start(), m.end(), m.group("href"), m.group("text")) for m in OLD_HTML_A.finditer(s)]
        assert _html_anchors(s) == expected, s


def test_inline_cleaning_matches_the_regexes_it_replaces() -> None:
    rng = random.Random(5)
    tokens = ["[", "]", "(", ")", "![", "x", " ", "\n", "<img ", ">", "<", "a"]
    img = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
    for _ in range(20_000):
        t = _random_markup(rng, tokens)
        assert unlink(t, "![", keep_text=False) == re.sub(r"!\[[^\]]*\]\([^)]*\)", "", t), t
        assert unlink(t, "[", keep_text=True) == re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t), t
        assert _before_last(">", lambda h: img.sub("", h), t) == img.sub("", t), t
        assert _before_last(">", lambda h: re.sub(r"<[^>]+>", "", h), t) == re.sub(r"<[^>]+>", "", t), t


def regex_clean_inline(text: str) -> str:
    """The link-removing steps of clean_inline as they were written before, as regexes."""
    t = re.sub(r"<img\b[^>]*>", "", text, flags=re.IGNORECASE)
    t = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", t)
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t)
    return re.sub(r"<[^>]+>", "", t)


@pytest.mark.parametrize("unit", ["[", "![", "![a](", "[a](", " ![](", "[![a](b)](c)"])
def test_extracted_links_on_long_unclosed_markup(unit: str) -> None:
    """A markdown or HTML text line of thousands of unclosed links: read in linear time (a regex retried from each
    "[" took 42 s for 20,000 "![a](" and 4 times that for twice as many), and as the regexes would read it."""
    tail = " [GPipe](https://arxiv.org/abs/1811.06965) ![logo](l.png) end"

    def by_regex(line: str) -> str:
        images_out = re.sub(r"[ \t]*!\[[^\]]*\]\([^)]*\)", "", line)
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", images_out)
        return text if images_out == line else text.rstrip()

    small = unit * 500 + tail
    assert strip_links(small) == by_regex(small)
    assert strip_links(unit * 20_000 + tail)[-60:] == strip_links(small)[-60:]


@pytest.mark.parametrize("unit", ["<img ", "[", "![", "![a](", "<x", "[a]"])
def test_clean_inline_on_long_unclosed_markup(unit: str) -> None:
    text = unit * 3000 + " [GPipe](https://arxiv.org/abs/1811.06965) <b>x</b>"
    assert clean_inline(text) == clean_inline(regex_clean_inline(text))
    assert clean_inline(text) == " ".join(clean_inline(text).split())  # cleaned, whatever the markup


# -- extraction ---------------------------------------------------------------------------------------


def tables_page(n: int, seed: int = 0) -> bytes:
    """``n`` one-cell tables of one letter each: a long run of short blocks (slow in trafilatura's fallbacks)."""
    rng = random.Random(seed)
    cells = "".join(f"<table><tr><td>{rng.choice('abcdefghijklmnopqrstuvwxyz')}</td></tr></table>" for _ in range(n))
    return f"<html><head><title>Tables</title></head><body>{cells}</body></html>".encode()


def test_many_tiny_tables_are_extracted_whole() -> None:
    n = FALLBACK_MAX_BLOCKS  # n tables are 2n blocks (row and cell): past the bound
    rng = random.Random(1)
    letters = [rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)]
    assert tables_page(n, seed=1).count(b"<td>") == n
    extracted = extract_html(tables_page(n, seed=1), url="https://example.org/tables")
    assert " ".join(b.text for b in extracted.blocks).split() == letters


def steps_page(commands: list[str]) -> bytes:
    """List items of a paragraph, a one-line code block and a paragraph: trafilatura writes each on one line."""
    items = "".join(f"<li><p>Step {i} runs:</p><pre><code>{c}</code></pre><p>Step {i} ends.</p></li>"
                    for i, c in enumerate(commands))
    return f"<html><body><article><h1>Steps</h1><ul>{items}</ul></article></body></html>".encode()


def test_thousands_of_list_items_with_code_are_cut_apart_and_lose_nothing() -> None:
    """Each block glued into its item's line is found through an index, not by trying every block on every line
    (15 s at 4,000 items; ``bench/hostile_inputs.py --steps`` measures it)."""
    n = 3_000
    commands = [f"$ tool{i} --flag {i}" for i in range(n)]
    lines = extract_html(steps_page(commands), url="https://example.org/steps").blocks[0].text.split("\n")
    assert [lines[lines.index(c) - 1:lines.index(c) + 2] for c in commands] == [["```", c, "```"] for c in commands]
    # blocks alike in their first two words: the first GLUED_CANDIDATES of them are cut apart, the rest stay in
    # their items' lines, whole
    alike = [f"$ tool --flag {i}" for i in range(n)]
    lines = extract_html(steps_page(alike), url="https://example.org/alike").blocks[0].text.split("\n")
    assert [c for c in alike if c in lines] == alike[:GLUED_CANDIDATES]
    assert all(any(f"runs: {c} Step" in line for line in lines) for c in alike[GLUED_CANDIDATES:])
    # one item of 3,000 paragraphs and blocks, all on one line of trafilatura's (cut by a recursion, it overflowed)
    inner = "".join(f"<p>Step {i} runs:</p><pre><code>{c}</code></pre>" for i, c in enumerate(commands))
    page = f"<html><body><article><h1>Steps</h1><ul><li>{inner}<p>Done.</p></li></ul></article></body></html>"
    lines = extract_html(page.encode(), url="https://example.org/one").blocks[0].text.split("\n")
    assert [c for c in commands if c in lines] == commands and lines[-1] == "Done."


def test_a_table_of_20000_rows_and_a_row_of_20000_empty_cells_are_read_whole() -> None:
    """A row's trailing empty cells are cut by rstrip, not by a regex that retried the run from each pipe (8.6 CPU s
    for a row of 20,000 empty cells before a filled one), and the line under each row is read without copying the
    rest of the page (``bench/hostile_inputs.py --rows`` measures both)."""
    from dmlqa.extract.sentences import ROW, split_document
    from dmlqa.extract.tables import markdown_row
    from dmlqa.models import Block, Document

    assert not markdown_row("|" + " |" * 20_000 + " a |")  # 40,000 characters: no row worth quoting
    assert markdown_row("| Model | Tokens |" + " |" * 20_000)  # its padding does not count
    n = 20_000
    rows = "".join(f"| model-{i} | {i} tokens | score {i} |\n" for i in range(n))
    doc = Document(doc_id="h", url="https://example.org/h", title="H", content_type="html",
                   blocks=(Block("Scores of the models.\n| Model | Tokens | Score |\n|---|---|---|\n" + rows),))
    got = [s.text for s in split_document(doc) if s.role == ROW]
    assert len(got) == n + 1 and got[-1] == f"| model-{n - 1} | {n - 1} tokens | score {n - 1} |"


def test_pdf_pages_of_thousands_of_footnotes_and_a_megabyte_line_are_read_whole() -> None:
    """A footnote's mark is looked for once per number (30 at most), not once per footnote; whether a line stops
    inside a sentence is read at its end, not by a pattern scanning the whole line."""
    notes = [f"Note number {i} is here." for i in range(20_000)]
    numbered = [f"{i % 30 + 1}{note}" for i, note in enumerate(notes)]
    body, apart = footnotes_apart("\n".join(["The body text goes onward1", *numbered, "and ends here."]))
    assert body == "The body text goes onward\nand ends here." and apart.split("\n") == notes
    line = "word " * 200_000 + "and"
    joined = join_page_breaks([(1, line), (2, "so on to the end. Next page.")])
    assert joined == [(1, line + "\nso on to the end."), (2, "Next page.")]


def test_a_sentence_of_20000_bracketed_lists_reads_each_by_the_words_right_before_it() -> None:
    """Whether a bracketed list is a value is read from the few words right before it ("shape [8, 1]"), not from
    the sentence's start up to it again, which made a sentence of many lists quadratic (``bench/hostile_inputs.py
    --lists`` measures it)."""
    from dmlqa.extract.quoting import for_answer

    n = 20_000
    assert for_answer("Theano [5, 4] and " * n + "so on.") == "Theano and " * n + "so on."  # references go
    values = "a tensor of shape [8, 1] and " * n + "so on."
    assert for_answer(values) == values  # every list after "shape" stays, however far into the sentence


def test_a_megabyte_sentence_is_read_by_the_reading_rules_whole() -> None:
    """The run-in enumerator, the label glued onto a cut sentence and the heading a sentence is read under look at a
    sentence's opening or its end, once: a sentence of a megabyte gets the same reading as a short one."""
    from dmlqa.query.extractive import Candidate
    from dmlqa.query.features import standalone
    from dmlqa.query.glued import labelled_figure_text
    from dmlqa.query.quotes import _heading_over

    body = "the stage keeps its layers in memory " * 25_000
    assert standalone("iv) CPU offload " + body + "until the end.")  # what follows the marker is the sentence
    assert labelled_figure_text("Weak scaling is " + body + "typically Table 1.")  # a cut sentence, a label glued on
    assert not labelled_figure_text("Weak scaling is " + body + "as shown in Table 1.")
    c = Candidate(0, "d", 3, "This test runs " + body + "to the end.", "prose", None, section="Strong Scaling")
    assert _heading_over(c, lambda c, step: None) == "Strong Scaling"


def good_page(topic: str) -> bytes:
    return html_page(topic, [("Notes", [f"{topic} is explained here. " + prose(6)])]).encode()


def test_timed_extractor_gives_up_on_a_slow_document_and_goes_on() -> None:
    with TimedExtractor(1) as extractor:
        first = extractor.run(extract_bytes, good_page("Tensor fusion"), "text/html", where="https://example.org/a")
        assert first.title == "Tensor fusion"
        with pytest.raises(ExtractError) as info:
            extractor.run(extract_bytes, tables_page(60_000), "text/html", where="https://example.org/slow")
        assert info.value.reason == timeout_reason(1) == "extraction took longer than 1 s"
        assert info.value.url == "https://example.org/slow"
        # A new child takes over: the next document is extracted, and its errors come back as they were.
        after = extractor.run(extract_bytes, good_page("ZeRO offload"), "text/html", where="https://example.org/b")
        assert after.title == "ZeRO offload"
        with pytest.raises(ExtractError) as empty:
            extractor.run(extract_bytes, b"", "text/html", where="https://example.org/empty")
        assert empty.value.reason == "empty body"


def test_zero_limit_extracts_in_this_process() -> None:
    with TimedExtractor(0) as extractor:
        got = extractor.run(extract_bytes, good_page("Ring allreduce"), "text/html", where="x")
        assert got.title == "Ring allreduce"
        assert extractor._proc is None


def test_build_reports_a_page_past_the_limit_and_indexes_the_rest(tmp_path: Path) -> None:
    runner = CliRunner()
    server = LocalServer()
    try:
        server.route("/robots.txt", Reply(404, body=b""))
        server.route("/good.html", Reply(200, body=good_page("Gradient compression")))
        server.route("/tables.html", Reply(200, body=tables_page(60_000)))
        home = tmp_path / "kb"
        assert runner.invoke(app, ["--home", str(home), "init"]).exit_code == 0
        (home / "dmlqa.toml").write_text((home / "dmlqa.toml").read_text() + "\n[build]\nextract_timeout_s = 2\n")
        write_catalog(home / "corpus" / "catalog.jsonl", [
            Resource(id="web:good", url=server.url("/good.html"), title="Gradient compression", kind="docs"),
            Resource(id="web:tables", url=server.url("/tables.html"), title="Tables", kind="docs"),
        ])
        result = runner.invoke(app, ["--home", str(home), "build", "--json", "--allow-private-hosts"],
                               catch_exceptions=False)
    finally:
        server.close()
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    failed = {f["url"]: f for f in report["failed"]}
    assert failed[server.url("/tables.html")]["stage"] == "extract"
    assert failed[server.url("/tables.html")]["error"] == "extraction took longer than 2 s"
    assert server.url("/good.html") not in failed
    assert report["documents"] == 1 and report["cards"] == 1
