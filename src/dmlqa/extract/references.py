"""A paper's references, parsed, and the sentences of the paper that cite each of them.

The citation graph is built from these: a reference's arXiv id, DOI or title ties it to a document
of the knowledge base, its ``marker`` ("12", "Huang et al., 2019") ties it to the sentences of the
citing paper that point at it. Reference lists are written in a dozen styles and come out of PDFs
with their line breaks, hyphenation and page furniture, so everything here is a best effort that
never raises: an entry that cannot be read as a reference is counted in ``skipped`` and left out.
Only PDFs (papers) have lists worth parsing; any other document gives an empty result at once.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field, replace

from dmlqa.catalog.urls import arxiv_year
from dmlqa.extract.boundaries import spans  # the one sentence rule
from dmlqa.extract.reference_entries import (
    AUTHOR_YEAR,
    Entry,
    cut_trailing_junk,
    reference_zone,
    split_entries,
    zone_lines,
)
from dmlqa.extract.sentences import QUOTABLE, classify
from dmlqa.models import BLOCK_SEPARATOR, ET_AL, Document, Reference

#: Years a reference may have been published in.
MIN_YEAR, MAX_YEAR = 1950, 2030
#: Longest context sentence handed out (characters).
MAX_CONTEXT = 400
#: Bump on any change to what parsing gives: parsed lists are cached under it (dmlqa.pipeline.graph_index).
PARSER_VERSION = 1


@dataclass(frozen=True)
class ParsedReferences:
    """The reference list of one document: entries in list order (``ordinal`` 1..n), a citing
    sentence per ordinal where the in-text marker could be tied to it, and how many entries of the
    list were not references (footnotes, tables, appendix text) and were left out."""

    references: tuple[Reference, ...] = ()
    contexts: dict[int, str] = field(default_factory=dict)
    skipped: int = 0


def parse_references(doc: Document) -> ParsedReferences:
    """The references of a paper (a PDF document) and the sentences that cite them; empty for
    anything else. Never raises: a document this cannot read gives what could be read."""
    if doc.content_type != "pdf" or doc.is_card or not doc.blocks:
        return ParsedReferences()
    try:
        return _parse(doc)
    except Exception:  # a parser of arbitrary PDF text must not block a build
        return ParsedReferences(skipped=1)


def _parse(doc: Document) -> ParsedReferences:
    text = doc.text
    zone = reference_zone(text)
    if zone is None:
        return ParsedReferences()
    lines, skipped = zone_lines(doc, zone)
    style, entries, junk = split_entries(lines)
    skipped += junk
    refs: list[Reference] = []
    for entry in entries:
        body, cut = cut_trailing_junk(entry.text)
        skipped += cut
        ref = parse_entry(Entry(body, entry.label, entry.page), author_year=style == AUTHOR_YEAR)
        if ref is None:
            skipped += 1
            continue
        refs.append(_with_ordinal(ref, len(refs) + 1))
    if not refs:
        return ParsedReferences(skipped=skipped)
    return ParsedReferences(tuple(refs), find_contexts(doc, zone[0], refs, author_year=style == AUTHOR_YEAR),
                            skipped)


def _with_ordinal(ref: Reference, ordinal: int) -> Reference:
    return replace(ref, ordinal=ordinal)


# -- identifiers -----------------------------------------------------------------------------------------

_ARXIV_PATTERNS = (
    re.compile(r"arxiv\.\s?org/(?:abs|pdf)/\s?(\d{4}\.\d{4,5}|[a-z][a-z\-]*(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?",
               re.IGNORECASE),
    re.compile(r"arXiv\s*(?:preprint)?\s*(?:arXiv)?\s*[:.]?\s*(\d{4}\.\d{4,5}|[a-z][a-z\-]*(?:\.[A-Z]{2})?/\d{7})"
               r"(?:v\d+)?", re.IGNORECASE),
    re.compile(r"\babs/(\d{4}\.\d{4,5}|[a-z][a-z\-]*(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?"),
)
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+)")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"]+")
#: Dates that are not the publication's: "[Online; accessed 6-December-2017]", "Accessed: 2020-06-05",
#: and ACM's "[n. d.]" (no date).
_ACCESSED = re.compile(r"\[(?:Online|Accessed|Last accessed)[^\]]{0,80}\]|\[n\.\s?d\.\]|"
                       r"\b(?:Accessed|Retrieved|Last accessed)(?: on)?:?\s[\w ,\-]{0,40}?\d{4}", re.IGNORECASE)


_ARXIV_CATEGORY = re.compile(r"\[[a-z\-]+\.[A-Z]{2}\]")


def _arxiv_venue(m: re.Match[str]) -> str:
    said = m.group().lower()
    if said.startswith("arxiv preprint"):
        return "arXiv preprint"
    return "arXiv" if said.startswith("arxiv") and not said.startswith("arxiv.") else " "


def _arxiv_id(text: str) -> str | None:
    for pattern in _ARXIV_PATTERNS:
        m = pattern.search(text)
        if m:
            return m.group(1)
    return None


def _strip_tail(s: str) -> str:
    """A link or DOI without the punctuation the sentence put after it (a ")" only if unbalanced)."""
    while s and s[-1] in ".,;:]}'\"’”)":
        if s[-1] == ")" and s.count("(") >= s.count(")"):
            break
        s = s[:-1]
    return s


# -- names ---------------------------------------------------------------------------------------------

#: pypdf writes an accent as a spacing character before its letter ("Mart´ın"): put it back on.
_SPACING_ACCENTS = {"´": "\u0301", "`": "\u0300", "¨": "\u0308", "˘": "\u0306", "ˇ": "\u030c", "˜": "\u0303",
                    "^": "\u0302"}
_ACCENTED = re.compile(r"([´`¨˘ˇ˜^])\s?([A-Za-zı])")


def fix_accents(text: str) -> str:
    """Text with pypdf's detached accents joined to their letters ("Mart´ın" → "Martín")."""
    if not _ACCENTED.search(text):
        return text
    text = _ACCENTED.sub(lambda m: ("i" if m.group(2) == "ı" else m.group(2)) + _SPACING_ACCENTS[m.group(1)], text)
    return unicodedata.normalize("NFC", text)


