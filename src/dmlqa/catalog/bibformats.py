"""Reference-manager exports read into typed entries: BibTeX (``.bib``) and CSL-JSON (``.json``).

A Zotero "Export with files" writes ``file = {Full Text PDF:files/12/x.pdf:application/pdf}``
(paths relative to the ``.bib``); Better BibTeX writes absolute paths and ``eprint``/``archivePrefix``;
JabRef and Mendeley write their own spellings of the same field. :func:`read_library` reads any of
them into :class:`LibraryEntry` records (title, every author, year, venue, DOI, arXiv id, URL and the
attached files) and :class:`EntryProblem` rows for what it skipped or ignored, naming each entry by
its file, line and key.

BibTeX is parsed by bibtexparser v2, not by hand: its splitter isolates a broken entry (the
entries after it are still read) and flags duplicate keys; its middlewares normalise field names,
resolve ``@string`` macros, split co-authors (``{Barnes and Noble}`` stays one name) and decode
LaTeX (``M{\\"u}ller`` → ``Müller``, ``{B}races`` → ``Braces``). Verbatim fields (``file``, ``url``,
``doi``, ``eprint``) are read before decoding: a Windows path ``C\\:\\\\Users`` or a URL's ``%20``
is not LaTeX. A duplicate key keeps the first entry, as biber does; the later one is reported.

CSL-JSON (what Zotero, Mendeley and citeproc tools export) is a list of objects with ``id`` and
``type``; it carries no attachments, so its entries are fetched from their DOI, arXiv id or URL.
A ``.json`` file that is not CSL-JSON is refused with what was found instead.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath
from typing import Any
from urllib.parse import quote, unquote

from dmlqa.catalog.urls import address, arxiv_id, bare_arxiv_id, canonicalize, guess_kind
from dmlqa.errors import LibraryError
from dmlqa.models import ET_AL

__all__ = ["EntryProblem", "LibraryEntry", "ParsedLibrary", "read_library"]

#: The suffixes ``dmlqa add`` reads as a library, and the format of each.
LIBRARY_FORMATS = {".bib": "BibTeX", ".json": "CSL-JSON"}
#: The years an entry may give (anything else is a typo: "20019", "2O19").
YEAR_MIN, YEAR_MAX = 1000, 2100

_BIB_PAPER_TYPES = {
    "article", "inproceedings", "conference", "incollection", "inbook", "book", "phdthesis", "mastersthesis",
    "thesis", "techreport", "report", "proceedings", "unpublished", "preprint", "collection",
}
_CSL_PAPER_TYPES = {
    "article", "article-journal", "paper-conference", "chapter", "book", "thesis", "report", "manuscript",
    "preprint", "dataset", "standard", "patent",
}
_CSL_VIDEO_TYPES = {"motion_picture", "broadcast", "video"}
#: ``arXiv:1910.02054``, ``arXiv preprint arXiv:1910.02054``, ``arXiv:cs/0112017v2`` in a note or journal.
_ARXIV_IN_TEXT = re.compile(
    r"\barxiv(?:\s+preprint)?\s*[:\s]\s*(?:arxiv\s*:\s*)?(\d{4}\.\d{4,5}|[a-z][a-z-]*(?:\.[A-Z]{2})?/\d{7})",
    re.IGNORECASE,
)
_DOI = re.compile(r"10\.\d{4,9}/\S+")
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi\s*:\s*)", re.IGNORECASE)
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_BIB_HEAD = re.compile(r"@\s*([A-Za-z]+)\s*[{(]\s*([^,\s{}()]*)")
_TAG = re.compile(r"</?[a-z][a-z0-9]*(?:\s[^<>]*)?>", re.IGNORECASE)


@dataclass(frozen=True)
class LibraryEntry:
    """One reference of a library, with the facts a document or a catalog entry needs.

    ``attachments`` are the files the entry names, absolute, in the order given (they may not
    exist: the caller checks). ``doi`` and ``arxiv_id`` are bare identifiers (no URL, no version).
    """

    key: str
    where: str  # "library.bib:12 (key)": how messages name the entry
    title: str = ""
    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    url: str | None = None  # the entry's own web address, as the library wrote it
    kind: str = "article"
    attachments: tuple[Path, ...] = field(default=(), compare=False)

    def _urls(self, *, canonical: bool) -> tuple[str, ...]:
        urls = []
        if self.arxiv_id:
            urls.append(f"https://arxiv.org/abs/{self.arxiv_id}")
        if self.doi:
            urls.append(doi_url(self.doi))
        if self.url:
            urls.append(canonicalize(self.url) if canonical else self.url)
        return tuple(dict.fromkeys(urls))

    @property
    def identity_urls(self) -> tuple[str, ...]:
        """Canonical URLs naming the work, preferred first: arXiv, then DOI, then the entry's URL."""
        return self._urls(canonical=True)

    @property
    def addresses(self) -> tuple[str, ...]:
        """The URLs to fetch the work from, in the same order (the entry's own URL as written)."""
        return self._urls(canonical=False)

    @property
    def citation_url(self) -> str | None:
        """The URL a citation of the work shows (and the catalog keys it by), or None."""
        urls = self.identity_urls
        return urls[0] if urls else None

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "where": self.where, "title": self.title, "authors": list(self.authors),
                "year": self.year, "venue": self.venue, "doi": self.doi, "arxiv_id": self.arxiv_id,
                "url": self.url, "kind": self.kind}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LibraryEntry:
        year = d.get("year")
        return cls(
            key=str(d.get("key") or ""), where=str(d.get("where") or ""), title=str(d.get("title") or ""),
            authors=tuple(str(a) for a in d.get("authors") or ()),
            year=year if isinstance(year, int) and not isinstance(year, bool) else None,
            venue=d.get("venue") or None, doi=d.get("doi") or None, arxiv_id=d.get("arxiv_id") or None,
            url=d.get("url") or None, kind=str(d.get("kind") or "article"),
        )


