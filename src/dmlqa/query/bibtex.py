"""BibTeX for recommended documents, ready for a reference manager (Zotero, JabRef, BibDesk).

Entry types follow what the catalog knows: a paper with a conference venue is ``@inproceedings``
(``booktitle``), with a journal venue ``@article`` (``journal``); a preprint or a paper without a
venue is ``@misc`` with ``eprint``/``archivePrefix`` when an arXiv id is known; repositories, docs,
posts, videos and slides are ``@misc`` with ``howpublished = {\\url{…}}``. Keys are
``surname + year + first title word`` in ASCII, with ``a``, ``b``… when two entries would share one.
Text fields escape LaTeX's special characters; titles are wrapped in a second pair of braces so
that styles keep their capitalisation ("ZeRO", "GPipe"). Non-ASCII letters stay UTF-8 (BibLaTeX,
Zotero and JabRef read it) unless ``ascii_only=True`` asks for LaTeX accents (``M{\\"u}ller``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Protocol

from dmlqa.catalog.urls import arxiv_id, doi
from dmlqa.models import is_et_al, is_linkable


class Citable(Protocol):
    """What an entry is made from (:class:`dmlqa.query.related.Related` has all of it)."""

    doc_id: str
    title: str
    url: str
    authors: tuple[str, ...]
    year: int | None
    venue: str | None
    kind: str


_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_SPECIAL_RE = re.compile("|".join(re.escape(c) for c in _SPECIAL))
#: A brace without its partner: BibTeX counts braces even after a backslash, so ``\{`` alone would
#: unbalance the field (pybtex rejects the file); these commands write one without a brace.
_LONE_BRACE = {"{": r"\textbraceleft{}", "}": r"\textbraceright{}"}
#: Characters a verbatim field (url, doi, eprint) cannot hold as they are: percent-encoded.
_UNSAFE_VERBATIM = re.compile(r"[\s{}\\\x00-\x1f\x7f]")

#: Combining accents and the LaTeX command that writes each (for ``ascii_only=True``).
_ACCENTS = {
    "\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0308": '"', "\u030a": "r ", "\u0327": "c ",
    "\u030c": "v ", "\u0304": "=", "\u0307": ".", "\u0306": "u ", "\u030b": "H ", "\u0328": "k ",
}
_LETTERS = {
    "ß": r"{\ss}", "ø": r"{\o}", "Ø": r"{\O}", "æ": r"{\ae}", "Æ": r"{\AE}", "œ": r"{\oe}", "Œ": r"{\OE}",
    "ł": r"{\l}", "Ł": r"{\L}", "å": r"{\aa}", "Å": r"{\AA}", "ı": r"{\i}",
    "–": "--", "—": "---", "‘": "`", "’": "'", "“": "``", "”": "''", "…": r"\ldots{}",
}

_PREPRINT = re.compile(r"\b(?:arxiv|corr|techrxiv|biorxiv|medrxiv|ssrn|preprint|e-?print)\b", re.IGNORECASE)
_JOURNAL = re.compile(
    r"\b(?:journal|transactions|trans\.|letters|magazine|review|surveys?|comput(?:ing)?\.? surv|jmlr|tpds|tocs|"
    r"taco|tkde|tpami|pvldb|vldb|proc\. vldb|nature|science|communications of the acm|cacm|ieee micro|"
    r"neurocomputing|parallel computing|concurrency and computation)\b",
    re.IGNORECASE,
)
_ORG = re.compile(
    r"\b(?:team|authors|inc|corp|corporation|foundation|labs?|project|contributors|community|university|"
    r"institute|research|google|microsoft|nvidia|meta|openai|deepmind)\b",
    re.IGNORECASE,
)
_STOPWORDS = {"a", "an", "the", "on", "of", "in", "for", "to", "towards", "toward", "with", "and", "via", "at"}
_KIND_NOTES = {
    "repo": "Code repository",
    "docs": "Documentation",
    "article": "Online article",
    "video": "Video",
    "slides": "Slides",
}


def escape(text: str, *, ascii_only: bool = False) -> str:
    """``text`` as the value of a BibTeX field: LaTeX specials escaped, whitespace collapsed.

    Any text gives a value strict parsers accept: braces that pair up become ``\\{``…``\\}``, a lone
    one ``\\textbraceleft{}``/``\\textbraceright{}``; control characters become spaces.
    """
    text = _printable(text)
    lone = _unpaired_braces(text)
    out = []
    for i, ch in enumerate(text):
        if i in lone:
            out.append(_LONE_BRACE[ch])
        else:
            out.append(_SPECIAL.get(ch, ch))
    text = "".join(out)
    return latex_accents(text) if ascii_only else text


def _printable(text: str) -> str:
    """Whitespace collapsed, control characters as spaces, lone surrogates as U+FFFD."""
    text = "".join(" " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch for ch in text)
    text = " ".join(text.split())
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _unpaired_braces(text: str) -> set[int]:
    """Positions of the ``{`` and ``}`` in ``text`` that have no partner (in nesting order)."""
    opened: list[int] = []
    lone: set[int] = set()
    for i, ch in enumerate(text):
        if ch == "{":
            opened.append(i)
        elif ch == "}":
            if opened:
                opened.pop()
            else:
                lone.add(i)
    lone.update(opened)
    return lone


def latex_accents(text: str) -> str:
    """Accented letters as LaTeX commands (``ü`` → ``{\\"u}``); letters it cannot write stay as they are."""
    out: list[str] = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        elif ch in _LETTERS:
            out.append(_LETTERS[ch])
        else:
            base, *marks = unicodedata.normalize("NFD", ch)
            if marks and len(marks) == 1 and marks[0] in _ACCENTS and ord(base) < 128:
                cmd = _ACCENTS[marks[0]]
                out.append(f"{{\\{cmd}{base}}}" if not cmd.endswith(" ") else f"{{\\{cmd[:-1]}{{{base}}}}}")
            else:
                out.append(ch)
    return "".join(out)


def _fold(text: str) -> str:
    """Lower-case ASCII letters and digits only (``Müller`` → ``muller``), for citation keys."""
    decomposed = unicodedata.normalize("NFKD", text)
    for src, dst in (("ß", "ss"), ("ø", "o"), ("Ø", "O"), ("æ", "ae"), ("œ", "oe"), ("ł", "l"), ("Ł", "L")):
        decomposed = decomposed.replace(src, dst)
    return re.sub(r"[^a-z0-9]", "", decomposed.encode("ascii", "ignore").decode("ascii").lower())


def _author_list(authors: Sequence[str]) -> tuple[list[str], bool]:
    """(names, and-others): "A B et al." and a trailing "et al." become BibTeX's ``and others``."""
    names: list[str] = []
    others = False
    for raw in authors:
        name = " ".join(raw.split())
        if is_et_al(name):
            others = True
            continue
        m = re.search(r",?\s+et\.?\s*al\.?$", name, re.IGNORECASE)
        if m:
            name, others = name[: m.start()], True
        if name:
            names.append(name)
    return names, others


def _author_field(authors: Sequence[str], *, ascii_only: bool) -> str | None:
    names, others = _author_list(authors)
    if not names:
        return None
    parts = []
    for name in names:
        value = escape(name, ascii_only=ascii_only)
        # "The TensorFlow Authors", "NVIDIA Corporation": an institution, not a first and a last name.
        # A name BibTeX would misread is kept whole too: "and" would split it into two people, and
        # more than two commas ("Last, Jr, First" is the most) is an error for strict parsers.
        if (" " in name and _ORG.search(name)) or _AND_WORD.search(value) or _top_level_commas(value) > 2:
            value = "{" + value + "}"
        parts.append(value)
    if others:
        parts.append("others")
    return " and ".join(parts)


_AND_WORD = re.compile(r"(?:^|\s)and(?:\s|$)", re.IGNORECASE)


def _top_level_commas(value: str) -> int:
    """Commas outside braces, the ones BibTeX's name parser splits on."""
    depth = commas = 0
    for ch in value:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            commas += 1
    return commas


def _surname(authors: Sequence[str]) -> str:
    names, _ = _author_list(authors)
    if not names:
        return ""
    first = names[0]
    if "," in first:  # "Huang, Yanping"
        return _fold(first.split(",", 1)[0])
    if _ORG.search(first):
        return _fold(first.split()[0]) if first.split() else ""
    return _fold(first.split()[-1]) if first.split() else ""


def _first_title_word(title: str) -> str:
    for word in re.split(r"[\s:/–—]+", title):  # "ZeRO-Offload" is one word
        folded = _fold(word)
        if folded and folded not in _STOPWORDS and not folded.isdigit():
            return folded
    return ""


def base_key(item: Citable) -> str:
    """``surname + year + first title word``, e.g. ``huang2019gpipe`` (before de-duplication).

    Without authors, ``first title word + year`` (``horovod``, ``zerooffload2021``).
    """
    surname, year, word = _surname(item.authors), str(item.year or ""), _first_title_word(item.title)
    key = f"{surname}{year}{word}" if surname else f"{word}{year}"
    if not key or not key[0].isalpha():
        key = "ref" + key
    return key


def citation_keys(items: Sequence[Citable]) -> list[str]:
    """One unique key per item; keys that would collide all get ``a``, ``b``, … in order."""
    bases = [base_key(i) for i in items]
    counts: dict[str, int] = {}
    for b in bases:
        counts[b] = counts.get(b, 0) + 1
    taken = {b for b, n in counts.items() if n == 1}
    seen: dict[str, int] = {}
    out = []
    for b in bases:
        if counts[b] == 1:
            out.append(b)
            continue
        n = seen.get(b, 0)
        while True:
            key = b + _suffix(n)
            n += 1
            if key not in taken:
                break
        seen[b] = n
        taken.add(key)
        out.append(key)
    return out


def _suffix(n: int) -> str:
    """a, b, …, z, aa, ab, …"""
    s = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        s = chr(ord("a") + r) + s
    return s


def venue_kind(venue: str | None) -> str:
    """``preprint``, ``journal`` or ``conference`` for a catalog venue string (None → preprint)."""
    v = (venue or "").strip()
    if not v or _PREPRINT.search(v):
        return "preprint"
    if _JOURNAL.search(v):
        return "journal"
    return "conference"


def _safe_url(url: str) -> str:
    """A verbatim value (URL, DOI, eprint) that cannot unbalance a BibTeX field.

    Braces, backslashes, whitespace and control characters are percent-encoded (UTF-8 bytes).
    """
    return _UNSAFE_VERBATIM.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode("utf-8")), url.strip())


