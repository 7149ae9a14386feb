"""Page furniture found by a PDF's layout (extract/layout.py): running headers and tables of contents are set
apart from the sentences, while the page text (what passages and BM25 read) keeps them."""

from __future__ import annotations

from dmlqa.extract.layout import contents_lines, header_line, running_headers, set_apart
from dmlqa.extract.sentences import FURNITURE, HEADING, PROSE, split_document
from dmlqa.models import Block, Document

_BODY = ["Pipelines split the model into stages.", "Each stage runs on one GPU of the node.",
         "Micro-batches keep every stage busy.", "The bubble shrinks as micro-batches grow.",
         "Weights are stashed between passes.", "Gradients are reduced at the end."]


def _paper(pages: list[str]) -> Document:
    return Document(doc_id="p", url="https://x.org/p.pdf", title="Pipelines",
                    blocks=tuple(Block(text, page=i + 1) for i, text in enumerate(pages)), content_type="pdf")


def test_a_running_header_on_most_pages_is_furniture_and_its_sentences_read_whole() -> None:
    """A conference stamp over odd pages and the authors' names (wrapped onto a second line) over even ones were
    glued to each page's first sentence, and quoted with it. Their lines are set apart; the page keeps its text."""
    pages = []
    for i, body in enumerate(_BODY):
        head = ("Published as a conference paper at ICLR 2021" if i % 2 == 0
                else f"Smith, Jones and Lee {i + 1}\n, Kim and Park")
        pages.append(f"{head}\n{body}")
    doc = _paper(pages)
    got = [(s.role, s.text) for s in split_document(doc)]
    assert [t for r, t in got if r == PROSE] == _BODY
    assert (FURNITURE, "Published as a conference paper at ICLR 2021") in got
    assert (FURNITURE, "Smith, Jones and Lee 2 , Kim and Park") in got
    assert "Published as a conference paper" in doc.text  # the passages still read it


def test_a_numbered_heading_right_under_a_running_header_stands_apart() -> None:
    """Under a header the heading rule had no sentence end before the heading's line, so "4.1 HEURISTICS EXAMINED
    We examine ..." stayed one sentence once the header was set apart."""
    titles = ["HEURISTICS EXAMINED", "Stage Balance", "BUBBLES", "Schedules Compared", "WEIGHT STASHING", "Reduction"]
    pages = [f"Published as a conference paper at ICLR 2021\n4.{i} {title}\n{body}"
             for i, (title, body) in enumerate(zip(titles, _BODY, strict=True))]
    got = [(s.role, s.text) for s in split_document(_paper(pages))]
    assert [t for r, t in got if r == HEADING] == [f"4.{i} {title}" for i, title in enumerate(titles)]
    assert [t for r, t in got if r == PROSE] == _BODY


def test_a_first_line_on_few_pages_or_without_letters_is_no_header() -> None:
    pages = [f"Results\n{_BODY[0]}", f"Results\n{_BODY[1]}"] + [f"{i}\n{b}" for i, b in enumerate(_BODY)]
    headers = running_headers(pages)
    assert "Results" not in headers  # two pages of eight
    assert headers == {}  # the page numbers ("#") hold no letters
    assert header_line("Results\nx", headers) == []
    assert running_headers([]) == {}


def test_set_apart_cuts_lines_out_of_paragraphs() -> None:
    text = "HEAD\nfirst sentence. TOC 1\nlast"
    assert list(set_apart([(0, len(text), "p")], [(0, 4), (21, 26)], "f")) == [
        (0, 4, "f"), (4, 21, "p"), (21, 26, "f"), (26, 31, "p")]
    assert contents_lines("one line") == []
