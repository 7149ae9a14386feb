"""Builders of small fixture documents (HTML pages, PDFs, markdown) for the tests.

The PDFs are written by hand (a few objects, one Helvetica text stream per page) so that the tests
need no PDF-making package and can produce exactly the defects they are about: pages without a text
layer, truncated files, garbage after a valid header. Encryption uses pypdf's writer with RC4, which
pypdf implements without optional crypto packages.
"""

from __future__ import annotations

import html
import io
import textwrap
import zlib
from collections.abc import Sequence

from pypdf import PdfReader, PdfWriter

COOKIE_TEXT = "We use optional cookies to improve your experience and to show personalised advertising."
NAV_LINKS = ("Product", "Pricing", "Enterprise Solutions", "Sign in to your account")
FOOTER_TEXT = "Copyright 2026 Example Corp. Terms of service. Privacy statement. Manage cookie settings."
SIDEBAR_TEXT = "Related projects you might like from the sidebar widget"


def html_page(
    title: str,
    sections: Sequence[tuple[str, Sequence[str]]],
    *,
    intro: Sequence[str] = (),
    chrome: bool = True,
    meta_charset: str | None = "utf-8",
    head_extra: str = "",
) -> str:
    """An article page: ``<h1>title``, ``intro`` paragraphs, then one ``<h2>`` per section.

    With ``chrome``, the article is wrapped in the boilerplate real sites carry: a cookie banner, a
    header with a nav bar, a sidebar, a footer and an "Edit on GitHub" link outside the article.
    """
    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>"]
    body += [f"<p>{esc(p)}</p>" for p in intro]
    for heading, paragraphs in sections:
        body.append(f"<h2>{esc(heading)}</h2>")
        body += [f"<p>{esc(p)}</p>" for p in paragraphs]
    article = "<article>\n" + "\n".join(body) + "\n</article>"
    charset = f'<meta charset="{meta_charset}">' if meta_charset else ""
    if not chrome:
        return (
            f"<!DOCTYPE html><html><head>{charset}<title>{esc(title)}</title>{head_extra}</head>"
            f"<body>{article}</body></html>"
        )
    nav = "".join(f'<li><a href="/{i}">{esc(t)}</a></li>' for i, t in enumerate(NAV_LINKS))
    return f"""<!DOCTYPE html>
<html lang="en"><head>{charset}
<title>{esc(title)} | Example Docs</title>
<meta name="description" content="A page about {esc(title)}">
{head_extra}
<script>window.dataLayer = []; function gtag(){{}}</script>
</head><body>
<a class="skip-link" href="#main">Skip to content</a>
<div id="cookie-banner" class="cookie-consent" role="dialog"><p>{COOKIE_TEXT}</p>
<button>Accept</button> <button>Reject</button></div>
<header class="site-header"><a href="/">Example Docs</a><nav><ul>{nav}</ul></nav></header>
<div class="layout"><main id="main">
<div class="breadcrumbs"><a href="/">Docs</a> / <a href="/guide">Guide</a></div>
{article}
<div class="edit-page"><a href="https://github.com/example/docs/edit/main/page.md">Edit on GitHub</a></div>
</main>
<aside class="sidebar"><h3>On this page</h3><ul><li><a href="#a">{SIDEBAR_TEXT}</a></li></ul></aside>
</div>
<footer class="footer"><p>{FOOTER_TEXT}</p>
<nav><a href="/terms">Terms</a> <a href="/privacy">Privacy</a></nav></footer>
</body></html>"""


