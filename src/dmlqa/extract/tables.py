"""Tables of a PDF as quotable rows: each data row with its row and column headers.

In a PDF's text layer a table is a run of bare figures ("1.7 24 2304 24 1 1 32 512 137 44% 4.4"):
which number is the batch size and which the throughput is lost, so a question about a measured
figure finds the number but cannot quote what it measures. pdfplumber's table finder reads the
cells of ruled tables by their lines; every data row then becomes one line that names its table and
its columns ("Table 3: Model · GPUs · Throughput — GPT-3 175B · 1024 · 140 TFLOPs"), a sentence that
reads alone. Only pages whose text holds a "Table N" caption are searched (pdfplumber is slow, and a
table without a caption is more often a figure's boxes), and a table is kept only near a caption.

A markdown table (a README's, a docs page's) needs no finder: :func:`markdown_row` tells which of its lines is a
row worth quoting, which the answer reads under its header's cells.

Tables are a bonus on top of the page text: whatever goes wrong here costs the tables, never the
document.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from dmlqa.extract.table_layout import aligned_tables
from dmlqa.extract.textscan import LINKING

log = logging.getLogger(__name__)
logging.getLogger("pdfminer").setLevel(logging.ERROR)  # it warns about every odd font, as pypdf does

#: A table caption as it starts a line of PDF text: "Table 3:", "Table 2.", "TABLE IV".
TABLE_CAPTION = re.compile(r"^\s*(?:Table|TABLE)\s*(\d+|[IVX]+)\s*(?:[:.|]|$)", re.MULTILINE)
#: The section a table block carries: its label, which is how the sentence splitter knows its lines are rows.
TABLE_LABEL = re.compile(r"^Table (?:\d+|[IVX]+)$")
#: A table further than this (PDF points, 1/72 in) from every caption on its page is no captioned table.
CAPTION_DISTANCE = 120.0
#: A table read by its columns this close under another (PDF points) is part of the same captioned table.
STACKED_GAP = 12.0
#: A row longer than this is no row worth quoting (a cell holding a paragraph); the splitter's MAX_CHARS.
ROW_MAX_CHARS = 500
#: Between cells, and between the headers and the values.
CELL_SEP, HEADER_SEP = " · ", " — "


@dataclass(frozen=True)
class Table:
    """One table of a page: its label ("Table 3") and one line per data row, headers first."""

    label: str
    text: str


def pdf_tables(body: bytes, pages: Sequence[tuple[int, str]], *, url: str = "") -> dict[int, list[Table]]:
    """The captioned tables of ``pages`` (1-based page number, that page's text) of the PDF ``body``,
    by page number. Pages without a "Table N" caption in their text are not searched."""
    wanted = [number for number, text in pages if TABLE_CAPTION.search(text)]
    if not wanted:
        return {}
    try:
        import pdfplumber
    except ImportError:  # declared, but tables are a bonus: a broken install loses them, not the PDF
        return {}
    out: dict[int, list[Table]] = {}
    try:
        with pdfplumber.open(io.BytesIO(body)) as pdf:
            for number in wanted:
                try:
                    tables = page_tables(pdf.pages[number - 1])
                except Exception as e:  # pdfminer raises anything on damaged content
                    log.debug("%s: tables of page %d unreadable: %r", url, number, e)
                    continue
                if tables:
                    out[number] = tables
    except Exception as e:
        log.debug("%s: pdfplumber cannot open it: %r", url, e)
    return out


def page_tables(page: object) -> list[Table]:
    """The captioned tables of one pdfplumber page, in reading order (top to bottom)."""
    captions = [(m["top"], m["bottom"], m["x0"], m["x1"], _label(m["text"]))
                for m in page.search(r"(?:Table|TABLE)\s*(?:\d+|[IVX]+)\s*[:.|]")]  # type: ignore[attr-defined]
    if not captions:
        return []
    ruled = list(page.find_tables())  # type: ignore[attr-defined]
    # tables ruled across only (most papers'), read by their words' columns where no ruled table stands
    aligned = [(box, grid) for box, grid in aligned_tables(page.extract_words(x_tolerance=1.5))  # type: ignore[attr-defined]
               if not any(_overlap(box, t.bbox) for t in ruled)]
    boxes = [t.bbox for t in ruled] + [box for box, _ in aligned]
    grids = [t.extract for t in ruled] + [(lambda g=grid: g) for _, grid in aligned]
    labels = caption_labels(boxes, captions)
    for k in range(len(ruled) + 1, len(boxes)):  # a table stacked right under one (GPipe's Table 1) shares its caption
        if labels[k] is None and 0 <= boxes[k][1] - boxes[k - 1][3] <= STACKED_GAP:
            labels[k] = labels[k - 1]
    found = []
    for box, grid, label in zip(boxes, grids, labels, strict=True):
        if label is None:
            continue
        lines = table_rows(label, grid())
        if lines:
            found.append((box[1], Table(label=label, text="\n".join(lines))))
    return [t for _, t in sorted(found, key=lambda x: x[0])]


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def caption_labels(boxes: Sequence[tuple[float, float, float, float]],
                   captions: Sequence[tuple[float, float, float, float, str]]) -> list[str | None]:
    """The caption label of each table box (x0, top, x1, bottom), or None: each caption names one table.

    A page sets its tables' captions above them (most papers) or below; the side that captions more of the page's
    tables is the page's, above on a tie. On that side the closest pairs of the whole page are matched first,
    within :data:`CAPTION_DISTANCE`, a caption in the table's own column before one across (a two-column page may
    have another table's caption level with it); a table left without one takes the nearest free caption on the
    other side. Taking each table's nearest caption on either side had read a table by the caption of the table
    under it ("Table 4" for Table 3's rows) and named three boxes of one page by one caption.
    """
    def assign(side: str) -> list[int | None]:
        pairs = []
        for i, (x0, top, x1, bottom) in enumerate(boxes):
            for k, (c_top, c_bottom, c_x0, c_x1, _) in enumerate(captions):
                gap = top - c_bottom if side == "above" else c_top - bottom
                if -1.0 <= gap <= CAPTION_DISTANCE:
                    pairs.append((not (c_x0 < x1 and x0 < c_x1), gap, i, k))
        got: list[int | None] = [None] * len(boxes)
        used: set[int] = set()
        for _, _, i, k in sorted(pairs):  # the closest pairs first, over the whole page
            if got[i] is None and k not in used:
                got[i] = k
                used.add(k)
        return got

    above, below = assign("above"), assign("below")
    first, other = (above, below) if sum(k is not None for k in above) >= sum(k is not None for k in below) \
        else (below, above)
    used = {k for k in first if k is not None}
    labels: list[str | None] = []
    for i, k in enumerate(first):
        if k is None and other[i] is not None and other[i] not in used:
            k = other[i]
            used.add(k)
        labels.append(captions[k][4] if k is not None else None)
    return labels


def _label(caption: str) -> str:
    number = re.search(r"\d+|[IVX]+", caption[5:])
    return f"Table {number.group() if number else ''}".strip()


#: A row as :func:`table_rows` writes it: "Table 3: Model · GPUs — GPT-3 175B · 1024".
_ROW_LINE = re.compile(r"^(Table (?:\d+|[IVX]+)): (.+?)" + HEADER_SEP + r"(.+)$")


def row_parts(line: str) -> tuple[str, list[str], list[str]] | None:
    """A row line's table label, column headers and values (None for a line :func:`table_rows` did not
    write, such as a markdown table's row, which carries no headers). Such a row reads alone: the
    answer quotes it without the table's first row, each value under its header."""
    m = _ROW_LINE.match(line)
    if m is None:
        return None
    return m[1], m[2].split(CELL_SEP), m[3].split(CELL_SEP)


def _cell(value: str | None) -> str:
    return " ".join((value or "").replace("-\n", "-").split())  # "model-\nparallel": a wrapped compound


def _has_digit(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def table_rows(label: str, grid: Sequence[Sequence[str | None]]) -> list[str]:
    """One line per data row of a table's cell grid: "label: header · header — value · value".

    The first row is the header (its cells' wrapped lines joined). A cell that pdfplumber leaves
    None is spanned from the row above (a model name over several settings), so it is carried down.
    A table ruled only above and below its body gives one tall row whose cells hold a value per
    line ("336M\\n1.3B\\n3.8B"): where the cells agree on that count, each line is a row of its own,
    and a one-line cell beside them holds for all of them. Rows without a figure are not data.
    """
    rows = [list(r) for r in grid if r and any(_cell(c) for c in r)]
    if len(rows) < 2:
        return []
    header = [_cell(c) for c in rows[0]]
    if sum(1 for h in header if sum(ch.isalpha() for ch in h) >= 2) < 2:
        return []  # no column names: nothing to say what a figure measures
    out: list[str] = []
    above: list[str] = [""] * len(header)
    for row in rows[1:]:
        for sub in _unstack(list(row)):
            values = [_cell(v) if v is not None else above[i] if i < len(above) else "" for i, v in enumerate(sub)]
            above = values + above[len(values):]
            if sum(1 for v in values if v) < 2 or not any(_has_digit(v) for v in values):
                continue
            line = f"{label}: {CELL_SEP.join(header)}{HEADER_SEP}{CELL_SEP.join(values)}"
            if len(line) <= ROW_MAX_CHARS:
                out.append(line)
    return out


def _unstack(cells: list[str | None]) -> list[list[str | None]]:
    """A row whose cells hold several values a line (rows the table finder could not tell apart)
    split into one row per line, when every multi-line cell has the same number of lines."""
    counts = {len(c.strip().split("\n")) for c in cells if c and "\n" in c.strip()}
    if len(counts) != 1:
        return [cells]
    n = counts.pop()
    stacked = [c for c in cells if c and len(c.strip().split("\n")) == n]
    if len(stacked) < 2 or not all(_has_digit(c) for c in stacked):
        return [cells]  # one wrapped text cell, not a column of figures
    out: list[list[str | None]] = []
    for k in range(n):
        sub: list[str | None] = []
        for c in cells:
            if c is None:
                sub.append(None)
            else:
                parts = c.strip().split("\n")
                sub.append(parts[k] if len(parts) == n else c)
        out.append(sub)
    return out


# -- tables in the text layer ----------------------------------------------------------------------


def _numeric_row(line: str) -> bool:
    """A PDF line that is a row of figures: short, at least a third of its tokens hold a digit, and it
    does not end as a sentence or a wrapped clause does (prose lines with a number in them stay prose)."""
    words = line.split()
    return 0 < len(words) <= 14 and len(line) <= 100 and sum(any(ch.isdigit() for ch in w) for w in words) * 3 >= \
        len(words) and not re.search(r"[.,;:]$", line)


_TABLE_CAPTION_LINE = re.compile(r"^\s*Table\s*[\dIVX]+\s*[:.|]")
#: A wrapped prose line ends on a small word; a table's header line does not.
_DANGLING = re.compile(rf"\b(?:{LINKING}|when|where|if)$", re.I)


def text_table_rows(block: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, text) of the rows of each small table in a PDF block's text: the runs of at least
    two numeric lines right above or below a "Table N:" caption line, with the header line above them.

    In PDF text a table is glued into the sentence around it ("... performance when the ≈ #machine ×
    time # of jobs failure rate 100 hours 13,187 7.8% ... Table 1: Statistics ..."), a caption that is
    never quoted, so the figure a question asks for could not be. A row alone is short and whole.
    """
    lines: list[tuple[int, int, str]] = []
    pos = 0
    for line in block.split("\n"):
        lines.append((pos, pos + len(line), line.strip()))
        pos += len(line) + 1
    taken: set[int] = set()
    for i, (_, _, text) in enumerate(lines):
        if not _TABLE_CAPTION_LINE.match(text):
            continue
        above = i - 1
        while above >= 0 and _numeric_row(lines[above][2]):
            above -= 1
        run = list(range(above + 1, i))
        if len(run) < 2:  # the caption may sit above its table: skip its wrapped lines, then the rows
            j = i
            while j < min(i + 4, len(lines)) and not lines[j][2].endswith("."):
                j += 1
            k = j + 1
            while k < len(lines) and _numeric_row(lines[k][2]):
                k += 1
            run, above = list(range(j + 1, k)), -1
        if len(run) < 2:
            continue
        header = lines[above][2] if above >= 0 else ""
        if header and len(header) <= 80 and not _DANGLING.search(header) and not header.endswith(".") \
                and sum(ch.isalpha() for ch in header) >= 3:
            run.insert(0, above)
        for r in run:
            if r not in taken:
                taken.add(r)
                yield lines[r][0], lines[r][1], " ".join(lines[r][2].split())


# -- markdown tables -------------------------------------------------------------------------------------

#: A markdown table row longer than this, its trailing empty cells left out, is no row worth quoting (a cell holding
#: a paragraph; a PDF table's row, which names its table and headers too, has ROW_MAX_CHARS): it is furniture,
#: never prose, whose raw "| a | b |" would be quoted as a sentence. A row of a settings table whose cells hold a
#: sentence each ("| Precision-aware Optimizer | Stores optimizer states in BF16 ... | --use-precision-aware-
#: optimizer ... |") is ~250.
MARKDOWN_ROW_CHARS = 300


def markdown_cells(row: str) -> list[str]:
    """The cells of a markdown table row, stripped: "| a | b |" → ["a", "b"]."""
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def table_line(text: str) -> bool:
    """A markdown table row of any length: two cells or more, words in one; not the ``|---|---|`` separator."""
    if not (text.startswith("|") and text.endswith("|")):
        return False
    cells = markdown_cells(text)
    return len(cells) >= 2 and any(sum(ch.isalpha() for ch in c) >= 3 for c in cells)


def markdown_row(text: str, header: bool = False) -> bool:
    """A markdown table row short enough to quote alone (:data:`MARKDOWN_ROW_CHARS`, trailing empty cells not
    counted: a compatibility matrix pads its header with 30 of them), with two cells or more that hold something:
    "| AMD | |", a build-status row whose badge was an image, says nothing. A ``header`` (the row over the
    ``|---|`` line) may leave its first cell empty ("| | Description |"): the rows under it are read by it. A
    file listing or a settings table says its facts only in rows."""
    # the row without its trailing empty cells, closed again: rstrip, not a regex, which on a run of 20,000 empty
    # cells before a filled one retried the run from each pipe (8.6 CPU s)
    return (table_line(text) and len(text.rstrip("| \t")) + 2 <= MARKDOWN_ROW_CHARS
            and sum(1 for cell in markdown_cells(text) if cell) >= (1 if header else 2))


#: A markdown table's line under its header: "|---|:---:|".
SEPARATOR_LINE = re.compile(r"^\s*\|(?:\s*:?-{3,}:?\s*\|)+\s*$")


def next_line(text: str, end: int) -> str:
    """The first non-empty line of ``text`` after offset ``end`` (a line's end), read without copying the rest."""
    start = end
    while start < len(text) and text[start] == "\n":
        start += 1
    stop = text.find("\n", start)
    return text[start : stop if stop >= 0 else len(text)]
