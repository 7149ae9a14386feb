"""How an extractive answer reads: the fourth step, after :func:`dmlqa.query.quotes.choose` picked the sentences.

:func:`compose` writes them out with one ``[n]`` per document page: list items as ``- `` lines, code lines as one
fenced block under the sentence (or heading) they are read under, a table's row with each cell under its column's
name, a heading a quote leans on named as a label. Quotes are verbatim; a sentence quoted without the one before it
loses the linking word that tied it there (:func:`unlinked`), and its citation keeps the source's words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dmlqa.extract.quoting import for_answer
from dmlqa.extract.sentences import ITEM, LISTING, PROSE, QUOTED_CODE, ROW
from dmlqa.extract.tables import markdown_cells, row_parts
from dmlqa.index.lexical import tokenize
from dmlqa.models import Citation, Hit
from dmlqa.query.extractive import Candidate
from dmlqa.query.glued import heading_end
from dmlqa.query.quotes import ANNOUNCED_STEPS, asked_resource, opens_in_english

#: What a list item's text may open with before its words: its bullet, written again as "- " in the answer.
_BULLETS = "-*•▪●◦‣ "


def _named_under(heading: str) -> str:
    """How an answer names the heading a quote is read under (:attr:`Candidate.under`): as a label, not a quote."""
    return f"Under “{for_answer(heading)}”:"


_ASKS_PAPER = re.compile(r"\b(?:paper|report)s?\W*$", re.I)


def _asked_kind_fits(asked: str, kind: str) -> bool:
    """Is a source of this ``kind`` (:attr:`dmlqa.models.Hit.kind`) what ``asked`` (:func:`asked_resource`) wants,
    so that its title answers it? A paper for "which paper ...?": not a README found by its path, or a list of
    links whose entry names the paper (the entry says the name). Anything for "which framework/system/method
    ...?": a paper names one as well as a repository does."""
    return _ASKS_PAPER.search(asked) is None or kind == "paper"


def _named_in(title: str, question: str) -> bool:
    """Does the question itself name the source by its title ("the library that comes bundled with Horovod")?
    Then the title is what the asked-for thing belongs to, not its name."""
    words = tokenize(title)
    return bool(words) and set(words) <= set(tokenize(question))


def _display_title(title: str) -> str:
    return re.sub(r"^GitHub - ", "", title).strip()


#: A linking adverbial opening a sentence: it ties the sentence to the one before it in its source. Only those whose
#: removal leaves the sentence's claim as it was: :data:`dmlqa.query.features._SOFT_LEAN`'s "Otherwise,", "Instead,",
#: "In other words," or "Though" carry part of the claim, so that list is not this one.
_LINK_OPENING = re.compile(
    r"^(?:However|Thus|Hence|Therefore|Moreover|Furthermore|In addition|Additionally|Also|Finally|Lastly|"
    r"Second(?:ly)?|Third(?:ly)?|Next|Then|Similarly|Likewise|Consequently|As a result|Besides|Nevertheless|"
    r"Nonetheless|Meanwhile|Accordingly),\s+(?=[A-Za-z])")


def unlinked(text: str) -> str:
    """A quote without the linking adverbial that opens it ("However, waiting for KVCache ... may violate the TTFT
    SLO." → "Waiting for KVCache ..."), for a sentence quoted without the one before it: in an answer "However,"
    or "Second," would tie it to whatever quote stands before it, from another page or document. Its first word
    is capitalised when it is English ("waiting", "a"), and left as written when it is a name ("fully_shard",
    "exo"). The citation keeps the sentence as the source writes it."""
    m = _LINK_OPENING.match(text)
    if m is None:
        return text
    rest = text[m.end():]
    return rest[:1].upper() + rest[1:] if opens_in_english(rest) else rest


def _markdown_header(c: Candidate, nxt: Candidate | None) -> bool:
    """Is ``c`` the header row of a markdown table quoted for the row after it? Then the row is read
    with each cell under its column's name ("Aspect: VPP · Recommendation: ..."), not after a bare
    "Aspect | Recommendation" line. A PDF table's rows carry their headers already."""
    return (c.role == ROW and nxt is not None and nxt.role == ROW and nxt.doc_id == c.doc_id
            and c.text.startswith("|") and nxt.text.startswith("|"))


def _announces_next(c: Candidate, after: Sequence[Candidate]) -> bool:
    """Is the sentence quoted after ``c`` one it announces (a list item or a code line of its document a few
    sentences on, the prose sentence right after it, or a line of the listing under it)?"""
    if not after or after[0].doc_id != c.doc_id:
        return False
    gap = after[0].ordinal - c.ordinal
    return 0 < gap <= (2 if after[0].role == PROSE else ANNOUNCED_STEPS + 1) or after[0].role == LISTING and gap > 0


