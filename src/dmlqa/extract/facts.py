"""Facts a body states about itself: publication year and authors, and how they meet the catalog's.

Kept in one module because the same rules serve the HTML and PDF extractors and the build (a
stored document refreshed with new catalog facts): a year outside 1950..next year is a misreading,
"Copyright" or "admin" is no author, and the catalog's facts win unless it has none.
"""

from __future__ import annotations

import datetime
import re
import unicodedata
from collections.abc import Iterable, Sequence

from dmlqa.catalog.urls import arxiv_year
from dmlqa.extract.text import clean_text
from dmlqa.models import Resource, is_et_al

#: Publication years outside ``MIN_YEAR`` .. next year are misreadings (a page count, a version).
MIN_YEAR = 1950


def max_year() -> int:
    """The latest plausible publication year: next year (proceedings are dated ahead)."""
    return datetime.date.today().year + 1


def valid_year(value: object) -> int | None:
    """``value`` as a publication year (an int or a 4-digit string in 1950..next year), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and re.fullmatch(r"\s*\d{4}\s*", value):
        value = int(value)
    if isinstance(value, int) and MIN_YEAR <= value <= max_year():
        return value
    return None


_YEAR_IN = re.compile(r"(?<!\d)(1[89]\d\d|2\d\d\d)(?!\d)")


def year_of(date: str | None) -> int | None:
    """The year of a date as pages write it ("2020/05/13", "2020-05-13T10:00Z", "13 May 2020")."""
    if not date:
        return None
    m = _YEAR_IN.search(date)
    return valid_year(int(m.group(1))) if m else None


_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
#: The stamp arXiv prints up the left margin of page 1: "arXiv:1910.02054v3 [cs.LG] 13 May 2020".
_ARXIV_STAMP = re.compile(
    r"arXiv:\s*(?P<id>\d{4}\.\d{4,5}|[a-z][a-z.\-]*/\d{7})(?:v\d+)?\s*\[[^\]\n]{1,24}\]"
    rf"(?:\s*(?P<day>\d{{1,2}})\s+(?:{_MONTHS})[a-z]*\.?\s+(?P<year>\d{{4}}))?",
    re.IGNORECASE,
)
#: "© 2021 Association for Computing Machinery", "Copyright 2020 by the author(s)", "c© 2018".
_COPYRIGHT_YEAR = re.compile(r"(?:©|\bCopyright\b)\s*(?:©\s*)?(?:(?:19|20)\d\d\s*[-–]\s*)?((?:19|20)\d\d)\b")
#: A line naming a venue: "33rd Conference on ... (NeurIPS 2019)", "SC20, November 9-19, 2020".
_VENUE_WORD = re.compile(r"\b(?:Conference|Symposium|Proceedings|Workshop|Transactions|Journal)\b")
_VENUE_ACRONYM = re.compile(
    r"\b(?:NeurIPS|NIPS|ICML|ICLR|MLSys|SysML|OSDI|SOSP|NSDI|EuroSys|PPoPP|ASPLOS|ISCA|MICRO|HPCA|VLDB|"
    r"SIGMOD|KDD|HPDC|IPDPS|SoCC|ATC|SC|CVPR|ICCV|ECCV|AAAI|IJCAI|ACL|EMNLP|NAACL|SIGCOMM|FAST|ICS|CLUSTER)"
    r"\s?['’‘]?\s?(?P<yy>\d{2}|\d{4})\b"
)
#: Producers that print a page rather than typeset a paper: their creation date is the print date.
_PRINTERS = re.compile(r"skia|chrom|print|quartz|wkhtml|safari|firefox|mozilla|webkit|cairo|electron", re.I)


def pdf_year(first_page: str, *, created: str | None = None, producer: str = "") -> int | None:
    """The publication year a PDF states on its first page, else (if plausible) its creation year.

    In order: arXiv's margin stamp (the date of that version; its id when the date is unreadable), a
    copyright line, a venue line ("SC20, November 9-19, 2020", "(NeurIPS 2019)"), and last the
    metadata's creation date, only when the producer typesets rather than prints and no year on the
    page contradicts it (a later year mentioned, or one more than two years after every year named).
    """
    m = _ARXIV_STAMP.search(first_page)
    if m:
        year = valid_year(int(m.group("year"))) if m.group("year") else None
        year = year or arxiv_year(m.group("id"))
        if year:
            return year
    for m in _COPYRIGHT_YEAR.finditer(first_page):
        if year := valid_year(int(m.group(1))):
            return year
    for line in first_page.splitlines():
        if "et al" in line:  # a citation, not the paper's own venue
            continue
        acronym = _VENUE_ACRONYM.search(line)
        if acronym is None and not _VENUE_WORD.search(line):
            continue
        years = [y for y in map(int, re.findall(r"(?<!\d)((?:19|20)\d\d)(?!\d)", line)) if valid_year(y)]
        if years:
            return years[0]
        if acronym is not None and len(acronym.group("yy")) == 2 and (year := valid_year(2000 + int(acronym["yy"]))):
            return year
    year = year_of(created)
    if year is None or _PRINTERS.search(producer or ""):
        return None
    named = [y for y in map(int, _YEAR_IN.findall(first_page)) if valid_year(y)]
    if named and (max(named) > year or year > max(named) + 2):
        return None
    return year


#: Author strings that name no person: placeholders of authoring tools and page furniture.
_JUNK_AUTHOR_WORDS = frozenset({
    "copyright", "admin", "administrator", "unknown", "user", "anonymous", "microsoft", "owner", "root",
    "guest", "default", "none", "null", "n/a", "untitled", "author", "authors", "editor", "webmaster",
})
_MAX_AUTHOR_CHARS = 60
#: Footnote marks after names in PDF metadata ("Aaron Harlap†").
_NAME_MARKS = re.compile(r"[†‡*§¶⋆∗]+")
_ET_AL = re.compile(r"(?:,?\s*(?:and\s+)?(?:et\.?\s*al\.?|others))\s*$", re.IGNORECASE)


def clean_author(name: str) -> str | None:
    """One author's name, tidied ("Rajbhandari, Samyam" → "Samyam Rajbhandari"), or None for junk.

    Junk: placeholder words ("Copyright", "Admin", "user", "Unknown", "Microsoft Word - x.docx"), e-mail
    addresses, URLs, anything with digits or LaTeX markup, one letter, a login, or over 60 characters.
    """
    n = _NAME_MARKS.sub("", clean_text(name).replace("~", " "))
    n = _ET_AL.sub("", " ".join(n.split())).strip(" ,;:")
    n = re.sub(r"^by\s+", "", n, flags=re.IGNORECASE)
    if "," in n:
        last, _, first = n.partition(",")
        if "," in first or not first.strip() or len(last.split()) > 3:
            return None
        n = f"{first.strip()} {last.strip()}"
    words = n.split()
    lowered = n.lower()
    if (
        not words
        or len(n) > _MAX_AUTHOR_CHARS
        or len(words) > 6
        or sum(c.isalpha() for c in n) < 2
        or re.search(r"[\d@\\{}$^_|<>#%=/]|://|\bwww\.|\.(?:com|org|net|edu|io)\b", n)
        or "©" in n
        or "rights reserved" in lowered
        or _JUNK_AUTHOR_WORDS & set(lowered.replace(".", " ").split())
        or (len(words) == 1 and (n.islower() or len(n) < 3))
    ):
        return None
    return n


def clean_authors(names: Iterable[str]) -> tuple[str, ...]:
    """The names that are names (see :func:`clean_author`), tidied, each once, in order."""
    out: dict[str, str] = {}
    for raw in names:
        n = clean_author(raw)
        if n is not None:
            out.setdefault(n.casefold(), n)
    return tuple(out.values())


def split_authors(text: str) -> list[str]:
    """An author field as one string ("A B; C D", "A B, C D and E F", "Smith, John") → its names.

    Semicolons separate names when present (each may be "Last, First"); otherwise commas, " and " and
    "&" do, except in a lone "Last, First".
    """
    text = " ".join(text.split())
    if ";" in text:
        return [p for p in text.split(";") if p.strip()]
    last, comma, first = text.partition(",")
    if (
        comma
        and "," not in first
        and not re.search(r"\s(?:and|&)\s", text)
        and len(last.split()) == 1
        and 1 <= len(first.split()) <= 2
    ):
        return [text]
    return [p for p in re.split(r",|\s+and\s+|\s*&\s*", text) if p.strip()]


def _person_key(name: str) -> tuple[str, str]:
    """(surname, first initial), accent- and case-free: "Y. Huang" and "Yanping Huang" share a surname."""
    n = unicodedata.normalize("NFKD", _ET_AL.sub("", name)).encode("ascii", "ignore").decode().lower()
    if "," in n:
        last, _, first = n.partition(",")
        n = f"{first} {last}"
    words = re.findall(r"[a-z][a-z'\-]*", n)
    if not words:
        return ("", "")
    return (words[-1], words[0][0] if len(words) > 1 else "")


def same_author(a: str, b: str) -> bool:
    """True when two spellings name one person (same surname; first initials agree where both exist)."""
    ka, kb = _person_key(a), _person_key(b)
    return bool(ka[0]) and ka[0] == kb[0] and (not ka[1] or not kb[1] or ka[1] == kb[1])


def merge_authors(catalog: Sequence[str], extracted: Sequence[str]) -> tuple[str, ...]:
    """The author list of a document: the catalog's, unless it has none, or the body names more
    authors in a list that starts with the catalog's first author or contains all of the catalog's
    (lists often write only "A et al."). The one place this rule lives."""
    catalog, extracted = tuple(catalog), tuple(extracted)
    named = [a for a in catalog if not is_et_al(a)]
    if not extracted:
        return catalog
    if not named:
        return extracted
    if len(extracted) > len(named) and (
        same_author(extracted[0], named[0]) or all(any(same_author(c, e) for e in extracted) for c in named)
    ):
        return extracted
    return catalog


def merge_facts(
    resource: Resource, *, year: int | None, authors: Sequence[str]
) -> tuple[int | None, tuple[str, ...]]:
    """(year, authors) of a document from its catalog entry and what its own text states.

    The catalog's year wins when it has a valid one (a person chose it; a PDF's date may be a later
    version's); otherwise the body's validated year. Authors as :func:`merge_authors` decides.
    """
    return (
        valid_year(resource.year) or valid_year(year),
        merge_authors(resource.authors, clean_authors(authors)),
    )