@dataclass(frozen=True)
class EntryProblem:
    """An entry skipped (or a fact of a kept entry ignored), and why, in words a user can act on."""

    where: str
    reason: str


@dataclass(frozen=True)
class ParsedLibrary:
    """What :func:`read_library` found: the good entries, the skipped ones, and notes on kept ones."""

    path: Path
    format: str  # "BibTeX" | "CSL-JSON"
    entries: tuple[LibraryEntry, ...]
    skipped: tuple[EntryProblem, ...] = ()
    notes: tuple[EntryProblem, ...] = ()


def doi_url(d: str) -> str:
    """The canonical doi.org URL of a bare DOI (characters a URL path cannot hold are escaped)."""
    return canonicalize("https://doi.org/" + quote(d, safe="/:@!$&'()*+,;=-._~"))


def normal_doi(value: str) -> str | None:
    """A bare DOI from ``10.x/y``, ``doi:10.x/y`` or a doi.org URL; None when it is none of them."""
    v = unquote(_DOI_PREFIX.sub("", value.strip())).strip().rstrip(".")
    return v if _DOI.fullmatch(v) else None


def read_library(path: Path, *, max_bytes: int | None = None) -> ParsedLibrary:
    """Read a BibTeX (``.bib``) or CSL-JSON (``.json``) export.

    Raises :class:`~dmlqa.errors.LibraryError` when the file as a whole cannot be read as one
    (unreadable, too large, not BibTeX, not CSL-JSON, no entry at all); a bad entry is one
    :class:`EntryProblem` of the result, never an exception.
    """
    path = Path(path)
    fmt = LIBRARY_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise LibraryError(f"{path}: not a library (expected .bib or .json, got {path.suffix or 'no suffix'})")
    try:
        size = path.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise LibraryError(f"{path}: too large ({size} bytes; the limit is fetch.max_bytes = {max_bytes})")
        data = path.read_bytes()
    except OSError as exc:
        raise LibraryError(f"{path}: cannot read file: {exc.strerror or exc}") from exc
    notes: list[EntryProblem] = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # Old JabRef and BibDesk files are Latin-1; reading them so beats refusing the whole library.
        text = data.decode("latin-1")
        notes.append(EntryProblem(path.name, f"not UTF-8 (byte {exc.start + 1}): read as Latin-1"))
    if fmt == "BibTeX":
        entries, skipped, more = _parse_bibtex(text, path)
    else:
        entries, skipped, more = _parse_csl_json(text, path)
    notes += more
    if not entries:
        first = f" ({skipped[0].where}: {skipped[0].reason})" if skipped else ""
        raise LibraryError(f"{path}: no usable {fmt} entry{first}")
    return ParsedLibrary(path, fmt, tuple(entries), tuple(skipped), tuple(notes))


