"""Catalog stage: parse curated lists into resources, keep the catalog, take in local documents.

Modules, lowest first: :mod:`~dmlqa.catalog.urls` (canonical URLs, ids, kinds, placeholder
titles), :mod:`~dmlqa.catalog.markdown` (a list's logical lines and links),
:mod:`~dmlqa.catalog.lists` (facts from them: :func:`parse_list`), :mod:`~dmlqa.catalog.store`
(``catalog.jsonl``, ``lists.toml``, :func:`import_lists`) and :mod:`~dmlqa.catalog.local` (the
user's own documents). The first stage; it imports nothing of the stages after it.
"""

from dmlqa.catalog.lists import ParsedList, combine, list_name_for, parse_list
from dmlqa.catalog.local import AddReport, add_paths, jsonl_documents, local_files, scan_local, too_large_reason
from dmlqa.catalog.markdown import ParseIssue, repair_mojibake
from dmlqa.catalog.store import ImportReport, import_lists, merge, read_catalog, read_lists, write_catalog
from dmlqa.catalog.urls import (
    address,
    arxiv_id,
    canonicalize,
    doi,
    github_repo,
    guess_kind,
    is_url_title,
    resource_id,
    site,
    spelling_key,
    url_title,
)

__all__ = [
    "AddReport",
    "ImportReport",
    "ParseIssue",
    "ParsedList",
    "add_paths",
    "address",
    "arxiv_id",
    "canonicalize",
    "combine",
    "doi",
    "github_repo",
    "guess_kind",
    "import_lists",
    "is_url_title",
    "jsonl_documents",
    "list_name_for",
    "local_files",
    "merge",
    "parse_list",
    "read_catalog",
    "read_lists",
    "repair_mojibake",
    "resource_id",
    "scan_local",
    "site",
    "spelling_key",
    "too_large_reason",
    "url_title",
    "write_catalog",
]