_INITIAL_TOKEN = re.compile(r"[A-Z](?:\.?-?[A-Z]){0,3}|[A-Z]\.-[a-z]|[a-z]")  # "J", "M.J", "C.-C", "A.-r", "r"
_SURNAME_FIRST = re.compile(r"(?:(?:van|von|de|der|den|di|da|du|le|la|del|dos|ter)\s+)*[A-Z\u00c0-\u00de][^\s,.;:]*"
                            r"(?:[ \-][A-Z\u00c0-\u00de][^\s,.;:]*)?,\s*[A-Z]\.")
_NAME_SPLIT = re.compile(r"\s*,\s*(?:and\s+|&\s*)?|\s+and\s+|\s*&\s*|\s*;\s*")
_INITIALS = re.compile(r"^[A-Z]\.?(?:\s?-?[A-Z]\.?|-[a-z]\.?){0,3}$")
_PARTICLES = frozenset({"van", "von", "de", "der", "den", "di", "da", "du", "le", "la", "del", "dos", "ter"})
_ABBREVIATIONS = frozenset({"Jr", "Sr", "St", "Mr", "Dr", "Ph", "vs"})


def _author_cut(text: str, surname_first: bool) -> int:
    """Where the author names at the start of an entry end (the index of their closing period),
    or -1 when no period closes them in the first 3,000 characters (some lists name 70 authors).

    A period after an initial is part of a name ("Tom B. Brown", "A. J. Smola"), except at the end
    of "Surname, I." lists when no further initial follows ("Zheng, X. TensorFlow: ...").
    """
    for m in re.finditer(r"\.(?:\s+|(?=(?:19|20)\d\d[a-z]?\.))", text[:3000]):
        p = m.start()
        before = text[:p].rsplit(" ", 1)[-1].rsplit(",", 1)[-1]
        if before in _ABBREVIATIONS or before == "et":  # "et. al."
            continue
        if _INITIAL_TOKEN.fullmatch(before) or (len(before) == 1 and before.isupper()):  # "Д. Иванов"
            if surname_first and not re.match(r"-?[A-Z]\.|and\s|&", text[m.end():]):
                return p  # "..., and Zheng, X. TensorFlow: ..."
            continue
        return p
    return -1