# -- BibTeX ----------------------------------------------------------------------------------------

#: Fields read as written (before LaTeX decoding): paths, addresses and identifiers are not LaTeX.
_VERBATIM = ("file", "url", "doi", "eprint", "eprinttype", "archiveprefix", "arxivid", "howpublished", "pdf")
#: Fields read as text, LaTeX decoded.
_PROSE = ("title", "journaltitle", "journal", "booktitle", "eventtitle", "note", "year", "date")


def _parse_bibtex(text: str, path: Path) -> tuple[list[LibraryEntry], list[EntryProblem], list[EntryProblem]]:
    import bibtexparser
    from bibtexparser import middlewares as mw
    from bibtexparser.model import DuplicateBlockKeyBlock, DuplicateFieldKeyBlock, Entry, ParsingFailedBlock

    # bibtexparser logs every broken block as a warning; they are reported here, entry by entry.
    logging.getLogger("bibtexparser").setLevel(logging.ERROR)
    if "@" not in text:
        raise LibraryError(f"{path}: not BibTeX: no @entry in it")
    name = path.name
    try:
        lib = bibtexparser.parse_string(text, append_middleware=[mw.NormalizeFieldKeys()])
        lib = mw.SeparateCoAuthors().transform(lib)
    except Exception as exc:  # noqa: BLE001 - the parser's own bug must not lose the user's add
        raise LibraryError(f"{path}: cannot parse BibTeX: {exc}") from exc
    decoder = mw.LatexDecodingMiddleware()
    entries: list[LibraryEntry] = []
    skipped: list[EntryProblem] = []
    notes: list[EntryProblem] = []
    first_line: dict[str, int] = {}
    for block in lib.blocks:
        line = (block.start_line or 0) + 1
        if isinstance(block, DuplicateBlockKeyBlock):
            if isinstance(block.ignore_error_block, Entry):
                where = f"{name}:{line} ({block.key})"
                also = first_line.get(block.key)
                skipped.append(EntryProblem(where, f"duplicate key {block.key}" + (
                    f" (first at line {also})" if also else "") + ": the first entry with this key is kept"))
            continue
        if isinstance(block, DuplicateFieldKeyBlock):
            e = block.ignore_error_block
            where = f"{name}:{line} ({getattr(e, 'key', '?')})"
            skipped.append(EntryProblem(where, f"field {', '.join(sorted(block.duplicate_keys))} given twice"))
            continue
        if isinstance(block, ParsingFailedBlock):
            head = _BIB_HEAD.search(block.raw or "")
            where = f"{name}:{line}" + (f" ({head.group(2)})" if head and head.group(2) else "")
            skipped.append(EntryProblem(where, f"not a valid BibTeX entry: {_failure_reason(block.error)}"))
            continue
        if not isinstance(block, Entry):
            continue  # @string, @preamble, @comment, text between entries
        first_line.setdefault(block.key, line)
        where = f"{name}:{line} ({block.key})"
        entry, entry_notes = _bib_entry(block, where, path.parent, decoder)
        notes += entry_notes
        entries.append(entry)
    return entries, skipped, notes


def _failure_reason(error: Exception) -> str:
    reason = getattr(error, "abort_reason", None) or str(error) or type(error).__name__
    return " ".join(str(reason).split())[:200]


