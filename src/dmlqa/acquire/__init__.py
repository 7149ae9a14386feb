"""Acquire stage: download what the catalog names (guarded HTTP, robots, resolvers) and keep
every response in a WARC archive that a build can replay offline.

Modules, lowest first: :mod:`~dmlqa.acquire.http` (guards and failure words),
:mod:`~dmlqa.acquire.archive` (WARC writer, replay), :mod:`~dmlqa.acquire.manifest` (per-URL
outcomes and validators), :mod:`~dmlqa.acquire.robots` (RFC 9309 policy),
:mod:`~dmlqa.acquire.fetch` (the :class:`Fetcher`), :mod:`~dmlqa.acquire.pacing` (per-host intervals:
arXiv's rate, Crawl-delay), :mod:`~dmlqa.acquire.pagemeta` (what a landing page says of its paper),
:mod:`~dmlqa.acquire.openaccess` (open copies of paywalled papers: arXiv, OpenAlex),
:mod:`~dmlqa.acquire.resolve` (from a listed link to the document worth reading). It imports only the
catalog stage and the base modules.
"""

from dmlqa.acquire.archive import ArchivedResponse, ArchiveReplay, ArchiveWriter, read_response
from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.http import parse_retry_after, status_text
from dmlqa.acquire.manifest import Manifest, ManifestEntry
from dmlqa.acquire.openaccess import OpenCopy, PaperHints, Search, find_open_copy, paper_hints
from dmlqa.acquire.pacing import ARXIV_API_INTERVAL, paced_fetch, set_min_interval
from dmlqa.acquire.pagemeta import PageMeta, page_meta
from dmlqa.acquire.resolve import Resolved, candidate_urls, citation_pdf_url, fetch_resource
from dmlqa.acquire.robots import RobotsPolicy, load_robots

__all__ = [
    "ARXIV_API_INTERVAL",
    "ArchiveReplay",
    "ArchiveWriter",
    "ArchivedResponse",
    "Fetcher",
    "Manifest",
    "ManifestEntry",
    "OpenCopy",
    "PageMeta",
    "PaperHints",
    "Resolved",
    "RobotsPolicy",
    "Search",
    "candidate_urls",
    "citation_pdf_url",
    "fetch_resource",
    "find_open_copy",
    "load_robots",
    "paced_fetch",
    "page_meta",
    "paper_hints",
    "parse_retry_after",
    "read_response",
    "set_min_interval",
    "status_text",
]
