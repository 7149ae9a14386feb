"""Works the citation graph suggests, put in the catalog (``dmlqa suggest --add``) so the next build
fetches them.

A suggestion names a work by the URL its references agree on (arXiv abstract, DOI, or a URL given in
the references); the catalog keys it by that URL's canonical form, as it keys every list entry, so a
work already listed elsewhere merges with its entry instead of being added twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dmlqa.catalog.store import merge, read_catalog, write_catalog
from dmlqa.catalog.urls import address, canonicalize, guess_kind, resource_id
from dmlqa.models import Resource


def add_suggested(catalog_path: Path, found: Sequence[Any], list_name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Add the suggestions (``dmlqa.query.graph.Suggestion``) that have a URL to the catalog under the list
    ``list_name``; returns (the catalog ids added, the titles that had no usable URL)."""
    entries, not_added = [], []
    for s in found:
        try:
            canon = canonicalize(s.url) if s.url else None
        except ValueError:
            canon = None
        if canon is None:
            not_added.append(s.title)
            continue
        kind = "paper" if s.arxiv_id or s.doi else guess_kind(canon, title=s.title)
        entries.append(Resource(id=resource_id(canon), url=canon, title=s.title, kind=kind, year=s.year,
                                lists=(list_name,), aliases=(address(s.url),)))
    if entries:
        write_catalog(catalog_path, merge(read_catalog(catalog_path), entries))
    return tuple(r.id for r in entries), tuple(not_added)