def _decode(decoder: Any, values: dict[str, str]) -> dict[str, str]:
    """LaTeX-decoded ``values`` through bibtexparser's decoding middleware (a value it fails on stays raw)."""
    from bibtexparser.library import Library
    from bibtexparser.model import Entry, Field

    scratch = Entry("decode", "decode", [Field(k, v) for k, v in values.items()])
    done = decoder.transform(Library([scratch]))
    block = done.entries[0] if done.entries else None
    out = dict(values)
    if block is not None:
        out.update({f.key: f.value for f in block.fields if isinstance(f.value, str)})
    return {k: " ".join(v.replace("\u00a0", " ").split()) for k, v in out.items()}


def _bib_entry(entry: Any, where: str, base: Path, decoder: Any) -> tuple[LibraryEntry, list[EntryProblem]]:
    """The entry a parsed BibTeX block makes, and notes on what of it was ignored."""
    from bibtexparser.middlewares.names import InvalidNameError, parse_single_name_into_parts

    notes: list[EntryProblem] = []
    fields = {f.key: f.value for f in entry.fields}
    raw = {k: str(fields[k]).strip() for k in _VERBATIM if isinstance(fields.get(k), str)}
    prose = {k: str(fields[k]) for k in _PROSE if isinstance(fields.get(k), str)}
    people = fields.get("author") if fields.get("author") else fields.get("editor")
    names: list[str] = []
    for n, person in enumerate(people if isinstance(people, list) else [people] if people else []):
        person = str(person).strip()
        if person.lower() == "others":
            names.append(ET_AL)
            continue
        try:
            person = parse_single_name_into_parts(person).merge_first_name_first
        except InvalidNameError as exc:
            notes.append(EntryProblem(where, f"author {person!r} kept as written: {exc.reason.lower()}"))
        prose[f"author{n}"] = person
        names.append(f"author{n}")
    decoded = _decode(decoder, prose)
    authors = tuple(dict.fromkeys(a for a in (decoded.get(n, n) for n in names) if a))

    year = _year(decoded.get("year") or decoded.get("date") or "", where, notes)
    venue = next((decoded[k] for k in ("journaltitle", "journal", "booktitle", "eventtitle") if decoded.get(k)), None)
    doi = None
    if raw.get("doi"):
        doi = normal_doi(raw["doi"])
        if doi is None:
            notes.append(EntryProblem(where, f"ignored doi {raw['doi']!r}: not a DOI"))
    url = None
    link = raw.get("url") or _howpublished_url(raw.get("howpublished", ""))
    if link:
        url = _web_url(link, where, notes)
    aid = _bib_arxiv(raw, decoded, doi, url)
    if doi and _ARXIV_DOI.match(doi):
        aid = aid or bare_arxiv_id(_ARXIV_DOI.match(doi).group(1))
    title = decoded.get("title", "")
    etype = entry.entry_type.lower()
    kind = _kind(etype in _BIB_PAPER_TYPES, aid, doi, url, title, software=etype == "software",
                 video=etype in ("video", "movie"))
    attachments = tuple(_resolve(p, base) for p in parse_file_field(raw.get("file", "")))
    if raw.get("pdf") and not attachments:  # BibDesk and some others: pdf = {path}
        attachments = (_resolve(raw["pdf"], base),)
    result = LibraryEntry(key=entry.key, where=where, title=title, authors=authors, year=year, venue=venue,
                          doi=doi, arxiv_id=aid, url=url, kind=kind, attachments=attachments)
    return result, notes


def _bib_arxiv(raw: dict[str, str], decoded: dict[str, str], doi: str | None, url: str | None) -> str | None:
    """The arXiv id an entry gives: ``eprint`` (of an arXiv ``archivePrefix``/``eprinttype``, or shaped
    like one), Mendeley's ``arxivId``, an arXiv URL, or "arXiv:ID" in its journal or note."""
    prefix = (raw.get("archiveprefix") or raw.get("eprinttype") or "").strip().lower()
    if raw.get("eprint") and prefix in ("", "arxiv"):
        found = bare_arxiv_id(raw["eprint"])
        if found:
            return found
    if raw.get("arxivid"):
        found = bare_arxiv_id(raw["arxivid"])
        if found:
            return found
    if url and arxiv_id(url):
        return arxiv_id(url)
    for key in ("journal", "journaltitle", "note", "howpublished"):
        m = _ARXIV_IN_TEXT.search(decoded.get(key) or raw.get(key) or "")
        if m:
            return bare_arxiv_id(m.group(1))
    return None