def landing_page(title: str, abstract: str, pdf_href: str, *, abstract_in_body: bool = True) -> str:
    """A publisher landing page as the snapshot has them: title, abstract, ``citation_pdf_url``.

    With ``abstract_in_body=False`` the abstract is only in the meta description (as on pages that
    render it with scripts).
    """
    esc = html.escape
    shown = f"<p>{esc(abstract)}</p>" if abstract_in_body else ""
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>{esc(title)} | dl.example.org</title>
<meta name="citation_title" content="{esc(title)}">
<meta name="citation_author" content="Ada Lovelace">
<meta name="citation_author" content="Charles Babbage">
<meta name="citation_publication_date" content="2019/10/27">
<meta name="citation_pdf_url" content="{esc(pdf_href)}">
<meta name="description" content="{esc(abstract)}">
</head><body>
<header><nav><a href="/">Home</a> <a href="/search">Search</a> <a href="/about">About</a>
<a href="/login">Sign in</a></nav></header>
<main><article><h1>{esc(title)}</h1>
<section class="abstract"><h2>Abstract</h2>{shown}</section>
<p><a class="pdf-link" href="{esc(pdf_href)}">PDF</a></p>
</article></main>
<footer><p>&copy; 2026 dl.example.org. Terms of use. Privacy policy. Cookie settings.</p></footer>
</body></html>"""


# -- PDF -------------------------------------------------------------------------------------------
def _pdf_string(line: str) -> bytes:
    """A PDF literal string in WinAnsi (cp1252) encoding, with (, ) and \\ escaped."""
    raw = line.encode("cp1252", errors="replace")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def _text_stream(text: str, width: int = 90) -> bytes:
    """Content stream that writes ``text`` line by line in 10 pt Helvetica.

    Newlines in ``text`` are kept as line breaks; longer lines are wrapped at ``width`` characters.
    """
    lines: list[str] = []
    for para in text.split("\n"):
        lines += textwrap.wrap(para, width) or [""]
    ops = [b"BT", b"/F1 10 Tf", b"13 TL", b"72 740 Td"]
    for i, line in enumerate(lines):
        ops.append(_pdf_string(line) + (b" Tj" if i == 0 else b" '"))
    ops.append(b"ET")
    return b"\n".join(ops)


def _image_stream() -> bytes:
    """Content stream that only paints an image (what a scanned page is)."""
    return b"q 468 0 0 600 72 100 cm /Im1 Do Q"


def build_pdf(
    pages: Sequence[str | None], *, compress: bool = False, broken_pages: Sequence[int] = ()
) -> bytes:
    """A valid PDF with one page per entry: text pages for strings, image-only pages for ``None``.

    ``broken_pages`` (1-based) get a content stream that claims FlateDecode but holds garbage, so
    that reading that page's text fails while the other pages stay readable.
    """
    objects: list[bytes] = []  # object n is objects[n - 1]

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in below
    pages_obj = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    pixels = bytes(range(256)) * 3  # 16 x 16 grey image
    image = add(
        b"<< /Type /XObject /Subtype /Image /Width 16 /Height 16 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Length %d >>\nstream\n" % len(pixels) + pixels + b"\nendstream"
    )
    kids = []
    for number, text in enumerate(pages, start=1):
        if number in broken_pages:
            data, filt = b"this is not zlib data at all" * 3, b" /Filter /FlateDecode"
        else:
            data = _text_stream(text) if text is not None else _image_stream()
            filt = b""
            if compress:
                data, filt = zlib.compress(data), b" /Filter /FlateDecode"
        content = add(b"<< /Length %d%s >>\nstream\n" % (len(data), filt) + data + b"\nendstream")
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                b"/Resources << /Font << /F1 %d 0 R >> /XObject << /Im1 %d 0 R >> >> >>"
                % (pages_obj, content, font, image)
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages_obj
    objects[pages_obj - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )

    return pdf_file(objects, root=catalog)


def pdf_file(objects: Sequence[bytes], *, root: int = 1) -> bytes:
    """A PDF file of numbered object bodies (object ``n`` is ``objects[n - 1]``, ``root`` the catalog) with its
    cross-reference table: the one writer behind every hand-made PDF of the tests."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, root, xref))
    return out.getvalue()


def encrypt_pdf(pdf: bytes, *, user_password: str, owner_password: str = "owner-secret") -> bytes:
    """``pdf`` encrypted with RC4-128 (readable with ``user_password``; "" means anyone may open it)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password=user_password, owner_password=owner_password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def prose(n_sentences: int, seed: int = 0) -> str:
    """Deterministic English-like prose about distributed training, ``n_sentences`` long."""
    subjects = [
        "Pipeline parallelism",
        "The optimizer",
        "Each worker",
        "Tensor parallelism",
        "The scheduler",
        "Data parallel training",
        "The all-reduce step",
        "Activation checkpointing",
    ]
    verbs = ["splits", "overlaps", "reduces", "partitions", "stores", "recomputes", "balances", "shards"]
    objects = [
        "the model states across devices",
        "communication with computation",
        "the memory footprint",
        "micro-batches between stages",
        "gradients in half precision",
        "activations during backward",
        "the optimizer state over data-parallel ranks",
        "parameters on the host",
    ]
    tails = [
        "to improve throughput",
        "at large scale",
        "without changing the model",
        "for long sequences",
        "under a fixed memory budget",
        "on commodity clusters",
    ]
    out = []
    for i in range(n_sentences):
        k = i + seed
        out.append(
            f"{subjects[k % len(subjects)]} {verbs[(k * 3) % len(verbs)]} {objects[(k * 5) % len(objects)]} "
            f"{tails[(k * 7) % len(tails)]}."
        )
    return " ".join(out)
