"""The catalog stage: awesome-list markdown in, :class:`~dmlqa.models.Resource` records out.

Lists are written by hand in many dialects (numbered or bulleted links, ``[title](url) by A et al.,
Venue Year``, Obsidian notes with ``#PAPER`` tags and nested bullets, bare URLs, page chrome copied
from a website). :func:`parse_list` reads all of them into facts only (title, authors, venue, year,
URL, kind, the section headings as topics); the lists' prose is never stored. A line that cannot be
read becomes a :class:`ParseIssue` and parsing goes on, so one typo never loses a whole list.

:func:`import_lists` is the only code here that touches the disk: it keeps a copy of every list in
the home (``corpus/lists/<name>.md``), records where it came from in ``corpus/lists.toml`` so a later
refresh can re-read it, and merges the resources into ``corpus/catalog.jsonl``.
"""

from __future__ import annotations

import html
import json
import re
import tomllib
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

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
from dmlqa.errors import CatalogError
from dmlqa.fsutil import atomic_write_text
from dmlqa.models import ET_AL, Resource
from dmlqa.paths import CATALOG_FILE, LISTS_FILE

LISTS_DIR = "lists"


@dataclass(frozen=True)
class ParseIssue:
    """One list line that was not (fully) read, with a reason specific enough to fix it."""

    list_name: str
    line_no: int  # 1-based, in the list file as given
    line: str
    reason: str


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


@dataclass(frozen=True)
class ImportReport:
    lists: tuple[str, ...]
    added: int
    updated: int
    total: int
    issues: tuple[ParseIssue, ...]


# -- markdown patterns -----------------------------------------------------------------------------

_HEADING = re.compile(r"^ {0,3}(?P<hashes>#{1,6})(?:[ \t]+(?P<text>.*?))?[ \t]*#*[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(?P<rule>=+|-+)[ \t]*$")
_ITEM = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+]|\d{1,3}[.)])(?:[ \t]+|$)(?P<content>.*)$")
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})")
_BARE_URL = re.compile(r"(?<![\w/@.\-])(?:https?://|www\.)[^\s<>\[\]\"'`|]+", re.IGNORECASE)
_TAG = re.compile(r"(?<![\w#&/])#(?P<tag>[A-Za-z][A-Za-z0-9_-]*)")
_HTML_IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
_HTML_A = re.compile(r"<a\b[^>]*?\bhref\s*=\s*[\"'](?P<href>[^\"']*)[\"'][^>]*>(?P<text>.*?)</a\s*>",
                     re.IGNORECASE | re.DOTALL)
_IMG_SRC = re.compile(r"\bsrc\s*=\s*[\"'](?P<src>[^\"']*)[\"']", re.IGNORECASE)
_FRONT_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:\s*(?P<value>.*)$")
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
_MOJIBAKE = re.compile("[\u00c2\u00c3\u00c5\u00e2\u00ea\u00eb\u00ec\u00ed\u00f0]"
                       "[\u0080-\u00bf\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc"
                       "\u2013\u2014\u2018\u2019\u201a\u201c\u201d\u201e\u2020\u2021\u2022\u2026\u2030"
                       "\u2039\u203a\u20ac\u2122]")
_MAX_JOIN = 3  # continuation lines a link's text may span


# -- small text helpers ----------------------------------------------------------------------------

def repair_mojibake(text: str) -> str:
    """Undo UTF-8 read as cp1252/latin-1 (``Uberâ€™s`` → ``Uber’s``); text without the marks is kept."""
    if not _MOJIBAKE.search(text):
        return text
    for codec in ("cp1252", "latin-1"):
        try:
            fixed = text.encode(codec).decode("utf-8")
        except UnicodeError:
            continue
        return fixed
    return text