def _howpublished_url(value: str) -> str:
    m = re.search(r"\\url\{([^}]*)\}", value)
    return m.group(1) if m else ""


def _web_url(link: str, where: str, notes: list[EntryProblem]) -> str | None:
    """The address ``link`` names (as written: http stays http), or None with a note when it names none."""
    try:
        return address(link)
    except ValueError as exc:
        notes.append(EntryProblem(where, f"ignored url: {exc}"))
        return None


def _year(value: str, where: str, notes: list[EntryProblem]) -> int | None:
    if not value.strip():
        return None
    m = re.match(r"\s*(\d{4})(?!\d)", value)
    if m and YEAR_MIN <= int(m.group(1)) <= YEAR_MAX:
        return int(m.group(1))
    notes.append(EntryProblem(where, f"ignored year {value.strip()[:40]!r}: not a year from {YEAR_MIN} to {YEAR_MAX}"))
    return None


def _kind(paper_type: bool, aid: str | None, doi: str | None, url: str | None, title: str, *,
          software: bool = False, video: bool = False) -> str:
    """The catalog kind of an entry: a paper when its type or an identifier says so, else by its URL."""
    if video:
        return "video"
    if paper_type or aid or doi:
        return "paper"
    if url:
        kind = guess_kind(url, title=title)
        return "repo" if software and kind in ("article", "docs") and "github.com" in url else kind
    return "repo" if software else "article"


def parse_file_field(value: str) -> list[str]:
    """The paths a ``file`` field names, in order.

    Zotero and JabRef write ``description:path:mime`` items separated by ``;`` (``\\:`` and ``\\;``
    escape the separators, ``\\\\`` a backslash); Better BibTeX writes bare paths separated by
    ``;``; Mendeley writes ``$\\backslash$`` for a backslash. A Windows drive letter (``C:``) is
    part of the path, not a separator.
    """
    value = value.replace("$\\backslash$", "\\").replace("{\\textbackslash}", "\\")
    out = []
    for item in _split_unescaped(value, ";"):
        parts = [_unescape(p) for p in _split_unescaped(item, ":")]
        if len(parts) >= 3:
            p = ":".join(parts[1:-1])
        elif len(parts) == 2:
            p = ":".join(parts) if len(parts[0]) == 1 and parts[0].isalpha() else parts[1]
        else:
            p = parts[0] if parts else ""
        p = p.strip()
        if p:
            out.append(p)
    return out


