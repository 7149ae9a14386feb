"""Extract stage: real trafilatura/pypdf behaviour on fixture documents the tests build themselves."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from fixtures_docs import (
    COOKIE_TEXT,
    FOOTER_TEXT,
    NAV_LINKS,
    SIDEBAR_TEXT,
    build_pdf,
    encrypt_pdf,
    html_page,
    landing_page,
    prose,
)

from dmlqa.catalog.lists import parse_list
from dmlqa.catalog.urls import url_title
from dmlqa.errors import ExtractError
from dmlqa.extract.documents import catalog_card, extract_bytes, extract_file, to_document
from dmlqa.extract.pdf import dehyphenate, footnotes_apart, join_page_breaks
from dmlqa.extract.sentences import split_document
from dmlqa.extract.text import Extracted, clean_text, decode_text
from dmlqa.models import BLOCK_SEPARATOR, Block, Resource

ARTICLE_SECTIONS = [
    ("Pipeline schedules", [prose(6, 1), prose(5, 2)]),
    ("Memory savings", [prose(7, 3)]),
]


def _reason(excinfo: pytest.ExceptionInfo[ExtractError]) -> str:
    return excinfo.value.reason


# -- HTML ------------------------------------------------------------------------------------------
def test_html_keeps_article_drops_chrome_and_labels_sections() -> None:
    page = html_page("GPipe in practice", ARTICLE_SECTIONS, intro=[prose(4, 7)])
    ex = extract_bytes(page.encode(), "text/html", url="https://docs.example.org/gpipe")

    assert ex.content_type == "html"
    assert ex.title is not None and "GPipe in practice" in ex.title
    text = ex.text
    for chrome in (COOKIE_TEXT, FOOTER_TEXT, SIDEBAR_TEXT, "Edit on GitHub", "Skip to content", *NAV_LINKS):
        assert chrome not in text
    # every paragraph is there, in the block of its own section
    by_section = {b.section: b.text for b in ex.blocks}
    assert prose(4, 7) in by_section["GPipe in practice"]
    assert prose(6, 1) in by_section["Pipeline schedules"] and prose(5, 2) in by_section["Pipeline schedules"]
    assert prose(7, 3) in by_section["Memory savings"]
    assert by_section["Memory savings"].startswith("Memory savings\n")  # heading words stay searchable
    assert all(b.page is None for b in ex.blocks)


@pytest.mark.parametrize("label", ["windows-1252", "iso-8859-1", "latin-1"])
def test_html_cp1252_with_charset_header(label: str) -> None:
    words = "Café déjà vu — “smart quotes” cost 5 € in Zürich; naïve façade."
    page = html_page("Encodings", [("Résumé", [words + " " + prose(4)])], chrome=False, meta_charset=None)
    ex = extract_bytes(page.encode("cp1252"), f"text/html; charset={label}")
    assert words in ex.text
    assert "Résumé" in {b.section for b in ex.blocks}


def test_html_cp1252_with_meta_charset_only() -> None:
    words = "Straße, Größe und Parallelität – “verteiltes” Lernen."
    page = html_page("Meta", [("Über", [words + " " + prose(3)])], chrome=False, meta_charset="windows-1252")
    ex = extract_bytes(page.encode("cp1252"), "text/html")
    assert words in ex.text


def test_html_cp1252_without_any_charset_is_detected() -> None:
    words = "Le modèle parallèle réduit la mémoire – “pipeline” à 5 € près."
    page = html_page("Sans charset", [("Aperçu", [words + " " + prose(3)])], chrome=False, meta_charset=None)
    ex = extract_bytes(page.encode("cp1252"), "text/html")
    assert words in ex.text


def test_utf8_body_behind_default_latin1_header_stays_utf8() -> None:
    words = "Ünïcödé “quotes” — ≥ 3× faster with ZeRO‑Offload."
    page = html_page("UTF-8", [("Intro", [words + " " + prose(3)])], chrome=False, meta_charset=None)
    ex = extract_bytes(page.encode("utf-8"), "text/html; charset=ISO-8859-1")
    assert words in ex.text


def test_bad_bytes_never_crash_the_decoder() -> None:
    junk = bytes(range(256)) * 4
    page = html_page("Junk", [("Bytes", [prose(5)])], chrome=False).encode() + junk
    ex = extract_bytes(page, "text/html; charset=utf-8")
    assert prose(5) in ex.text
    for charset in (None, "utf-8", "no-such-charset", "utf-16"):
        assert isinstance(decode_text(junk, charset, html=True), str)
    assert "\x00" not in extract_bytes(b"hello\x00 world\x07 " + prose(3).encode(), "text/plain").text


@pytest.mark.parametrize(
    "page",
    [
        "<html><head><title>Nothing</title></head><body><div></div></body></html>",
        html_page("Only chrome", [], chrome=True),
        "<html><body><nav><a href='/'>Home</a> <a href='/x'>Products</a></nav>"
        "<footer>© 2026</footer></body></html>",
        "<!DOCTYPE html>",
    ],
)
def test_html_without_text_is_an_error(page: str) -> None:
    with pytest.raises(ExtractError) as excinfo:
        extract_bytes(page.encode(), "text/html", url="https://example.org/empty")
    assert _reason(excinfo) == "no readable text in the HTML page"
    assert excinfo.value.url == "https://example.org/empty"


def test_empty_body_is_an_error() -> None:
    for body in (b"", b"  \n\t "):
        with pytest.raises(ExtractError) as excinfo:
            extract_bytes(body, "text/html")
        assert _reason(excinfo) == "empty body"


def test_landing_page_gives_title_abstract_and_pdf_link() -> None:
    abstract = prose(8, 4)
    page = landing_page("PipeDream: Generalized Pipeline Parallelism", abstract, "/doi/pdf/10.1145/3341301")
    ex = extract_bytes(page.encode(), "text/html", url="https://dl.example.org/doi/10.1145/3341301")
    assert ex.title == "PipeDream: Generalized Pipeline Parallelism"
    assert abstract in ex.text
    assert "Sign in" not in ex.text and "Cookie settings" not in ex.text
    assert any(b.section == "Abstract" and abstract in b.text for b in ex.blocks)
    assert ex.pdf_url == "https://dl.example.org/doi/pdf/10.1145/3341301"
    assert ex.authors == ("Ada Lovelace", "Charles Babbage")
    assert ex.date == "2019/10/27"


def test_pdf_link_resolves_as_the_resolver_resolves_it() -> None:
    """The extractor records the same PDF the resolver follows: ``<base href>`` honoured, fragment dropped."""
    from dmlqa.acquire.resolve import citation_pdf_url

    abstract = prose(8, 4)
    page = landing_page("Based", abstract, "a.pdf#page=2").replace("<head>", '<head><base href="https://cdn.x.org/p/">')
    ex = extract_bytes(page.encode(), "text/html", url="https://x.org/abs/1")
    assert ex.pdf_url == citation_pdf_url(page.encode(), "https://x.org/abs/1") == "https://cdn.x.org/p/a.pdf"


def test_landing_page_with_abstract_only_in_metadata() -> None:
    abstract = prose(6, 2)
    page = landing_page("Script-rendered page", abstract, "https://x.org/a.pdf", abstract_in_body=False)
    ex = extract_bytes(page.encode(), "text/html", url="https://x.org/abs")
    assert ex.blocks == (Block(f"Script-rendered page\n{abstract}", section="Abstract"),)


def test_landing_page_without_abstract_is_an_error() -> None:
    page = landing_page("ZeRO-Offload: Democratizing Billion-Scale Model Training", "", "https://x.org/a.pdf")
    with pytest.raises(ExtractError) as excinfo:
        extract_bytes(page.encode(), "text/html")
    assert _reason(excinfo) == "no readable text in the HTML page"


def test_html_served_as_text_plain_is_sniffed() -> None:
    page = html_page("Sniffed", ARTICLE_SECTIONS, chrome=False)
    assert extract_bytes(page.encode(), "text/plain").content_type == "html"
    assert extract_bytes(page.encode(), "application/octet-stream").content_type == "html"


# -- PDF -------------------------------------------------------------------------------------------
PAGES = [prose(25, 0), prose(25, 1), prose(25, 2)]


def test_pdf_blocks_per_page_with_page_numbers() -> None:
    ex = extract_bytes(build_pdf(PAGES), "application/pdf", url="https://arxiv.org/pdf/1")
    assert ex.content_type == "pdf" and ex.pages == 3
    assert [b.page for b in ex.blocks] == [1, 2, 3]
    for block, page in zip(ex.blocks, PAGES, strict=True):
        # line breaks of the PDF stay, the words are the page's words in order
        assert " ".join(block.text.split()) == page


def test_pdf_pages_without_text_are_skipped_but_numbering_stays() -> None:
    ex = extract_bytes(build_pdf([PAGES[0], None, PAGES[2]], compress=True), "application/pdf")
    assert [b.page for b in ex.blocks] == [1, 3]
    assert ex.pages == 3


@pytest.mark.parametrize("content_type", ["application/octet-stream", "text/html", "", "binary/octet-stream"])
def test_pdf_is_sniffed_whatever_the_content_type(content_type: str) -> None:
    ex = extract_bytes(build_pdf(PAGES[:1]), content_type)
    assert ex.content_type == "pdf" and [b.page for b in ex.blocks] == [1]


def test_pdf_line_end_hyphenation_is_repaired() -> None:
    pdf = build_pdf(
        [
            "We study pipeline paral-\nlelism with data-\nparallel training, as data-parallel ranks do. "
            + prose(5)
        ]
    )
    text = extract_bytes(pdf, "application/pdf").text
    assert "pipeline parallelism" in text
    assert "data-parallel" in text  # the document spells it hyphenated elsewhere
    assert dehyphenate("the paral-\nlelism of data-\nparallel and data-parallel") == (
        "the parallelism of data-parallel and data-parallel"
    )
    # a name broken after its hyphen keeps it, without the line break ("ZeRO- 3" once whitespace is collapsed)
    assert dehyphenate("ZeRO-\n3 partitions and Megatron- \nLM splits; see pages 4-\n 7") == (
        "ZeRO-3 partitions and Megatron-LM splits; see pages 4-7"
    )
    # a compound broken after its second part keeps the hyphen: no word is split right after a hyphen
    assert dehyphenate("traverse it column-by-\ncolumn, the state-of-the-\nart way, a paral-\nlel one") == (
        "traverse it column-by-column, the state-of-the-art way, a parallel one"
    )


def test_pdf_sentence_over_a_page_break_is_one_sentence_cited_at_its_first_page() -> None:
    """The page break cut "... are communicated to" / "servers as soon as ..." into two fragments."""
    footer = "Proceedings of the Example Systems Conference {}"
    pages = [
        prose(12, 0) + "\nUsing wait-free back propagation, weight gradients are communicated to\n"
        + footer.format(551) + "\n1",
        "servers as soon as they are computed, rather than waiting for all layers. Pipeline paral-\n"
        + footer.format(552),
        "lelism also requires its stages to be balanced. Then more.\n" + prose(8, 1) + " We then turn to what",
        "4 Evaluation\nwe measure it again, on more machines. " + prose(8, 2),
    ]
    url = "https://arxiv.org/pdf/2"
    doc = to_document(Resource(id="p", url=url, title="A paper", kind="paper"),
                      extract_bytes(build_pdf(pages), "application/pdf"), source_url=url, sha256="0" * 64)
    sentences = {s.text: s.page for s in split_document(doc)}
    assert sentences["Using wait-free back propagation, weight gradients are communicated to servers as soon as "
                     "they are computed, rather than waiting for all layers."] == 1
    # the running footer between the parts is dropped, the hyphen broken over the page repaired
    assert sentences["Pipeline parallelism also requires its stages to be balanced."] == 2
    assert sentences["Then more."] == 3
    assert not any("Example Systems Conference" in text for text in sentences)
    # a next page that opens with a heading is no continuation; its own sentences stay on it
    assert [page for text, page in sentences.items() if "Evaluation" in text or "measure it again" in text] == [4]
    assert sentences["We then turn to what"] == 3


def test_pdf_footnote_is_taken_out_from_between_a_sentence_and_its_rest() -> None:
    """The text layer sets a footnote at its column's foot, inside the sentence the column breaks."""
    pages = [
        prose(10, 0) + "\nGPipe assumes that a layer fits in a single accelerator3. Then the rest of the"
        "\ncolumn goes on.\nAdditionally, micro-batch splitting requires complicated strategies to support layers that"
        "\n3One possible way around this limitation is splitting a single matrix-multiplication into smaller"
        "\nones and spreading them across layers.\nrequire statistics over the whole minibatch. Then 16GB on the"
        "\n16GB V100 hold it.\n4Note that the second note runs on",
        "and on. Which one.",
    ]
    url = "https://arxiv.org/pdf/3"
    doc = to_document(Resource(id="p", url=url, title="A paper", kind="paper"),
                      extract_bytes(build_pdf(pages), "application/pdf"), source_url=url, sha256="0" * 64)
    sentences = {s.text: s.page for s in split_document(doc)}
    assert [b.section for b in doc.blocks] == [None, "Footnotes", None]
    assert sentences["Additionally, micro-batch splitting requires complicated strategies to support layers that "
                     "require statistics over the whole minibatch."] == 1
    assert sentences["GPipe assumes that a layer fits in a single accelerator."] == 1  # the note's mark goes
    assert sentences["One possible way around this limitation is splitting a single matrix-multiplication into "
                     "smaller ones and spreading them across layers."] == 1
    # a line opening with a size is no footnote; a "note" whose sentence runs past the page is none either
    assert sentences["Then 16GB on the 16GB V100 hold it."] == 1
    assert sentences["4Note that the second note runs on and on."] == 1
    assert footnotes_apart("body of text1\n1We count a layer as one.\n2And this one\ngoes on.\nrest fp16 words2") == (
        "body of text\nrest fp16 words", "We count a layer as one.\nAnd this one\ngoes on.")
    assert footnotes_apart("3One line first: no body before it.") == ("3One line first: no body before it.", "")


