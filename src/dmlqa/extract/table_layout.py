"""Tables that no rule draws, read by where their words stand: each figure under the header word above it.

pdfplumber's table finder (:func:`dmlqa.extract.tables.page_tables`) reads a table by its ruling lines, and most
papers rule a table with three horizontal lines and no vertical one, so it finds only some of them. The text layer
then holds such a table as bare rows of figures ("T5-Base (d=0.1) 82.9 19.6 83.5 72.4") under a line of column
names, and an answer quoting a row cannot say which figure is GLUE and which SQuAD. The words' positions say it:
the figures of a table stand in columns, the same number a row, and each column name stands over its column.

A table is read only where that is unambiguous, since a figure under the wrong header states something false:

* two or more rows in a row, each a label of up to five words, then the same number of figures (two or more),
  every column's figures within :data:`COLUMN_SLACK` points of the column's place in every row;
* the line right above the first row is the header: each of its words stands over one column (within the slack)
  or left of them all (the labels' header), and every column gets a name; a line right over it that names every
  column too is the header's first line (a name over some columns only may span them all, and is left out);
* and a "Table N" caption within reach names it (:func:`dmlqa.extract.tables.caption_labels`, one table a caption).

Anything else (a column of words, a row with a figure missing, a header word between two columns, a two-column
page's prose interleaved with the rows) is left as the bare rows it was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from statistics import median

#: Words whose tops differ by less than this (PDF points) are on one line.
LINE_SLACK = 3.0
#: How far a figure's or a header word's centre may stand from its column's (PDF points), at least; 0.4 of the
#: narrowest gap between two columns' centres when that is wider.
COLUMN_SLACK = 12.0
#: The most words a row's label may have ("Switch-Base (d=0.1, ed=0.4)").
LABEL_WORDS = 5
#: How far below the header line its first row may start, in lines' heights.
HEADER_GAP = 2.5

_FIGURE = re.compile(r"^[-+±~≈<>(]*(?:\d[\d.,]*|\.\d+)(?:[%×x]|[KMBGTkm]B?|[a-z]{0,2})?\)?[,*†‡]?$|^[-–—]$|"
                     r"^\(\d[\d.]*, \d[\d.]*\)$")  # a pair: "(18, 208)"


def _lines(words: Sequence[dict]) -> list[list[dict]]:
    """Words grouped into lines (tops within :data:`LINE_SLACK`), top to bottom, each left to right; a bracket
    opened in one word and closed in the next is one cell ("(18," "208)": "(18, 208)")."""
    out: list[list[dict]] = []
    for w in sorted(words, key=lambda w: (w["top"], w["x0"])):
        if out and abs(w["top"] - out[-1][0]["top"]) <= LINE_SLACK:
            out[-1].append(w)
        else:
            out.append([w])
    lines = []
    for line in out:
        merged: list[dict] = []
        for w in sorted(line, key=lambda w: w["x0"]):
            prev = merged[-1] if merged else None
            if (prev is not None and prev["text"].startswith("(") and ")" not in prev["text"]
                    and w["text"].endswith(")") and "(" not in w["text"] and w["x0"] - prev["x1"] <= LINE_SLACK * 2):
                merged[-1] = {**prev, "text": f"{prev['text']} {w['text']}", "x1": w["x1"],
                              "bottom": max(prev["bottom"], w["bottom"])}
            else:
                merged.append(w)
        lines.append(merged)
    return lines


def _split(line: list[dict]) -> tuple[list[dict], list[dict]] | None:
    """A data row's label words and figures: up to :data:`LABEL_WORDS` words, then figures only (two or more)."""
    k = 0
    while k < len(line) and not _FIGURE.match(line[k]["text"]):
        k += 1
    figures = line[k:]
    if k > LABEL_WORDS or len(figures) < 2 or not all(_FIGURE.match(w["text"]) for w in figures):
        return None
    return line[:k], figures


def _centre(w: dict) -> float:
    return (w["x0"] + w["x1"]) / 2


def aligned_tables(words: Sequence[dict]) -> list[tuple[tuple[float, float, float, float], list[list[str]]]]:
    """The tables of a page's words (pdfplumber's ``extract_words``: text, x0, x1, top, bottom) that stand in
    aligned columns under a header line: (their box, the cell grid: header first, then one row a line)."""
    lines = _lines(words)
    found = []
    i = 1
    while i < len(lines):
        first = _split(lines[i])
        if first is None:
            i += 1
            continue
        rows = [first]
        j = i + 1
        while j < len(lines) and (nxt := _split(lines[j])) is not None and len(nxt[1]) == len(first[1]):
            rows.append(nxt)
            j += 1
        grid = _grid(lines[:i], rows, lines[i][0]["top"]) if len(rows) >= 2 else None
        if grid is not None:
            box_words = lines[i - 1] + [w for line in lines[i:j] for w in line]
            box = (min(w["x0"] for w in box_words), min(w["top"] for w in box_words),
                   max(w["x1"] for w in box_words), max(w["bottom"] for w in box_words))
            found.append((box, grid))
        i = j
    return found


def _grid(above: list[list[dict]], rows: list[tuple[list[dict], list[dict]]],
          first_top: float) -> list[list[str]] | None:
    """The cell grid of ``rows`` under the header line that ends ``above``, or None where a figure or a header
    word has no one column. A line right over the header whose words stand over the columns too is the header's
    first line ("Quality" over "(Neg. Log Perp.)")."""
    n = len(rows[0][1])
    centres = [median(_centre(figs[c]) for _, figs in rows) for c in range(n)]
    gaps = [b - a for a, b in zip(centres, centres[1:], strict=False)]
    if any(g <= 0 for g in gaps):
        return None
    slack = max(COLUMN_SLACK, 0.4 * min(gaps))  # a word half way between two columns names neither
    if any(abs(_centre(figs[c]) - centres[c]) > slack for _, figs in rows for c in range(n)):
        return None  # the figures do not stand in columns
    left = min(figs[0]["x0"] for _, figs in rows)

    def named(line: list[dict]) -> tuple[list[str], list[list[str]]] | None:
        label: list[str] = []
        names: list[list[str]] = [[] for _ in range(n)]
        if 2 * sum(bool(_FIGURE.match(w["text"])) for w in line) >= len(line):
            return None  # a line of figures is no header ("(16GB each)" in one is a name's part)
        for w in line:
            c = min(range(n), key=lambda c: abs(_centre(w) - centres[c]))
            if abs(_centre(w) - centres[c]) <= slack:
                names[c].append(w["text"])
            elif w["x1"] <= left:
                label.append(w["text"])
            else:
                return None  # a word between columns: which one it names is a guess
        return label, names

    header = above[-1]
    height = max(w["bottom"] - w["top"] for w in header) or 1.0
    if not 0 < first_top - header[0]["top"] <= HEADER_GAP * height * 2:
        return None
    got = named(header)
    if got is None or not all(got[1]):
        return None
    label_name, names = got
    if len(above) >= 2 and 0 < header[0]["top"] - above[-2][0]["top"] <= HEADER_GAP * height:
        first = named(above[-2])
        if first is not None and all(first[1]):  # a name over one column of several ("LAMBADA") spans: left out
            label_name = first[0] + label_name
            names = [a + b for a, b in zip(first[1], names, strict=True)]
    labelled = any(label for label, _ in rows)
    head = ([" ".join(label_name)] if labelled else []) + [" ".join(ws) for ws in names]
    body = [([" ".join(w["text"] for w in label)] if labelled else []) + [w["text"] for w in figs]
            for label, figs in rows]
    return [head, *body]