def _unglue(segment: str) -> str:
    """Names the PDF text layer ran together, apart: "J.Chen,R.Monga,andR.Jozefowicz"."""
    segment = re.sub(r"(?<=[a-z,])and(?=[A-Z])", " and ", segment)
    segment = re.sub(r",(?=\S)", ", ", segment)
    return re.sub(r"(?<=[A-Z]\.)(?=[A-Z][a-z])", " ", segment)


def _names(segment: str, surname_first: bool) -> tuple[list[str], list[str]]:
    """(names as "First Last", surnames) of an author segment; "et al." kept as :data:`ET_AL`."""
    segment = _unglue(segment)
    et_al = re.search(r"\bet\.?\s*al\b\.?|\band others\b", segment) is not None
    segment = re.sub(r",?\s*(?:and\s+)?(?:\bet\.?\s*al\b\.?|\bothers\b)", "", segment)
    parts = [p.strip(" .") for p in _NAME_SPLIT.split(segment) if p.strip(" .")]
    names: list[str] = []
    surnames: list[str] = []
    if surname_first:
        pending = ""
        for p in parts:
            if _INITIALS.match(p) and pending:
                names.append(f"{p.rstrip()}{'' if p.endswith('.') else '.'} {pending}".replace("..", "."))
                surnames.append(pending)
                pending = ""
            else:
                if pending:
                    names.append(pending)
                    surnames.append(pending)
                pending = p
        if pending:
            names.append(pending)
            surnames.append(pending)
    else:
        for p in parts:
            words = p.split()
            i = len(words) - 1
            while i > 0 and words[i - 1].lower() in _PARTICLES:
                i -= 1
            names.append(p)
            surnames.append(" ".join(words[i:]) if words else p)
    keep = [(n, s) for n, s in zip(names, surnames, strict=True) if _is_name(n)]
    out = [n for n, _ in keep]
    if et_al and out:
        out.append(ET_AL)
    return out, [s for _, s in keep]


def _is_name(name: str) -> bool:
    words = name.split()
    return (0 < len(words) <= 6 and len(name) <= 60 and not re.search(r"[\d:()\[\]/@]", name)
            and sum(c.isalpha() for c in name) >= 2 and (not name[:1].islower() or words[0] in _PARTICLES))


def _looks_like_authors(segment: str) -> bool:
    """Is the text before the first period a list of names rather than a title ("Gloo: a collective
    communications library", "NVIDIA A100 Tensor Core GPU")?"""
    if not segment or len(segment) > 3000 or re.search(r"[:()\[\]\d?!\"“”]", segment):
        return False
    words = re.findall(r"[^\s,]+", segment)
    lower = [w for w in words if w[:1].islower() and w not in _PARTICLES and w not in ("and", "et", "al.", "al")]
    return len(lower) <= len(words) // 5


# -- an entry ------------------------------------------------------------------------------------------

_YEAR = re.compile(r"(?<![\d\-–/.:])((?:19[5-9]\d|20[0-3]\d))([a-z]?)(?![\d\-–])")
_LEADING_YEAR = re.compile(r"^\(?((?:19|20)\d\d)([a-z]?)\)?[.,]\s*")
_QUOTED = re.compile(r"[“\"]([^”\"]{8,300}?)[,.]?[”\"]")
_VENUE_END = re.compile(r",?\s*\b(?:pages|page|vol|volume|no|URL|doi)\b|,?\s*\bpp\.|,\s*\d+\s*[:(,]|,\s*\d+\s*$|"
                        r"\(\s*(?:19|20)\d\d[a-z]?\s*\)|,?\s*(?:19|20)\d\d[a-z]?\s*(?:[.,)]|$)", re.IGNORECASE)
