"""List parsing: awesome-list markdown in, :class:`~dmlqa.models.Resource` records out.

:func:`parse_list` reads the lists' many dialects (numbered or bulleted links, ``[title](url) by A et
al., Venue Year``, Obsidian notes with ``#PAPER`` tags and nested bullets, bare URLs, page chrome
copied from a website) into facts only (title, authors, venue, year, URL, kind, the section headings
as topics); the lists' prose is never stored. A line that cannot be read becomes a
:class:`~dmlqa.catalog.markdown.ParseIssue` and parsing goes on, so one typo never loses a whole list.
Pure: no I/O (:mod:`dmlqa.catalog.store` keeps the files).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path

from dmlqa.catalog.markdown import (
    ITEM,
    Line,
    ParseIssue,
    clean_inline,
    logical_lines,
    repair_mojibake,
    scan_links,
)
from dmlqa.catalog.urls import (
    address,
    arxiv_id,
    arxiv_year,
    canonicalize,
    guess_kind,
    is_non_resource,
    is_relative,
    is_url_title,
    resource_id,
    url_title,
)
from dmlqa.models import ET_AL, Resource


@dataclass(frozen=True)
class ParsedList:
    """Everything one list file says: its title, its upstream (if the text names it) and its resources.

    ``skipped`` records the links deliberately left out (badges, anchors, buttons) with the reason, so
    that every link of a list is accounted for either as a resource, an issue or a skip.
    """

    name: str
    title: str
    upstream: str | None
    resources: tuple[Resource, ...]
    issues: tuple[ParseIssue, ...]
    skipped: tuple[ParseIssue, ...] = ()


# -- patterns of facts -----------------------------------------------------------------------------

_TAG = re.compile(r"(?<![\w#&/])#(?P<tag>[A-Za-z][A-Za-z0-9_-]*)")
_TOC_TITLES = {"contents", "table of contents", "toc", "table of content"}
_META_SECTIONS = re.compile(r"^(?:contribut\w*|how to contribute|licen[sc]e|code of conduct)$", re.IGNORECASE)
_YEAR = r"(?:19|20)\d\d"
_NAME_WORD = (r"(?:[A-Z][a-z\u00c0-\u024f'’]+(?:-[A-Za-z\u00c0-\u024f'’]+)*|[A-Z]\.(?:-?[A-Z]\.)*"
              r"|van|von|de|der|den|da|di|du|del|la|le|bin|al)")
_NAME = re.compile(rf"^{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,4}}$")
_ET_AL = re.compile(r"\s*,?\s*\bet\s+al\b\.?", re.IGNORECASE)
_TITLE_CITE = re.compile(rf"\s*\((?P<who>[^()]*?)\s*(?P<year>{_YEAR})\)\s*$")
_WHOLE_CITE = re.compile(rf"^(?P<who>[^()\d]+?)\s+(?P<year>{_YEAR})$")
_BLOCKREF = re.compile(r"\s\^[\w-]+\s*$")


# -- facts in a link's text and after it -----------------------------------------------------------

def _split_names(who: str) -> tuple[str, ...] | None:
    """``"A B, C D, et al."`` → ``("A B", "C D", "et al.")``; None when the text does not look like names.

    A list's "et al." is kept as a last element, so that a reference (BibTeX ``and others``) does not
    claim the named authors are all of them.
    """
    et_al = _ET_AL.search(who) is not None
    who = _ET_AL.sub("", who).strip().rstrip(".,;").strip()
    if not who:
        return None
    parts = [p.strip().rstrip(".").strip() for p in re.split(r",|\band\b|&", who)]
    names = tuple(p for p in parts if p)
    if not names or not all(_NAME.match(n) and re.search(r"[A-Z][a-z]", n) for n in names):
        return None
    return (*names, ET_AL) if et_al else names


@dataclass(frozen=True)
class _Facts:
    title: str = ""
    authors: tuple[str, ...] = ()
    venue: str | None = None
    year: int | None = None


def _title_facts(text: str, *, nested: bool) -> _Facts:
    """Facts inside link text: ``Title (Huang 2019)``, ``Title (2020)``, or (nested) just ``Hoefler 2018``."""
    t = clean_inline(text)
    m = _TITLE_CITE.search(t)
    if m and m.start() > 0:
        who = m.group("who").strip().rstrip(",").strip()
        names = _split_names(who) if who else ()
        if names is not None:
            return _Facts(title=t[: m.start()].strip(), authors=names, year=int(m.group("year")))
    if nested:
        m = _WHOLE_CITE.match(t)
        names = _split_names(m.group("who")) if m else None
        if m and names:
            return _Facts(title="", authors=names, year=int(m.group("year")))
    return _Facts(title=t)


def _tail_facts(tail: str) -> _Facts | None:
    """Facts after a link: ``by Tal Ben-Nun et al., ACM Computing Surveys 2020`` (``by`` optional).

    Anything else after a link (`` - description``, ``: description``) is the list's prose and is
    not kept, so None is returned.
    """
    t = _BLOCKREF.sub("", tail).strip()
    if not t or t[0] in "-–—:|(":
        return None
    has_by = re.match(r"^by\s+", t, re.IGNORECASE) is not None
    t = re.sub(r"^by\s+", "", t, flags=re.IGNORECASE)
    who, sep, rest = t.rpartition(",")
    m = re.match(rf"^(?P<pre>[^,]*?)\b(?P<year>{_YEAR})\b(?P<post>[^,\d]*)$", rest.strip()) if sep else None
    if m:
        names = _split_names(who)
        venue = " ".join(f"{m.group('pre')} {m.group('post')}".split()).strip(" .;") or None
        if names and (venue is None or len(venue) <= 60):
            return _Facts(authors=names, venue=venue, year=int(m.group("year")))
        return None
    if has_by:
        names = _split_names(t)
        if names:
            return _Facts(authors=names)
    return None


def _slug(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")[:64].strip("-")


# -- the list parser -------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Parent:
    """The entry a nested bullet hangs under: its facts are inherited by a bare copy of it."""

    facts: _Facts
    tag: str | None


def _title_of(meta: dict[str, str], lines: list[Line]) -> tuple[str | None, int | None]:
    """The list's title and the index of the heading that is the title (not a topic), if any.

    Front matter wins; otherwise the first heading is the title when it is a level-1 heading or every
    later heading is deeper (a list that starts at ``##`` has no title heading, only sections).
    """
    headings = [(i, ln.heading) for i, ln in enumerate(lines) if ln.heading and ln.heading[1]]
    if meta.get("title"):
        return repair_mojibake(meta["title"]), None
    if not headings:
        return None, None
    first_i, (level, text) = headings[0]
    if level == 1 or all(lv > level for _, (lv, _t) in headings[1:]):
        return text, first_i
    return None, None


def _upstream(meta: dict[str, str], text: str) -> str | None:
    """The list's home, only where the list text itself shows it.

    Front matter ``upstream``/``source``/``repository``/``url``; or the GitHub repository whose own
    issue/pull-request links the list carries ("Open an issue or send a pull request"); or the
    repository an ecosyste.ms page names with ``List: <repo>``. Ambiguous signals give None.
    """
    for key in ("upstream", "source", "repository", "repo", "url"):
        value = meta.get(key, "")
        if re.match(r"https?://", value):
            return value
    repos: set[str] = set()
    for m in re.finditer(r"https?://(?:www\.)?github\.com/([\w.-]+)/([\w.-]+)/"
                         r"(?:issues|pulls|compare|edit/|blob/[^/\s)]+/CONTRIBUTING)", text, re.IGNORECASE):
        repos.add(f"{m.group(1)}/{m.group(2)}".lower())
    listed = re.search(r"^List:\s*(?P<name>[\w.-]+)\s*$", text, re.MULTILINE)
    if listed:
        for m in re.finditer(r"https?://(?:www\.)?github\.com/([\w.-]+)/([\w.-]+)/?(?=[\s)\]]|$)", text):
            if m.group(2).lower() == listed.group("name").lower():
                repos.add(f"{m.group(1)}/{m.group(2)}".lower())
    if len(repos) != 1:
        return None
    repo = repos.pop()
    owner, name = repo.split("/")
    written = re.search(rf"https?://(?:www\.)?github\.com/{re.escape(owner)}/{re.escape(name)}(?=[/\s)\]]|$)",
                        text, re.IGNORECASE)
    return written.group(0).replace("http://", "https://", 1) if written else f"https://github.com/{repo}"


def list_name_for(path: Path, text: str) -> str:
    """A stable slug naming a list in ``Resource.lists`` and ``lists.toml``: from its title, else its file name."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    meta, logical = logical_lines(lines, "", [])
    title, _ = _title_of(meta, logical)
    slug = _slug(title or "")
    if not slug:
        slug = _slug(Path(path).stem)
    return slug or "list"


def parse_list(text: str, name: str) -> ParsedList:
    """Read one awesome list. Pure: same text and name, same result; never raises on bad lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    issues: list[ParseIssue] = []
    skipped: list[ParseIssue] = []
    meta, lines = logical_lines(text, name, issues)
    title, title_index = _title_of(meta, lines)
    found: dict[str, Resource] = {}

    topics: list[tuple[int, str]] = []  # heading path below the title
    toc_level: int | None = None  # inside a table of contents down to this heading level
    meta_section: str | None = None
    items: list[tuple[int, _Parent | None]] = []  # open list items: (indent, what they name)

    for index, ln in enumerate(lines):
        if ln.heading:
            level, htext = ln.heading
            items = []
            if index == title_index:
                continue
            if toc_level is not None and level > toc_level:
                continue
            toc_level = None
            if htext.lower().rstrip(":") in _TOC_TITLES:
                toc_level = level
                continue
            while topics and topics[-1][0] >= level:
                topics.pop()
            if htext:
                topics.append((level, htext))
            meta_section = htext if _META_SECTIONS.match(htext) else None
            continue
        if toc_level is not None or not ln.text.strip():
            continue
        try:
            items = _parse_line(ln, items, name, tuple(t for _, t in topics), meta_section,
                                found, issues, skipped)
        except Exception as exc:  # a parser bug on one odd line must not lose the list
            issues.append(ParseIssue(name, ln.no, ln.raw, f"line could not be parsed ({type(exc).__name__}: {exc})"))

    return ParsedList(
        name=name,
        title=title or name,
        upstream=_upstream(meta, text),
        resources=tuple(_dated(r) for r in found.values()),
        issues=tuple(issues),
        skipped=tuple(skipped),
    )


def _parse_line(
    ln: Line,
    items: list[tuple[int, _Parent | None]],
    name: str,
    topics: tuple[str, ...],
    meta_section: str | None,
    found: dict[str, Resource],
    issues: list[ParseIssue],
    skipped: list[ParseIssue],
) -> list[tuple[int, _Parent | None]]:
    """Read one logical line into ``found``; return the updated stack of open list items."""
    m = ITEM.match(ln.text)
    if m:
        indent = len(m.group("indent").expandtabs(4))
        content = m.group("content")
        while items and items[-1][0] >= indent:
            items.pop()
    else:
        indent = len(ln.text) - len(ln.text.lstrip(" \t"))
        content = ln.text.strip()
        if indent == 0:
            items = []
    parent = next((p for _, p in reversed(items) if p is not None), None)

    links, masked, problems = scan_links(content)
    for problem in problems:
        issues.append(ParseIssue(name, ln.no, ln.raw, problem))
    tag_m = _TAG.search(masked)
    own_tag = tag_m.group("tag") if tag_m else None
    section = " / ".join(topics) or None
    first: _Parent | None = None

    for pos, link in enumerate(links):
        def note(reason: str, *, issue: bool = False) -> None:
            (issues if issue else skipped).append(ParseIssue(name, ln.no, ln.raw, reason))

        target = link.target.strip()
        if link.image:
            note(f"image or badge link ({target or 'no target'})")
            continue
        if not target:
            note(f"link {link.text!r} has an empty target", issue=True)
            continue
        if is_relative(target):
            note(f"relative link {target!r}: a local file or note, not a web resource", issue=True)
            continue
        reason = is_non_resource(target)
        if reason:
            note(reason)
            continue
        try:
            url = canonicalize(target)
            listed = address(target)
        except ValueError as exc:
            note(str(exc), issue=True)
            continue
        if meta_section:
            note(f"link in the list's {meta_section!r} section (list upkeep, not a resource)")
            continue

        nested = parent is not None and m is not None and indent > 0
        facts = _title_facts(link.text, nested=nested) if link.text is not None else _Facts()
        if is_url_title(facts.title, url) or facts.title.strip() == target:
            facts = replace(facts, title="")
        nxt = links[pos + 1].start if pos + 1 < len(links) else len(content)
        tail = _tail_facts(content[link.end : nxt]) if link.text is not None else None
        if tail:
            facts = replace(facts, authors=tail.authors or facts.authors, venue=tail.venue or facts.venue,
                            year=tail.year or facts.year)
        if not facts.title and parent is not None:
            # A bare copy (or a "Hoefler 2018" talk) of the entry above: same work, same facts.
            pf = parent.facts
            facts = _Facts(title=pf.title, authors=facts.authors or pf.authors,
                           venue=facts.venue or pf.venue, year=facts.year or pf.year)
        title = facts.title or url_title(url)
        kind = guess_kind(url, title=title, tag=own_tag, section=section,
                          parent_tag=parent.tag if parent else None)
        res = Resource(id=resource_id(url), url=url, title=title, kind=kind, authors=facts.authors,
                       venue=facts.venue, year=facts.year, topics=topics, lists=(name,), aliases=(listed,))
        found[res.id] = combine(found[res.id], res) if res.id in found else res
        if first is None:
            first = _Parent(_Facts(title, facts.authors, facts.venue, facts.year),
                            own_tag or (parent.tag if parent else None))

    if m:
        items = [*items, (indent, first)]
    return items


# -- one entry from several sightings ------------------------------------------------------------


def _dated(res: Resource) -> Resource:
    """An undated arXiv entry gets the year its id dates it to (YYMM). Applied once all sightings in
    a list are combined, so a year any sighting states (it may be the venue's) wins over the id's."""
    if res.year is None:
        year = arxiv_year(arxiv_id(res.url))
        if year is not None:
            return replace(res, year=year)
    return res


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return a + tuple(x for x in dict.fromkeys(b) if x not in a)


def combine(old: Resource, new: Resource) -> Resource:
    """One entry from two sightings of the same resource: the first facts win unless they are missing.

    The one rule for both a list naming a work twice and an import meeting the catalog's entry
    (:func:`dmlqa.catalog.store.merge`); a title that is only a URL or the catalog's placeholder
    is a missing fact (:func:`~dmlqa.catalog.urls.is_url_title`).
    """
    title = old.title
    if is_url_title(old.title, old.url) and not is_url_title(new.title, new.url):
        title = new.title
    return replace(
        old,
        title=title,
        kind=new.kind if old.kind == "article" and new.kind != "article" else old.kind,
        authors=old.authors or new.authors,
        venue=old.venue or new.venue,
        year=old.year or new.year,
        topics=_union(old.topics, new.topics),
        lists=_union(old.lists, new.lists),
        aliases=_union(old.aliases, new.aliases),
    )

