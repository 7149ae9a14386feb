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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from dmlqa.extract.boundaries import spans
from dmlqa.extract.layout import contents_lines, header_line, page_number_line, running_headers, set_apart
from dmlqa.extract.leaning import marker_subject
from dmlqa.extract.reference_entries import reference_zone
from dmlqa.extract.tables import (
    SEPARATOR_LINE,
    TABLE_LABEL,
    markdown_row,
    next_line,
    row_parts,
    table_line,
    text_table_rows,
)
from dmlqa.extract.textscan import (
    CODE_TOKENS,
    COMMENT,
    COMMENT_MARK,
    LINKING,
    MATH,
    VERSION_BOUND,
    VERSION_RANGE,
    count_upto,
    holds,
    letter_count,
    lowered,
    may_hold,
    number_run,
)
from dmlqa.extract.wrapping import ITEM_LINE, continues
from dmlqa.models import BLOCK_SEPARATOR, Block, Document

#: Roles a sentence may have; only QUOTABLE ones are stored for an answer. A SNIPPET (a code or
#: command line that a sentence ending in ':', a code comment or a prose sentence right before a short
#: run of command lines announces) is quoted only with that sentence, never alone. A LISTING line is any
#: other line of a code block right under a sentence, which says what the code is: quoted under that
#: sentence (or a comment above it in the code), the lines between left out. A ROW is one row of a table
#: (a markdown row, or a line of a PDF table above or below its "Table N:" caption).
PROSE, ITEM, HEADING, FURNITURE, CODE, CAPTION, REFERENCE, SNIPPET, ROW, LISTING = (
    "prose", "item", "heading", "furniture", "code", "caption", "reference", "snippet", "row", "listing")
QUOTABLE = (PROSE, ITEM, SNIPPET, ROW, LISTING)
QUOTED_CODE = (SNIPPET, LISTING)  # the roles of code lines that are quoted (under the sentence saying what they are)
#: An announced snippet is at most SNIPPET_LINES lines of at most SNIPPET_CHARS; a line of a listing longer than
#: LISTING_CHARS is not quoted (a command with all its flags is ~150 characters).
SNIPPET_LINES, SNIPPET_CHARS, LISTING_CHARS = 3, 120, 200
#: Raised with any change to the sentences or roles a text is split into: a build then splits unchanged documents again.
SPLIT_VERSION = 4
#: Length bounds of a quotable sentence (characters, words); the chat UI reads the same numbers.
MIN_CHARS, MAX_CHARS, MIN_WORDS = 30, 500, 5


@dataclass(slots=True)
class Sentence:
    """One sentence (or list item) of a document; ``start``/``end`` index into ``Document.text``.

    Not frozen, like the other per-row records (:class:`~dmlqa.models.Chunk`, the segment rows): a frozen
    dataclass sets each field through ``object.__setattr__``, 2.9 µs a record against 0.6, and a build of 1M
    passages makes some 20M of them. Nothing changes one once made but a code line's
    indentation, added when its role is settled (:func:`_indented`)."""

    doc_id: str
    start: int
    end: int
    text: str  # whitespace collapsed, as quoted; a code line keeps its indentation (:func:`_indented`)
    role: str
    page: int | None = None
    section: str | None = None

    @property
    def quotable(self) -> bool:
        return self.role in QUOTABLE


_FOLLOWING = re.compile(r"\b(?:the following|as follows)\b")
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*$")
_BULLETED = re.compile(r"[-•▪●◦‣]\s")  # an item split from the text it was flattened into (:func:`spans`)
_PDF_LIKE = ("pdf",)


