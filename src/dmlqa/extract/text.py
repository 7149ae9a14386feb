"""Decoding and cleaning text, and the extractors of Markdown and plain text.

The lowest module of the extract stage: :class:`Extracted` (what every extractor returns),
:func:`decode_text` (bytes to text whatever the charset says), :func:`clean_text` (the one
normalisation every block gets) and :func:`sectionize` (lines and headings to one block per
section), which the HTML extractor shares, so a heading means the same in a page and a README.
"""

from __future__ import annotations

import codecs
import logging
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import charset_normalizer

from dmlqa.catalog.markdown import unlink
from dmlqa.errors import ExtractError
from dmlqa.models import BLOCK_SEPARATOR, Block
from dmlqa.textsafe import replace_lone_surrogates

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Extracted:
    """Text of one body, block by block, with the metadata the body itself carries."""

    blocks: tuple[Block, ...]
    content_type: str  # "pdf" | "html" | "markdown" | "text"
    title: str | None = None
    authors: tuple[str, ...] = ()
    date: str | None = None  # the date string the body states (or the PDF's creation date)
    pages: int | None = None  # PDFs
    #: ``citation_pdf_url`` of a publisher landing page: where the full text is (absolute URL).
    pdf_url: str | None = None
    #: Publication year the body states (meta tags, arXiv stamp, copyright line), validated.
    year: int | None = None

    @property
    def text(self) -> str:
        """All blocks joined, as a :class:`Document` built from them would show them."""
        return BLOCK_SEPARATOR.join(b.text for b in self.blocks)


# -- blocks and headings shared with HTML ----------------------------------------------------------
#: An ATX heading (``## Title``) and a setext underline (``=====``), as CommonMark writes them.
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
SETEXT_RULE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")


def strip_links(line: str) -> str:
    """Markdown links reduced to their text (``[GPipe](https://…)`` → ``GPipe``) and images left out.

    An image's alt text labels a picture, and is no text the page shows: a README's badges
    (``[![GitHub Repo stars](…)](…)`` ``[![Build](…)](…)``) had become a run of labels glued to its first
    sentence, "GitHub Repo stars Build Documentation CodeFactor ...". trafilatura leaves an HTML page's
    images out the same way. The scan is linear (:func:`dmlqa.catalog.markdown.unlink`): a regex retried
    from every "[" of a line of unclosed links took minutes."""
    if "](" not in line:
        return line
    bare = unlink(line, "![", keep_text=False, instead="\x00")
    if bare == line:
        return unlink(line, "[", keep_text=True)
    # an image goes with the spaces before it ("... and ![a figure](f.png)." → "... and."); a line of badges is blank
    return unlink(re.sub(r"[ \t]*\x00", "", bare), "[", keep_text=True).rstrip()


def norm_space(s: str) -> str:
    """``s`` with every run of whitespace one space, trimmed: how headings are compared."""
    return " ".join(s.split())


def sectionize(items: Iterable[tuple[str, str | None]]) -> list[Block]:
    """Group ``(line, heading-or-None)`` items into one block per section.

    A heading keeps its text as the first line of its block (its words help retrieval). A heading
    directly followed by another heading has no block of its own: its line moves into the next
    section's block, so nothing is lost and no chunk consists of a lone heading.
    """
    blocks: list[Block] = []
    section: str | None = None
    lines: list[str] = []
    has_body = False

    def flush() -> None:
        t = clean_text("\n".join(lines))
        if t:
            blocks.append(Block(text=t, section=section))

    for line, heading in items:
        if heading is not None:
            if has_body:
                flush()
                lines = []
            section = heading
            lines.append(line)
            has_body = False
        else:
            lines.append(line)
            has_body = has_body or bool(line.strip())
    if has_body or not blocks:
        flush()
    return blocks


# -- markdown and plain text -----------------------------------------------------------------------
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
#: The line opening and closing a code block in the extracted text of any format (a markdown fence as it
#: was written, an HTML <pre> fenced by the extractor): the sentence splitter knows its lines as code.
CODE_FENCE = "```"
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
#: Inline HTML in Markdown (READMEs centre logos with <p align="center"><img ...>).
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")


