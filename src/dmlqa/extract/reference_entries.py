"""A paper's reference list, found and cut into entries: the section, its lines, one string per entry.

Kept apart from :mod:`~dmlqa.extract.references` (which parses entries and finds citing sentences)
because :mod:`~dmlqa.extract.sentences` needs the one rule of where a reference list starts and ends
(its entries are sources, never answers), and the parser needs sentences: one rule, no import cycle.

PDF text comes line by line with the page furniture of every page (running headers, page numbers,
footers) wherever the page broke, and with entries of numbered lists (``[12]``, ``12.``, ``12``) or
author-year lists ("Huang, Y., ..." / "Yanping Huang, ..." on a new line, the year at the end or
after the names). Every pattern here is anchored or bounded, and each line is looked at a fixed
number of times, so a list of thousands of entries is cut in linear time.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from dmlqa.models import BLOCK_SEPARATOR, Document

# -- the section ---------------------------------------------------------------------------------------

#: The heading of a reference list: on a line of its own (possibly numbered, "9. REFERENCES"), or
#: glued by the PDF text layer to the sentence before it or to the first entry after it.
_REFS_HEAD = re.compile(
    r"(?:^|\n|(?<=[.!?]))[ \t]*(?:(?:\d{1,2}|[IVX]{1,4})\.?[ \t]+)?"
    r"(?:References|REFERENCES|Bibliography|BIBLIOGRAPHY|Literature Cited|LITERATURE CITED|Works Cited|"
    r"WORKS CITED)[ \t]*:?[ \t]*(?=\n|$|\[1\]|1\.\s|[A-Z][\w'’\-]+,\s?[A-Z]\.)"
)
#: An appendix heading after the list: "Appendix", "Supplementary Material", or the first lettered
#: section ("A Proofs", "A.1 Setup", "A. BERT Finetuning"): at least two words, no comma, period or
#: colon on the line, and not an initial ("A. J. Smola" is an author).
_APPENDIX_HEAD = re.compile(
    r"\n[ \t]*(?:(?:[A-Z]|\d{1,2})\.?[ \t]+)?(?:Appendix|APPENDIX|Appendices|APPENDICES|Supplementary|"
    r"SUPPLEMENTARY|Supplemental|SUPPLEMENTAL)\b[^\n]{0,80}(?=\n|$)"
    r"|\n[ \t]*A(?:\.1)?\.?[ \t]+(?![A-Z]\.)[A-Z](?:[^\n,.:;]|\.(?=\d)){0,60}[ \t](?:[^\n,.:;]|\.(?=\d)){1,60}"
    r"(?=\n|$)"
)
_YEAR_TOKEN = re.compile(r"(?<![\d.])(?:19[5-9]\d|20[0-3]\d)(?!\d)")
_NUM_LABEL = re.compile(r"(?:^|\n)[ \t]*\[\d{1,4}\]")


def _looks_like_references(text: str) -> bool:
    """Do these characters read like reference entries (years, or "[n]" labels at line starts)?"""
    return len(_YEAR_TOKEN.findall(text)) >= 2 or len(_NUM_LABEL.findall(text)) >= 2


def reference_zone(text: str) -> tuple[int, int] | None:
    """(start, end) of a paper's reference list in its text: after the last heading that is
    followed by something like references (an earlier "References" line is a table of contents),
    to the first appendix heading after the entries, or the end. None when there is no list."""
    for head in reversed(list(_REFS_HEAD.finditer(text))):
        start = head.end()
        if not _looks_like_references(text[start : start + 2000]):
            continue
        pos = start + 120
        while True:
            after = _APPENDIX_HEAD.search(text, pos)
            if after is None:
                return start, len(text)
            # a wrapped title line such as "A Scalable Framework for Training" is no heading: the
            # text after a real appendix heading is prose, not a run of dated entries
            following = text[after.end() : after.end() + 600]
            if len(_YEAR_TOKEN.findall(following)) < 3 and not re.match(r"\s*\[\d{1,4}\]", following):
                return start, after.start()
            pos = after.end()
    return None


# -- lines ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One line of the reference section with the PDF page it is printed on."""

    text: str
    page: int | None