_EDITORS = re.compile(r"(?:\b(?:editors?|eds?\.)|\((?:eds?\.|editors?)\))\s*,\s*")
_VENUE_HINT = re.compile(r"^(?:In\b|Proc|Advances|arXiv|CoRR|Journal|Trans|IEEE|ACM|USENIX|Technical|Tech\.|"
                         r"PhD|Master|Workshop|Conference|Symposium)", re.IGNORECASE)


def parse_entry(entry: Entry, *, author_year: bool = False) -> Reference | None:
    """One entry's fields, or None when it is no reference (no date, identifier or link, or not
    enough words: a table row, a page header, a stray line)."""
    raw = " ".join(entry.text.split())
    if len(raw) < 15 or len(raw) > 3000:
        return None
    arxiv = _arxiv_id(raw)
    doi_m = _DOI.search(raw)
    doi = _strip_tail(doi_m.group(1)) if doi_m else None
    url_m = _URL.search(raw)
    url = _strip_tail(url_m.group()) if url_m else None
    clean = _ACCESSED.sub(" ", raw)
    clean = _URL.sub(" ", clean)
    clean = _DOI.sub(" ", clean)
    for pattern in _ARXIV_PATTERNS:  # the id goes, the venue stays ("arXiv preprint arXiv:1909.08053")
        clean = pattern.sub(_arxiv_venue, clean)
    clean = _ARXIV_CATEGORY.sub(" ", clean)
    clean = fix_accents(" ".join(re.sub(r"\bdoi:\s*", " ", clean, flags=re.IGNORECASE).split()))
    if sum(map(str.isalpha, clean)) < 0.5 * sum(map(str.isalnum, clean)):
        return None  # a table row or a run of numbers

    year: int | None = None
    suffix = ""
    lead = _LEADING_YEAR.match(clean)
    if lead:  # ACM lists without authors: "2019. Gloo. https://..."
        year, suffix = int(lead.group(1)), lead.group(2)
        clean = clean[lead.end():]
    authors: list[str] = []
    surnames: list[str] = []
    title = ""
    rest = clean
    quoted = _QUOTED.search(clean)
    surname_first = _SURNAME_FIRST.match(clean) is not None
    if quoted and quoted.start() < 400:
        authors, surnames = _names(clean[: quoted.start()].strip(" ,."), surname_first)
        title, rest = quoted.group(1), clean[quoted.end():]
    else:
        cut = _author_cut(clean, surname_first)
        segment = _unglue(clean[:cut]) if cut >= 0 else ""
        if segment and _looks_like_authors(segment):
            authors, surnames = _names(segment, surname_first)
            rest = clean[cut + 1:].lstrip()
        after = _LEADING_YEAR.match(rest)
        if after:  # ACM: "Names. 2017. Title. Venue."
            year, suffix = int(after.group(1)), after.group(2)
            rest = rest[after.end():]
        title, rest = _title(rest)
    title = re.sub(r",?\s*(?:19|20)\d\d[a-z]?$", "", title).strip(" ,.;:")
    if not title and len(authors) == 1 and not surname_first:  # "Selene. https://..." names no author
        title, authors, surnames = authors[0], [], []
    if _VENUE_HINT.match(title) and not authors:
        rest, title = f"{title}. {rest}", ""
    if year is None:
        years = [(int(y), s) for y, s in _YEAR.findall(clean) if MIN_YEAR <= int(y) <= MAX_YEAR]
        if years:
            year, suffix = years[-1]
    if year is None and arxiv:
        year = arxiv_year(arxiv)  # "arXiv: 1812.06162." is dated by its id
    if year is not None and not MIN_YEAR <= year <= MAX_YEAR:
        year, suffix = None, ""
    if not (title or authors) or not (year or arxiv or doi or url or (entry.label and len(raw) >= 30)):
        return None  # a numbered entry is one by its label; an unnumbered one needs a date or an id
    marker = entry.label
    if author_year:
        marker = _author_year_marker(authors, surnames, year, suffix)
    return Reference(raw=raw, title=title[:400], authors=tuple(authors), year=year, venue=_venue(rest),
                     arxiv_id=arxiv, doi=doi, url=url, marker=marker, page=entry.page)


