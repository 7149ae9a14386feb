"""Sentences of a document, each with the role it plays: what an extractive answer may quote.

Chunks are sized for the embedding model and cut wherever the token budget ends, so a chunk's first
and last "sentences" are often fragments. Answers are therefore built from the *document's*
sentences, split once at build time (and embedded then, so answering embeds nothing): every
sentence is whole, knows its page and section, and knows whether it is prose or a list item worth
quoting, or page furniture, a heading, a caption, code or pseudocode, or a reference-list entry,
none of which reads as an answer. Pure functions: a document in, its sentences out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from dmlqa.extract.reference_entries import reference_zone
from dmlqa.models import BLOCK_SEPARATOR, Document

#: Roles a sentence may have; only QUOTABLE ones are candidates for an answer.
PROSE, ITEM, HEADING, FURNITURE, CODE, CAPTION, REFERENCE = (
    "prose", "item", "heading", "furniture", "code", "caption", "reference")
QUOTABLE = (PROSE, ITEM)
#: Length bounds of a quotable sentence (characters, words); the chat UI reads the same numbers.
MIN_CHARS, MAX_CHARS, MIN_WORDS = 30, 500, 5


@dataclass(frozen=True)
class Sentence:
    """One sentence (or list item) of a document; ``start``/``end`` index into ``Document.text``."""

    doc_id: str
    start: int
    end: int
    text: str  # whitespace collapsed, as quoted
    role: str
    page: int | None = None
    section: str | None = None

    @property
    def quotable(self) -> bool:
        return self.role in QUOTABLE


# -- splitting ---------------------------------------------------------------------------------------

#: A sentence ends at . ! ? (plus closing quotes/brackets) followed by space and a capital, digit or
#: opening bracket; not after common abbreviations or initials.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_NO_END = re.compile(r"(?:\b(?:e\.g|i\.e|et al|etc|vs|cf|Fig|Figs|Eq|Eqs|Sec|Secs|No|Ref|Refs|approx|resp|"
                     r"Dr|Mr|Ms|Prof|Inc|Ltd|Jr|St|al)|\b[A-Z])\.$")
_ITEM_LINE = re.compile(r"^\s*(?:[-*•▪●◦‣]|\d{1,2}[.)]|[a-z][.)])\s+(?=\S)")
_PDF_LIKE = ("pdf",)


def _spans(text: str, base: int) -> Iterator[tuple[int, int]]:
    """Sentence spans (absolute offsets) of one paragraph's text."""
    start = 0
    for m in _BOUNDARY.finditer(text):
        # Only the tail can end in an abbreviation (the longest is 7 characters): looking at the whole
        # run since ``start`` made a paragraph of many "et al." quadratic (minutes for 200,000 chars).
        if _NO_END.search(text[max(start, m.start() - 16) : m.start()]):
            continue
        yield base + start, base + m.start() + len(m.group().rstrip())  # closing quotes stay with it
        start = m.end()
    if text[start:].strip():
        yield base + start, base + len(text)


def _paragraphs(block: str, pdf: bool) -> Iterator[tuple[int, int, bool]]:
    """(start, end, is_list_item) of a block's paragraphs.

    In PDF text a newline is a line wrap, so the block is one paragraph; elsewhere (HTML, markdown)
    each line is a paragraph or a list item, which is what keeps list items apart.
    """
    if pdf:
        yield 0, len(block), False
        return
    pos = 0
    for line in block.split("\n"):
        if line.strip():
            yield pos, pos + len(line), _ITEM_LINE.match(line) is not None
        pos += len(line) + 1


def _reference_zone(doc: Document) -> tuple[int, int] | None:
    """(start, end) of a paper's reference list in ``doc.text`` (the rule lives with the reference
    parser). Its entries are sources, never answers (titles read like prose)."""
    if doc.content_type not in _PDF_LIKE:
        return None
    return reference_zone(doc.text)


def split_document(doc: Document) -> list[Sentence]:
    """Every sentence of a document's text, in reading order, with its role. Cards have none."""
    if doc.is_card:
        return []
    pdf = doc.content_type in _PDF_LIKE
    refs = _reference_zone(doc)
    out: list[Sentence] = []
    offset = 0
    for block in doc.blocks:
        for p_start, p_end, item in _paragraphs(block.text, pdf):
            para = block.text[p_start:p_end]
            spans = [(p_start, p_end)] if item else list(_spans(para, p_start))
            for s, e in spans:
                raw = block.text[s:e]
                text = " ".join(raw.split())
                if not text:
                    continue
                if refs and refs[0] <= offset + s < refs[1]:
                    role = REFERENCE
                else:
                    role = classify(text, ITEM if item else PROSE, title=doc.title)
                out.append(Sentence(doc.doc_id, offset + s, offset + e, text, role, block.page, block.section))
        offset += len(block.text) + len(BLOCK_SEPARATOR)
    return out


# -- roles -------------------------------------------------------------------------------------------

_CAPTION = re.compile(r"^(?:Figure|Fig\.|Table|Algorithm|Listing)\s*[\dIVX]+\s*[:.|]|"
                      r"\b(?:Figure|Fig\.|Table|Algorithm)\s*\d+\s*[:.]\s+[A-Z]")
