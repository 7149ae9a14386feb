"""Media types of bodies: one copy of the rules for reading a Content-Type header and for telling
HTML, PDF, text and binary data apart by their bytes.

The fetcher, the archive, the extractor and local documents all decide what a body is; they must
agree, or a page the fetcher calls HTML is extracted as text (or the other way round). Every such
decision is made here, and the stages only ask.

Servers get the label wrong both ways: PDFs come as ``application/octet-stream`` (GitHub raw, the
snapshot), error and login pages come as ``application/pdf``, READMEs as ``text/plain``. So the
bytes decide where they are unambiguous (:func:`looks_like_pdf`, :func:`looks_like_html`), the
declared type where they are not, and a URL's suffix only where the label says nothing.
"""

from __future__ import annotations

import codecs
import re
from pathlib import PurePosixPath
from urllib.parse import urlsplit

PDF_TYPES = frozenset({"application/pdf", "application/x-pdf", "application/acrobat"})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
#: Declared types that say nothing about the content: decided by sniffing and the URL's suffix.
UNKNOWN_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown"})
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd")

#: PDF readers accept the header anywhere in the first 1024 bytes (junk may precede it).
_PDF_HEADER_WINDOW = 1024
#: How much of a body the HTML and binary checks look at: enough for a doctype after long comments.
_HTML_WINDOW = 2048
_TEXT_WINDOW = 8192
#: A body opens like an HTML document: optional XML prolog and comments, then a document-level tag.
#: ``<meta>`` and ``<title>`` count (pages that skip ``<html>``/``<head>`` are common and valid).
_HTML_START = re.compile(
    rb"^\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|meta|title)\b",
    re.IGNORECASE | re.DOTALL,
)


# -- the Content-Type header ----------------------------------------------------------------------


def parse_content_type(value: str | None) -> tuple[str, str | None]:
    """``("text/html", "iso-8859-1")`` from ``"Text/HTML; charset=ISO-8859-1"``; ``("", None)`` from nothing."""
    media, _, params = (value or "").partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip("\"'")
    return media.strip().lower(), charset


def media_type(value: str | None) -> str:
    """``Text/HTML; charset=utf-8`` → ``text/html``."""
    return parse_content_type(value)[0]


def charset(value: str | None) -> str | None:
    """The charset parameter of a Content-Type header, or None."""
    return parse_content_type(value)[1]


# -- is this text at all ---------------------------------------------------------------------------

#: Above this share of unprintable characters a body (or the text taken from it) is not text. Real
#: text in any language and encoding has next to none; random bytes read in any single-byte charset
#: have at least 11% (the C0 controls alone are 28 of 256 byte values), in UTF-8 far more.
MAX_UNPRINTABLE_SHARE = 0.1
#: What no text is made of: C0 controls but tab, newline, form feed and carriage return; DEL and the
#: C1 controls; the replacement character a decoder leaves for bytes it cannot read; private-use
#: code points (symbol fonts without a Unicode map), lone surrogates and noncharacters.
_UNPRINTABLE = re.compile(
    r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ufffd\ue000-\uf8ff\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff"
    r"\U000f0000-\U0010ffff]"
)
#: Texts shorter than this (whitespace collapsed) are too short to judge as one repeated pattern.
_MIN_REPEAT_JUDGED = 200
#: A text is one pattern repeated when at least this share of it equals itself one period later.
_REPEATED_SHARE = 0.9
#: A "short" pattern is repeated at least this many times, and is at most a short paragraph long. A
#: longer passage given again and again is left to the chunker, which indexes each passage once.
_MIN_REPEATS = 4
_MAX_PATTERN = 512
_PROBE = 32  # characters looked up again to find a candidate period
_BLOCK = 64  # characters compared at a time when measuring how much of a text repeats


def unprintable_share(text: str) -> float:
    """The share of ``text``'s characters that no text is made of (controls, U+FFFD, private use, ...)."""
    return len(_UNPRINTABLE.findall(text)) / max(1, len(text))


