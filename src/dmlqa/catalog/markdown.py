"""The Markdown layer of reading a list: logical lines and the links on them.

Lists are written by hand in many dialects, so this layer is forgiving: front matter, HTML comments
and code blocks are dropped, setext and ATX headings recognised, link text broken over lines joined
back, and every link found whatever its spelling (``[text](url)``, ``<a href>``, a bare URL, an image
or badge). Malformed link syntax becomes a :class:`ParseIssue`, never an exception.
:mod:`dmlqa.catalog.lists` reads facts from what this module finds.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ParseIssue:
    """One list line that was not (fully) read, with a reason specific enough to fix it."""

    list_name: str
    line_no: int  # 1-based, in the list file as given
    line: str
    reason: str


# -- markdown patterns -----------------------------------------------------------------------------

#: An ATX heading, a setext underline, and a list item (bullet or number) with its indent.
HEADING = re.compile(r"^ {0,3}(?P<hashes>#{1,6})(?:[ \t]+(?P<text>.*?))?[ \t]*#*[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(?P<rule>=+|-+)[ \t]*$")
ITEM = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+]|\d{1,3}[.)])(?:[ \t]+|$)(?P<content>.*)$")
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})")
_BARE_URL = re.compile(r"(?<![\w/@.\-])(?:https?://|www\.)[^\s<>\[\]\"'`|]+", re.IGNORECASE)
_HTML_IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
# An ``<a href>`` link is found in pieces (see :func:`_html_anchors`), not by one regex: a regex that
# looks for ``</a>`` after every ``<a`` rescans the rest of the line each time an anchor is never
# closed, and a list line of 20,000 unclosed anchors then costs minutes.
_A_OPEN = re.compile(r"<a\b", re.IGNORECASE)
_A_CLOSE = re.compile(r"</a\s*>", re.IGNORECASE)
_A_HREF = re.compile(r"\bhref\s*=\s*[\"']", re.IGNORECASE)
_IMG_SRC = re.compile(r"\bsrc\s*=\s*[\"'](?P<src>[^\"']*)[\"']", re.IGNORECASE)
_FRONT_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:\s*(?P<value>.*)$")
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


def _before_last(char: str, sub: Callable[[str], str], text: str) -> str:
    """Apply ``sub`` (a pattern ``X[^char]*char``) to ``text`` up to its last ``char`` only.

    Such a pattern fails only where no ``char`` follows, and then rescans to the end from every
    start: thousands of ``<img`` with no ``>`` cost quadratic time. Nothing can match past the last
    ``char``, so leaving that tail out changes no result and makes the work linear.
    """
    cut = text.rfind(char) + 1
    return sub(text[:cut]) + text[cut:]


def unlink(text: str, opener: str, keep_text: bool, instead: str = "") -> str:
    """Replace each ``[text](target)`` (``opener`` ``[`` or ``![``) by its text, or by ``instead``.

    The result of ``re.sub(r"\\[([^\\]]*)\\]\\([^)]*\\)", ...)``, in linear time: when the ``]`` that
    ends one opener's text is not followed by ``(``, every opener before that ``]`` fails the same
    way, so the scan jumps past it instead of retrying each (``[[[[…]`` is quadratic for the regex).
    """
    out: list[str] = []
    kept = i = 0
    while (start := text.find(opener, i)) >= 0:
        close = text.find("]", start + len(opener))
        if close < 0:
            break
        if not text.startswith("(", close + 1):
            i = close + 1
            continue
        end = text.find(")", close + 2)
        if end < 0:
            break  # no ')' follows: no later link can end either
        out.append(text[kept:start])
        out.append(text[start + len(opener) : close] if keep_text else instead)
        kept = i = end + 1
    out.append(text[kept:])
    return "".join(out)


def clean_inline(text: str) -> str:
    """Markdown inline text → plain text: links to their text, emphasis and escapes removed."""
    t = _before_last(">", lambda head: _HTML_IMG.sub("", head), text)
    t = unlink(t, "![", keep_text=False)
    t = unlink(t, "[", keep_text=True)
    t = _before_last(">", lambda head: re.sub(r"<[^>]+>", "", head), t)
    t = t.replace("**", "").replace("__", "").replace("`", "")
    t = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|])", r"\1", t)
    t = html.unescape(t)
    t = " ".join(t.split())
    t = t.strip(" *_")
    return repair_mojibake(t)


# -- the line scanner ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Link:
    """One link found on a logical line, with where it sits (``start``/``end``) on that line."""

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


def _html_anchors(content: str) -> list[tuple[int, int, str, str]]:
    """Every ``<a href="…">text</a>`` on a line, as (start, end, href, text), in O(n log n).

    It finds what ``<a\\b[^>]*?\\bhref\\s*=\\s*["']([^"']*)["'][^>]*>(.*?)</a\\s*>`` would find
    (case-insensitive, the text may span lines), but looks up each next ``>``, quote and ``</a>`` in
    position lists instead of rescanning the line: an anchor that is never closed costs a few
    bisections, not a scan to the end of the line.
    """
    gts = [i for i, c in enumerate(content) if c == ">"]
    if not gts:
        return []
    quotes = [i for i, c in enumerate(content) if c in "\"'"]
    hrefs = [(m.start(), m.end()) for m in _A_HREF.finditer(content)]
    href_starts = [h for h, _ in hrefs]
    closes = [(m.start(), m.end()) for m in _A_CLOSE.finditer(content)]
    close_starts = [c for c, _ in closes]
    found: list[tuple[int, int, str, str]] = []
    done = 0  # matches do not overlap: the next one starts after the last one's ``</a>``
    for m in _A_OPEN.finditer(content):
        p = m.start()
        if p < done:
            continue
        g = bisect_left(gts, p + 2)
        if g == len(gts):
            break  # no '>' after this point: no tag can end
        # The attributes before href cannot contain '>': the href must start before the first '>'.
        k = bisect_left(href_starts, p + 2)
        if k == len(hrefs) or hrefs[k][0] >= gts[g]:
            continue
        value_start = hrefs[k][1]
        q = bisect_left(quotes, value_start)
        if q == len(quotes):
            continue
        tag_end = bisect_left(gts, quotes[q] + 1)
        if tag_end == len(gts):
            continue
        text_start = gts[tag_end] + 1
        c = bisect_left(close_starts, text_start)
        if c == len(closes):
            continue
        found.append((p, closes[c][1], content[value_start : quotes[q]], content[text_start : closes[c][0]]))
        done = closes[c][1]
    return found


def scan_links(content: str) -> tuple[list[Link], str, list[str]]:
    """Find every link in one logical line.

    Returns the links in order, the line with links masked by spaces (for tag and prose checks) and
    problems (malformed link syntax) found on the way.
    """
    links: list[Link] = []
    problems: list[str] = []
    masked = list(content)

    def mask(a: int, b: int) -> None:
        for k in range(a, b):
            masked[k] = " "

    for start, end, href, inner in _html_anchors(content):
        image = "<img" in inner.lower() and not clean_inline(inner)
        links.append(Link(clean_inline(inner), href, start, end, image=image))
        mask(start, end)
    for m in _HTML_IMG.finditer(content, 0, content.rfind(">") + 1):  # see _before_last
        if masked[m.start()] != " ":
            src = _IMG_SRC.search(m.group(0))
            links.append(Link("", src.group("src") if src else "", m.start(), m.end(), image=True))
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
                links.append(Link(text, target, start, pclose + 1, image=image or text_is_image))
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
        links.append(Link(None, url, m.start(), m.start() + len(url)))
        mask(m.start(), m.start() + len(url))
    links.sort(key=lambda lk: lk.start)
    return links, "".join(masked), problems


# -- logical lines ---------------------------------------------------------------------------------

@dataclass
class Line:
    """One logical line of a list: continuation lines joined, headings recognised."""

    no: int  # 1-based number of the first physical line
    text: str  # logical line (continuations joined with a space)
    raw: str  # as written, for issue reports
    heading: tuple[int, str] | None = None


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


def logical_lines(text: str, name: str, issues: list[ParseIssue]) -> tuple[dict[str, str], list[Line]]:
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

    out: list[Line] = []
    k = 0
    while k < len(visible):
        no, line = visible[k]
        raw = physical[no - 1]
        h = HEADING.match(line)
        if h:
            out.append(Line(no, line, raw, (len(h.group("hashes")), clean_inline(h.group("text") or ""))))
            k += 1
            continue
        nxt = visible[k + 1][1] if k + 1 < len(visible) else ""
        sm = SETEXT.match(nxt)
        if (sm and line.strip() and not ITEM.match(line) and not line.startswith(("    ", "\t"))
                and not (sm.group("rule").startswith("-") and len(sm.group("rule")) < 2)):
            level = 1 if sm.group("rule").startswith("=") else 2
            out.append(Line(no, line, raw, (level, clean_inline(line))))
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
        out.append(Line(no, line, raw))
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
    return bool(s) and not ITEM.match(next_line) and not HEADING.match(next_line)