def extract_markdown(text: str, *, url: str = "") -> Extracted:
    """Markdown split at its ATX (``#``) and setext headings; fenced code is kept as text between
    :data:`CODE_FENCE` lines, and its ``#`` comment lines are not headings. Links and images are reduced to
    their text, inline HTML tags (outside code) dropped."""
    text = _HTML_COMMENT.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    title = None
    front = re.match(r"---\n(.*?)\n(?:---|\.\.\.)\n", text, re.DOTALL)
    if front:
        text = text[front.end() :]
        m = re.search(r"^title:\s*[\"']?(.+?)[\"']?\s*$", front.group(1), re.MULTILINE)
        title = m.group(1).strip() if m else None
    items: list[tuple[str, str | None]] = []
    fence: str | None = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
                items.append((CODE_FENCE, None))
            else:
                items.append((line, None))
            continue
        if m:
            fence = m.group(1)
            items.append((CODE_FENCE, None))
            continue
        line = _HTML_TAG.sub("", strip_links(line))
        h = ATX_HEADING.match(line)
        if h:
            heading = norm_space(h.group(2))
            items.append((heading, heading))
            title = title or (heading if len(h.group(1)) == 1 else None)
            continue
        if SETEXT_RULE.match(line) and items and items[-1][1] is None and items[-1][0].strip():
            heading = norm_space(items[-1][0])
            items[-1] = (heading, heading)
            title = title or (heading if line.strip().startswith("=") else None)
            continue
        items.append((line, None))
    if fence is not None:  # a block left open runs to the end of the file
        items.append((CODE_FENCE, None))
    blocks = sectionize(items)
    if not blocks:
        raise ExtractError(url, "no text in the markdown file")
    return Extracted(blocks=tuple(blocks), content_type="markdown", title=title)


def extract_text(text: str, *, url: str = "") -> Extracted:
    """Plain text as a single block."""
    cleaned = clean_text(text)
    if not cleaned:
        raise ExtractError(url, "no text in the file")
    return Extracted(blocks=(Block(text=cleaned),), content_type="text")


# -- decoding and cleaning -------------------------------------------------------------------------
#: Labels that WHATWG maps to windows-1252: servers say latin-1 and mean cp1252 (curly quotes, €).
_CP1252_ALIASES = frozenset({"iso8859-1", "ascii", "cp1252"})
#: Codecs Python counts as text encodings that are no charset a document may declare: the escapes of
#: Python source and the host-name codecs (they raise on ordinary bytes, or read ``\\ud800`` as a lone
#: surrogate), "undefined" (always raises), and UTF-7, which WHATWG bars (it smuggles markup past
#: filters). The bytes-to-bytes codecs (hex, base64, zlib, rot13...) are refused by ``_is_text_encoding``.
_NOT_CHARSETS = frozenset({"unicode-escape", "raw-unicode-escape", "idna", "punycode", "undefined", "utf-7"})
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9_:.\-]+)", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"^\s*<\?xml[^>]+encoding\s*=\s*[\"']([A-Za-z0-9_.\-]+)", re.IGNORECASE)


def decode_text(body: bytes, charset: str | None = None, *, html: bool = False) -> str:
    """Decode a text body; never raises, whatever the bytes and whatever charset they declare.

    Order: byte-order mark; the declared charset (header, then ``<meta>``/XML declaration for
    HTML) if it is a text charset (``hex``, ``base64``, ``rot13`` or an unknown name count as none
    declared) and the bytes are valid in it; UTF-8 if they are valid UTF-8; windows-1252 when the text
    decoded that way looks like Western prose (charset detectors are unreliable on short Western
    text); charset_normalizer's guess; windows-1252 with replacement characters as the last resort.
    The text never holds a lone surrogate (a decoder that leaves one has it replaced by U+FFFD).
    """
    return replace_lone_surrogates(_decode(body, charset, html))


def _decode(body: bytes, charset: str | None, html: bool) -> str:
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if body.startswith(bom):
            return body[len(bom) :].decode(encoding, errors="replace")
    declared = [charset]
    if html:
        head = body[:4096]
        declared += [
            m.group(1).decode("ascii") for m in (_META_CHARSET.search(head), _XML_ENCODING.search(head)) if m
        ]
    for label in declared:
        codec = _codec(label)
        if codec is None:
            continue
        if codec == "cp1252":
            # Servers send "charset=iso-8859-1" by default for pages that are really UTF-8; valid
            # multi-byte UTF-8 is practically never intended as latin-1.
            try:
                return body.decode("utf-8")
            except UnicodeDecodeError:
                return _decode_cp1252(body)
        try:
            return body.decode(codec)
        except UnicodeError:  # not only UnicodeDecodeError: some codecs raise the base class
            log.debug("body is not valid %s as declared", codec)
            if codec == "utf-8" and _mostly_utf8(body):
                return body.decode("utf-8", errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    western = _decode_cp1252(body)
    if _looks_western(western):
        return western
    best = charset_normalizer.from_bytes(body[:200_000]).best()
    guess = _codec(best.encoding) if best is not None else None
    if guess is not None:
        try:
            return body.decode(guess, errors="replace")
        except (LookupError, UnicodeError):
            pass
    return western


def _codec(label: str | None) -> str | None:
    """Python codec name for a charset label, cp1252 for the labels browsers read as cp1252; None for
    a label that names no text charset (unknown, a bytes-to-bytes codec, or one of :data:`_NOT_CHARSETS`)."""
    if not label or len(label) > 64:  # real names are short; Python caches every name it is asked for
        return None
    try:
        info = codecs.lookup(label.strip().strip("\"'"))
    except (LookupError, ValueError):  # ValueError: a label with a NUL in it
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        log.debug("charset %r is not a text charset: ignored", label)
        return None
    return "cp1252" if info.name in _CP1252_ALIASES else info.name


def _decode_cp1252(body: bytes) -> str:
    """windows-1252, with the five bytes it leaves undefined read as latin-1 (as browsers do)."""
    try:
        return body.decode("cp1252")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="_dmlqa_latin1")


