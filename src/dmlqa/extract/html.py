"""HTML pages: main text through trafilatura, headings as sections, and the facts in meta tags.

Page chrome that trafilatura's fallback extractors sometimes keep (nav bars, headers, footers,
cookie banners) is pruned first. Scholarly landing pages that render their abstract with scripts
still carry it in their metadata, so such a page is indexed by its abstract rather than refused.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

import lxml.etree
import lxml.html
import trafilatura

from dmlqa.catalog.urls import absolute_link
from dmlqa.errors import ExtractError
from dmlqa.extract.facts import clean_authors, split_authors, year_of
from dmlqa.extract.text import (
    ATX_HEADING,
    CODE_FENCE,
    SETEXT_RULE,
    Extracted,
    clean_text,
    decode_text,
    norm_space,
    sectionize,
    strip_links,
)
from dmlqa.models import Block

log = logging.getLogger(__name__)

#: A page whose text (title lines aside) has fewer words than this has nothing worth indexing.
MIN_HTML_WORDS = 5
#: Kana and CJK ideographs: scripts written without spaces between words.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

#: Page chrome removed before trafilatura sees the page. trafilatura drops most of it by itself,
#: but its fallback extractors (used on thin pages such as publisher landing pages) keep nav bars.
PRUNE_XPATH = [
    "//nav",
    "//footer",
    "//header[not(ancestor::article) and not(ancestor::main)]",
    "//*[@role='navigation' or @role='banner' or @role='contentinfo']",
    "//*[@role='dialog' or @role='alertdialog']",
    "//*[contains(translate(@id, 'COOKIE', 'cookie'), 'cookie')]",
    "//*[contains(translate(@class, 'COOKIE', 'cookie'), 'cookie')]",
    "//*[contains(@id, 'consent') or contains(@class, 'consent')]",
    "//*[contains(@class, 'skip-link') or contains(@class, 'skip-to-content')]",
    "//*[contains(@class, 'breadcrumb') or contains(@id, 'breadcrumb')]",
    "//*[contains(@aria-label, 'readcrumb')]",
    "//*[contains(@class, 'edit-page') or contains(@class, 'edit-this-page')]",
    "//*[contains(@class, 'edit-link')]",
    "//*[contains(@class, 'feedback')]",
    "//a[contains(@href, '/edit/')]",
]
#: Pages with more block elements than this are extracted without trafilatura's fallback extractors
#: (see :func:`extract_html`). The longest page of the snapshot has 776; the fallbacks cost ~1 s at 3,000.
FALLBACK_MAX_BLOCKS = 3000
#: Elements of trafilatura's output a <code> sits in when it is code inline in text, not a code block.
_INLINE_PARENTS = ("p", "head", "hi", "ref", "cell", "quote", "item")
_BLOCK_TAGS = ("p", "div", "td", "th", "tr", "li", "dd", "dt", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6")
#: trafilatura's "extensive" date search reads the footer's "© 2026" as a publication date.
DATE_PARAMS = {"extensive_search": False, "original_date": True}


def extract_html(body: bytes | str, *, url: str = "", charset: str | None = None) -> Extracted:
    """Main text of an HTML page, one block per heading-delimited section.

    ``body`` is the page's bytes (decoded here, ``charset`` first), or its text when the caller
    has decoded it already (:func:`~dmlqa.extract.documents.extract_bytes` judges the decoded text).
    """
    text = body if isinstance(body, str) else decode_text(body, charset, html=True)
    try:
        # Parse our own decoding as UTF-8 bytes: lxml refuses str input that carries an XML
        # encoding declaration, and a forced parser encoding keeps a lying <meta charset> out.
        tree = lxml.html.document_fromstring(
            text.encode("utf-8", "surrogatepass"), parser=lxml.html.HTMLParser(encoding="utf-8")
        )
    except (lxml.etree.ParserError, ValueError) as e:
        raise ExtractError(url, "no readable text in the HTML page") from e
    meta = _meta_tags(tree)
    try:
        result = trafilatura.bare_extraction(
            tree,
            url=url if url.startswith(("http://", "https://")) else None,
            include_comments=False,
            favor_recall=True,
            # trafilatura's fallbacks are quadratic in a run of short blocks (justext rescans the
            # run's neighbours for each one): 30,000 one-cell tables cost minutes. A page that long
            # has enough text for the main extractor, so it goes without them.
            fast=_block_count(tree) > FALLBACK_MAX_BLOCKS,
            with_metadata=True,
            prune_xpath=PRUNE_XPATH,
            date_extraction_params=DATE_PARAMS,
        )
    except Exception as e:  # trafilatura is robust, but a crash in it must not stop a build
        log.warning("trafilatura failed on %s: %r", url, e)
        result = None

    title = _first(meta, "citation_title", "dc.title") or (result.title if result else None) or None
    title = clean_text(title) if title else None
    blocks = _html_blocks(result.text or "", result.body) if result is not None else []
    if _word_count(blocks, title) < MIN_HTML_WORDS:
        # Scholarly landing pages that render the abstract with scripts still carry it in their
        # metadata. Elsewhere a meta description is a marketing line, not worth indexing alone.
        scholarly = any(name.startswith(("citation_", "dc.")) for name in meta)
        abstract = _first(meta, "citation_abstract", "dc.description", "description", "og:description")
        abstract = clean_text(abstract) if abstract and scholarly else ""
        if len(abstract.split()) < MIN_HTML_WORDS:
            raise ExtractError(url, "no readable text in the HTML page")
        blocks = [Block(f"{title}\n{abstract}" if title else abstract, section="Abstract")]

    authors = _html_authors(meta, result.author if result is not None else None)
    date, year = _html_date(meta, tree, result.date if result is not None else None)
    pdf_url = _first(meta, "citation_pdf_url")
    return Extracted(
        blocks=tuple(blocks),
        content_type="html",
        title=title,
        authors=authors,
        date=date,
        pdf_url=absolute_link(pdf_url, url, _base_href(tree)) if pdf_url else None,
        year=year,
    )


#: Meta tags that state when a page's work was published, most specific first.
HTML_DATE_META = (
    "citation_publication_date",
    "citation_date",
    "citation_online_date",
    "citation_year",
    "citation_cover_date",
    "dc.date.issued",
    "dc.date",
    "dcterms.issued",
    "dcterms.date",
    "prism.publicationdate",
    "article:published_time",
)
#: One-author-per-tag meta tags (Google Scholar's ``citation_author`` and Dublin Core's creator).
HTML_AUTHOR_META = ("citation_author", "dc.creator", "dcterms.creator")


def _html_authors(meta: dict[str, list[str]], trafilatura_author: str | None) -> tuple[str, ...]:
    """Authors a page names: repeated ``citation_author`` tags first, then ``<meta name=author>``,
    then trafilatura's guess; junk ("Copyright", "admin", e-mail addresses) rejected throughout."""
    for name in HTML_AUTHOR_META:
        if meta.get(name):
            found = clean_authors(meta[name])
            if found:
                return found
    for raw in (_first(meta, "author"), trafilatura_author):
        if raw:
            found = clean_authors(split_authors(raw))
            if found:
                return found
    return ()