def _clean_inline(text: str) -> str:
    """Markdown inline text → plain text: links to their text, emphasis and escapes removed."""
    t = _HTML_IMG.sub("", text)
    t = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", t)
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t)
    t = re.sub(r"<[^>]+>", "", t)
    t = t.replace("**", "").replace("__", "").replace("`", "")
    t = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|])", r"\1", t)
    t = html.unescape(t)
    t = " ".join(t.split())
    t = t.strip(" *_")
    return repair_mojibake(t)


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
    t = _clean_inline(text)
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


# -- the line scanner ------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Link:
    text: str | None  # None for a bare URL
    target: str
    start: int
    end: int
    image: bool = False  # an image, or a link whose text is only an image (badge, button)


def _bracket_pairs(s: str, open_c: str, close_c: str) -> dict[int, int]:
    """Map each opening bracket to its closing one (nesting and backslash escapes respected).

    One pass with a stack, so a line of thousands of unmatched brackets still costs linear time.
    """
    pairs: dict[int, int] = {}
    stack: list[int] = []
    j = 0
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == open_c:
            stack.append(j)
        elif c == close_c and stack:
            pairs[stack.pop()] = j
        j += 1
    return pairs


def _link_target(inner: str) -> str:
    """``url "title"`` or ``<url>`` inside ``( )`` → the URL."""
    inner = inner.strip()
    if inner.startswith("<") and ">" in inner:
        return inner[1 : inner.index(">")].strip()
    return inner.split()[0] if inner else ""


def _scan(content: str) -> tuple[list[_Link], str, list[str]]:
    """Find every link in one logical line.

    Returns the links in order, the line with links masked by spaces (for tag and prose checks) and
    problems (malformed link syntax) found on the way.
    """
    links: list[_Link] = []
    problems: list[str] = []
    masked = list(content)

    def mask(a: int, b: int) -> None:
        for k in range(a, b):
            masked[k] = " "

    for m in _HTML_A.finditer(content):
        inner = m.group("text")
        image = "<img" in inner.lower() and not _clean_inline(inner)
        links.append(_Link(_clean_inline(inner), m.group("href"), m.start(), m.end(), image=image))
        mask(m.start(), m.end())
    for m in _HTML_IMG.finditer(content):
        if masked[m.start()] != " ":
            src = _IMG_SRC.search(m.group(0))
            links.append(_Link("", src.group("src") if src else "", m.start(), m.end(), image=True))
            mask(m.start(), m.end())

    urls_at = [m.start() for m in re.finditer(r"https?://", content)]
    last_hint = max(content.rfind("]("), urls_at[-1] if urls_at else -1)
    squares = _bracket_pairs(content, "[", "]")
    rounds = _bracket_pairs(content, "(", ")")
    i = 0
    n = len(content)
    while i < n:
        if masked[i] == " " and content[i] != " ":
            i += 1
            continue
        c = content[i]
        if c == "\\":
            i += 2
            continue
        if content.startswith("[[", i):  # Obsidian wiki link: a note in the vault, not a web resource
            j = content.find("]]", i + 2)
            end = n if j < 0 else j + 2
            mask(i, end)
            i = end
            continue
        if c == "[" or content.startswith("![", i):
            start = i
            image = c == "!"
            b = i + 1 if image else i
            close = squares.get(b)
            if close is None:
                if last_hint > b:  # a link was meant: "](" or a URL follows the stray '['
                    problems.append(f"unclosed '[' at column {b + 1}: the link text never ends with ']'")
                    mask(b, n)
                    break
                i = b + 1
                continue
            if close + 1 < n and content[close + 1] == "(":
                pclose = rounds.get(close + 1)
                if pclose is None:
                    problems.append(f"unclosed '(' at column {close + 2}: the link target never ends with ')'")
                    mask(start, n)
                    break
                text = content[b + 1 : close]
                target = _link_target(content[close + 2 : pclose])
                text_is_image = re.fullmatch(r"\s*(?:!\[[^\]]*\]\([^)]*\)|<img\b[^>]*>)\s*", text) is not None
                links.append(_Link(text, target, start, pclose + 1, image=image or text_is_image))
                mask(start, pclose + 1)
                i = pclose + 1
                continue
            i = close + 1
            continue
        i += 1

    masked_text = "".join(masked)
    for m in _BARE_URL.finditer(masked_text):
        url = m.group(0)
        # Sentence punctuation and a closing bracket belong to the prose, not to the URL.
        while url and (url[-1] in ".,;:!?*_" or (url[-1] == ")" and url.count("(") < url.count(")"))):
            url = url[:-1]
        if url.lower() in ("http://", "https://", "www."):
            continue
        links.append(_Link(None, url, m.start(), m.start() + len(url)))
        mask(m.start(), m.start() + len(url))
    links.sort(key=lambda lk: lk.start)
    return links, "".join(masked), problems