def _title(rest: str) -> tuple[str, str]:
    """(title, what follows) of the text after the authors: up to the next sentence end."""
    rest = rest.strip()
    if not rest:
        return "", ""
    for m in re.finditer(r"[.?!](?:\s+|$)", rest):
        p = m.start()
        if p < 3:
            continue
        tail = rest[m.end():]
        word = rest[:p].rsplit(" ", 1)[-1]
        if rest[p] == "." and (word in _ABBREVIATIONS or re.fullmatch(r"[A-Z]", word)):
            continue  # "vs." or an initial inside a title
        if rest[p] != "." and tail[:1].islower() and not _VENUE_HINT.match(tail):
            continue  # "Man is to computer programmer as woman is to homemaker? debiasing ..."
        return rest[: p + (rest[p] != ".")].strip(), tail
    return rest, ""


_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z0-9])")
_MONTH_ONLY = re.compile(r"(?:\d{1,2}\s+)?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?(?:\s+\d{1,2})?",
                         re.IGNORECASE)


def _venue(rest: str) -> str:
    """The journal, proceedings or preprint server named after the title ("In OSDI, 2019" → "OSDI")."""
    v = rest.strip(" .,;")
    v = re.sub(r"^In(?::?\s+|(?=[A-Z][a-z]))", "", v)  # "In Proceedings", "InProceedings" (glued text)
    editors = _EDITORS.search(v[:400])
    if editors:  # "In H. Wallach, ..., editors, Advances in ..." names the editors first
        v = v[editors.end():]
    m = _VENUE_END.search(v)
    if m:
        v = v[: m.start()]
    m = _SENTENCE_END.search(v)
    while m:
        word = v[: m.start()].rsplit(" ", 1)[-1]
        if len(word) >= 4 and word not in ("Proc", "Conf", "Symp", "Intl", "Trans"):
            v = v[: m.start()]
            break
        m = _SENTENCE_END.search(v, m.end())
    v = " ".join(v.split()).strip(" .,;:(")[:200]
    return "" if _MONTH_ONLY.fullmatch(v) else v


def _author_year_marker(authors: list[str], surnames: list[str], year: int | None, suffix: str) -> str:
    """How an author-year text cites the entry: "Huang et al., 2019", "Huang and Cheng, 2019a"."""
    if not surnames or year is None:
        return ""
    named = len(surnames)
    when = f"{year}{suffix}"
    if named >= 3 or ET_AL in authors:
        return f"{surnames[0]} et al., {when}"
    if named == 2:
        return f"{surnames[0]} and {surnames[1]}, {when}"
    return f"{surnames[0]}, {when}"


# -- citing sentences ------------------------------------------------------------------------------------

_BRACKET_CITE = re.compile(r"\[(\d{1,4}(?:\s*[,;–—\-]\s*\d{1,4}){0,40})\]")
_SUPERSCRIPT_CITE = re.compile(r"\b([a-z]{4,})(\d{1,3}(?:[,–\-]\d{1,3}){0,10})(?=[\s.,;:)]|$)")
_NAME_WORD = r"[A-Z\u00c0-\u00de][\w'’\-]+"
_BARE_YEAR = re.compile(r"\s*((?:19|20)\d\d)([a-z]?)\s*$")
_AY_PAREN = re.compile(r"\(([^()]{4,400})\)")
_AY_ONE = re.compile(rf"({_NAME_WORD}(?:\s+{_NAME_WORD})?)(?:\s+et\s+al\.?|\s+(?:and|&)\s+{_NAME_WORD}"
                     rf"(?:\s+{_NAME_WORD})?)?,?\s+((?:19|20)\d\d)([a-z]?)\b((?:\s*,\s*(?:(?:19|20)\d\d)?[a-z]?\b)*)")