def test_page_break_join_leaves_figure_labels_stamps_and_long_runs_alone() -> None:
    unjoined = [
        (1, "A backward pathway can be constructed by traversing\n2"), (2, "fullc-forward\nsigmoid-forward\nAnd so."),
        (3, "see the address below for the data\nhttp://example.org/data.html"),
        (4, "encountered first is kept. Then."),
        (5, "which is the case when the text goes on without"),
        (6, "any\nend\nof\nits\nsentence for more than four lines. Done."),
    ]
    assert join_page_breaks(unjoined) == unjoined
    # pages apart (a page between them unreadable) are not joined either
    assert join_page_breaks([(1, "the sentence goes on to"), (3, "the next readable page. Yes.")]) == [
        (1, "the sentence goes on to"), (3, "the next readable page. Yes.")]


def test_corrupt_pdf_is_an_error() -> None:
    for body in (
        b"%PDF-1.7\n" + bytes(range(256)) * 20,
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\n",
    ):
        with pytest.raises(ExtractError) as excinfo:
            extract_bytes(body, "application/pdf", url="u")
        assert _reason(excinfo).startswith("corrupt PDF")


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.8])
def test_truncated_pdf_keeps_what_survived(fraction: float) -> None:
    pdf = build_pdf([prose(25, i) for i in range(6)])
    try:
        ex = extract_bytes(pdf[: int(len(pdf) * fraction)], "application/pdf")
    except ExtractError as e:
        assert e.reason.startswith(("corrupt PDF", "PDF has no text layer"))
    else:
        pages = [b.page for b in ex.blocks]
        assert pages and pages == list(range(1, len(pages) + 1)) and len(pages) < 6
        assert ex.blocks[0].text.split() == prose(25, 0).split()