def _edge_lines(lines: list[str]) -> list[str]:
    kept = [x.strip() for x in lines if x.strip()]
    return kept[:3] + kept[-3:] if len(kept) > 6 else kept


_LABEL_KEY = re.compile(r"\[#\]|#\.\s")


def _furniture_key(line: str) -> str:
    return re.sub(r"\d+", "#", " ".join(line.lower().split()))


#: A footnote at the foot of a page: its number glued to its text ("2The batch size", "1https://").
_FOOTNOTE = re.compile(r"^\d{1,2}(?:[A-Z][a-z]|https?:)")
_PAGE_NUMBER = re.compile(r"^(?:page\s*)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?$", re.IGNORECASE)


def zone_lines(doc: Document, zone: tuple[int, int]) -> tuple[list[Line], int]:
    """The lines of ``doc.text[zone]`` with their pages, page furniture left out, and how many
    footnote lines were dropped.

    Furniture is a line that starts or ends several pages in the same words (digits aside: a
    running header with its page number) or a bare page number at a page's edge; a footnote is a
    number glued to text at the foot of a page.
    """
    blocks = doc.blocks
    keys: Counter[str] = Counter()
    inner: set[str] = set()  # what a page says away from its edges is text, not furniture
    for block in blocks:
        kept = [x.strip() for x in block.text.split("\n") if x.strip()]
        keys.update({_furniture_key(x) for x in _edge_lines(kept)})
        inner.update(_furniture_key(x) for x in kept[3:-3])
    repeated = 2 if len(blocks) <= 4 else 3
    # an entry's first line is never furniture, however alike the lines of a generated list look
    furniture = {k for k, n in keys.items()
                 if n >= repeated and len(k) > 1 and k not in inner and not _LABEL_KEY.match(k)}
    out: list[Line] = []
    footnotes = 0
    offset = 0
    start, end = zone
    for block in blocks:
        b_start, b_end = offset, offset + len(block.text)
        offset = b_end + len(BLOCK_SEPARATOR)
        if b_end <= start or b_start >= end:
            continue
        lo, hi = max(start, b_start) - b_start, min(end, b_end) - b_start
        raw = block.text[lo:hi].split("\n")
        edges = set(_edge_lines(block.text.split("\n")))
        tail = set(_edge_lines(block.text.split("\n"))[-3:])
        for x in raw:
            s = x.strip()
            if not s:
                continue
            if s in edges and (_furniture_key(s) in furniture or _PAGE_NUMBER.match(s)):
                continue
            if s in tail and _FOOTNOTE.match(s):
                footnotes += 1
                continue
            out.append(Line(s, block.page))
    return out, footnotes


