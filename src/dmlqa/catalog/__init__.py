"""Catalog stage: parse curated lists into resources, keep the catalog, take in local documents.

Modules, lowest first: :mod:`~dmlqa.catalog.urls` (canonical URLs, ids, kinds, placeholder
titles), :mod:`~dmlqa.catalog.markdown` (a list's logical lines and links),
:mod:`~dmlqa.catalog.lists` (facts from them: :func:`parse_list`), :mod:`~dmlqa.catalog.store`
(``catalog.jsonl``, ``lists.toml``, :func:`import_lists`), :mod:`~dmlqa.catalog.local` (the
user's own documents), :mod:`~dmlqa.catalog.bibformats` (BibTeX and CSL-JSON exports read into
:class:`LibraryEntry` records) and :mod:`~dmlqa.catalog.library` (a reference library added to a
home: attachments as documents, the rest as catalog entries, :func:`add_files`), and
:mod:`~dmlqa.catalog.remove` (taking an entry or a local document back out). The first stage; it
imports nothing of the stages after it.
"""

from dmlqa.catalog.bibformats import EntryProblem, LibraryEntry, ParsedLibrary, read_library
from dmlqa.catalog.library import AttachedFile, add_files, add_library, is_library, library_list, library_metadata
from dmlqa.catalog.lists import ParsedList, combine, list_name_for, parse_list
from dmlqa.catalog.local import AddReport, add_paths, jsonl_documents, local_files, scan_local, too_large_reason
from dmlqa.catalog.markdown import ParseIssue, repair_mojibake
from dmlqa.catalog.remove import Removal, apply_removal
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
    "AttachedFile",
    "EntryProblem",
    "ImportReport",
    "LibraryEntry",
    "ParseIssue",
    "ParsedLibrary",
    "ParsedList",
    "Removal",
    "add_files",
    "add_library",
    "add_paths",
    "address",
    "apply_removal",
    "arxiv_id",
    "canonicalize",
    "combine",
    "doi",
    "github_repo",
    "guess_kind",
    "import_lists",
    "is_library",
    "is_url_title",
    "jsonl_documents",
    "library_list",
    "library_metadata",
    "list_name_for",
    "local_files",
    "merge",
    "parse_list",
    "read_catalog",
    "read_library",
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