_PRINT_STAMP = re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4},?\s+\d{1,2}:\d{2}\s*(?:AM|PM)?\b|\b\d+\s*/\s*\d+\s*$|"
                          r"^\s*(?:page\s*)?\d+\s*(?:of\s*\d+)?\s*$", re.IGNORECASE)
_FURNITURE = re.compile(r"(?:arXiv:\d{4}\.\d{4,5}v?\d*\s*\[[\w.\-]+\]|Proceedings of the|Copyright ©|©\s*\d{4}|"
                        r"All rights reserved|Permission to make digital or hard copies|ACM ISBN|"
                        r"https?://doi\.org/\S+\s*$|licensed under a Creative Commons)", re.IGNORECASE)
_REFERENCE = re.compile(r"^\[\d+\]\s+[A-Z]|(?:In\s+)?Proceedings of|arXiv preprint arXiv|"
                        r"\b(?:19|20)\d\d[a-z]?\.\s+URL\b|\bpp\.\s*\d+|\bvol\.\s*\d+|\bdoi:\s*10\.", re.IGNORECASE)
_CODE_TOKENS = re.compile(r"[{};=]|\(\)|\b(?:def|return|import|self|lambda|elif|torch|np|npx|print)\b|"
                          r"\w+\.\w+\(|\w+_\w+\(|^\s*\d+\s+\w+\(|==|->|\+=|//")
_HEADING_LEAD = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[A-Z]\.\d*|[IVX]+\.)\s+[A-Z][A-Z \-&]{3,}\b(?=\s+[A-Z][a-z])")


def classify(text: str, role: str = PROSE, *, title: str = "") -> str:
    """The role of one sentence's text (``role`` is its layout role: prose or a list item)."""
    n = len(text)
    words = text.split()
    if _PRINT_STAMP.search(text) and n < 120 or (title and text.strip() == title.strip()):
        return FURNITURE
    if _CAPTION.search(text):
        return CAPTION
    if _FURNITURE.search(text) and n < 400:
        return FURNITURE
    refs = len(_REFERENCE.findall(text))
    if refs >= 2 or (refs and re.match(r"^\[?\d+\]?\s", text) and "et al" in text) or text.count("et al.") >= 3:
        return REFERENCE
    code_hits = len(_CODE_TOKENS.findall(text))
    letters = sum(ch.isalpha() for ch in text)
    if code_hits >= 3 or (code_hits and letters < 0.6 * n) or letters < 0.5 * n:
        return CODE
    if role == ITEM:
        return ITEM if n >= 12 and len(words) >= 2 else HEADING
    if not re.search(r"[.!?:)\"”]$", text) and len(words) <= 12:
        return HEADING  # a title or section heading on a line of its own
    if not MIN_CHARS <= n <= MAX_CHARS or len(words) < MIN_WORDS:
        return HEADING if n < MIN_CHARS else FURNITURE
    return PROSE


# -- quoting -----------------------------------------------------------------------------------------

#: The source's own reference markers: [12], [3, 14], [5–7], [12, 13, 21], and superscript digits
#: glued to a word. In an answer they would read as the answer's own citations.
_REF_MARK = re.compile(r"\s?\[\s*\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\s*\]")
_SUPERSCRIPT = re.compile(r"(?<=[A-Za-z\)])[\u00b9\u00b2\u00b3\u2070-\u2079]+")
#: Section heading glued in front of a sentence by the PDF text layer: "3 DESIGN In this section".
_LEADING_HEADING = _HEADING_LEAD


#: A browser's print stamp glued into PDF text ("11/23/26, 3:16 AM"), with the page counter after it.
_STAMP = re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4},?\s+\d{1,2}:\d{2}\s*(?:AM|PM)?\b(?:\s+\d{1,3}/\d{1,3}\b)?", re.I)


def for_answer(text: str) -> str:
    """A sentence as an answer quotes it: the source's reference markers, print stamps and a glued
    heading removed."""
    t = _STAMP.sub("", text)
    t = _REF_MARK.sub("", t)
    t = _SUPERSCRIPT.sub("", t)
    m = _LEADING_HEADING.match(t)
    if m:
        t = t[m.end():].lstrip()
    t = re.sub(r"\s+([,.;:])", r"\1", t)
    return " ".join(t.split())


#: Openings that lean on the sentence before: the answer must carry that sentence too.
_ANAPHOR = re.compile(r"^(?:This|These|That|Those|It|Its|They|Their|Such|Here|Thus|Hence|Therefore|"
                      r"However|Moreover|Furthermore|In addition|Additionally|Also|Then|As a result|"
                      r"In this case|To do so|For this|With this|Instead|Similarly|Likewise|Otherwise|"
                      r"In contrast|On the other hand|As such|Both|Each of these)\b")


def leans_back(text: str) -> bool:
    """Does this sentence depend on the one before it (anaphor, lower-case start, 'above')?"""
    t = text.lstrip("\"'“(- ")
    return bool(_ANAPHOR.match(t)) or t[:1].islower() or re.search(r"\b(?:above|aforementioned)\b", t) is not None


def leans_forward(text: str) -> bool:
    """Does this sentence announce what follows (ends with ':' or says 'the following')?"""
    return text.rstrip().endswith(":") or re.search(r"\bthe following\b|\bas follows\b", text) is not None