#: A numbered section heading on a line of its own in PDF text ("3.2.2 Gradient Bucketing", "5 CONCLUSIONS",
#: "A.5 PROOFS"), after a paragraph's end (or the block's start) and before a capitalised line. Read as
#: one paragraph it was glued to the section's first sentence ("3.2.2 Gradient Bucketing The idea of
#: gradient bucketing is ..."), which then could not be quoted, and a section's first sentence is often
#: the one that says what the section is about. Section numbers have one or two digits a level: "2019."
#: opening a line is a year in a reference, and a line after one ending mid-sentence is a wrapped line.
#: An appendix's letter alone numbers a heading in capitals ("E PROTOTYPE IMPLEMENTATION"; "A Survey of ..." is
#: prose), which may wrap onto a line of capitals ("B STRUCTURE OF A TYPICAL ML" / "PROGRAM" / "This ...").
_CAPITALS_WRAPPED = (r"[A-Z][A-Z-]+(?:[ \t]+[A-Z0-9-]+)*[ \t]*\n[A-Z][A-Z0-9-]+(?:[ \t]+[A-Z0-9-]+){0,5}"
                     r"(?=[ \t]*\n[A-Z])")
_HEADING_LINE = (r"(?:\d{1,2}(?:\.\d{1,2})*\.?|[A-Z]\.\d{0,2}|[IVX]{1,4}\.|[A-Z](?=[ \t]+[A-Z][A-Z0-9 \t.-]*\n))"
                 r"[ \t]+(?P<title>" + _CAPITALS_WRAPPED
                 + r"|[A-Z][A-Za-z0-9+-]+(?:[ \t]+(?:\d+(?:\.\d+)+|[^\s.!?:;,]+))*)[ \t]*\n(?=[A-Z])")
#: Opening with the newline (not a lookbehind or ``^`` alternative) lets the engine skip to each line
#: start: twice as fast over a paper's text.
_PDF_HEADING_LINE = re.compile(r"(?<=[.!?:])\n(?P<line>" + _HEADING_LINE + ")")
_PDF_HEADING_FIRST = re.compile(r"(?P<line>" + _HEADING_LINE + ")")
#: A heading longer than this is more likely a sentence that happens to open with a number.
HEADING_WORDS = 10


def _heading_lines(block: str, pos: int = 0) -> Iterator[re.Match[str]]:
    """A PDF block's numbered heading lines (:data:`_HEADING_LINE`): at ``pos`` (its start, or where its running
    header ends), after a paragraph's end, and right under another ("E PROTOTYPE IMPLEMENTATION" / "E.1
    INTEGRATION INTO PYTORCH" / "To avoid ...")."""
    m = _PDF_HEADING_FIRST.match(block, pos)
    while True:
        if m is None and (m := _PDF_HEADING_LINE.search(block, pos)) is None:
            return
        yield m
        pos = m.end("line")
        m = _PDF_HEADING_FIRST.match(block, pos)