def test_pdf_with_a_broken_page_keeps_the_good_pages() -> None:
    ex = extract_bytes(build_pdf(PAGES, broken_pages=[2]), "application/pdf")
    assert [b.page for b in ex.blocks] == [1, 3]


def test_pdf_with_a_page_that_raises_keeps_the_good_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    from pypdf import PageObject

    from dmlqa.extract import pdf as pdf_module
    from dmlqa.extract.pdf import pdfium_page_texts

    original = PageObject.extract_text

    def flaky(self: PageObject, *args: object, **kwargs: object) -> str:
        text = original(self, *args, **kwargs)
        if "Tensor parallelism" in text.split(".")[0]:  # the first sentence of prose(25, 3)
            raise KeyError("/Font")
        return text

    def pdfium_fails_on_page_2(*args: object, **kwargs: object) -> list[str | None] | None:
        texts = pdfium_page_texts(*args, **kwargs)  # type: ignore[arg-type]
        return texts[:1] + [None] + texts[2:] if texts else texts  # pypdf, the fallback, then raises too

    monkeypatch.setattr(PageObject, "extract_text", flaky)
    monkeypatch.setattr(pdf_module, "pdfium_page_texts", pdfium_fails_on_page_2)
    ex = extract_bytes(build_pdf([PAGES[0], prose(25, 3), PAGES[2]]), "application/pdf")
    assert [b.page for b in ex.blocks] == [1, 3]