def _latin1_fallback(e: UnicodeError) -> tuple[str, int]:
    """Codec error handler: undecodable bytes become the latin-1 character of the same value."""
    if not isinstance(e, UnicodeDecodeError):
        raise e
    return e.object[e.start : e.end].decode("latin-1"), e.end


codecs.register_error("_dmlqa_latin1", _latin1_fallback)


def _mostly_utf8(body: bytes) -> bool:
    """Valid UTF-8 apart from a few stray bytes (a cp1252 character pasted into a UTF-8 page)."""
    bad = body.decode("utf-8", errors="replace").count("\ufffd")
    return bad <= max(2, len(body) // 1000)


_WESTERN_PUNCT = frozenset("“”‘’‚„–—…€•™©®°±×÷·«»§¶¢£¥¹²³¼½¾¿¡ ")


def _looks_western(text: str) -> bool:
    """True when a cp1252 reading is plausible: few non-ASCII characters, nearly all of them Latin
    letters or common typographic punctuation (Cyrillic or CJK bytes read as cp1252 give mostly
    non-ASCII letter soup and are left to the charset detector)."""
    non_ascii = [c for c in text if ord(c) > 127]
    if not non_ascii:
        return True
    letters = sum(1 for c in text if c.isalpha())
    if len(non_ascii) > 0.25 * max(letters, 1):
        return False
    plausible = sum(1 for c in non_ascii if c in _WESTERN_PUNCT or (c.isalpha() and ord(c) < 0x250))
    return plausible >= 0.9 * len(non_ascii)


#: Letters and digits of the Mathematical Alphanumeric Symbols block and the italic h (U+210E) a PDF's text
#: layer uses for a formula's variables: ZeRO++ writes its hpZ as "ℎ𝑝𝑍", which no question's "hpZ" matches
#: (BM25's tokens, the name check). Written as their plain letters (NFKC), as the reader sees them.
_MATH_LETTERS = re.compile("[\U0001d400-\U0001d7ff\u210e]+")
_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})
#: C0/C1 controls except tab and newline, plus soft hyphens, zero-width characters and BOMs.
_INVISIBLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200d\u2060\ufeff\ufffe\uffff]")
_ODD_SPACES = re.compile(r"[\t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")


def clean_text(text: str) -> str:
    """Normalise text for indexing: NFC, ligatures expanded, mathematical letters written plain ("ℎ𝑝𝑍" is
    "hpZ"), invisible/control characters dropped, runs of spaces collapsed, lines stripped, at most one blank
    line in a row. A code block's lines (between ``` fences) keep their indentation beyond the block's own:
    Python's nesting is its meaning, and an answer quotes the lines as the page shows them."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _MATH_LETTERS.sub(lambda m: unicodedata.normalize("NFKC", m[0]), text)
    text = _INVISIBLE.sub("", text.translate(_LIGATURES))
    lines = text.split("\n")  # line by line (as fast as the whole text at once over the snapshot's 2.8 MB)
    indents = _code_indents(lines)
    text = "\n".join(" " * indents.get(i, 0) + _one_line(line) for i, line in enumerate(lines))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def _one_line(line: str) -> str:
    """A line with its odd spaces as spaces, runs of them as one, and no space at either end."""
    return re.sub(r" {2,}", " ", _ODD_SPACES.sub(" ", line)).strip(" ")


def _code_indents(lines: list[str]) -> dict[int, int]:
    """The indentation of each line of a fenced code block (tabs as 4 columns) less the block's least, by line
    number; fences are paired as the sentence splitter pairs them."""
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith(CODE_FENCE)]
    indents: dict[int, int] = {}
    for a, b in zip(fences[::2], fences[1::2], strict=False):
        widths = {i: _indent_width(lines[i]) for i in range(a + 1, b) if lines[i].strip()}
        least = min(widths.values(), default=0)
        indents.update((i, width - least) for i, width in widths.items())
    return indents


def _indent_width(line: str) -> int:
    head = line[: len(line) - len(line.lstrip())]
    return len(head.expandtabs(4))