# -- the list parser -------------------------------------------------------------------------------

@dataclass
class _Line:
    no: int  # 1-based number of the first physical line
    text: str  # logical line (continuations joined with a space)
    raw: str  # as written, for issue reports
    heading: tuple[int, str] | None = None


@dataclass(frozen=True)
class _Parent:
    """The entry a nested bullet hangs under: its facts are inherited by a bare copy of it."""

    facts: _Facts
    tag: str | None


def _front_matter(lines: list[str]) -> tuple[dict[str, str], int]:
    """YAML-ish front matter keys (flat ``key: value`` only) and the number of lines it takes."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    for end in range(1, min(len(lines), 200)):
        if lines[end].strip() in ("---", "..."):
            meta: dict[str, str] = {}
            for raw in lines[1:end]:
                m = _FRONT_KEY.match(raw.strip())
                if m:
                    meta[m.group("key").lower()] = m.group("value").strip().strip("\"'").strip()
            return meta, end + 1
    return {}, 0


def _logical_lines(text: str, name: str, issues: list[ParseIssue]) -> tuple[dict[str, str], list[_Line]]:
    """Split a list into logical lines: front matter, HTML comments and code blocks removed,
    headings recognised, and link text broken over several lines joined back together."""
    physical = text.split("\n")
    meta, skip = _front_matter(physical)
    visible: list[tuple[int, str]] = []
    in_comment_from: int | None = None
    fence: str | None = None
    for idx in range(skip, len(physical)):
        raw = physical[idx]
        no = idx + 1
        if fence is not None:
            if raw.strip().startswith(fence):
                fence = None
            continue
        line = raw
        if in_comment_from is not None:
            end = line.find("-->")
            if end < 0:
                continue
            line = line[end + 3 :]
            in_comment_from = None
        while "<!--" in line:
            a = line.index("<!--")
            b = line.find("-->", a + 4)
            if b < 0:
                line = line[:a]
                in_comment_from = no
                break
            line = line[:a] + line[b + 3 :]
        fm = _FENCE.match(line)
        if fm and in_comment_from is None:
            fence = fm.group("fence")
            continue
        visible.append((no, line))
    if in_comment_from is not None:
        issues.append(ParseIssue(name, in_comment_from, physical[in_comment_from - 1],
                                 "HTML comment '<!--' is never closed: the rest of the list is commented out"))

    out: list[_Line] = []
    k = 0
    while k < len(visible):
        no, line = visible[k]
        raw = physical[no - 1]
        h = _HEADING.match(line)
        if h:
            out.append(_Line(no, line, raw, (len(h.group("hashes")), _clean_inline(h.group("text") or ""))))
            k += 1
            continue
        nxt = visible[k + 1][1] if k + 1 < len(visible) else ""
        sm = _SETEXT.match(nxt)
        if (sm and line.strip() and not _ITEM.match(line) and not line.startswith(("    ", "\t"))
                and not (sm.group("rule").startswith("-") and len(sm.group("rule")) < 2)):
            level = 1 if sm.group("rule").startswith("=") else 2
            out.append(_Line(no, line, raw, (level, _clean_inline(line))))
            k += 2
            continue
        # A link whose text runs onto the next line: join until the brackets balance.
        joined, j = line, k
        while (_unbalanced(joined) and j + 1 < len(visible) and j - k < _MAX_JOIN
               and _continues(visible[j + 1][1])):
            j += 1
            joined = joined.rstrip() + " " + visible[j][1].strip()
            raw = raw + "\n" + physical[visible[j][0] - 1]
        if not _unbalanced(joined):
            line, k = joined, j
        else:
            raw = physical[no - 1]
        out.append(_Line(no, line, raw))
        k += 1
    return meta, out


def _unbalanced(line: str) -> bool:
    """True when a '[' opened on this line has not been closed (its link text goes on below)."""
    depth = 0
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if line.startswith("[[", i):
            j = line.find("]]", i + 2)
            if j < 0:
                return False
            i = j + 2
            continue
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
        i += 1
    return depth > 0


def _continues(next_line: str) -> bool:
    """Can ``next_line`` be the rest of a link's text (not a new item, heading or blank line)?"""
    s = next_line.strip()
    return bool(s) and not _ITEM.match(next_line) and not _HEADING.match(next_line)