def test_encrypted_pdf_with_user_password_is_an_error() -> None:
    with pytest.raises(ExtractError) as excinfo:
        extract_bytes(encrypt_pdf(build_pdf(PAGES), user_password="s3cret"), "application/pdf")
    assert _reason(excinfo).startswith("encrypted PDF")


def test_encrypted_pdf_with_empty_user_password_is_read() -> None:
    ex = extract_bytes(encrypt_pdf(build_pdf(PAGES), user_password=""), "application/pdf")
    assert [b.page for b in ex.blocks] == [1, 2, 3]
    assert " ".join(ex.blocks[1].text.split()) == PAGES[1]


def test_image_only_pdf_has_no_text_layer() -> None:
    with pytest.raises(ExtractError) as excinfo:
        extract_bytes(build_pdf([None, None, None]), "application/pdf")
    assert _reason(excinfo) == "PDF has no text layer (scanned images?)"


def test_html_served_as_pdf_is_an_error() -> None:
    with pytest.raises(ExtractError) as excinfo:
        extract_bytes(html_page("Login", ARTICLE_SECTIONS).encode(), "application/pdf")
    assert "HTML" in _reason(excinfo)


# -- markdown, text, types -------------------------------------------------------------------------
MARKDOWN = """---
layout: page
---
<p align="center"><img src="logo.png" alt="logo"></p>

# ZeRO tutorial

Intro paragraph with a [link to the paper](https://arxiv.org/abs/1910.02054) and ![a figure](fig.png).

## Setup

```bash
# install deepspeed first: this is a comment, not a heading
pip install deepspeed
```

Note: if a < b and c > d then <b>bold</b> stays readable.

Setext section
--------------

Body of the setext section.

### Empty heading
## Results
Results text.
"""