def compose(chosen: Sequence[Candidate], hits: Sequence[Hit], *, question: str = "") -> tuple[str, list[Citation]]:
    """The answer text with one [n] per document page, and its citations (quotes are verbatim).

    ``chosen`` is in answer order (:func:`choose`); ``hits`` must hold a passage of each of their
    documents. For a question asking which paper/project/tool, the answer leads with the title of the
    source of its first sentence: the name is the answer, and the sentences say why. List items are
    ``- `` lines; code lines, one fenced block under the sentence announcing them (which cites them);
    a markdown table's row, one item with each cell under its column's name.
    """
    numbers: dict[tuple[str, int | None], int] = {}
    quotes: dict[tuple[str, int | None], list[str]] = {}
    parts: list[str] = []
    items: list[str] = []
    code: list[str] = []  # a run of code lines: one fenced block after the sentence announcing it
    by_doc = {h.doc_id: h for h in reversed(hits)}  # the best-ranked passage of each document

    def flush() -> None:
        if items:
            parts.append("\n" + "\n".join(items) + "\n")
            items.clear()
        if code:
            parts.append("\n```\n" + "\n".join(code) + "\n```\n")
            code.clear()

    asked = asked_resource(question)
    source = by_doc[chosen[0].doc_id] if chosen and asked is not None else None
    if source is not None and _asked_kind_fits(asked, source.kind) and not _named_in(
            title := _display_title(source.title), question):
        numbers[(chosen[0].doc_id, chosen[0].page)] = 1
        parts.append(f"{title} [1]:")
    said: set[str] = set()
    header: list[str] | None = None  # a table's header row, read with the row quoted after it
    for i, c in enumerate(chosen):
        if c.text in said:  # the same sentence in two copies of a page says nothing new
            continue
        said.add(c.text)
        if _markdown_header(c, chosen[i + 1] if i + 1 < len(chosen) else None):
            header = markdown_cells(for_answer(c.text))
            continue
        key = (c.doc_id, c.page)
        if key not in numbers:
            numbers[key] = len(numbers) + 1
        # a heading glued before the sentence is left out of the quote: what is left is still the source's text
        verbatim = c.text[heading_end(c.text):] if c.role in (PROSE, ITEM) else c.text
        quotes.setdefault(key, []).append(verbatim)
        prev = chosen[i - 1] if i else None
        if c.role in QUOTED_CODE:  # code is quoted as written, cited by the sentence announcing it
            if items or code and prev is not None and prev.doc_id != c.doc_id:
                flush()  # another document's code is another block
            if c.under is not None:  # a line right under its heading: the heading says what it does
                flush()
                parts.append(f"{_named_under(c.under)} [{numbers[key]}]")
            elif prev is not None and prev.doc_id == c.doc_id and c.ordinal - prev.ordinal > (
                    1 if prev.role in QUOTED_CODE else 2):  # the next line, or the first under the block's fence
                code.append("…")  # lines of the listing between are left out
            code.append(" " * c.indent + c.text)  # a loop's body indented under it, as written
            continue
        text = for_answer(verbatim)
        if c.role in (PROSE, ITEM) and not (prev is not None and prev.doc_id == c.doc_id and
                                           prev.ordinal == c.ordinal - 1):
            text = unlinked(text)
        if c.role in (PROSE, ITEM) and text.endswith(":") and not _announces_next(c, chosen[i + 1:i + 2]):
            text = text[:-1].rstrip() + " …"  # what it announces is not quoted: the colon would point at nothing
        if c.role == ROW and (pdf_row := row_parts(text)) is not None:  # "Table 2: Scheme: PTD-P · GPUs: 384"
            label, heads, values = pdf_row
            if len(heads) == len(values):
                text = f"{label}: " + " · ".join(f"{h}: {v}" if h else v for h, v in zip(heads, values, strict=True))
        elif c.role == ROW:  # a table row reads as a list item, each cell under its column's header
            cells = markdown_cells(text)
            if header is not None and len(header) == len(cells):
                # an empty cell says nothing under its header ("Status:"), nor a matrix's padding ("| | | |")
                text = " · ".join(f"{h}: {v}" if h else v for h, v in zip(header, cells, strict=True) if v)
            else:
                text = " | ".join(cells)
            header = None
        if c.under is not None:  # the heading the sentence leans on, named as what it is: not a quote
            text = f"{_named_under(c.under)} {text.lstrip(_BULLETS)}"
        if c.role in (ITEM, ROW):
            if code:
                flush()
            items.append(f"- {text.lstrip(_BULLETS).strip()} [{numbers[key]}]")
            continue
        flush()
        parts.append(f"{text} [{numbers[key]}]")
    flush()
    body = "".join(p if i == 0 or p.startswith("\n") or parts[i - 1].endswith("\n") else " " + p
                   for i, p in enumerate(parts)).strip()  # a space between sentences, none at a line's ends
    citations: list[Citation] = []
    for (doc_id, page), n in numbers.items():
        h = by_doc[doc_id]
        quote = quotes.get((doc_id, page), [h.title])[0]  # verbatim: a reader finds it in the source
        citations.append(Citation(n=n, url=h.url, title=h.title, page=page, quote=quote[:300], doc_id=doc_id,
                                  chunk_id=h.chunk_id, venue=h.venue, year=h.year))
    return body, citations