_AY_NARRATIVE = re.compile(rf"({_NAME_WORD})(?:\s+et\s+al\.?|\s+(?:and|&)\s+{_NAME_WORD})?\s*"
                           rf"\(\s*((?:19|20)\d\d)([a-z]?)((?:\s*[,;]\s*(?:(?:19|20)\d\d)?[a-z]?\b)*)\s*\)")


def _surname_key(name: str) -> str:
    """A surname as citations and lists both spell it: last word, accents and case folded."""
    last = name.split()[-1] if name.split() else ""
    return "".join(c for c in unicodedata.normalize("NFKD", last).lower() if "a" <= c <= "z")


def find_contexts(doc: Document, body_end: int, refs: list[Reference], *, author_year: bool) -> dict[int, str]:
    """For each reference ordinal, the first sentence before the reference list that cites it, a
    prose sentence before a table row or a caption that cites it too.

    The markers are found in the text itself and only the sentence around each is cut out (with the
    sentence rule of :mod:`~dmlqa.extract.sentences`), so a body of any size costs linear time.
    """
    texts = _body_texts(doc, body_end)
    if author_year:
        keys: dict[tuple[str, str], list[int]] = {}
        for r in refs:
            if r.marker and r.year:
                surname = r.marker.split(" et al.")[0].split(" and ")[0].split(",")[0]
                suffix = r.marker.rsplit(str(r.year), 1)[-1]
                keys.setdefault((_surname_key(surname), f"{r.year}{suffix}"), []).append(r.ordinal)
                if suffix:
                    keys.setdefault((_surname_key(surname), str(r.year)), []).append(r.ordinal)
        hits = [(i, ordinal, pos) for i, t in enumerate(texts) for ordinal, pos in _author_year_cites(t, keys)]
    else:
        by_marker = {r.marker: r.ordinal for r in refs if r.marker}
        hits = []
        bracketed = False
        for i, t in enumerate(texts):
            for m in _BRACKET_CITE.finditer(t):
                numbers = _numbers(m.group(1))
                bracketed = bracketed or bool(numbers)
                hits += [(i, by_marker[str(n)], m.start()) for n in numbers if str(n) in by_marker]
        if not bracketed:
            hits = _superscript_hits(doc, texts, by_marker)
    prose: dict[int, str] = {}
    other: dict[int, str] = {}
    tries: Counter[int] = Counter()
    for i, ordinal, pos in sorted(hits, key=lambda h: (h[0], h[2])):  # reading order
        tries[ordinal] += 1
        if ordinal in prose or tries[ordinal] > _MAX_TRIES:
            continue
        sentence, quotable = _sentence_at(texts[i], pos, doc.title)
        if sentence:
            (prose if quotable else other).setdefault(ordinal, sentence)
    return {**other, **prose}


#: Sentences looked at per reference for a prose one (a table citing it a thousand times costs no more).
_MAX_TRIES = 8


def _body_texts(doc: Document, body_end: int) -> list[str]:
    """The text of each block before the reference list."""
    out: list[str] = []
    offset = 0
    for block in doc.blocks:
        if offset >= body_end:
            break
        out.append(block.text[: body_end - offset])
        offset += len(block.text) + len(BLOCK_SEPARATOR)
    return out