CODE_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Ray Train with DeepSpeed</title></head>
<body><article><h1>Ray Train with DeepSpeed</h1>
<p>You can use your existing DeepSpeed training code with Ray Train and keep the workflow you already know.
Install the packages with <code>pip install deepspeed</code> before anything else on every node.</p>
<pre><code>def train_func():
    # Prepare everything for distributed training
    model, optimizer = deepspeed.initialize(model=model)

    # Define the GPU device for the current worker
    device = get_accelerator().device_name(model.local_rank)
</code></pre>
<p>Then launch the trainer with the scaling configuration of your cluster and watch the loss go down.</p>
</article></body></html>"""


def test_html_code_blocks_are_fenced_and_their_comments_are_no_headings() -> None:
    ex = extract_bytes(CODE_PAGE.encode(), "text/html", url="https://docs.example.org/deepspeed")
    lines = ex.text.split("\n")
    opening = lines.index("```")
    # the block's lines between two fences, its blank line kept inside; the prose around stays outside
    assert lines[opening + 1] == "def train_func():" and "```" in lines[opening + 2:]
    closing = opening + 1 + lines[opening + 1:].index("```")
    # the function's body keeps its indentation under its "def" line
    assert "    device = get_accelerator().device_name(model.local_rank)" in lines[opening:closing]
    assert "    # Define the GPU device for the current worker" in lines[opening:closing]
    assert lines[closing + 1].startswith("Then launch the trainer")
    # inline code stays in its sentence, unfenced; a comment in code opens no section
    assert any("with pip install deepspeed before" in line for line in lines[:opening])
    assert [b.section for b in ex.blocks] == ["Ray Train with DeepSpeed"]


#: A Sphinx page's numbered steps (horovod.readthedocs.io's pytorch.html): each step a list item holding its
#: paragraphs and a code block, which trafilatura writes on one line with the item's text.
STEPS_PAGE = """<html><head><title>Horovod with PyTorch</title></head><body><article>
<h1>Horovod with PyTorch</h1>
<p>To use Horovod with PyTorch, make the following modifications to your training script:</p>
<ol class="arabic simple"><li><p>Run <span class="docutils literal">hvd.init()</span>.</p></li></ol>
<ol class="arabic" start="2"><li><p>Pin each GPU to a single process.</p>
<p>With the typical setup of one GPU per process, set this to <em>local rank</em>. The first process on the server
will be allocated the first GPU, the second process will be allocated the second GPU, and so forth.</p>
<pre class="code python literal-block"><code>if torch.cuda.is_available():
    torch.cuda.set_device(hvd.local_rank())</code></pre></li></ol>