def _html_date(
    meta: dict[str, list[str]], tree: lxml.html.HtmlElement, trafilatura_date: str | None
) -> tuple[str | None, int | None]:
    """(date string, year) from the page's meta tags, its JSON-LD ``datePublished``, or trafilatura."""
    candidates = [v for name in HTML_DATE_META for v in meta.get(name, [])[:1]]
    candidates += _json_ld_dates(tree)
    if trafilatura_date:
        candidates.append(trafilatura_date)
    for c in candidates:
        year = year_of(c)
        if year is not None:
            return c, year
    return (candidates[0] if candidates else None), None


def _json_ld_dates(tree: lxml.html.HtmlElement) -> list[str]:
    """``datePublished`` values of the page's JSON-LD blocks (schema.org articles, papers)."""
    found: list[str] = []
    for el in tree.iter("script"):
        if "ld+json" not in (el.get("type") or "").lower() or not el.text or len(el.text) > 200_000:
            continue
        try:
            data = json.loads(el.text)
        except ValueError:
            continue
        stack = [data]
        while stack and len(found) < 5:
            item = stack.pop()
            if isinstance(item, dict):
                value = item.get("datePublished")
                if isinstance(value, str):
                    found.append(value)
                stack.extend(v for v in item.values() if isinstance(v, dict | list))
            elif isinstance(item, list):
                stack.extend(v for v in item if isinstance(v, dict | list))
    return found


def _block_count(tree: lxml.html.HtmlElement) -> int:
    """How many block elements (paragraphs, cells, items) the page has: what its fallbacks' cost grows with."""
    return sum(1 for _ in tree.iter(*_BLOCK_TAGS))


def _meta_tags(tree: lxml.html.HtmlElement) -> dict[str, list[str]]:
    """``<meta name|property=... content=...>`` values by lower-case name, in page order."""
    found: dict[str, list[str]] = {}
    for el in tree.iter("meta"):
        name = (el.get("name") or el.get("property") or "").strip().lower()
        content = (el.get("content") or "").strip()
        if name and content:
            found.setdefault(name, []).append(content)
    return found