def repeated_pattern(text: str) -> tuple[int, int] | None:
    """``(pattern length, repeats)`` when ``text`` (whitespace collapsed) is essentially one short
    pattern (at most 512 characters) repeated: filler such as ``abcabc…`` or one phrase or line over
    and over. None for ordinary text, and for texts too short to judge.

    A candidate period comes from where a probe of the text recurs (three probes, so a phrase that a
    real text happens to repeat near one probe cannot hide a period); the text counts as repeated
    when nine tenths of it equal the text one period later, which tolerates a head or tail (a title,
    a partial last repeat). Slices are compared a block at a time, so a long text costs little.
    """
    t = " ".join(text.split())
    n = len(t)
    if n < _MIN_REPEAT_JUDGED:
        return None
    for where in (n // 4, n // 2, 3 * n // 4):
        found = t.find(t[where : where + _PROBE], where + 1)
        period = found - where
        if found < 0 or period > _MAX_PATTERN or period * _MIN_REPEATS > n:
            continue
        span = n - period
        allowed = (1 - _REPEATED_SHARE) * span  # mismatching characters tolerated
        mismatched = 0
        for i in range(0, span, _BLOCK):
            j = min(i + _BLOCK, span)
            if t[i:j] != t[i + period : j + period]:
                mismatched += j - i
                if mismatched > allowed:
                    break
        else:
            return period, n // period
    return None


def not_text_reason(text: str) -> str | None:
    """Why ``text`` (a decoded body, or the text extracted from one) is not text, or None when it is.

    The one rule for "this is no text to index", used on what every body decodes to and on what its
    extractor returns: mostly unprintable characters (binary data served as ``text/html``, a PDF
    whose fonts map to nothing), or one short pattern repeated (filler). Real text in any script
    passes: letters, digits and punctuation of every language are printable, and a table of numbers
    is not one pattern over and over.
    """
    share = unprintable_share(text)
    if share > MAX_UNPRINTABLE_SHARE:
        return f"not text: {share:.0%} of characters are control or unprintable"
    repeated = repeated_pattern(text)
    if repeated is not None:
        length, times = repeated
        return f"not text: one {length}-character pattern repeated {times} times"
    return None


# -- what the bytes are ---------------------------------------------------------------------------


def looks_like_html(body: bytes) -> bool:
    """True when ``body`` opens like an HTML document (after a BOM, whitespace, an XML prolog and
    comments: ``<!doctype html``, ``<html``, ``<head``, ``<body``, ``<meta`` or ``<title``).

    Only the opening counts, so a Markdown README that embeds some HTML further down stays Markdown.
    """
    head = body[:_HTML_WINDOW]
    if head.startswith(codecs.BOM_UTF8):
        head = head[len(codecs.BOM_UTF8) :]
    return _HTML_START.match(head) is not None


def looks_like_pdf(body: bytes) -> bool:
    """True when ``body`` is a PDF: ``%PDF-`` first (after whitespace or a BOM), or within the first
    1024 bytes as readers accept it, except in an HTML page that merely mentions ``%PDF-`` near its top.
    """
    if body[:_PDF_HEADER_WINDOW].lstrip(b"\xef\xbb\xbf \t\r\n\f").startswith(b"%PDF-"):
        return True
    return b"%PDF-" in body[:_PDF_HEADER_WINDOW] and not looks_like_html(body)


def looks_binary(body: bytes) -> bool:
    """An image, an archive or random bytes: in the first 8 KB read as UTF-8, over a tenth of the
    characters are unprintable (control characters, bytes that are no UTF-8).

    A legacy-encoded text (latin-1, cp1252) has a few undecodable bytes, not that many, and the
    extractor decodes it; a stray NUL or bell in a text is dropped by cleaning, so neither makes a
    text binary. The measure and the threshold are those of :func:`not_text_reason`, which the
    extractor applies once it knows the charset, so the fetcher's guess at a body with no useful
    label agrees with what extraction will then decide.
    """
    return unprintable_share(body[:_TEXT_WINDOW].decode("utf-8", errors="replace")) > MAX_UNPRINTABLE_SHARE


def looks_like_text(body: bytes) -> bool:
    """A non-empty body that is not :func:`looks_binary`."""
    return bool(body) and not looks_binary(body)


def url_suffix(url: str) -> str:
    """The lower-case suffix of a URL's path (``.pdf``), or of a plain file path; ``""`` for none."""
    path = urlsplit(url).path if "://" in url else url
    return PurePosixPath(path).suffix.lower()


def sniff_content_type(body: bytes, declared: str | None, url: str = "") -> str:
    """The media type the *bytes* are, which is what extraction must go by.

    The body decides first (a PDF → PDF, HTML markup → HTML), then the declared type, then the
    URL's suffix. Returns ``application/pdf``, ``text/html``, ``text/markdown``, ``text/plain``, or
    the declared type (``application/octet-stream`` when nothing is known) for anything else.
    """
    if looks_like_pdf(body):
        return "application/pdf"
    declared_type = media_type(declared)
    if looks_like_html(body) or declared_type in HTML_TYPES:
        return "text/html"
    if declared_type in MARKDOWN_TYPES or (
        url_suffix(url) in MARKDOWN_SUFFIXES and declared_type in ("", "text/plain", "application/octet-stream")
    ):
        return "text/markdown"
    if declared_type.startswith("text/"):
        return "text/plain"
    if declared_type and declared_type != "application/octet-stream":
        return declared_type
    if looks_like_text(body):
        return "text/plain"
    return "application/octet-stream"
