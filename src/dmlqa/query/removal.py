"""What ``dmlqa remove TARGET`` names: catalog entries and local files, found as ``related`` finds targets.

:mod:`dmlqa.catalog.remove` knows the catalog and corpus/local only; this module adds what the
published index knows, so a target can be anything a user has seen in results: a title, a doc id,
the URL of either copy of a paper the build merged into one document. A target names a *work*, and
every catalog entry of that work goes (otherwise the copy left behind would bring the document back
at the next build); a path names one file alone.

Anything unclear is refused rather than guessed, since removing is not undone by the next command:
a title several documents share, one record of a JSON Lines file (its file goes whole), a name that
matches nothing (the error lists the closest names there are).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from dmlqa.catalog.local import LOCAL_PREFIX, safe_id
from dmlqa.catalog.remove import Removal, local_files_named, local_names, matching_entries
from dmlqa.errors import UnknownTargetError
from dmlqa.index.versions import DocRecord, IndexVersion
from dmlqa.models import Resource
from dmlqa.query.related import identify, resolve_target, resolve_title
from dmlqa.query.relatedness import title_words


def find_removal(target: str, corpus_dir: Path, entries: Sequence[Resource],
                 version: IndexVersion | None) -> Removal:
    """The entries and files ``target`` names (see the module docstring); :class:`UnknownTargetError` if none.

    ``entries`` is the catalog; ``version`` the published index version, or None before the first
    build (the catalog's ids, URLs and titles and the paths under corpus/local still answer then).
    Nothing is changed here: :func:`dmlqa.catalog.remove.apply_removal` takes the result out.
    """
    files, folder = local_files_named(corpus_dir, target)
    found: list[Resource] = []
    if not files:  # a path names a file alone; anything else names a work, with all its copies
        ident = identify(target)
        ids = {target, *(ident.ids if ident else ())}
        urls = set(ident.urls if ident else ())
        work = _indexed_work(version, target) if version is not None else None
        if work is not None:
            doc, merged = work
            if "://" not in doc.source_url and "#" in doc.source_url and not doc.doc_id.startswith(LOCAL_PREFIX):
                rel = doc.source_url.split("#", 1)[0]
                raise UnknownTargetError(
                    f"{target!r} is record {doc.doc_id} of local/{rel}: one record cannot be removed on its "
                    f"own; remove the file (`dmlqa remove local:{rel}`) or edit it and add it again")
            ids |= {doc.doc_id, *merged}
            urls |= {u for u in (doc.url, doc.source_url, *doc.aliases) if u}
            present = {safe_id(n): n for n in local_names(corpus_dir)}  # doc ids show odd names escaped
            files = [present[i.removeprefix(LOCAL_PREFIX)] for i in sorted(ids)
                     if i.startswith(LOCAL_PREFIX) and i.removeprefix(LOCAL_PREFIX) in present]
        found = matching_entries(entries, ids=ids, urls=urls)
    if not files and not found:
        found = _entries_by_title(entries, target)
    if not files and not found:
        raise UnknownTargetError(_unknown(target, corpus_dir, entries, version))
    return Removal(target=target, entries=tuple(found), files=tuple(files), folder=folder)


def _indexed_work(version: IndexVersion, target: str) -> tuple[DocRecord, set[str]] | None:
    """The indexed document ``target`` names (as ``related`` resolves it) and the catalog ids the build
    merged into it; None when it names none. A title several documents share is refused."""
    doc_id = resolve_target(version, target)
    if doc_id is None:
        return None
    if identify(target) is None and target != doc_id:
        _, others = resolve_title(version, target)
        if others:
            named = ", ".join(f"{version.docs[d].title} ({d})" for d in (doc_id, *others[:3]))
            raise UnknownTargetError(f"{target!r} names several documents: {named}; name one by URL or id")
    merged = {d.get("doc_id") for d in version.meta.get("duplicates") or () if d.get("of") == doc_id}
    return version.docs[doc_id], {m for m in merged if m}


def _entries_by_title(entries: Sequence[Resource], target: str) -> list[Resource]:
    """Catalog entries not built yet, by their whole title (the words ``related`` compares titles by)."""
    words = title_words(target)
    found = [r for r in entries if words and title_words(r.title) == words]
    if len(found) > 1:
        named = ", ".join(f"{r.title} ({r.id})" for r in found[:4])
        raise UnknownTargetError(f"{target!r} names several catalog entries: {named}; name one by URL or id")
    return found


def _unknown(target: str, corpus_dir: Path, entries: Sequence[Resource], version: IndexVersion | None) -> str:
    """The one-line error for a target that names nothing, with the closest names there are."""
    names: dict[str, str] = {}  # lower-case name to match -> how it is shown
    for r in entries:
        names.setdefault(r.title.lower(), f"{r.title!r} ({r.id})")
        names.setdefault(r.id.lower(), r.id)
    for rel in local_names(corpus_dir):
        names.setdefault(rel.lower(), f"{LOCAL_PREFIX}{rel}")
    for d in (version.docs.values() if version is not None else ()):
        names.setdefault(d.title.lower(), f"{d.title!r} ({d.doc_id})")
    close = difflib.get_close_matches(target.lower(), list(names), n=3, cutoff=0.5)
    hint = f"; closest: {', '.join(names[c] for c in close)}" if close else ""
    return (f"{target!r} names no local document or catalog entry (give its URL, arXiv id, DOI, id, title "
            f"or path under corpus/local){hint}")