<ol class="arabic" start="5"><li><p>Broadcast the initial variable states from rank 0 to all other processes:</p>
<pre class="code python literal-block"><code>hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)</code></pre>
<p>This is necessary to ensure consistent initialization of all workers when training is started with random
weights or restored from a checkpoint.</p></li></ol>
<ul><li><p>Install the horovod pip package.</p><p>To run on CPUs:</p><pre><code>$ pip install horovod</code></pre>
<p>To run on GPUs with NCCL:</p><pre><code>$ HOROVOD_GPU_OPERATIONS=NCCL pip install horovod</code></pre></li></ul>
<ol class="arabic" start="6"><li><p>Modify your code to save checkpoints only on worker 0 to prevent other
workers from corrupting them.</p></li></ol>
</article></body></html>"""


def test_a_list_items_code_block_is_split_from_the_items_text() -> None:
    lines = extract_bytes(STEPS_PAGE.encode(), "text/html", url="https://docs.example.org/pytorch.html").text.split("\n")
    pin = next(i for i, line in enumerate(lines) if line.startswith("- Pin each GPU"))
    assert lines[pin].endswith("and so forth.")  # not "... and so forth. if torch.cuda.is_available():"
    assert lines[pin + 1:pin + 5] == ["```", "if torch.cuda.is_available():",
                                      "    torch.cuda.set_device(hvd.local_rank())", "```"]  # the if's body indented
    cast = next(i for i, line in enumerate(lines) if line.startswith("- Broadcast"))
    assert lines[cast] == "- Broadcast the initial variable states from rank 0 to all other processes:"
    assert lines[cast + 1:cast + 5] == ["```", "hvd.broadcast_parameters(model.state_dict(), root_rank=0)",
                                        "hvd.broadcast_optimizer_state(optimizer, root_rank=0)", "```"]
    assert lines[cast + 5].startswith("This is necessary to ensure")
    # a one-line block between two of the item's paragraphs
    pip = lines.index("- Install the horovod pip package. To run on CPUs:")
    assert lines[pip + 1:pip + 7] == ["```", "$ pip install horovod", "```", "To run on GPUs with NCCL:", "```",
                                      "$ HOROVOD_GPU_OPERATIONS=NCCL pip install horovod"]
    # code inline in an item's sentence stays in it
    assert "- Run hvd.init()." in lines


def test_markdown_code_keeps_its_fences() -> None:
    ex = extract_bytes(MARKDOWN.encode(), "text/markdown")
    setup = ex.blocks[1].text.split("\n")
    at = setup.index("```")
    assert setup[at:at + 4] == ["```", "# install deepspeed first: this is a comment, not a heading",
                                "pip install deepspeed", "```"]


def test_a_markdown_fence_left_open_runs_to_the_end_and_loses_nothing() -> None:
    ex = extract_bytes(b"# Setup\n\nInstall it first, then run the example:\n\n```bash\npip install deepspeed\n"
                       b"deepspeed train.py\n", "text/markdown")
    lines = [line for line in ex.text.split("\n") if line]
    assert lines[-3:] == ["pip install deepspeed", "deepspeed train.py", "```"]  # closed where the file ends
    assert lines.count("```") == 2 and "Install it first, then run the example:" in lines


def test_markdown_headings_become_sections() -> None:
    ex = extract_bytes(MARKDOWN.encode(), "text/markdown")
    assert ex.content_type == "markdown" and ex.title == "ZeRO tutorial"
    sections = [b.section for b in ex.blocks]
    assert sections == ["ZeRO tutorial", "Setup", "Setext section", "Results"]
    setup = ex.blocks[1].text
    assert "# install deepspeed first" in setup and "pip install deepspeed" in setup
    assert "link to the paper" in ex.blocks[0].text and "](" not in ex.text and "<p" not in ex.text
    assert "if a < b and c > d" in setup  # comparison signs are not tags
    assert ex.blocks[3].text == "Empty heading\nResults\nResults text."  # heading-only section kept


def test_a_readmes_badges_and_images_leave_no_labels_in_the_text() -> None:
    """An image's alt text labels a picture: a README's badge row had become "GitHub Repo stars Build ..." glued to
    the next line's words. Links keep their text; an image inside a sentence leaves the sentence whole."""
    readme = (b"# Colossal-AI\n\n"
              b"[![GitHub Repo stars](https://img.shields.io/github/stars/x/y?style=social)](https://github.com/x/y)\n"
              b"[![Build](https://github.com/x/y/badge.svg)](https://github.com/x/y/actions) "
              b"[![slack badge](https://img.shields.io/badge/Slack-join.svg)](https://slack.com/x)\n\n"
              b"Colossal-AI needs a GPU of [compute capability](https://developer.nvidia.com/cc) 7.0 or higher, as "
              b"![diagram](arch.png) the figure shows.\n")
    ex = extract_bytes(readme, "text/markdown")
    assert [line for line in ex.text.split("\n") if line] == [
        "Colossal-AI",
        "Colossal-AI needs a GPU of compute capability 7.0 or higher, as the figure shows."], ex.text
    ex = extract_bytes(MARKDOWN.encode(), "text/markdown")
    assert "Intro paragraph with a link to the paper and." in ex.blocks[0].text and "a figure" not in ex.text


def test_markdown_by_url_suffix_and_plain_text() -> None:
    ex = extract_bytes(
        MARKDOWN.encode(), "text/plain", url="https://raw.githubusercontent.com/a/b/main/README.md"
    )
    assert ex.content_type == "markdown"
    ex = extract_bytes(b"Just  some\r\nplain\ttext.\n\n\n\nSecond paragraph.", "text/plain; charset=utf-8")
    assert ex.content_type == "text"
    assert ex.blocks == (Block("Just some\nplain text.\n\nSecond paragraph."),)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png"),
        (b"PK\x03\x04" + bytes(64), "application/zip"),
        (b"\x00\x01binary", "application/octet-stream"),
        (b"{}", "application/json"),
    ],
)
def test_unsupported_content_type(body: bytes, content_type: str) -> None:
    with pytest.raises(ExtractError) as excinfo:
        extract_bytes(body, content_type, url="https://example.org/x")
    assert _reason(excinfo) == f"unsupported content type {content_type}"


