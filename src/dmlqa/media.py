"""Media types of bodies: one copy of the rules for reading a Content-Type header and for telling
HTML, PDF, text and binary data apart by their bytes.

The fetcher, the archive, the extractor and local documents all decide what a body is; they must
agree, or a page the fetcher calls HTML is extracted as text (or the other way round). Every such
decision is made here.
"""

from __future__ import annotations


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
