"""Re-read the awesome lists from upstream and fold what changed into the catalog (``--refresh-lists``).

``corpus/lists.toml`` names where each imported list lives (its ``upstream``, only where the list's
own text showed it). A refresh downloads each upstream through the ordinary :class:`Fetcher` — so
the same safety rules apply as to every resource (http(s) only, no private addresses unless
allowed, size caps, robots.txt) and the response lands in the WARC archive — parses it with
:func:`dmlqa.catalog.lists.parse_list` under the list's existing name, and replaces that list's entries in
the catalog: a link the list dropped leaves the catalog unless another list still names it, a new
link joins it. The next build then drops and adds the documents accordingly.

A list whose upstream cannot be had (network down, repository gone, an HTML page instead of
markdown, a text with no links at all) is reported and its entries are kept: a refresh never
empties the catalog because a server had a bad day.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dmlqa.catalog import merge, parse_list, read_catalog, read_lists, write_catalog
from dmlqa.errors import FetchError
from dmlqa.fsutil import atomic_write_text
from dmlqa.models import Resource
from dmlqa.paths import LISTS_DIR
from dmlqa.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ListRefresh:
    """What refreshing one list did. ``status``: updated | unchanged | failed | no-upstream."""

    name: str
    upstream: str | None
    status: str
    source_url: str | None = None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    resources: int = 0
    issues: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "upstream": self.upstream, "status": self.status, "source_url": self.source_url,
            "added": list(self.added), "removed": list(self.removed), "resources": self.resources,
            "issues": self.issues, "error": self.error,
        }


@dataclass(frozen=True)
class RefreshReport:
    """All lists' outcomes, and the catalog ids added and removed overall."""

    lists: tuple[ListRefresh, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def failed(self) -> list[ListRefresh]:
        return [x for x in self.lists if x.status == "failed"]

    def to_json(self) -> dict[str, Any]:
        return {
            "lists": [x.to_json() for x in self.lists],
            "added": list(self.added),
            "removed": list(self.removed),
            "failed": [{"name": x.name, "upstream": x.upstream, "error": x.error} for x in self.failed],
        }


def upstream_urls(upstream: str) -> list[str]:
    """Where a list's markdown can be read, best first.

    A GitHub repository (``https://github.com/o/r``) is read from its raw ``README.md``, a ``blob``
    link from its raw file (:func:`dmlqa.acquire.resolve.candidate_urls` knows these); the page itself comes
    last and is only used if it is not an HTML page.
    """
    from dmlqa.acquire.resolve import candidate_urls

    return candidate_urls(upstream)


async def _fetch_text(fetcher: Any, upstream: str) -> tuple[str, str]:
    """The list's markdown and the URL it came from; FetchError when no candidate gives markdown."""
    errors: list[str] = []
    for url in upstream_urls(upstream):
        try:
            result = await fetcher.fetch(url, conditional=False)
        except FetchError as exc:
            errors.append(f"{url}: {exc.reason}")
            continue
        if result.content_type in ("text/html", "application/xhtml+xml", "application/pdf"):
            errors.append(f"{url}: got {result.content_type}, not the list's markdown")
            continue
        return result.body.decode("utf-8", errors="replace"), url
    raise FetchError(upstream, "; ".join(errors) or "no URL to try")


async def _fetch_all(
    settings: Settings, upstreams: dict[str, str], archives: Sequence[Path], offline: bool
) -> dict[str, tuple[str, str] | FetchError]:
    from dmlqa.acquire import ArchiveReplay, ArchiveWriter, Fetcher, Manifest

    replay = ArchiveReplay(list(archives)) if archives else None
    writer = None if offline else ArchiveWriter(settings.archive_dir)
    manifest = Manifest(settings.paths.manifest)
    try:
        async with Fetcher(settings.fetch, archive=writer, manifest=manifest, replay=replay,
                           offline=offline) as fetcher:

            async def one(upstream: str) -> tuple[str, str] | FetchError:
                try:
                    return await _fetch_text(fetcher, upstream)
                except FetchError as exc:
                    return exc
                except Exception as exc:  # noqa: BLE001 - one list's bug must not stop the others
                    log.exception("unexpected error fetching list %s", upstream)
                    return FetchError(upstream, f"unexpected error: {exc!r}")

            names = list(upstreams)
            results = await asyncio.gather(*(one(upstreams[n]) for n in names))
            return dict(zip(names, results, strict=True))
    finally:
        manifest.close()
        if writer is not None:
            writer.close()


def replace_list_entries(catalog: Sequence[Resource], name: str, incoming: Sequence[Resource]) -> list[Resource]:
    """The catalog with list ``name``'s entries replaced by ``incoming``.

    An entry the list no longer names loses the list, and leaves the catalog when no other list
    names it; entries of other lists and entries added by hand are untouched; entries still named
    keep their facts (first facts win, as in :func:`dmlqa.catalog.store.merge`).
    """
    keep_ids = {r.id for r in incoming}
    base: list[Resource] = []
    for r in catalog:
        if name in r.lists and r.id not in keep_ids:
            others = tuple(x for x in r.lists if x != name)
            if not others:
                continue
            r = replace(r, lists=others)
        base.append(r)
    return merge(base, incoming)


def refresh_lists(
    settings: Settings, *, archives: Sequence[Path] = (), offline: bool = False
) -> RefreshReport:
    """Re-read every list with an upstream and update ``catalog.jsonl`` and the stored list copies.

    The caller holds the writer lock (the build does): the catalog is rewritten here. The catalog is
    written before the list copies, so a refresh killed in between finds the copy still old next
    time and applies the (same) change again.
    """
    corpus = settings.corpus_dir
    lists = read_lists(corpus)
    upstreams = {n: str(e["upstream"]) for n, e in sorted(lists.items()) if e.get("upstream")}
    outcomes: dict[str, ListRefresh] = {
        n: ListRefresh(n, None, "no-upstream") for n in sorted(lists) if n not in upstreams
    }
    if not upstreams:
        return RefreshReport(tuple(outcomes[n] for n in sorted(outcomes)))
    fetched = asyncio.run(_fetch_all(settings, upstreams, archives, offline))

    before = read_catalog(settings.catalog_path)
    catalog = list(before)
    copies: dict[Path, str] = {}
    for name, upstream in upstreams.items():
        got = fetched[name]
        if isinstance(got, FetchError):
            log.warning("list %s: upstream %s failed (%s); keeping its entries", name, upstream, got.reason)
            outcomes[name] = ListRefresh(name, upstream, "failed", error=got.reason)
            continue
        text, source = got
        parsed = parse_list(text, name)
        if not parsed.resources:
            reason = f"the upstream text has no resources ({len(parsed.issues)} unreadable lines); entries kept"
            outcomes[name] = ListRefresh(name, upstream, "failed", source, issues=len(parsed.issues), error=reason)
            continue
        copy = corpus / str(lists[name].get("file") or f"{LISTS_DIR}/{name}.md")
        try:
            old_text = copy.read_text(encoding="utf-8", errors="replace")
        except OSError:
            old_text = None
        if old_text is not None and old_text.replace("\r\n", "\n") == text.replace("\r\n", "\n"):
            outcomes[name] = ListRefresh(name, upstream, "unchanged", source, resources=len(parsed.resources),
                                         issues=len(parsed.issues))
            continue
        ids_before = {r.id for r in catalog}
        catalog = replace_list_entries(catalog, name, parsed.resources)
        ids_after = {r.id for r in catalog}
        outcomes[name] = ListRefresh(
            name, upstream, "updated", source,
            added=tuple(sorted(ids_after - ids_before)), removed=tuple(sorted(ids_before - ids_after)),
            resources=len(parsed.resources), issues=len(parsed.issues),
        )
        copies[copy] = text
        log.info("list %s: %d resources from %s (+%d -%d)", name, len(parsed.resources), source,
                 len(outcomes[name].added), len(outcomes[name].removed))

    if copies:
        write_catalog(settings.catalog_path, catalog)
        for path, text in copies.items():
            atomic_write_text(path, text)
    old_ids = {r.id for r in before}
    new_ids = {r.id for r in catalog}
    return RefreshReport(
        lists=tuple(outcomes[n] for n in sorted(outcomes)),
        added=tuple(sorted(new_ids - old_ids)),
        removed=tuple(sorted(old_ids - new_ids)),
    )