def test_extract_file_by_suffix_and_sniffing(tmp_path: Path) -> None:
    (tmp_path / "paper.pdf").write_bytes(build_pdf(PAGES[:2]))
    (tmp_path / "paper.bin").write_bytes(build_pdf(PAGES[:1]))
    (tmp_path / "notes.md").write_text(MARKDOWN, encoding="utf-8")
    (tmp_path / "page.html").write_text(html_page("Local page", ARTICLE_SECTIONS), encoding="utf-8")
    (tmp_path / "README").write_text("A readme without suffix. " + prose(2), encoding="utf-8")
    assert [b.page for b in extract_file(tmp_path / "paper.pdf").blocks] == [1, 2]
    assert extract_file(tmp_path / "paper.bin").content_type == "pdf"
    assert extract_file(tmp_path / "notes.md").content_type == "markdown"
    assert extract_file(tmp_path / "page.html").content_type == "html"
    assert extract_file(tmp_path / "README").content_type == "text"
    with pytest.raises(ExtractError) as excinfo:
        extract_file(tmp_path / "missing.pdf")
    assert _reason(excinfo).startswith("cannot read file")


def test_clean_text() -> None:
    raw = "ef\ufb01cient\u00a0 training\x00\x0c of\u00adfload\u200b\r\n\n\n\n  next   line \t"
    assert clean_text(raw) == "efficient training offload\n\nnext line"
    # a formula's variables in mathematical italics read, and are searched, as plain letters; m² keeps its square
    math = "By design, \u210e\U0001d45d\U0001d44d trades memory for m² and \U0001d45a \u226b \U0001d45d."
    assert clean_text(math) == "By design, hpZ trades memory for m² and m \u226b p."


# -- documents and cards ---------------------------------------------------------------------------
GPIPE = Resource(
    id="gpipe",
    url="https://arxiv.org/abs/1811.06965",
    title="GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism",
    kind="paper",
    authors=("Yanping Huang", "Youlong Cheng", "Ankur Bapna"),
    venue="NeurIPS",
    year=2019,
    topics=("Papers", "Pipeline Parallelism"),
)


def test_catalog_card_reads_like_a_reference() -> None:
    card = catalog_card(GPIPE)
    assert card.is_card and card.content_type == "card" and card.doc_id == "gpipe"
    assert card.text == (
        "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism. Yanping Huang et al. "
        "NeurIPS 2019. Paper. Topics: Papers, Pipeline Parallelism. URL: https://arxiv.org/abs/1811.06965"
    )
    assert card.blocks == (Block(card.text),) and card.sha256
    bare = catalog_card(Resource(id="r", url="https://github.com/a/b", title="a/b", kind="repo"))
    assert bare.text == "a/b. Code repository. URL: https://github.com/a/b"


def test_to_document_prefers_catalog_facts() -> None:
    ex = Extracted(
        blocks=(Block("p1", page=1), Block("p2", page=2)),
        content_type="pdf",
        title="Untitled-ish PDF title",
        authors=("Someone Else",),
        pages=2,
    )
    doc = to_document(GPIPE, ex, source_url="https://arxiv.org/pdf/1811.06965", sha256="ab")
    assert doc.title == GPIPE.title and doc.authors == GPIPE.authors
    assert (doc.venue, doc.year, doc.topics, doc.kind) == ("NeurIPS", 2019, GPIPE.topics, "paper")
    assert doc.text == "p1" + BLOCK_SEPARATOR + "p2"
    assert (doc.source_url, doc.sha256, doc.content_type, doc.is_card) == (
        "https://arxiv.org/pdf/1811.06965",
        "ab",
        "pdf",
        False,
    )

    bare = Resource(id="x", url="https://example.org/post", title="https://example.org/post")
    doc = to_document(bare, ex, source_url=bare.url, sha256="cd")
    assert doc.title == "Untitled-ish PDF title" and doc.authors == ("Someone Else",)


def test_fetched_title_replaces_the_catalog_placeholder() -> None:
    """A bare link gets the catalog's placeholder title (the URL without its scheme); the page's own
    title must replace it, while a title a person wrote is kept."""
    parsed = parse_list("# L\n\n- https://example.org/blog/zero-offload/\n- [ZeRO](https://example.org/zero)\n", "l")
    placeholder, named = sorted(parsed.resources, key=lambda r: r.url)
    assert placeholder.title == url_title(placeholder.url) == "example.org/blog/zero-offload"
    page = Extracted(blocks=(Block("text"),), content_type="html", title="ZeRO-Offload: Democratizing Training")
    assert to_document(placeholder, page, source_url=placeholder.url, sha256="x").title == page.title
    assert to_document(named, page, source_url=named.url, sha256="x").title == "ZeRO"
    # no title in the page: the placeholder stays rather than nothing
    untitled = Extracted(blocks=(Block("text"),), content_type="text")
    assert to_document(placeholder, untitled, source_url=placeholder.url, sha256="x").title == placeholder.title