def _title_of(meta: dict[str, str], lines: list[_Line]) -> tuple[str | None, int | None]:
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
    meta, logical = _logical_lines(lines, "", [])
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
    meta, lines = _logical_lines(text, name, issues)
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
    ln: _Line,
    items: list[tuple[int, _Parent | None]],
    name: str,
    topics: tuple[str, ...],
    meta_section: str | None,
    found: dict[str, Resource],
    issues: list[ParseIssue],
    skipped: list[ParseIssue],
) -> list[tuple[int, _Parent | None]]:
    """Read one logical line into ``found``; return the updated stack of open list items."""
    m = _ITEM.match(ln.text)
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

    links, masked, problems = _scan(content)
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
        found[res.id] = _combine(found[res.id], res) if res.id in found else res
        if first is None:
            first = _Parent(_Facts(title, facts.authors, facts.venue, facts.year),
                            own_tag or (parent.tag if parent else None))

    if m:
        items = [*items, (indent, first)]
    return items


# -- merging -------------------------------------------------------------------------------------


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


def _combine(old: Resource, new: Resource) -> Resource:
    """One entry from two sightings of the same resource: the first facts win unless they are missing."""
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


def merge(existing: Iterable[Resource], incoming: Iterable[Resource]) -> list[Resource]:
    """Fold ``incoming`` into ``existing`` by id (topics and lists unioned), sorted by id for stable diffs."""
    by_id: dict[str, Resource] = {}
    for res in (*existing, *incoming):
        by_id[res.id] = _combine(by_id[res.id], res) if res.id in by_id else res
    return [by_id[k] for k in sorted(by_id)]


# -- files ---------------------------------------------------------------------------------------

