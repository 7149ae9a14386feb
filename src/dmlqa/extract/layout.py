"""Page furniture a PDF's layout gives away: a table of contents, the running header over each page, and the
number under it.

Both are text of the page, so they stay in the passages (a paper's title in its running header is how BM25
finds its pages), but neither is a sentence of the paper: the sentence splitter sets their lines apart
(:func:`set_apart`) as furniture, never quoted. Pure functions over a document's page texts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

#: A line of a table of contents: a section's number (or an appendix's letter), its title, maybe dot leaders, and
#: its page number ("2.1 Simplifying Sparse Routing . . . . 5", "B Preventing Token Dropping 29").
_CONTENTS_LINE = re.compile(r"(?:\d{1,2}(?:\.\d{1,2})*\.?|[A-Z](?:\.\d{1,2})*)[ \t]+[A-Z].*?(?:[ \t]*\.){0,80}"
                            r"[ \t]+(?P<page>\d{1,3})[ \t]*")
#: So many lines in a row, their page numbers never going back, make a table of contents; a longer line is none.
CONTENTS_LINES, CONTENTS_CHARS = 5, 160
#: A page's first line is a running header when it opens at least this many pages, and this share of them.
HEADER_PAGES, HEADER_SHARE = 3, 0.3
#: A running header may wrap onto this many lines more.
HEADER_WRAPS = 2
_DIGITS = re.compile(r"\d+")


def contents_lines(page: str) -> list[tuple[int, int]]:
    """The spans of a page's table of contents lines (:data:`_CONTENTS_LINE`, in runs of :data:`CONTENTS_LINES`
    or more, page numbers never going back). Read as prose, they ran into "sentences" of titles and page numbers
    ("22 6 Related Work 24 7 Discussion 25 ...") that name a paper's every topic, so came near many questions.
    Only lines of at most :data:`CONTENTS_CHARS` are tried: the pattern's work stays bounded a line."""
    if "\n" not in page:
        return []
    runs: list[list[tuple[int, int, int]]] = []  # (start, end, page number) of each line of a run
    pos = 0
    last = -2  # the index of the line the run's last line was
    for i, line in enumerate(page.split("\n")):
        m = _CONTENTS_LINE.fullmatch(line) if len(line) <= CONTENTS_CHARS else None
        if m is not None:
            entry = (pos, pos + len(line), int(m.group("page")))
            if runs and last == i - 1 and entry[2] >= runs[-1][-1][2]:
                runs[-1].append(entry)
            else:
                runs.append([entry])
            last = i
        pos += len(line) + 1
    return [(a, b) for run in runs if len(run) >= CONTENTS_LINES for a, b, _ in run]


def _lines(page: str, n: int) -> list[str]:
    """A page's first ``n`` lines as a running header is compared: their numbers (page, year) count as one."""
    return [_DIGITS.sub("#", " ".join(line.split())) for line in page.split("\n", n)[:n]]


def running_headers(pages: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """A paper's running headers: each first line (:func:`_lines`) that opens :data:`HEADER_PAGES` or more of its
    pages and :data:`HEADER_SHARE` of them, with the lines that follow it on nearly every such page (a header
    wrapped over lines: the authors' names, "ABC, 2023, USA Guanhua Wang*, ..." / ", Lei Yang2" / ", Yuxiong
    He"). "Published as a conference paper at ICLR 2021", a short title, the authors on even pages, "SOSP '19,
    October 27–30, 2019, Huntsville, ON, Canada": glued to each page's first sentence, they were quoted with it
    ("Fedus, Zoph and Shazeer 5.4 Expert and Data Parallelism Next we describe ...")."""
    heads = [_lines(p, HEADER_WRAPS + 1) for p in pages if p.strip()]
    firsts = Counter(h[0] for h in heads)
    out: dict[str, tuple[str, ...]] = {}
    for line, n in firsts.items():
        if n < HEADER_PAGES or n < HEADER_SHARE * len(heads) or sum(c.isalpha() for c in line) < 3:
            continue
        wraps: list[str] = []
        for k in range(1, HEADER_WRAPS + 1):
            nxt = Counter(h[k] for h in heads if h[0] == line and len(h) > k and h[1:k] == wraps)
            if not nxt:
                break
            text, m = nxt.most_common(1)[0]
            if m < 0.8 * n:
                break
            wraps.append(text)
        out[line] = tuple(wraps)
    return out


def page_number_line(page: str, number: int | None) -> list[tuple[int, int]]:
    """The span of ``page``'s last line when it is the page's own ``number`` (297 of the snapshot's PDF pages
    end so): glued to the page's last sentence, it was quoted as a word of it ("... increases the memory 3")."""
    body = page.rstrip()
    start = body.rfind("\n") + 1
    if number is None or not start or body[start:].strip() != str(number):
        return []
    return [(start, len(body))]


def header_line(page: str, headers: dict[str, tuple[str, ...]]) -> list[tuple[int, int]]:
    """The span of ``page``'s running header (:func:`running_headers`): its first line and the wrapped lines under
    it, when the first line is one of ``headers``; none otherwise."""
    lines = _lines(page, HEADER_WRAPS + 1)
    if not lines or lines[0] not in headers:
        return []
    wraps = headers[lines[0]]
    count = 1 + next((k for k, w in enumerate(wraps) if k + 1 >= len(lines) or lines[k + 1] != w), len(wraps))
    end = -1
    for _ in range(count):  # the end of the header's last line
        end = page.find("\n", end + 1)
        if end < 0:
            return [(0, len(page))]
    return [(0, end)]


def set_apart(paragraphs: Iterable[tuple[int, int, str]], lines: Sequence[tuple[int, int]],
              kind: str) -> Iterator[tuple[int, int, str]]:
    """``paragraphs`` (start, end, kind) with ``lines`` (sorted spans) cut out of them, each line a paragraph of
    ``kind`` of its own."""
    for start, end, was in paragraphs:
        for a, b in lines:
            if a >= end or b <= start:
                continue
            if a > start:
                yield start, a, was
            yield max(a, start), min(b, end), kind
            start = max(start, b)
        if start < end:
            yield start, end, was