def test_the_stage_offers_its_names_loaded_on_first_use() -> None:
    """``dmlqa.extract`` names what the stage offers; importing it does not load the extractors."""
    import subprocess
    import sys

    import dmlqa.extract as stage

    assert sorted(stage.__all__) == sorted(stage._HOME)
    for name in stage.__all__:
        assert getattr(stage, name) is getattr(importlib.import_module(f"dmlqa.extract.{stage._HOME[name]}"), name)
    code = "import sys, dmlqa.extract.sentences; print('trafilatura' in sys.modules, 'pypdf' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# -- the real snapshot -----------------------------------------------------------------------------
SNAPSHOT = Path(__file__).resolve().parents[2] / "shared" / "websnap"
#: Chrome strings the snapshot's synthetic page furniture contains (checked in the raw pages).
CHROME = [
    "We use optional cookies",
    "You signed in with another tab or window",
    "Skip to content",
    "Edit on GitHub",
    "Do not share my personal information",
    "© 2026 GitHub",
]


def _snapshot_records(urls: set[str]) -> dict[str, tuple[str, bytes]]:
    from warcio.archiveiterator import ArchiveIterator

    found: dict[str, tuple[str, bytes]] = {}
    with open(SNAPSHOT / "snapshot.warc.gz", "rb") as f:
        for record in ArchiveIterator(f):
            url = record.rec_headers.get_header("WARC-Target-URI")
            if record.rec_type == "response" and url in urls:
                found[url] = (
                    record.http_headers.get_header("Content-Type") or "",
                    record.content_stream().read(),
                )
                if len(found) == len(urls):
                    break
    return found


@pytest.mark.snapshot
def test_snapshot_records_extract_cleanly() -> None:
    if not (SNAPSHOT / "snapshot.warc.gz").exists():
        pytest.skip(f"no web snapshot at {SNAPSHOT}/snapshot.warc.gz (shared test data not checked out)")
    manifest = [json.loads(line) for line in (SNAPSHOT / "manifest.jsonl").read_text().splitlines()]
    kinds = {m["url"]: m for m in manifest if m.get("in_warc", True)}
    readme = "https://github.com/NVIDIA/Megatron-LM"
    doc_page = "https://www.deepspeed.ai/tutorials/zero/"
    paper = "https://arxiv.org/pdf/1910.02054"
    octet = next(u for u, m in kinds.items() if m.get("content_type") == "application/octet-stream")
    assert kinds[readme]["kind"] == "repo-readme" and kinds[paper]["kind"] == "paper-pdf"
    records = _snapshot_records({readme, doc_page, paper, octet})

    for url in (readme, doc_page):
        content_type, body = records[url]
        raw = body.decode("utf-8")
        ex = extract_bytes(body, content_type, url=url)
        assert ex.content_type == "html" and len(ex.text) > 500
        assert sum(1 for b in ex.blocks if b.section) >= 3
        present = [c for c in CHROME if c in raw]
        assert present, "the snapshot pages are expected to carry page chrome"
        assert not [c for c in present if c in ex.text]

    for url in (paper, octet):
        content_type, body = records[url]
        ex = extract_bytes(body, content_type, url=url)
        assert ex.content_type == "pdf" and len(ex.text) > 500
        assert ex.pages == kinds[url]["pages"]
        pages = [b.page for b in ex.blocks if b.section is None]  # a page's text; its tables follow it
        assert pages == sorted(set(pages)) and pages[0] == 1 and pages[-1] <= ex.pages
        assert [b.page for b in ex.blocks] == sorted(b.page for b in ex.blocks)
    zero = extract_bytes(records[paper][1], "application/pdf")
    assert "ZeRO" in zero.blocks[0].text
    # the sentence page 7 ends inside is read whole there (it goes on at the top of page 8)
    text = {b.page: " ".join(b.text.split()) for b in zero.blocks if b.section is None}
    assert "In addition, it needs to hold the optimizer states: an f p32 copy of the parameters" in text[7]
    assert not text[8].startswith("to hold the optimizer states")


def test_binary_bytes_named_text_are_refused_not_indexed() -> None:
    """Random bytes in a .txt file (or served as text/plain) are no document: one clear reason."""
    import random

    junk = random.Random(7).randbytes(4000)
    with pytest.raises(ExtractError, match="not text: .* control or unprintable"):
        extract_bytes(junk, "text/plain", url="junk.txt")
    with pytest.raises(ExtractError, match="not text: .* control or unprintable"):
        extract_bytes(b"# Notes\n" + junk, "text/markdown", url="notes.md")
    legacy = ("Caf\xe9 na\xefve r\xe9sum\xe9: " + prose(20)).encode("latin-1")
    assert "Caf\xe9 na\xefve r\xe9sum\xe9: Pipeline" in extract_bytes(legacy, "text/plain", url="legacy.txt").text