# -- entries -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One entry as printed: its lines joined, the list's label for it ("12", or "" in author-year
    lists), and the page it starts on."""

    text: str
    label: str
    page: int | None


NUMBERED, AUTHOR_YEAR = "numbered", "author-year"

_BRACKET = re.compile(r"\[(\d{1,4})\]\s*")
_DOTTED = re.compile(r"(\d{1,4})\.\s+(?=\S)")
_PLAIN = re.compile(r"(\d{1,4})\s+(?=[A-Z\u00c0-\u024f\"“])")
#: A bracket label inside a line, for lists the text layer ran together: "... 2019. [13] A. Author".
_INLINE_BRACKET = re.compile(r"(?<=[.)\]/] )\[(\d{1,4})\]\s+(?=\S)")


def _numbered_starts(lines: list[Line], pattern: re.Pattern[str], loose: bool) -> list[tuple[int, int, int]]:
    """(line index, column, number) of the list labels of one numbered style.

    A label must continue the count (n + 1); with ``loose`` (bracket labels, which prose never
    starts a line with) a line-start label may also skip a few numbers or come out of order, as a
    two-column page read in the wrong order does, as long as its number is new.
    """
    starts: list[tuple[int, int, int]] = []
    seen: set[int] = set()
    last = 0
    for i, line in enumerate(lines):
        m = pattern.match(line.text)
        if m:
            n = int(m.group(1))
            if n == last + 1 or (loose and n not in seen and 0 < n <= max(last, 0) + 5):
                starts.append((i, 0, n))
                seen.add(n)
                last = max(last, n)
        if loose:
            for m in _INLINE_BRACKET.finditer(line.text):
                n = int(m.group(1))
                if n == last + 1:
                    starts.append((i, m.start(), n))
                    seen.add(n)
                    last = n
    return starts


_NAME = r"[A-Z\u00c0-\u00de][\w'’´`¨˘ˇ\-\u0300-\u036f]*"
_PARTICLE = r"(?:(?:van|von|de|der|den|di|da|du|le|la|del|dos|das|ter|te)\s+)"
#: How an author-year entry starts: "Abadi, M.," / "Chen, C.-C.," / "A. Ahmed," / "J.Chen,R.Monga" /
#: "Martín Abadi, Paul ..." / "Tom B Brown, ..." / "Yanping Huang and ..." / "Yanping Huang et al."
_AUTHOR_START = re.compile(
    rf"{_PARTICLE}*{_NAME}(?:[ \-]{_NAME})?,\s*[A-Z]\.|"
    rf"(?:[A-Z]\.\s?-?){{1,3}}\s*{_PARTICLE}*{_NAME}(?:,|\s+and\b|\.|\s+et al)|"
    rf"{_NAME}(?:\s+(?:[A-Z]\.?|{_PARTICLE}*{_NAME})){{1,3}}(?:,|\s+and\s|\s+et al|\.\s)|"
    r"[A-Z][\w\-]+\.\s+[A-Z]"  # an organisation as author: "NVIDIA. Fastertransformer."
)
#: What looks like names but is a publisher or an institution on a wrapped line.
_NOT_AUTHOR = re.compile(
    r"\b(?:Press|Associates|Publishers?|Publishing|Springer|Inc|Ltd|University|Institute|Association|"
    r"Society|Verlag|Foundation|Laboratory|Proceedings|Conference|Workshop|Symposium|Journal|Transactions|Report)\b"
)
#: An arXiv id, DOI or link completes an entry as a year does ("arXiv: 1812.06162." ends one).
_IDENTIFIER = re.compile(r"\d{4}\.\d{4,5}|\b10\.\d{4,9}/|://")
_YEAR_END = re.compile(r"\d{4}[a-z]?$")


def _terminal(line: str) -> bool:
    """Does this line end an entry (period, bracket, slash, a year, or a link)?"""
    return line[-1:] in ".)]/" or _YEAR_END.search(line) is not None or "://" in line.rsplit(" ", 1)[-1]


def _author_year_starts(lines: list[Line]) -> list[tuple[int, int, int]]:
    """(line index, 0, 0) of the lines that start an author-year entry: a line that opens with
    author names, after a line that ends one (period, bracket, URL or year) of an entry that has
    its year already (every author-year entry has one; a wrapped "Curran Associates, Inc., 2019."
    line is no new entry because the entry before it has no year yet)."""
    starts: list[tuple[int, int, int]] = []
    has_year = True
    prev_terminal = True
    for i, line in enumerate(lines):
        t = line.text
        head = t[:60]
        if prev_terminal and has_year and _AUTHOR_START.match(t) and not _NOT_AUTHOR.search(head):
            starts.append((i, 0, 0))
            has_year = False
        if _YEAR_TOKEN.search(t) or _IDENTIFIER.search(t):
            has_year = True
        prev_terminal = _terminal(t)
    return starts


def split_entries(lines: list[Line]) -> tuple[str, list[Entry], int]:
    """(style, entries, pieces of junk) of a reference section's lines.

    The numbered style whose labels run longest wins when it covers at least a few entries;
    otherwise the list is read as author-year. Text before the first entry is junk.
    """
    candidates = [
        (_numbered_starts(lines, _BRACKET, True), 2),
        (_numbered_starts(lines, _DOTTED, False), 3),
        (_numbered_starts(lines, _PLAIN, False), 3),
    ]
    starts, need = max(candidates, key=lambda c: len(c[0]))
    style = NUMBERED
    if len(starts) < need:
        starts, style = _author_year_starts(lines), AUTHOR_YEAR
    if not starts:
        return style, [], 0
    junk = 0
    first_line, first_col, _ = starts[0]
    before = " ".join(x.text for x in lines[:first_line]) + " " + lines[first_line].text[:first_col]
    if len(before.strip()) > 40:
        junk += 1
    entries: list[Entry] = []
    bounds = [*starts, (len(lines), 0, 0)]
    for (li, col, n), (lj, colj, _) in zip(bounds, bounds[1:], strict=False):
        parts = [lines[li].text[col:]] if li != lj else [lines[li].text[col:colj]]
        if li != lj:
            parts += [x.text for x in lines[li + 1 : lj]]
            if colj:
                parts.append(lines[lj].text[:colj])
        if style == NUMBERED and parts:
            parts[0] = _strip_label(parts[0].strip())  # the label may stand on a line of its own
        parts = [p.strip() for p in parts if p.strip()]
        entries.append(Entry(join_lines(parts), str(n) if style == NUMBERED else "", lines[li].page))
    return style, entries, junk


def _strip_label(first: str) -> str:
    for pattern in (_BRACKET, _DOTTED, _PLAIN):
        m = pattern.match(first)
        if m:
            return first[m.end() :]
    return first


_URL_TAIL = re.compile(r"(?:https?:|https?://\S*|www\.\S*|(?<!\S)\S+\.(?:com|org|net|edu|io|ai|cn|html?)/\S*)$")
_URL_HEAD = re.compile(r"^(?://|[\w\-.~%/#?=&]*[/.#_\-])")


def join_lines(parts: list[str]) -> str:
    """An entry's lines as one string: a word hyphenated at a line end is joined ("ef-" + "ficient"),
    a compound keeps its hyphen ("Large-" + "Scale"), a URL broken at a line end is rejoined, other
    lines meet with a space. Each join looks at the last 300 characters only (linear in the entry)."""
    chunks: list[str] = []
    for part in parts:
        if not chunks:
            chunks.append(part)
            continue
        tail = chunks[-1][-300:]
        token = tail.rsplit(" ", 1)[-1]
        if re.search(r"[a-z]-$", tail) and part[:1].islower() and not re.search(r"\d\S*-$|://\S*-$", token):
            chunks[-1] = chunks[-1][:-1]
            chunks.append(part)
        elif tail.endswith("-") or tail.endswith("/") and not tail.endswith("://") and _URL_TAIL.search(token):
            chunks.append(part)
        elif tail and tail[-1] not in ".,;" and _URL_TAIL.search(token) and _URL_HEAD.match(part.split(" ", 1)[0]):
            chunks.append(part)
        elif re.search(r"(?:https?://|www\.)\S*\.$", token) and re.match(r"[a-z]{2,}[./]", part):
            chunks.append(part)  # "https://hal." + "inria.fr/hal-02352969."
        else:
            chunks.append(" " + part)
    return " ".join("".join(chunks).split())


def cut_trailing_junk(text: str) -> tuple[str, bool]:
    """An entry without what the list's end swallowed: after a sentence that completes a dated
    entry, text whose next 300 characters hold no year, identifier or link is prose or a table."""
    if len(text) < 400:
        return text, False
    dated, checked = False, 0
    for m in _SENTENCE_GAP.finditer(text):
        if not dated:
            dated, checked = _YEAR_TOKEN.search(text, max(0, checked - 4), m.end()) is not None, m.end()
        if not dated or m.end() < 40 or len(text) - m.end() < 250:
            continue
        if not _REFERENCE_FEATURE.search(text, m.end(), m.end() + 300):
            return text[: m.end()].strip(), True
    return text, False


_SENTENCE_GAP = re.compile(r"[.)\]]\s")
_REFERENCE_FEATURE = re.compile(r"(?<![\d.])(?:19[5-9]\d|20[0-3]\d)(?!\d)|://|ar[Xx]iv|\b(?:doi|DOI)\b|\bIn\s|Proceedings")