def _split_unescaped(value: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            cur.append(value[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _resolve(p: str, base: Path) -> Path:
    """An attachment path: ``~`` expanded; a relative one is relative to the library file's folder.

    A Windows path (``C:\\Users\\...``) read elsewhere stays as written: it names no file here,
    and the message saying so should show it as the library wrote it.
    """
    path = Path(p).expanduser()
    return path if path.is_absolute() or PureWindowsPath(p).is_absolute() else base / path


# -- CSL-JSON --------------------------------------------------------------------------------------


def _parse_csl_json(text: str, path: Path) -> tuple[list[LibraryEntry], list[EntryProblem], list[EntryProblem]]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise LibraryError(f"{path}: not CSL-JSON: not valid JSON ({str(exc)[:200]})") from exc
    if isinstance(data, dict) and "type" in data and "id" in data:
        data = [data]  # one item on its own
    elif isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]
    if not isinstance(data, list):
        found = f"an object with keys {', '.join(sorted(map(str, data))[:8])}" if isinstance(data, dict) else (
            f"a JSON {type(data).__name__}")
        raise LibraryError(f'{path}: not CSL-JSON: expected a list of items with "id" and "type", found {found}')
    name = path.name
    entries: list[LibraryEntry] = []
    skipped: list[EntryProblem] = []
    notes: list[EntryProblem] = []
    seen: dict[str, int] = {}
    for n, item in enumerate(data, start=1):
        where = f"{name} item {n}"
        if not isinstance(item, dict):
            skipped.append(EntryProblem(where, f"not a CSL-JSON item: a JSON {type(item).__name__}, not an object"))
            continue
        missing = [k for k in ("id", "type") if item.get(k) in (None, "")]
        if missing:
            keys = ", ".join(sorted(map(str, item))[:8]) or "none"
            skipped.append(EntryProblem(where, f'not a CSL-JSON item: no {" and no ".join(map(repr, missing))} '
                                               f"(its keys: {keys})"))
            continue
        key = str(item["id"])
        where = f"{name} item {n} ({key})"
        if key in seen:
            skipped.append(EntryProblem(where, f"duplicate id {key} (first at item {seen[key]}): the first is kept"))
            continue
        seen[key] = n
        entry = _csl_entry(item, key, where, notes)
        if isinstance(entry, str):
            skipped.append(EntryProblem(where, entry))
        else:
            entries.append(entry)
    if not entries and data and all(p.reason.startswith("not a CSL-JSON item") for p in skipped):
        raise LibraryError(f"{path}: not CSL-JSON: {skipped[0].where}: {skipped[0].reason}")
    return entries, skipped, notes


def _text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):  # some exporters write a list where one value belongs
        return _text(value[0]) if value else ""
    if not isinstance(value, str):
        return ""
    return " ".join(_TAG.sub("", value).split())  # CSL titles carry <i>, <sup> markup


def _csl_names(value: Any) -> tuple[str, ...] | str:
    if value is None:
        return ()
    if not isinstance(value, list):
        return f'"author" must be a list of names, not a JSON {type(value).__name__}'
    out = []
    for person in value:
        if isinstance(person, str):
            name = _text(person)
        elif isinstance(person, dict):
            name = _text(person.get("literal")) or " ".join(
                p for p in (_text(person.get(k)) for k in ("given", "dropping-particle", "non-dropping-particle",
                                                           "family", "suffix")) if p)
        else:
            return f'"author" must hold name objects, not a JSON {type(person).__name__}'
        if name:
            out.append(name)
    return tuple(dict.fromkeys(out))


def _csl_year(value: Any, where: str, notes: list[EntryProblem]) -> int | None:
    if not isinstance(value, dict):
        return _year(_text(value), where, notes) if value is not None else None
    parts = value.get("date-parts")
    if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]:
        return _year(_text(parts[0][0]), where, notes)
    return _year(_text(value.get("raw") or value.get("literal") or value.get("season")), where, notes)


def _csl_entry(item: dict[str, Any], key: str, where: str, notes: list[EntryProblem]) -> LibraryEntry | str:
    authors = _csl_names(item.get("author") if item.get("author") else item.get("editor"))
    if isinstance(authors, str):
        return authors
    if "title" in item and not isinstance(item["title"], str | list):
        return f'"title" must be a string, not a JSON {type(item["title"]).__name__}'
    title = _text(item.get("title"))
    doi = None
    if item.get("DOI"):
        doi = normal_doi(_text(item["DOI"]))
        if doi is None:
            notes.append(EntryProblem(where, f"ignored DOI {_text(item['DOI'])!r}: not a DOI"))
    url = _web_url(_text(item["URL"]), where, notes) if item.get("URL") else None
    aid = arxiv_id(url) if url else None
    if doi and _ARXIV_DOI.match(doi):
        aid = aid or bare_arxiv_id(_ARXIV_DOI.match(doi).group(1))
    for k in ("number", "archive_location", "note", "container-title"):
        m = _ARXIV_IN_TEXT.search(_text(item.get(k)))
        if aid is None and m:
            aid = bare_arxiv_id(m.group(1))
    ctype = _text(item.get("type")).lower()
    venue = _text(item.get("container-title")) or _text(item.get("event-title")) or _text(item.get("event")) or None
    return LibraryEntry(
        key=key, where=where, title=title, authors=authors, year=_csl_year(item.get("issued"), where, notes),
        venue=venue, doi=doi, arxiv_id=aid, url=url,
        kind=_kind(ctype in _CSL_PAPER_TYPES, aid, doi, url, title, software=ctype == "software",
                   video=ctype in _CSL_VIDEO_TYPES),
    )