def _identifiers(item: Citable) -> tuple[str | None, str | None]:
    """(arXiv id, DOI) known for an item, from its doc id or URL."""
    aid = arxiv_id(item.url) or (item.doc_id[6:] if item.doc_id.lower().startswith("arxiv:") else None)
    d = doi(item.url) or (item.doc_id[4:] if item.doc_id.lower().startswith("doi:") else None)
    if d and not aid:
        m = re.match(r"10\.48550/arxiv\.(.+)$", d, re.IGNORECASE)
        aid = m.group(1) if m else None
    return aid, d


def entry(item: Citable, key: str, *, ascii_only: bool = False) -> str:
    """One BibTeX entry for ``item`` under ``key``."""
    fields: list[tuple[str, str]] = []
    title = escape(item.title if (item.title or "").strip() else item.url, ascii_only=ascii_only)
    fields.append(("title", "{" + title + "}"))
    author = _author_field(item.authors, ascii_only=ascii_only)
    if author:
        fields.append(("author", author))
    aid, d = _identifiers(item)
    # only an http(s) address is one for a reader of the bibliography: not a file of your own
    # (file:///home/...), a local record's place in its file, nor javascript: or data:
    url = _safe_url(item.url) if is_linkable(item.url) else ""
    venue = (item.venue or "").strip()
    if item.kind == "paper":
        kind = venue_kind(venue)
        if kind == "conference":
            etype = "inproceedings"
            fields.append(("booktitle", escape(venue, ascii_only=ascii_only)))
        elif kind == "journal":
            etype = "article"
            fields.append(("journal", escape(venue, ascii_only=ascii_only)))
        else:
            etype = "misc"
            if venue and not aid:
                fields.append(("howpublished", escape(venue, ascii_only=ascii_only)))
    else:
        etype = "misc"
        if url:
            fields.append(("howpublished", "\\url{" + url.replace("%", "\\%").replace("#", "\\#") + "}"))
        if item.kind in _KIND_NOTES:
            fields.append(("note", _KIND_NOTES[item.kind]))
    if item.year:
        fields.append(("year", str(int(item.year))))
    if aid and item.kind == "paper":
        fields.append(("eprint", _safe_url(aid)))
        fields.append(("archivePrefix", "arXiv"))
    if d:
        fields.append(("doi", _safe_url(d)))
    if url:
        fields.append(("url", url))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{etype}{{{key},\n{body}\n}}\n"


def to_bibtex(items: Sequence[Citable], *, ascii_only: bool = False) -> str:
    """A BibTeX file (one entry per item, blank line between) for ``items``, keys unique.

    Args:
        items: :class:`~dmlqa.query.related.Related` results (or anything with the same fields).
        ascii_only: write accented letters as LaTeX commands instead of UTF-8.
    """
    keys = citation_keys(items)
    return "\n".join(entry(item, key, ascii_only=ascii_only) for item, key in zip(items, keys, strict=True))