def _base_href(tree: lxml.html.HtmlElement) -> str | None:
    """The page's first ``<base href>``, against which its relative links resolve."""
    for el in tree.iter("base"):
        href = (el.get("href") or "").strip()
        if href:
            return href
    return None


def _first(meta: dict[str, list[str]], *names: str) -> str | None:
    for name in names:
        if meta.get(name):
            return meta[name][0]
    return None


def _html_blocks(text: str, body: lxml.etree._Element | None) -> list[Block]:
    """Split trafilatura's text at the headings it kept (``<head>`` elements of its output tree).

    Some pages (READMEs rendered by a lenient Markdown engine) also carry Markdown as literal
    text: ``#`` lines outside code are taken as headings too, and links reduced to their text.
    """
    heads: deque[str] = deque()
    code_lines: set[str] = set()
    block_lines: set[str] = set()  # the lines of code blocks (a <pre>), not of code inline in a sentence
    ends: list[tuple[str, str]] = []  # each code block's first and last line
    if body is not None:
        heads.extend(h for h in (norm_space("".join(el.itertext())) for el in body.iter("head")) if h)
        for el in body.iter("code"):
            said = [n for n in (norm_space(line) for line in "".join(el.itertext()).split("\n")) if n]
            code_lines.update(said)
            parent = el.getparent()
            in_item = bool(said) and parent is not None and parent.tag == "item" and _item_block(el, said)
            if in_item or said and (len(said) > 1 or parent is None or parent.tag not in _INLINE_PARENTS):
                block_lines.update(said)
            if in_item:
                ends.append((said[0], said[-1]))  # a list item's code block, which trafilatura writes on its line
    items: list[tuple[str, str | None]] = []
    lines = _unglued(text.split("\n"), block_lines, ends)
    code = _code_runs([norm_space(line) for line in lines], block_lines)
    fenced = False
    for line, in_code in zip(lines, code, strict=True):
        n = norm_space(line)
        if in_code != fenced:
            # trafilatura's text loses the page's code blocks: fenced, their lines are known as code (a "# ..."
            # comment in one is no heading, "model = ..." no sentence) and the LLM reads them as code too
            items.append((CODE_FENCE, None))
            fenced = in_code
        if fenced:
            items.append((line, None))
            continue
        # Look a few headings ahead: trafilatura may drop a heading from the text but not the tree.
        hit = next((i for i, h in enumerate(list(heads)[:4]) if h == n), None) if n else None
        if hit is not None:
            for _ in range(hit + 1):
                heads.popleft()
            items.append((line, n))
            continue
        if n and n not in code_lines:
            line = strip_links(line)
            m = ATX_HEADING.match(line)
            if m:
                heading = norm_space(m.group(2))
                items.append((heading, heading))
                continue
            if (
                SETEXT_RULE.match(line)
                and len(n) >= 3
                and items
                and items[-1][1] is None
                and items[-1][0].strip()
            ):
                heading = norm_space(items[-1][0])
                items[-1] = (heading, heading)
                continue
        items.append((line, None))
    if fenced:
        items.append((CODE_FENCE, None))
    return sectionize(items)


def _item_block(el: lxml.etree._Element, said: list[str]) -> bool:
    """Is a <code> right under a list item (in trafilatura's tree) a code block of its own, not code inline in
    the item's text ("Run <code>hvd.init()</code>.")? Several lines, or one after a paragraph of the item with
    no text after it ("To run on CPUs:" then "$ pip install horovod")."""
    prev = el.getprevious()
    return len(said) > 1 or prev is not None and prev.tag == "p" and not (el.tail or "").strip()


#: A code block glued into its item's line is looked for among at most this many blocks whose lines open or end
#: on the same two words: the lookup stays linear in the page's words on a page of thousands of alike blocks
#: ("$ tool --flag 1", "$ tool --flag 2", ...), where trying every block on every line took 15 s at 4,000.
GLUED_CANDIDATES = 32


class _Glued(NamedTuple):
    """The code blocks of a page's list items, by the two words (one, for a line of one) that a glued line shows
    of each (:func:`_unglued`)."""

    tails: dict[str, list[str]]  # a block's first line, by its last words: it ends a glued line
    heads: dict[str, list[str]]  # a block's last line, by its first words: it opens a glued line
    singles: dict[str, list[str]]  # a one-line block, by its first words: it stands inside a glued line


