"""URL facts for the catalog: canonical form, stable ids, and what kind of thing a link points at.

Awesome lists name the same paper as ``http://arxiv.org/abs/X``, ``https://arxiv.org/pdf/Xv3`` or
``arxiv.org/abs/X/``, and the same repository as ``github.com/Owner/Repo`` or ``github.com/owner/repo``.
The catalog must hold one entry for each, so every link goes through :func:`canonicalize` and is keyed
by :func:`resource_id`. Everything here is a pure function of its arguments (no I/O), so the rules can
be tested one by one and reused by later stages (fetch, citation) that need the same identity.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from datetime import date
from urllib.parse import parse_qsl, quote, unquote, urlencode, urljoin, urlsplit, urlunsplit

# -- patterns ------------------------------------------------------------------------------------

#: New-style (``1910.02054``) and old-style (``cs/0112017``, ``math.GT/0309136``) arXiv ids.
_ARXIV_ID = r"(?P<id>\d{4}\.\d{4,5}|[a-z][a-z-]*(?:\.[A-Z]{2})?/\d{7})"
_ARXIV_PATH = re.compile(rf"^/(?:abs|pdf|html|format)/{_ARXIV_ID}(?:v\d+)?(?:\.pdf)?/?$", re.IGNORECASE)
_ARXIV_HOSTS = {"arxiv.org", "export.arxiv.org"}
#: an id as a person or a page writes it: ``1910.02054``, ``arXiv:1910.02054v3``, ``arXiv: hep-th/9901001``
_ARXIV_BARE = re.compile(rf"^(?:arxiv\s*:\s*)?{_ARXIV_ID}(?:v\d+)?$", re.IGNORECASE)

#: A DOI as it appears in a path: ``10.<registrant>/<suffix>``.
_DOI_IN_PATH = re.compile(r"^/(?:doi/(?:(?:abs|pdf|full|epdf|fullhtml|book)/)?)?(?P<doi>10\.\d{4,9}/\S+)$",
                          re.IGNORECASE)
_DOI_HOSTS = {"doi.org", "dx.doi.org"}

#: First path segments of github.com that are site pages, not repository owners.
_GITHUB_RESERVED = {
    "about", "apps", "collections", "contact", "customer-stories", "enterprise", "events", "explore",
    "features", "login", "marketplace", "new", "notifications", "orgs", "pricing", "readme", "search",
    "security", "settings", "site", "sponsors", "topics", "trending", "join",
}
#: Repository sub-pages that are the list's own contribution machinery, never reading material.
_GITHUB_CONTRIB_PAGES = {"issues", "pulls", "compare", "fork", "edit", "new", "discussions", "graphs",
                         "network", "stargazers", "watchers", "actions", "security", "pulse"}

_HOST_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$")
_SCHEME_RE = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*):")
_TRACKING_PARAMS = {"fbclid", "gclid", "mc_cid", "mc_eid", "ref_src", "igshid", "yclid", "_hsenc", "_hsmi"}

_IMAGE_EXT = (".svg", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".bmp")
_BADGE_HOSTS = {"img.shields.io", "shields.io", "badgen.net", "badge.fury.io", "static.pepy.tech"}
#: ``/badge.svg``, ``/badge/``, ``/badges/...``: CI, coverage, docs and awesome badges on any host.
_BADGE_PATH = re.compile(r"/badges?(?:/|\.(?:svg|png)|$)", re.IGNORECASE)
_LAUNCH_HOSTS = {"mybinder.org", "gke.mybinder.org", "gitpod.io", "deepnote.com", "binder.pangeo.io"}

_VIDEO_HOSTS = {"youtube.com", "m.youtube.com", "youtu.be", "vimeo.com", "player.vimeo.com",
                "bilibili.com", "slideslive.com", "videolectures.net", "youtube-nocookie.com"}
_SLIDE_HOSTS = {"speakerdeck.com", "slideshare.net"}
_CODE_HOSTS = {"github.com", "gitlab.com", "bitbucket.org", "git.sr.ht", "codeberg.org", "sr.ht"}
#: Hosts (or host + path prefix) whose pages are papers or their publisher landing pages.
_PAPER_PREFIXES = (
    "arxiv.org/", "doi.org/", "dl.acm.org/doi/", "usenix.org/conference/", "usenix.org/system/files/",
    "openreview.net/", "proceedings.neurips.cc/", "papers.nips.cc/", "proceedings.mlr.press/",
    "proceedings.mlsys.org/", "mlsys.org/", "ieeexplore.ieee.org/", "aclanthology.org/", "techrxiv.org/",
    "computer.org/csdl/", "osti.gov/biblio/", "research.google/pubs/", "semanticscholar.org/paper/",
    "link.springer.com/", "sciencedirect.com/", "jmlr.org/papers/", "vldb.org/pvldb/", "core.ac.uk/",
    "biorxiv.org/", "ssrn.com/", "researchgate.net/publication/", "cambridge.org/core/",
    "openaccess.thecvf.com/", "ojs.aaai.org/", "ijcai.org/proceedings/", "hal.science/",
)
_BLOG_HOSTS = {"medium.com", "towardsdatascience.com", "marktechpost.com", "insidehpc.com", "hunch.net",
               "substack.com", "dev.to", "hackernoon.com", "eng.uber.com", "engineering.fb.com"}
_DATED_PATH = re.compile(r"/(?:19|20)\d\d/\d\d/")
_DOCS_PATH = re.compile(r"/(?:docs?|documentation|tutorials?|guide|api|manual|user-guide)(?:/|$)|"
                        r"/en/(?:latest|stable)(?:/|$)", re.IGNORECASE)
_SLIDE_HINTS = re.compile(r"slides?|talk|presentation|keynote|summit|session|lecture|webinar", re.IGNORECASE)

#: Obsidian-style tags (``#PAPER``) mapped to the kind they assert.
_TAG_KINDS = {
    "paper": "paper", "papers": "paper", "article": "article", "blog": "article", "post": "article",
    "news": "article", "code": "repo", "repo": "repo", "tool": "repo", "library": "repo", "lib": "repo",
    "docs": "docs", "doc": "docs", "book": "docs", "course": "docs", "video": "video", "talk": "talk",
    "slides": "slides", "slide": "slides", "presentation": "talk",
}
_SECTION_PAPER = re.compile(r"\b(?:papers?|references?|surveys?|publications?|readings?|research)\b", re.I)
_SECTION_VIDEO = re.compile(r"\b(?:videos?|talks?|lectures?|webinars?)\b", re.I)
_SECTION_PROJECT = re.compile(r"\b(?:frameworks?|projects?|tools?|librar(?:y|ies)|code|software)\b", re.I)
_SECTION_DOCS = re.compile(r"\b(?:docs|documentation|tutorials?|guides?|courses?|books?)\b", re.I)


# -- canonical form ------------------------------------------------------------------------------

def canonicalize(url: str) -> str:
    """Return the one spelling under which the catalog stores ``url``.

    https; lower-case host without ``www.`` and default port; no fragment, no tracking parameters
    (``utm_*``, ``fbclid``…); no trailing slash (a bare host stays ``https://host``); arXiv abs/pdf/vN
    forms become ``https://arxiv.org/abs/<id>``; the owner/repo part of a GitHub path is lower-cased
    (GitHub treats it case-insensitively, sub-paths are not). A scheme-less ``www.host/...`` is read as
    https. Raises :class:`ValueError` naming the problem for anything that is not a web URL.
    """
    if not isinstance(url, str):
        raise ValueError(f"URL must be a string, got {type(url).__name__}")
    raw = url.strip().strip("<>").strip()
    if not raw:
        raise ValueError("empty URL")
    if any(c.isspace() for c in raw):
        raise ValueError(f"URL contains whitespace: {raw!r}")
    if raw.startswith("//"):
        raw = "https:" + raw
    elif raw.lower().startswith("www."):
        raw = "https://" + raw
    m = _SCHEME_RE.match(raw)
    if m is None:
        if raw.startswith("#"):
            raise ValueError(f"in-page anchor, not a URL: {raw!r}")
        raise ValueError(f"relative link (no scheme or host): {raw!r}")
    scheme = m.group("scheme").lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"unsupported URL scheme {scheme!r} (only http and https are catalogued): {raw!r}")
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"garbled URL {raw!r}: {exc}") from None
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ValueError(f"URL has no host: {raw!r}")
    try:
        host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError(f"URL host is not a valid domain name: {raw!r}") from None
    if not _HOST_RE.match(host) or "." not in host and host != "localhost":
        raise ValueError(f"URL host is not a valid domain name: {host!r} in {raw!r}")
    host = _strip_www(host)
    netloc = host if port in (None, 80, 443) else f"{host}:{port}"

    path = quote(parts.path, safe="/%:@!$&'()*+,;=-._~")
    query = _clean_query(parts.query)

    if host in _ARXIV_HOSTS:
        am = _ARXIV_PATH.match(path)
        if am:
            return f"https://arxiv.org/abs/{am.group('id')}"
        netloc = "arxiv.org"
    if host == "github.com":
        path = _github_path(path)
    if host == "dx.doi.org":
        netloc = "doi.org"

    path = path.rstrip("/")
    return urlunsplit(("https", netloc, path, query, ""))


def _github_path(path: str) -> str:
    """A github.com path with its owner/repo part lower-cased (GitHub ignores their case; the rest
    of the path is case-sensitive) and ``.git`` dropped from the repository name."""
    segs = path.split("/")
    if len(segs) >= 3 and segs[1] and segs[1].lower() not in _GITHUB_RESERVED:
        segs[1] = segs[1].lower()
        if segs[2]:
            segs[2] = segs[2].lower().removesuffix(".git")
        return "/".join(segs)
    if len(segs) == 2:
        return "/" + segs[1].lower()
    return path


def _strip_www(host: str) -> str:
    """``www.example.org`` → ``example.org``, but never a host that is not a domain name (``www.ww``).

    Stripping ``www.`` from a host whose rest has no dot would give a name that :func:`canonicalize`
    itself rejects, so canonicalisation would not be idempotent.
    """
    if host.startswith("www.") and "." in host[4:]:
        return host[4:]
    return host


def spelling_key(url: str) -> str:
    """A key under which spellings of one *address* meet: scheme, ``www.``, default port, trailing
    slash, fragment and the case of a GitHub owner/repo are erased; nothing else.

    Weaker than :func:`canonicalize` on purpose: ``arxiv.org/abs/X`` and ``arxiv.org/pdf/X`` are one
    work but two different responses, so an archive looked up by this key never serves one for the
    other. Used by archive replay to find a record under any equivalent spelling of the URL asked for.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        parts, port = urlsplit(""), None
    host = _strip_www((parts.hostname or "").lower())
    netloc = host if port in (None, 80, 443) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    if host == "github.com":
        path = _github_path(path)
    return f"{netloc}{path}" + (f"?{parts.query}" if parts.query else "")


def address(url: str) -> str:
    """The URL to request for a link as a list wrote it: exactly as written, except that a
    scheme-less ``www.host/...`` or ``//host/...`` gets ``https:`` and surrounding ``<>`` go.

    ``http`` stays ``http`` and GitHub paths keep their case: some hosts serve only http, and an
    archive holds a response under the URL that was requested (see PITFALLS: address vs identity).
    Raises :class:`ValueError` for what :func:`canonicalize` rejects.
    """
    canonicalize(url)  # the same validation, the same messages
    raw = url.strip().strip("<>").strip()
    if raw.startswith("//"):
        return "https:" + raw
    if raw.lower().startswith("www."):
        return "https://" + raw
    return raw.split("#", 1)[0]


def absolute_link(href: str, page_url: str, base_href: str | None = None) -> str | None:
    """The absolute http(s) URL a link on a page leads to (fragment dropped), else None.

    Resolved against the page's ``<base href>`` when it has one, else against ``page_url`` (its
    final URL after redirects). The resolver following ``citation_pdf_url`` and the extractor
    recording it both go by this, so they never name different PDFs for one page.
    """
    base = urljoin(page_url, base_href) if base_href else page_url
    absolute = urljoin(base, href.strip()).split("#", 1)[0]
    if urlsplit(absolute).scheme.lower() not in ("http", "https"):
        return None
    return absolute


def _clean_query(query: str) -> str:
    """Drop tracking parameters but keep the rest in order (they can select the resource)."""
    if not query:
        return ""
    pairs = parse_qsl(query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if not k.lower().startswith("utm_") and k.lower() not in _TRACKING_PARAMS]
    if len(kept) == len(pairs):
        return query  # untouched: re-encoding could change a signed URL
    return urlencode(kept, quote_via=quote, safe="/:@!$'()*,;~")


def _split(url: str) -> tuple[str, str]:
    """(host without www., path) of an absolute or scheme-less URL; ("", "") when unparsable.

    ``www.`` goes by :func:`_strip_www`, the rule :func:`canonicalize` uses, so an id or a kind
    read from a URL never disagrees with the URL's canonical form about which host it names.
    """
    raw = url.strip()
    if raw.lower().startswith("www."):
        raw = "https://" + raw
    try:
        parts = urlsplit(raw)
        host = (parts.hostname or "").lower()
    except ValueError:
        return "", ""
    return _strip_www(host), parts.path


def site(url: str) -> str:
    """The lower-case host of a URL without ``www.`` (``""`` when it has none or cannot be read):
    the one spelling of "which site" for filters and reports, as the catalog's identity has it."""
    return _split(url)[0]


# -- identities ----------------------------------------------------------------------------------

def arxiv_id(url: str) -> str | None:
    """The arXiv id (no version) for any abs/pdf/versioned arXiv URL, else None."""
    host, path = _split(url)
    if host not in _ARXIV_HOSTS:
        return None
    m = _ARXIV_PATH.match(path)
    return m.group("id") if m else None


def bare_arxiv_id(text: str | None) -> str | None:
    """The arXiv id (no version) written as ``1910.02054``, ``arXiv:1910.02054v3`` or an arXiv URL,
    else None: the one reading of an id that a reference, a library entry or a landing page gives."""
    text = (text or "").strip()
    if "://" in text:
        return arxiv_id(text)
    m = _ARXIV_BARE.match(text)
    return m.group("id") if m else None


def arxiv_year(ident: str | None) -> int | None:
    """The year an arXiv id dates its paper to: ``1910.02054`` → 2019, ``cs/0112017`` → 2001.

    New-style ids start with YYMM (since April 2007); old-style ids end with YYMMNNN. None for
    anything else, and for a month that does not exist (not an arXiv id after all).
    """
    if not ident:
        return None
    m = re.fullmatch(r"(\d{2})(\d{2})\.\d{4,5}(?:v\d+)?", ident)
    if m is not None:  # new style, used from April 2007 on
        year = 2000 + int(m.group(1))
        ok = 2007 <= year <= date.today().year + 1
    else:
        m = re.fullmatch(r"[a-z][a-z-]*(?:\.[A-Za-z]{2})?/(\d{2})(\d{2})\d{3}(?:v\d+)?", ident, re.IGNORECASE)
        if m is None:
            return None
        yy = int(m.group(1))
        year = 1900 + yy if yy >= 91 else 2000 + yy
        ok = year <= 2007
    return year if ok and 1 <= int(m.group(2)) <= 12 else None


def doi(url: str) -> str | None:
    """The DOI named by a doi.org or ACM Digital Library URL (any of its abs/pdf/full pages), else None."""
    host, path = _split(url)
    if host in _DOI_HOSTS or host == "dl.acm.org":
        if host == "dl.acm.org" and not path.lower().startswith("/doi/"):
            return None
        m = _DOI_IN_PATH.match(unquote(path).rstrip("/"))
        if m:
            return m.group("doi")
    return None


def github_repo(url: str) -> str | None:
    """``owner/repo`` (lower-case) for any github.com URL inside a repository, else None."""
    host, path = _split(url)
    if host != "github.com":
        return None
    segs = [s for s in path.split("/") if s]
    if len(segs) < 2 or segs[0].lower() in _GITHUB_RESERVED:
        return None
    return f"{segs[0].lower()}/{segs[1].lower().removesuffix('.git')}"


def is_github_repo_root(url: str) -> bool:
    """True when the URL is the repository's front page (not a file, folder or issue page in it)."""
    _, path = _split(url)
    return github_repo(url) is not None and len([s for s in path.split("/") if s]) == 2


def resource_id(canonical_url: str) -> str:
    """A stable, readable catalog key: ``arxiv:<id>``, ``doi:<doi>``, ``github:owner/repo``, else ``web:``.

    Only a repository's root is ``github:``; a file or folder in it is its own resource. The ``web:``
    form hashes the canonical URL so that the id stays short and filename-safe.
    """
    aid = arxiv_id(canonical_url)
    if aid:
        return f"arxiv:{aid}"
    d = doi(canonical_url)
    if d:
        return f"doi:{d.lower()}"
    if is_github_repo_root(canonical_url):
        return f"github:{github_repo(canonical_url)}"
    host, _ = _split(canonical_url)
    digest = hashlib.sha1(canonical_url.encode("utf-8")).hexdigest()[:10]
    return f"web:{host or 'unknown'}/{digest}"


def url_title(canonical_url: str) -> str:
    """The stand-in title of a link that has no text of its own: the URL without its scheme.

    The catalog gives this placeholder to every entry it has no title for; :func:`is_url_title`
    knows it, so the title of the fetched page replaces it later.
    """
    return re.sub(r"^https?://", "", canonical_url)


def is_url_title(title: str, canonical_url: str) -> bool:
    """True when ``title`` is only a spelling of a URL (so any real title should replace it).

    Empty, the URL itself, the catalog's placeholder :func:`url_title`, or anything that is a
    single ``http(s)://`` or ``www.`` token. The one copy of this rule: the catalog merging two
    sightings, the extractor choosing between the catalog's title and the page's, and the build
    refreshing a stored document all ask it, so a placeholder never outlives a real title.
    """
    t = title.strip()
    if not t or t in (canonical_url, url_title(canonical_url)):
        return True
    return re.fullmatch(r"(?:https?://|www\.)\S+", t, re.IGNORECASE) is not None


def is_relative(url: str) -> bool:
    """True for a link into the list's own folder or vault (``notes/Horovod.md``): nothing to fetch."""
    raw = url.strip()
    if not raw or raw.startswith(("#", "//")) or raw.lower().startswith("www."):
        return False
    return _SCHEME_RE.match(raw) is None


def is_non_resource(url: str) -> str | None:
    """Why a link is list furniture rather than reading material, or None when it may be a resource.

    Badges and other images, binder/launch buttons, table-of-contents anchors, relative links and a
    repository's own issue/pull-request pages are never catalogued.
    """
    raw = url.strip()
    if raw.startswith("#"):
        return "in-page anchor (table of contents)"
    if is_relative(raw):
        return f"relative link {raw!r} (a local file or note, not a web resource)"
    host, path = _split(raw)
    lpath = path.lower()
    if host in _BADGE_HOSTS or (host.endswith(".shields.io")):
        return f"badge image ({host})"
    if _BADGE_PATH.search(lpath) or lpath.endswith("badge_logo.svg"):
        return "badge image"
    if lpath.endswith(_IMAGE_EXT):
        return "image"
    if host in _LAUNCH_HOSTS or host.endswith(".mybinder.org"):
        return f"binder/launch button ({host})"
    if host == "colab.research.google.com" and lpath.startswith("/assets/"):
        return "badge image (Colab)"
    if host == "github.com":
        segs = [s for s in path.split("/") if s]
        if len(segs) >= 3 and segs[2].lower() in _GITHUB_CONTRIB_PAGES and github_repo(raw):
            return f"repository {segs[2].lower()} page (contribution link, not a resource)"
    return None


def guess_kind(
    url: str,
    *,
    title: str = "",
    tag: str | None = None,
    section: str | None = None,
    parent_tag: str | None = None,
) -> str:
    """Best guess of the resource kind, one of :data:`dmlqa.models.KINDS`.

    Evidence is weighed strongest first: a video host; GitHub (a repository or a folder in it is a
    repo, a file in it docs or paper); the list's own tag (``#PAPER``, ``#TALK``, ``#CODE``); what the
    URL says by itself (publisher/arXiv → paper, PDF → paper or slides, blog → article, docs site →
    docs); the tag of the entry this link is nested under; the section heading; else article.
    """
    host, path = _split(url)
    lpath = path.lower()
    hp = f"{host}{lpath}"
    is_pdf = lpath.endswith(".pdf") or "/pdf/" in lpath
    if host in _VIDEO_HOSTS or host.endswith(".youtube.com"):
        return "video"
    if host == "github.com" and github_repo(url):
        segs = [s for s in path.split("/") if s]
        if len(segs) <= 2 or segs[2] == "tree":
            return "repo"
        return "paper" if is_pdf else "docs"
    if host == "raw.githubusercontent.com" and is_pdf:
        return "paper"

    kind = _kind_from_tag(tag, host, is_pdf)
    if kind:
        return kind
    kind = _kind_from_url(host, lpath, hp, is_pdf, title, section)
    if kind:
        return kind
    kind = _kind_from_tag(parent_tag, host, is_pdf)
    if kind:
        return kind
    sec = section or ""
    if _SECTION_PAPER.search(sec):
        return "paper"
    if _SECTION_DOCS.search(sec) or _SECTION_PROJECT.search(sec):
        return "docs"
    if _SECTION_VIDEO.search(sec):
        return "video"
    return "article"


def _kind_from_tag(tag: str | None, host: str, is_pdf: bool) -> str | None:
    """The kind an Obsidian tag asserts; a talk is slides when it is a PDF and a video page otherwise."""
    if not tag:
        return None
    kind = _TAG_KINDS.get(tag.strip().lstrip("#").lower())
    if kind == "talk":
        # A talk's web page (conference or news post about it) is text to read, so article.
        return "slides" if is_pdf or host in _SLIDE_HOSTS else "article"
    if kind == "repo" and host not in _CODE_HOSTS:
        return "docs"  # a project's own site, named as code
    return kind


def _kind_from_url(host: str, lpath: str, hp: str, is_pdf: bool, title: str, section: str | None) -> str | None:
    """The kind the URL itself settles, or None when only context can tell."""
    if host in _SLIDE_HOSTS or hp.startswith("docs.google.com/presentation"):
        return "slides"
    if any(hp.startswith(p) for p in _PAPER_PREFIXES):
        return "paper"
    if is_pdf:
        hints = f"{lpath} {title} {section or ''}"
        return "slides" if _SLIDE_HINTS.search(hints) else "paper"
    if (host in _BLOG_HOSTS or any(host.endswith("." + b) for b in _BLOG_HOSTS) or host.startswith("blog.")
            or "/blog" in lpath or _DATED_PATH.search(lpath)):
        return "article"
    if (host.startswith("docs.") or host.endswith(".readthedocs.io") or host == "d2l.ai"
            or _DOCS_PATH.search(lpath)):
        return "docs"
    return None


# -- titles as identity ----------------------------------------------------------------------------

#: Shorter titles ("ZeRO", "Ray") name no single work: two documents (or a reference and a document)
#: are never taken for one work by such a title.
_MIN_TITLE_WORDS = 3
_MIN_TITLE_CHARS = 20


def title_key(title: str) -> str | None:
    """A title with case, accents, punctuation and spacing erased; None when too short to identify a work."""
    t = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii").lower()
    words = re.findall(r"[a-z0-9]+", t)
    key = " ".join(words)
    if len(words) < _MIN_TITLE_WORDS or len(key) < _MIN_TITLE_CHARS:
        return None
    return key