def read_catalog(path: Path) -> list[Resource]:
    """The catalog's resources in file order; a missing file is an empty catalog."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(str(path), f"cannot read catalog: {exc}") from exc
    out: list[Resource] = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, got {type(data).__name__}")
            out.append(Resource.from_json(data))
        except (ValueError, KeyError, TypeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise CatalogError(f"{path}:{no}", f"bad catalog line {no}: {detail}") from exc
    return out


def write_catalog(path: Path, resources: Iterable[Resource]) -> None:
    """Write one JSON object a line (UTF-8, not escaped), atomically."""
    body = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in resources)
    atomic_write_text(Path(path), body)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # A JSON string is a valid TOML basic string (same escapes, \uXXXX included).
    return json.dumps(str(value), ensure_ascii=False)


def read_lists(corpus_dir: Path) -> dict[str, dict]:
    """``lists.toml`` as ``{name: {"title", "file", "upstream"?, ...}}``; missing file → {}."""
    path = Path(corpus_dir) / LISTS_FILE
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(str(path), f"cannot read lists file: {exc}") from exc
    lists = data.get("lists", {})
    if not isinstance(lists, dict):
        raise CatalogError(str(path), "'lists' must be a table of tables")
    return {k: dict(v) for k, v in lists.items() if isinstance(v, dict)}


def _write_lists(corpus_dir: Path, lists: dict[str, dict]) -> None:
    out = ["# Lists imported into catalog.jsonl (written by `dmlqa catalog import`).",
           "# upstream: where the list lives, only where the list text shows it; a refresh re-reads it.", ""]
    for name in sorted(lists):
        key = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)
        out.append(f"[lists.{key}]")
        entry = lists[name]
        for k in ("title", "file", "upstream", "imported_from"):
            if entry.get(k) is not None:
                out.append(f"{k} = {_toml_value(entry[k])}")
        for k, v in entry.items():
            if k not in ("title", "file", "upstream", "imported_from") and isinstance(v, str | int | float | bool):
                out.append(f"{k} = {_toml_value(v)}")
        out.append("")
    atomic_write_text(Path(corpus_dir) / LISTS_FILE, "\n".join(out))


def _read_list_file(path: Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CatalogError(str(path), f"cannot read list file: {exc.strerror or exc}") from exc
    return data.decode("utf-8", errors="replace")


def import_lists(paths: Sequence[Path], corpus_dir: Path, *, replace_lists: bool = False) -> ImportReport:
    """Parse list files and fold them into the home's catalog; re-importing the same file changes nothing.

    Every file is read before anything is written, so a missing file fails the import cleanly. Each
    list is copied to ``corpus_dir/lists/<name>.md`` and named in ``lists.toml`` (title, file,
    upstream when its text shows one). With ``replace_lists`` the re-imported lists' previous entries
    are withdrawn first (an entry no other list names disappears), so a refreshed list that dropped
    a link drops it from the catalog too; otherwise the import only adds and enriches.
    """
    corpus_dir = Path(corpus_dir)
    parsed: list[tuple[Path, str, ParsedList]] = []
    names: set[str] = set()
    for path in paths:
        text = _read_list_file(path)
        name = list_name_for(Path(path), text)
        base, n = name, 2
        while name in names:  # two different files with the same title in one import
            name, n = f"{base}-{n}", n + 1
        names.add(name)
        parsed.append((Path(path), text, parse_list(text, name)))

    catalog_path = corpus_dir / CATALOG_FILE
    before = read_catalog(catalog_path)
    old = {r.id: r for r in before}
    base_entries = before
    if replace_lists:
        base_entries = []
        for r in before:
            kept = tuple(x for x in r.lists if x not in names)
            if kept or not r.lists:
                base_entries.append(replace(r, lists=kept))
    incoming = [r for _, _, pl in parsed for r in pl.resources]
    after = merge(base_entries, incoming)
    added = sum(1 for r in after if r.id not in old)
    updated = sum(1 for r in after if r.id in old and r != old[r.id])

    lists = read_lists(corpus_dir)
    for path, text, pl in parsed:
        rel = f"{LISTS_DIR}/{pl.name}.md"
        dest = corpus_dir / rel
        entry = dict(lists.get(pl.name, {}))
        entry.update(title=pl.title, file=rel)
        if pl.upstream:
            entry["upstream"] = pl.upstream
        if dest.resolve() != path.resolve():  # re-importing the stored copy itself needs no copy
            atomic_write_text(dest, text)
            entry["imported_from"] = path.name
        lists[pl.name] = entry
    write_catalog(catalog_path, after)
    _write_lists(corpus_dir, lists)
    return ImportReport(
        lists=tuple(pl.name for _, _, pl in parsed),
        added=added,
        updated=updated,
        total=len(after),
        issues=tuple(i for _, _, pl in parsed for i in pl.issues),
    )