def _paragraphs(block: str, pdf: bool, furniture: Sequence[tuple[int, int]] = ()) -> Iterator[tuple[int, int, str]]:
    """(start, end, kind) of a block's paragraphs: PROSE, ITEM (a list item), CODE (a line of a code block),
    HEADING (a PDF's numbered heading line) or FURNITURE (``furniture``: the spans of a PDF page's running header
    and table of contents lines).

    In PDF text a newline is a line wrap, so the block is one paragraph but for the numbered section headings
    on lines of their own (:data:`_PDF_HEADING_LINE`) and the ``furniture`` lines; elsewhere (HTML, markdown)
    each line is a paragraph or a list item, which is what keeps list items apart, except a line that stops
    mid-sentence and is continued by the next (:func:`continues`): that is one paragraph.
    Between :data:`~dmlqa.extract.text.CODE_FENCE` lines each line is code of its own.
    """
    if pdf:
        top = furniture[0][1] + 1 if furniture and furniture[0][0] == 0 else 0  # a heading may open under a header
        yield from set_apart(_pdf_paragraphs(block, top), furniture, FURNITURE)
        return
    pos = 0
    current: tuple[int, int, str] | None = None
    last = ""
    fenced = False
    lines = block.split("\n")
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    fences = set(fences[: len(fences) // 2 * 2])  # in pairs: one left open (text quoting a fence) opens nothing
    for i, line in enumerate(lines):
        fence = i in fences
        if fenced or fence:  # a code block's lines (and its fences) stand apart, one each, but for a comment
            # wrapped over lines ("# If running in a multi-node cluster, this is where you / # should configure ...")
            # (not to commented-out code: "# model.to(device)" under it is no part of it)
            if fenced and not fence and current is not None and COMMENT.match(last) and COMMENT.match(line) \
                    and len(COMMENT.sub("", line).split()) >= 3 and continues(last, line):
                current = (current[0], pos + len(line), CODE)
            else:
                if current is not None:
                    yield current
                current = (pos, pos + len(line), CODE) if line.strip() else None
            last = line if current is not None else ""
            fenced = fenced != fence
        elif line.strip():
            if current is not None and continues(last, line):
                current = (current[0], pos + len(line), current[2])
            else:
                if current is not None:
                    yield current
                current = (pos, pos + len(line), ITEM if ITEM_LINE.match(line) else PROSE)
            last = line
        elif current is not None:
            yield current
            current, last = None, ""
        pos += len(line) + 1
    if current is not None:
        yield current


def _pdf_paragraphs(block: str, top: int = 0) -> Iterator[tuple[int, int, str]]:
    """A PDF block's paragraphs: the text between its numbered heading lines (from ``top`` on), and those lines
    (HEADING)."""
    start = 0
    for m in _heading_lines(block, top):
        if len(m.group("title").split()) > HEADING_WORDS:
            continue
        if m.start("line") > start:
            yield start, m.start("line"), PROSE
        yield m.start("line"), m.end("line"), HEADING  # "3.2 Hierarchical Partitioning for ZeRO (hpZ)" too
        start = m.end("line")
    if start < len(block):
        yield start, len(block), PROSE


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
    # each page's first block of text (not a table read cell by cell), where its running header is
    tops = {b.page: i for i, b in reversed(list(enumerate(doc.blocks)))
            if pdf and b.page is not None and not (b.section and TABLE_LABEL.match(b.section))}
    headers = running_headers([doc.blocks[i].text for i in tops.values()])
    tops_at = set(tops.values())
    headed = _headed_rows(doc.blocks) if pdf else {}
    out: list[Sentence] = []
    fences: list[int] = []  # where in ``out`` each code block opens and closes
    offset = 0
    for at, block in enumerate(doc.blocks):
        if pdf and block.section and TABLE_LABEL.match(block.section):
            # A table the PDF extractor read cell by cell (extract/tables.py): a line is a row with its headers.
            out += [Sentence(doc.doc_id, offset + s, offset + e, text, ROW, block.page, block.section)
                    for s, e, text in _lines(block.text) if text]
            offset += len(block.text) + len(BLOCK_SEPARATOR)
            continue
        furniture = (header_line(block.text, headers) if at in tops_at else []) + contents_lines(block.text) + \
            page_number_line(block.text, block.page) if pdf else []
        for p_start, p_end, kind in _paragraphs(block.text, pdf, furniture):
            para = block.text[p_start:p_end]
            if kind in (FURNITURE, HEADING):  # a running header, a contents line, a numbered heading's line
                out.append(Sentence(doc.doc_id, offset + p_start, offset + p_end, " ".join(para.split()), kind,
                                    block.page, block.section))
                continue
            if kind == CODE:
                text = " ".join(para.split())
                if text.startswith("```"):
                    fences.append(len(out))
                out.append(Sentence(doc.doc_id, offset + p_start, offset + p_end, text, _code_role(text), block.page,
                                    block.section))
                continue
            item = kind == ITEM
            # a list item is quoted whole, but for one too long to quote: its sentences are quoted instead; a
            # table's row is one unit whatever its cells say ("| EXO_MODELS_DIRS | Colon-separated ... downloads.
            # Checked in order ... |" is no two sentences)
            cut = [(p_start, p_end)] if (item and p_end - p_start <= MAX_CHARS) or \
                ("\n" not in para.strip() and table_line(" ".join(para.split()))) else \
                list(spans(para, p_start, short=0 if pdf else MIN_WORDS, longest=MAX_CHARS))
            for s, e in cut:
                raw = block.text[s:e]
                text = " ".join(raw.split())
                if not text:
                    continue
                if refs and refs[0] <= offset + s < refs[1]:
                    role = REFERENCE
                else:
                    role = classify(text, ITEM if item or _BULLETED.match(text) else PROSE, title=doc.title)
                    if role not in (CAPTION, FURNITURE, REFERENCE) and table_line(text):
                        header = SEPARATOR_LINE.match(next_line(block.text, e)) is not None
                        role = ROW if markdown_row(text, header=header) else FURNITURE
                out.append(Sentence(doc.doc_id, offset + s, offset + e, text, role, block.page, block.section))
        if pdf and not (refs and refs[0] <= offset < refs[1]):
            # a row the table finder read with its headers is quoted that way; its bare figures are not
            out += [Sentence(doc.doc_id, offset + s, offset + e, text,
                             FURNITURE if tuple(text.split()) in headed.get(block.page, ()) else ROW,
                             block.page, block.section)
                    for s, e, text in text_table_rows(block.text)]
        offset += len(block.text) + len(BLOCK_SEPARATOR)
    if pdf:
        return sorted(out, key=lambda x: (x.start, x.role == ROW))  # a row after the sentence it is glued into
    return _indented(doc.text, _listings(_announced_snippets(_lead_ins(out, fences)), fences))


def _headed_rows(blocks: Sequence[Block]) -> dict[int | None, set[tuple[str, ...]]]:
    """Per page, the figures of each row a table finder read with its headers (extract/tables.py), as the page's
    text layer writes the same row: "4 1 32K 32 128 1 81.985 113.79" beside "Table 3: group_num · bs · ... —
    4 · 1 · ... · 113.79". The bare one said nothing of what its figures measure, and was quoted as often."""
    out: dict[int | None, set[tuple[str, ...]]] = {}
    for b in blocks:
        if b.section and TABLE_LABEL.match(b.section):
            for line in b.text.split("\n"):
                parts = row_parts(line)
                if parts is not None:
                    out.setdefault(b.page, set()).add(tuple(" ".join(parts[2]).split()))
    return out


def _indented(text: str, out: list[Sentence]) -> list[Sentence]:
    """A code line's text with the indentation its block gives it (:func:`~dmlqa.extract.text.clean_text`),
    added once its role is settled (the roles read the line without it): an answer quotes a loop's body as a
    body. Its vectors and BM25 terms are the same: neither reads spaces."""
    for s in out:
        if s.role in _CODE_ROLES and text[s.start:s.start + 1] == " ":
            line = text[s.start:s.end]
            s.text = line[: len(line) - len(line.lstrip(" "))] + s.text
    return out


_CODE_ROLES = (CODE, SNIPPET, LISTING)


def _lead_ins(out: list[Sentence], fences: list[int]) -> list[Sentence]:
    """A short line right over a code block that leads into it ("Install the requirements:", "**From source:**", "To
    install the latest stable version, run") is no heading: it says what the code does, as a sentence ending in ':'.
    So is one ending in ':' over a command on a line of its own, unfenced ("**Install from PyPI:**" over ``uv pip
    install megatron-core``; a page's text often loses its fences): it then announces the command."""
    for start in fences[::2]:
        if start and (s := out[start - 1]).role == HEADING and s.section == out[start].section and \
                len(s.text.split()) >= 2 and (_colon_ended(s.text) or _LEADS_IN.search(s.text)):
            out[start - 1] = Sentence(s.doc_id, s.start, s.end, s.text, PROSE, s.page, s.section)
    for i, (s, nxt) in enumerate(zip(out, out[1:], strict=False)):
        if s.role == HEADING and _colon_ended(s.text) and len(s.text.split()) >= 2 and \
                nxt.role in (HEADING, CODE, FURNITURE) and nxt.section == s.section and _COMMAND_LINE.match(nxt.text) \
                and _code_like(nxt.text):
            out[i] = Sentence(s.doc_id, s.start, s.end, s.text, PROSE, s.page, s.section)
    return out


def _colon_ended(text: str) -> bool:
    """Does the line end in ':', inside its emphasis or not ("**Install from PyPI:**")?"""
    return text.rstrip("*_").endswith(":")


#: A lead-in's last word when it has no colon: "... run", "... via", "... execute".
_LEADS_IN = re.compile(rf"\b(?:{LINKING}|run|execute|type|use|using)$", re.I)


def _listings(out: list[Sentence], fences: list[int]) -> list[Sentence]:
    """The code lines no sentence announced of each block (between the fences at ``fences``, in pairs) right under
    a prose sentence, a list item or their section's heading ("3.4 Do forward": a README's steps) become LISTING
    lines: "This example runs a parallel grid search ..." says what the 20 lines under it are."""
    for start, end in zip(fences[::2], fences[1::2], strict=False):
        if not start or (over := out[start - 1]).section != out[start].section or \
                over.role not in (PROSE, ITEM, HEADING) or over.role == HEADING and not over.section:
            continue
        for j in range(start + 1, end):
            line = out[j]
            if line.role == CODE and _snippet_line(line.text, LISTING_CHARS):
                out[j] = Sentence(line.doc_id, line.start, line.end, line.text, LISTING, line.page, line.section)
    return out


#: A code block's fence line (``CODE_FENCE``, or a markdown fence naming its language: "```bash").
_FENCE_LINE = re.compile(r"^\s*```[\w+.-]*\s*$")


def _code_role(text: str) -> str:
    """The role of a line of a code block: CODE, but for a comment that reads as a sentence ("# Define the
    GPU device for the current worker"), which is PROSE: it says what the line under it does, and announces
    it (:func:`_announces`) as a sentence ending in ':' does."""
    if not COMMENT.match(text):
        return CODE
    words = COMMENT_MARK.sub(" ", text).split()  # a comment wrapped over lines has a marker on each
    said = " ".join(words)
    return PROSE if (len(words) >= MIN_WORDS and MIN_CHARS <= len(text) <= MAX_CHARS
                     and not _reads_as_code(said, words)) else CODE


def _lines(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, whitespace-collapsed text) of each line of ``text``."""
    pos = 0
    for line in text.split("\n"):
        yield pos, pos + len(line), " ".join(line.split())
        pos += len(line) + 1


def _snippet_line(text: str, chars: int = SNIPPET_CHARS) -> bool:
    """A line of code or a command short enough to quote (``chars``): not a table row, a fence, a lone bracket
    or BibTeX, nor a markdown heading (a ``#`` line is code only when it holds code: commented-out code)."""
    if text.startswith("# ") and not CODE_TOKENS.search(text):
        return False
    return (len(text) <= chars and sum(ch.isalpha() for ch in text) >= 3
            and not re.match(r"^(?:\||```|@\w+\{)", text))


def _code_like(line: str) -> bool:
    """Could a line taken for a heading be code? A command opens lower-case ("ray status", "ds_report")
    or holds code's characters; "Running Unmodified Megatron-LM GPT2 model" is the next section's title."""
    return line[:1].islower() or not line[:1].isalnum() or re.search(r"[=()\[\]{}<>$_/\\`'\":;]", line) is not None \
        or CODE_TOKENS.search(line) is not None


#: A command line: a flag (``--num-experts 64``), a shell prompt, or a program given flags.
#: Also a common program and its arguments ("pip install deepspeed"), one lower-case tool name of its own
#: ("ds_report", "nvidia-smi"), or a setting assigned (``config.gpu_options.per_process_gpu_memory_fraction = 0.4``).
_COMMAND_LINE = re.compile(r"^(?:\$\s+\S|--?[a-zA-Z][\w-]*(?:[\s=]|$)|[\w./-]+\s+(?:\S+\s+)*--[a-z][\w-]*|"
                           r"(?:pip3?|python3?|torchrun|deepspeed|horovodrun|mpirun|ray|git|conda|docker|kubectl|"
                           r"helm|export|srun|accelerate|bash|uvx?|pipx|poetry|mamba|npm|cd|sudo|apt(?:-get)?|brew|curl|wget|sbatch|"
                           r"salloc)\s+\S|[a-z][\w.-]*[_.-][\w.-]*$|"
                           r"[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*\+?=\s*\S)")


def _announces(sentences: list[Sentence], i: int) -> int:
    """How many code lines after sentence ``i`` it announces (0: none).

    A sentence ending in ':' announces up to SNIPPET_LINES; a code comment explains the one line under it
    ("# ... configure the run's persistent storage ..." over ``run_config=RunConfig(storage_path=...)``);
    a prose sentence followed by a short run of command lines that ends before more prose
    ("Distribute experts across GPUs." over ``--num-experts 64``) is shown by them.
    """
    s = sentences[i]
    if s.role not in (PROSE, ITEM):
        return 0
    if _colon_ended(s.text) or "follow" in s.text and _FOLLOWING.search(s.text):  # substring: 10x quicker
        return SNIPPET_LINES  # "... by setting the following in the config file."
    if COMMENT.match(s.text):
        return 1
    first = i + 1 + (i + 1 < len(sentences) and _FENCE_LINE.match(sentences[i + 1].text) is not None)
    run = 0
    # the role first: it is free, and _COMMAND_LINE backtracks over every word of a prose sentence
    while first + run < len(sentences) and sentences[first + run].role in (CODE, HEADING) and \
            _COMMAND_LINE.match(sentences[first + run].text):
        run += 1
    after = sentences[first + run] if first + run < len(sentences) else None
    ends = after is None or after.role in (PROSE, ITEM) or after.role == HEADING and not _COMMAND_LINE.match(
        after.text) or _FENCE_LINE.match(after.text) is not None  # a code block's end
    return run if 0 < run <= SNIPPET_LINES and ends else 0


#: A line opening a block of Python (its body is under it): quoted alone it is a fragment.
_OPENS_BLOCK = re.compile(r"^(?:(?:async\s+)?(?:for|while|if|elif|with|def)\b.*|else|try|finally|except\b.*):\s*$")


def _announced_snippets(sentences: list[Sentence]) -> list[Sentence]:
    """The code lines a sentence announces (:func:`_announces`) become SNIPPETs.

    "TensorFlow can grow its memory gradually by (if desired):" says nothing without the
    ``config.gpu_options.allow_growth = True`` after it; as code, that line was never quotable, so
    the answer stopped at the colon. Only announced lines qualify: code elsewhere stays unquoted. A line
    opening a Python block (:data:`_OPENS_BLOCK`) brings the first line of its body.
    """
    out = list(sentences)
    for i, s in enumerate(sentences):
        n = _announces(sentences, i)
        j = i + 1
        if n and j < len(out) and out[j].text.startswith("```"):
            j += 1  # a fenced block's opening line ("```bash"): the code is under it
        comments = opened = 0
        while n and j < len(out):
            nxt = out[j]
            # a comment labelling the line under it ("# For Jax users") comes with the code, uncounted (one
            # that reads as a sentence stays one: it announces the line under it itself)
            label = (comments < SNIPPET_LINES and nxt.role in (CODE, HEADING, FURNITURE) and j + 1 < len(out)
                     and COMMENT.match(nxt.text) is not None and out[j + 1].role in (CODE, HEADING, FURNITURE)
                     and len(nxt.text) <= SNIPPET_CHARS)
            # a command too short for a sentence is furniture by length ("deepspeed --include localhost:0,1 ...")
            if nxt.page != s.page or not label and (
                    nxt.role not in (CODE, HEADING, FURNITURE) or not _snippet_line(nxt.text)
                    or nxt.role != CODE and not _code_like(nxt.text)):
                break
            out[j] = Sentence(nxt.doc_id, nxt.start, nxt.end, nxt.text, SNIPPET, nxt.page, nxt.section)
            comments, n, j = comments + label, n - (not label), j + 1
            if not n and not label and opened < SNIPPET_LINES and _OPENS_BLOCK.match(nxt.text):
                n, opened = 1, opened + 1  # "for g in opt.param_groups:" says nothing without its body's first line
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
#: Three or more "Name Surname," at the start of a line: the authors of a publication list entry.
_AUTHOR_LIST = re.compile(r"^(?:[-*•▪●◦‣]\s*)?(?:(?:[A-Z][\w'’.\-]*\s+){1,3}[A-Z][\w'’\-]+,\s*(?:and\s+)?){3,}")
#: What a cited work carries: a year in parentheses or after a full stop, an arXiv or DOI identifier.
_CITED_WORK = re.compile(r"\((?:19|20)\d\d[a-z]?\)|\.\s+(?:19|20)\d\d\.|arXiv:\s?\d{4}\.\d{4,5}|\bdoi\b|"
                         r"\b10\.\d{4,}/", re.I)
_HEADING_LEAD = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[A-Z]\.\d*|[IVX]+\.)\s+[A-Z][A-Z \-&]{3,}\b(?=\s+[A-Z][a-z])")
_NUMBERED = re.compile(r"^\[?\d+\]?\s")
_CLOSED = re.compile(r"[.!?:)\"”]$")

# Every sentence of a build is classified, and a regex search tries each of its alternatives at every
# position of the text (it finds no literal prefix to skip to in an alternation or under IGNORECASE), so
# the patterns above cost most of a build's sentence splitting. Almost no sentence can match them: these
# literals are what each match must contain, and a substring test (a C scan) rules a pattern out tens of
# times cheaper. Add a literal here with every alternative added above (tests/test_sentence_gates.py).
_CAPTION_NEEDLES = ("Fig", "Table", "Algorithm", "Listing")
#: Lower-case, as the text they are sought in (the patterns ignore case); "©" covers "Copyright ©".
_FURNITURE_NEEDLES = ("arxiv:", "proceedings of the", "©", "all rights reserved",
                      "permission to make digital or hard copies", "acm isbn", "doi.org/",
                      "licensed under a creative commons")
#: Lower-case; the marker entry ``^\[\d+\]`` is tested apart (a text starting with "[").
_REFERENCE_NEEDLES = ("proceedings of", "arxiv preprint arxiv", "url", "pp.", "vol.", "doi:")
#: The calls ``\w+\.\w+\(`` and the like and ``()`` are tested apart, by :data:`_CALL`; "=" covers "==" and "+=".
_CODE_NEEDLES = ("{", "}", ";", "=", "//", "->", "def", "return", "import", "self", "lambda", "elif", "torch",
                 "np", "print")
_CALL = re.compile(r"\w\(|\(\)")
#: Box-drawing characters: a directory tree or a text-art table in a README, never a sentence.
_TREE = re.compile(r"[\u2500-\u257f]")
#: A plain lower-case word of prose ("the", "micro-batches", "gradients,").
_PLAIN_WORD = re.compile(r"[a-z][a-z'-]*[,;:.]?")
#: The share of plain words (:data:`_PLAIN_WORD`) a sentence holding code tokens needs to be read as prose.
PROSE_WORDS = 0.65


def _reads_as_prose(text: str, words: list[str]) -> bool:
    """Is a sentence holding code tokens prose all the same: ended as a sentence, short enough to quote,
    and mostly plain words? A docs page says how to call an API in such sentences ("Each worker should
    load micro-batches of size engine.train_micro_batch_size_per_gpu() and will be queried a total of
    engine.gradient_accumulation_steps() times per train_batch()."), a paper states a setting with symbols
    ("With a batch size of b = 512, ... the total memory required to store the KV cache is 1.2 TB"); taken for
    code, neither could be quoted."""
    return (len(words) >= 8 and len(text) <= MAX_CHARS and _SENTENCE_END.search(text) is not None
            and sum(_PLAIN_WORD.fullmatch(w) is not None for w in words) >= PROSE_WORDS * len(words))


def _reads_as_code(text: str, words: list[str]) -> bool:
    """Code, not prose: 3 code tokens, one among few letters, or few letters, unless :func:`_reads_as_prose` (with its
    math read as words: "we split the columns of $A$ into $[A_1 ~ A_2]$, and ..."). A version bound reads as what it
    bounds: "- NCCL >= 2.0" in a list of requirements is no line of code, nor "ROCm 5.3->5.6" in a news item."""
    text = VERSION_BOUND.sub(r"\1", text) if "=" in text else text
    text = VERSION_RANGE.sub(r"\1 to \2", text) if "->" in text else text
    hits, letters, n = _code_tokens(text, 3), letter_count(text), len(text)
    return (hits >= 3 or (hits and letters < 0.6 * n) or letters < 0.5 * n) and not _reads_as_prose(text, words) and \
        not ("$" in text and _reads_as_prose(plain := MATH.sub(" x ", text), plain.split()))


def _code_tokens(text: str, cap: int) -> int:
    """How many :data:`CODE_TOKENS` ``text`` holds, up to ``cap``."""
    if not holds(text, _CODE_NEEDLES) and not ("(" in text and _CALL.search(text)):
        return 0
    return count_upto(CODE_TOKENS, text, cap)


def _print_stamp(text: str) -> bool:
    """Is there a print stamp or a page counter in ``text``? Each alternative of :data:`_PRINT_STAMP`
    holds a "/" or ends the text on a digit (``\\s`` and ``rstrip`` strip the same characters)."""
    return ("/" in text or text.rstrip()[-1:].isdecimal()) and _PRINT_STAMP.search(text) is not None


#: What a paper's footnote about its authors says (after a mark: see classify).
_AUTHOR_NOTE = re.compile(r"(?i)equal(?:ly)? contribut|corresponding author|internship|affiliat|universit|"
                          r"\bwork (?:was )?(?:done|conducted|performed)|school of|institute|@")


def classify(text: str, role: str = PROSE, *, title: str = "") -> str:
    """The role of one sentence's text (``role`` is its layout role: prose or a list item)."""
    n = len(text)
    words = text.split()
    # the length first: it is free, the regexes are not
    if n < 120 and _print_stamp(text) or (title and text.strip() == title.strip()):
        return FURNITURE
    if text[:1] in "∗†‡" and _AUTHOR_NOTE.search(text):
        return FURNITURE  # "∗Equal contribution.", "∗This work was conducted when ... was an employee at ..."
    if holds(text, _CAPTION_NEEDLES) and _CAPTION.search(text):
        return CAPTION
    low = lowered(text)
    if n < 400 and may_hold(low, _FURNITURE_NEEDLES) and _FURNITURE.search(text):
        return FURNITURE
    if text.rstrip("\"'”’)* ").endswith("?"):
        return HEADING  # a question (an FAQ entry, an exercise, a rhetorical one) asks; it states nothing
    refs = count_upto(_REFERENCE, text, 2) if text.startswith("[") or may_hold(low, _REFERENCE_NEEDLES) else 0
    if _AUTHOR_LIST.match(text) and _CITED_WORK.search(text):
        return REFERENCE  # a publication list entry on a web page: "- A. Smith, B. Lee, C. Wu. (2022) Title"
    if refs >= 2 or (refs and _NUMBERED.match(text) and "et al" in text) or text.count("et al.") >= 3:
        return REFERENCE
    if marker_subject(text):
        return REFERENCE  # about a cited work named only by its number: a fragment once the marker goes
    if _TREE.search(text) or "```" in text:
        return CODE  # a directory tree drawn with box characters ("│ ├── distributed/"), a markdown code fence
    if not markdown_row(text) and number_run(text):
        return FURNITURE  # a plot's ticks or a table's figures run into a line ("1 0.5 0 1 0.5 0 Prefill Load")
    # an item's bullet or number is layout, not letters or code: "- Run hvd.init()." is an item
    if _reads_as_code(ITEM_LINE.sub("", text, count=1) if role == ITEM else text, words):
        return CODE
    if role == ITEM:
        return ITEM if n >= 12 and len(words) >= 2 else HEADING
    # "$" is the end or a newline just before it: the last two characters hold any match
    if not _CLOSED.search(text[-2:]) and len(words) <= 12:
        return HEADING  # a title or section heading on a line of its own
    if not MIN_CHARS <= n <= MAX_CHARS or len(words) < MIN_WORDS:
        return HEADING if n < MIN_CHARS else FURNITURE
    return PROSE