def _glued_index(ends: list[tuple[str, str]]) -> _Glued:
    index = _Glued({}, {}, {})

    def keep(found: dict[str, list[str]], key: str, line: str) -> None:
        kept = found.setdefault(key, [])
        if len(kept) < GLUED_CANDIDATES:
            kept.append(line)
    for first, last in dict.fromkeys(ends):
        keep(index.tails, " ".join(first.split(" ")[-2:]), first)
        keep(index.heads, " ".join(last.split(" ")[:2]), last)
        if first == last:
            keep(index.singles, " ".join(first.split(" ")[:2]), first)
    return index


def _keyed(found: dict[str, list[str]], pair: list[str], one: str) -> list[str]:
    """The lines of ``found`` keyed by the two words ``pair`` of a glued line, or by ``one`` of them alone (a
    block's line of one word)."""
    return found.get(" ".join(pair), []) + (found.get(one, []) if len(pair) > 1 else [])


def _unglued(lines: list[str], block_lines: set[str], ends: list[tuple[str, str]]) -> list[str]:
    """The text's lines, with a code block that trafilatura ran into the prose of its list item split off.

    trafilatura writes a list item's paragraphs and code blocks on one line: "... and so forth. if
    torch.cuda.is_available():" (the block's first line after the item's sentence), then its last line before
    the next paragraph: "hvd.broadcast_optimizer_state(optimizer, root_rank=0) This is necessary to ...", or a
    one-line block between two: "To run on CPUs: $ pip install horovod To run on GPUs with NCCL: ...". Glued,
    the code reads as part of a sentence and its block loses a line. A line that is no code line itself is cut
    where a one-line block stands inside it, a block's first line ends it, or its last line opens it."""
    if not ends:
        return lines
    index = _glued_index(ends)
    out: list[str] = []
    for line in lines:
        n = norm_space(line)
        pieces = _cut(n, index) if n and n not in block_lines else [n]
        out += pieces if len(pieces) > 1 else [line]
    return out


def _cut(n: str, index: _Glued) -> list[str]:
    """``n`` in pieces at the code blocks of ``index`` glued into it (:func:`_unglued`), left to right: the
    one-line blocks standing in it, then, in each piece of prose between them, a block's last line opening it
    and a block's first line ending it. A loop, not a recursion: one item may hold thousands of blocks."""
    pieces: list[str] = []
    words = n.split(" ")
    start = at = 0  # where the prose piece being read begins, and the word being read
    for k, w in enumerate(words):
        if at >= start:
            single = next((c for c in _keyed(index.singles, words[k:k + 2], w)
                           if n.startswith(c, at) and n[at + len(c):at + len(c) + 1] in ("", " ")), None)
            if single is not None:
                pieces += [*_ends_cut(n[start:at - 1], index), single] if at > start else [single]
                start = at + len(single) + 1
        at += len(w) + 1
    return pieces + _ends_cut(n[start:], index) if start < len(n) else pieces


def _ends_cut(piece: str, index: _Glued) -> list[str]:
    """A piece of prose with a block's last line cut from its start and a block's first line from its end."""
    out: list[str] = []
    words = piece.split(" ")
    last = next((c for c in _keyed(index.heads, words[:2], words[0]) if piece.startswith(c + " ")), None)
    if last is not None:
        out.append(last)
        piece = piece[len(last) + 1:]
        words = piece.split(" ")
    first = next((c for c in _keyed(index.tails, words[-2:], words[-1]) if piece.endswith(" " + c)), None)
    if first is not None:
        return [*out, piece[: -len(first) - 1], first]
    return [*out, piece]


def _code_runs(lines: list[str], block_lines: set[str]) -> list[bool]:
    """Which of the (whitespace-normalised) lines are code: those of a code block, and a blank line
    between two of them (a function's blank line does not end its listing)."""
    code = [bool(n) and n in block_lines for n in lines]
    for i, n in enumerate(lines):
        if not n and 0 < i and code[i - 1]:
            j = next((k for k in range(i + 1, len(lines)) if lines[k]), None)
            code[i] = j is not None and code[j]
    return code


def _word_count(blocks: Iterable[Block], title: str | None) -> int:
    """Words of the blocks, not counting lines that merely repeat the title. Chinese and Japanese
    put no spaces between words: each of their characters counts as one, or a page in either
    language would have a "word" per paragraph and be refused as empty."""
    t = norm_space(title or "")
    return sum(
        len(line.split()) + len(_CJK.findall(line))
        for b in blocks
        for line in b.text.split("\n")
        if norm_space(line) != t
    )