def _sentence_at(text: str, pos: int, title: str) -> tuple[str, bool]:
    """(the sentence of ``text`` around ``pos``, whitespace collapsed and at most 400 characters;
    whether it reads as prose). Only the 1,200 characters around ``pos`` are split into sentences."""
    lo, hi = max(0, pos - 600), min(len(text), pos + 600)
    for s, e in spans(text[lo:hi], lo):
        if s <= pos < e:
            sentence = " ".join(text[s:e].split())
            return _window(sentence, len(" ".join(text[s:pos].split()))), classify(sentence, title=title) in QUOTABLE
    return "", False


def _numbers(group: str) -> list[int]:
    """The reference numbers of "3, 12", "10–14", "12,13" (a range of at most 50)."""
    out: list[int] = []
    for piece in re.split(r"[,;]", group):
        m = re.fullmatch(r"\s*(\d+)\s*(?:[–—\-]\s*(\d+))?\s*", piece)
        if not m:
            return []
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        if b < a or b - a > 50:
            return []
        out.extend(range(a, b + 1))
    return out


def _author_year_cites(text: str, keys: dict[tuple[str, str], list[int]]) -> list[tuple[int, int]]:
    """(ordinal, position) of the author-year citations in a text that name exactly one entry."""
    hits: list[tuple[str, str, int]] = []
    for paren in _AY_PAREN.finditer(text):
        name = ""
        for part in paren.group(1).split(";"):
            bare = _BARE_YEAR.match(part)
            if bare and name:  # "(Paszke et al., 2017; 2019)": the same authors again
                hits.append((name, bare.group(1) + bare.group(2), paren.start()))
            for m in _AY_ONE.finditer(part):
                name = m.group(1)
                hits += [(name, y, paren.start()) for y in _years(m.group(2), m.group(3), m.group(4))]
    for m in _AY_NARRATIVE.finditer(text):
        hits += [(m.group(1), y, m.start()) for y in _years(m.group(2), m.group(3), m.group(4))]
    out: list[tuple[int, int]] = []
    for name, year, pos in hits:
        ordinals = keys.get((_surname_key(name), year), [])
        if len(ordinals) == 1:
            out.append((ordinals[0], pos))
    return out


def _years(year: str, suffix: str, more: str) -> list[str]:
    """"2019", "a" and ", b, 2020" → ["2019a", "2019b", "2020"]."""
    out = [year + suffix]
    for piece in re.findall(r"((?:19|20)\d\d)?([a-z]?)", more or ""):
        if piece[0]:
            year = piece[0]
            out.append(year + piece[1])
        elif piece[1]:
            out.append(year + piece[1])
    return out


def _superscript_hits(doc: Document, texts: list[str], by_marker: dict[str, int]) -> list[tuple[int, int, int]]:
    """Citations printed as superscripts come out as digits glued to a word ("parallelism12"): used
    only when the glued word is a word the paper writes on its own too, and only when the paper has
    at least three of them (else "resnet50" or "fp16" would read as citations)."""
    words = set(re.findall(r"\b[a-z]{4,}\b", doc.text))
    hits: list[tuple[int, int, int]] = []
    for i, t in enumerate(texts):
        for m in _SUPERSCRIPT_CITE.finditer(t):
            if m.group(1) in words:
                hits += [(i, by_marker[str(n)], m.start()) for n in _numbers(m.group(2)) if str(n) in by_marker]
    return hits if len(hits) >= 3 else []


def _window(text: str, pos: int) -> str:
    """The sentence, or the ≤ 400 characters of it around the citation at ``pos``."""
    text = " ".join(text.split())
    if len(text) <= MAX_CONTEXT:
        return text
    start = max(0, min(pos - MAX_CONTEXT // 2, len(text) - MAX_CONTEXT + 2))
    piece = text[start : start + MAX_CONTEXT - 2]
    if start > 0:
        piece = "…" + piece.split(" ", 1)[-1]
    if start + MAX_CONTEXT - 2 < len(text):
        piece = piece.rsplit(" ", 1)[0] + "…"
    return piece[:MAX_CONTEXT]
