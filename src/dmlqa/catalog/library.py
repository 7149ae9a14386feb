"""A reference library in a home: ``dmlqa add library.bib`` (BibTeX) or ``dmlqa add library.json`` (CSL-JSON).

Reading the file is :mod:`dmlqa.catalog.bibformats`'s job; this module decides where each entry
goes, so that the next build holds every work of the library once:

* An entry with an attached file (its first PDF, else its first HTML, markdown or text file) becomes
  a **local document**: the file is copied to ``corpus/local/<library file name>/<path>``, where
  ``<path>`` is the attachment's path relative to the library's folder (Zotero's ``files/12/x.pdf``)
  or, for one outside it (Better BibTeX's absolute paths), ``<key>/<file name>``. Copying keeps the
  home self-contained, like any ``dmlqa add``; the same library added again writes the same paths.
* Its metadata goes to a **sidecar**, ``corpus/local/<library file name>/dmlqa-library.json``: one
  JSON object, ``{"dmlqa_library": 1, "library", "source", "list", "files": {path: entry}}``, each
  path relative to the sidecar's folder and each entry a :class:`LibraryEntry` as JSON (key, title,
  authors, year, venue, doi, arxiv_id, url, kind). A sidecar, not a rewrite of the copied files: the
  PDF stays byte-identical (its sha256 is what merges it with a fetched copy of the same bytes), and
  the build reads all of a library's metadata in one small file (:func:`library_metadata`) to let
  it win over what the PDF extractor guesses. JSON, not JSON Lines, so that the build never takes
  it for a file of records (``.json`` is not a document type).
* An entry without a usable attachment that names an arXiv id, a DOI or a URL becomes a **catalog
  resource** under the list ``library:<library file name>``; the next build fetches it like any
  list's entry (arXiv first, then the DOI, then the URL). One without any of these is skipped and
  reported with the reason.

Adding a library again is idempotent: the same files, the same catalog ids (merged, never
duplicated), a rewritten sidecar; files an earlier add copied for entries the library no longer
attaches are removed. Catalog entries are never withdrawn, as with list imports.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dmlqa.catalog.bibformats import LIBRARY_FORMATS, LibraryEntry, read_library
from dmlqa.catalog.local import SUPPORTED_SUFFIXES, AddReport, add_paths, copy_file, too_large_reason
from dmlqa.catalog.store import merge, read_catalog, write_catalog
from dmlqa.catalog.urls import resource_id, url_title
from dmlqa.errors import CatalogError, LibraryError
from dmlqa.fsutil import atomic_write_text
from dmlqa.models import Resource
from dmlqa.paths import CATALOG_FILE, LIBRARY_SIDECAR, LOCAL_DIR

__all__ = ["AttachedFile", "SIDECAR", "add_files", "add_library", "is_library", "library_list", "library_metadata"]

#: The metadata file beside a library's copied attachments (see the module docstring).
SIDECAR = LIBRARY_SIDECAR
SIDECAR_VERSION = 1
#: Attachments that can become documents, preferred first (a JSON Lines file is no paper).
_PREFERRED = (".pdf",)
_DOCUMENT_SUFFIXES = SUPPORTED_SUFFIXES - {".jsonl"}


@dataclass(frozen=True)
class AttachedFile:
    """A file of corpus/local that a library attached to ``entry``; the library's catalog list."""

    entry: LibraryEntry
    list_name: str


def library_list(path: Path) -> str:
    """The catalog list a library's entries go under: ``library:<file name>``."""
    return f"library:{Path(path).name}"


def is_library(path: Path) -> bool:
    """A file ``dmlqa add`` reads as a library (``.bib``, ``.json``) rather than copies as a document."""
    path = Path(path)
    try:
        return path.suffix.lower() in LIBRARY_FORMATS and path.is_file()
    except OSError:  # cannot be looked at (a folder on the way denies it): add_paths says so
        return False


def add_files(
    paths: Sequence[Path], corpus_dir: Path, *, catalog_path: Path | None = None, max_bytes: int | None = None
) -> AddReport:
    """``dmlqa add``: each library named goes through :func:`add_library`, every other path through
    :func:`~dmlqa.catalog.local.add_paths`; one report, in the order of ``paths``."""
    reports = []
    for given in paths:
        if is_library(Path(given).expanduser()):
            reports.append(add_library(Path(given).expanduser(), corpus_dir, catalog_path=catalog_path,
                                       max_bytes=max_bytes, shown=str(given)))
        else:
            reports.append(add_paths([Path(given)], corpus_dir, max_bytes=max_bytes))
    return AddReport.combine(reports)


def add_library(
    path: Path, corpus_dir: Path, *, catalog_path: Path | None = None, max_bytes: int | None = None,
    shown: str | None = None,
) -> AddReport:
    """Add the entries of one library: attachments to corpus/local, the others to the catalog.

    A library that cannot be read at all, or of which no entry could be added, is listed in
    ``failed``; a bad entry is one row of ``bad_entries`` and the others are added.
    """
    shown = shown or str(path)
    try:
        parsed = read_library(path, max_bytes=max_bytes)
    except LibraryError as exc:
        reason = str(exc).removeprefix(f"{path}: ")
        return AddReport((), ((shown, reason),), (shown,))
    name = path.name
    list_name = library_list(path)
    folder = corpus_dir / LOCAL_DIR / name
    files: dict[str, LibraryEntry] = {}
    resources: list[Resource] = []
    bad = [(p.where, p.reason) for p in parsed.skipped]
    notes = [(p.where, p.reason) for p in parsed.notes]
    for entry in parsed.entries:
        chosen, problems = _attachment(entry, path.parent, max_bytes)
        if chosen is not None:
            rel = _destination(entry, chosen, path.parent)
            if rel in files:
                problems.append(f"its attachment {_shown(chosen, path.parent)} is already {files[rel].where}'s")
            else:
                try:
                    (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                    copy_file(chosen, folder / rel)
                    files[rel] = entry
                    continue
                except OSError as exc:
                    problems.append(f"cannot copy {_shown(chosen, path.parent)}: {exc.strerror or exc}")
        res = _resource(entry, list_name)
        if res is None:
            why = "; ".join(problems) or "no attached file"
            bad.append((entry.where, f"{why}, and no arXiv id, DOI or url to fetch it from"))
            continue
        if problems:
            notes.append((entry.where, f"{'; '.join(problems)}: the next build fetches {res.address} instead"))
        resources.append(res)
    dropped = {where for where, _ in bad}
    notes = [(where, note) for where, note in notes if where not in dropped]  # a skipped entry's reason says it all
    failed: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    previous = _sidecar_files(folder)
    try:
        if files or previous:
            _write_sidecar(folder, path, list_name, files)
        _remove_stale(folder, set(previous) - set(files))
    except OSError as exc:  # the copies stay; the build indexes them as plain files
        failed, skipped = (shown,), ((shown, f"cannot write the library's metadata: {exc.strerror or exc}"),)
    if resources:
        target = catalog_path or corpus_dir / CATALOG_FILE
        try:
            write_catalog(target, merge(read_catalog(target), resources))
        except (CatalogError, OSError) as exc:
            failed = (shown,)
            skipped = (*skipped, (shown, f"cannot add its {len(resources)} entries to the catalog: {exc}"))
            resources = []
    if not files and not resources and not failed:
        failed, skipped = (shown,), ((shown, f"no entry of this {parsed.format} library could be added"),)
    return AddReport(
        added=tuple(f"{name}/{rel}" for rel in files), skipped=skipped, failed=failed,
        cataloged=tuple(r.id for r in resources), catalog_lists=(list_name,) if resources else (),
        bad_entries=tuple(bad), entry_notes=tuple(notes),
    )


def _shown(path: Path, base: Path) -> str:
    """An attachment as a message names it: relative to the library's folder when inside it."""
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return str(path)


def _attachment(entry: LibraryEntry, base: Path, max_bytes: int | None) -> tuple[Path | None, list[str]]:
    """The attachment that becomes the entry's document (a PDF first), and why others could not."""
    problems: list[str] = []
    usable = [p for p in entry.attachments if p.suffix.lower() in _DOCUMENT_SUFFIXES]
    usable.sort(key=lambda p: p.suffix.lower() not in _PREFERRED)  # stable: PDFs first, each kind in order
    if entry.attachments and not usable:
        kinds = ", ".join(sorted({p.suffix.lower() or "(none)" for p in entry.attachments}))
        problems.append(f"no attachment of a supported type (found {kinds})")
    for p in usable:
        try:
            if not p.is_file():
                problems.append(f"attachment {_shown(p, base)} not found")
                continue
            size = p.stat().st_size
        except OSError as exc:
            problems.append(f"attachment {_shown(p, base)} cannot be read: {exc.strerror or exc}")
            continue
        if max_bytes is not None and size > max_bytes:
            problems.append(f"attachment {_shown(p, base)} is {too_large_reason(size, max_bytes)}")
            continue
        return p, problems
    return None, problems


def _destination(entry: LibraryEntry, attachment: Path, base: Path) -> str:
    """Where under the library's folder an attachment is copied (a relative POSIX path).

    Its own path relative to the library when it lies below it and every part is a plain name;
    else ``<key>/<file name>``, which is as stable as the key.
    """
    rel = Path(os.path.normpath(os.path.relpath(attachment, base)))
    if ".." not in rel.parts and not any(p.startswith(".") for p in rel.parts):
        return rel.as_posix()
    key = re.sub(r"[^A-Za-z0-9._-]+", "_", entry.key).lstrip("._") or "entry"
    file_name = attachment.name.lstrip(".") or f"attachment{attachment.suffix}"
    return f"{key}/{file_name}"


def _resource(entry: LibraryEntry, list_name: str) -> Resource | None:
    """The catalog entry that lets the next build fetch ``entry``, or None when it names no address."""
    urls = entry.identity_urls
    if not urls:
        return None
    canon = urls[0]
    return Resource(
        id=resource_id(canon), url=canon, title=entry.title or url_title(canon), kind=entry.kind,
        authors=entry.authors, venue=entry.venue, year=entry.year, lists=(list_name,), aliases=entry.addresses,
    )


# -- the sidecar -----------------------------------------------------------------------------------


def _write_sidecar(folder: Path, source: Path, list_name: str, files: dict[str, LibraryEntry]) -> None:
    body = {
        "dmlqa_library": SIDECAR_VERSION, "library": source.name, "source": str(source.resolve()),
        "list": list_name, "files": {rel: entry.to_json() for rel, entry in sorted(files.items())},
    }
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / SIDECAR, json.dumps(body, ensure_ascii=False, indent=1) + "\n")


def _read_sidecar(path: Path) -> dict[str, Any]:
    """The sidecar's JSON object; :class:`LibraryError` naming what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise LibraryError(f"cannot read library metadata: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise LibraryError('library metadata is not a JSON object with "files"')
    if data.get("dmlqa_library") != SIDECAR_VERSION:
        raise LibraryError(f"library metadata of an unknown version {data.get('dmlqa_library')!r}")
    return data


def _sidecar_files(folder: Path) -> list[str]:
    """The paths an earlier add of this library copied (none when there was none, or it is unreadable)."""
    if not (folder / SIDECAR).is_file():
        return []
    try:
        return [str(k) for k in _read_sidecar(folder / SIDECAR)["files"]]
    except LibraryError:
        return []


def _remove_stale(folder: Path, stale: set[str]) -> None:
    """Remove the files an earlier add copied that no entry attaches now (and folders left empty)."""
    root = folder.resolve()
    for rel in sorted(stale):
        target = folder / rel
        if ".." in Path(rel).parts or not target.resolve().is_relative_to(root):
            continue  # never outside the library's folder, whatever the sidecar says
        target.unlink(missing_ok=True)
        parent = target.parent
        while parent != folder and parent.is_relative_to(folder):
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent


def library_metadata(corpus_dir: Path) -> tuple[dict[str, AttachedFile], list[tuple[str, str]]]:
    """What the libraries added to ``corpus_dir`` say about their files, for the build.

    Returns ``{path under corpus/local: AttachedFile}`` and ``(sidecar path under corpus, reason)``
    for a sidecar that cannot be read (its files are then indexed as plain local files).
    """
    root = corpus_dir / LOCAL_DIR
    found: dict[str, AttachedFile] = {}
    problems: list[tuple[str, str]] = []
    if not root.is_dir():
        return found, problems
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        sidecar = folder / SIDECAR
        if not sidecar.is_file():
            continue
        label = sidecar.relative_to(corpus_dir).as_posix()
        try:
            data = _read_sidecar(sidecar)
        except LibraryError as exc:
            problems.append((label, str(exc)))
            continue
        list_name = str(data.get("list") or library_list(Path(folder.name)))
        for rel, entry in data["files"].items():
            if not isinstance(entry, dict):
                problems.append((label, f"entry for {rel} is not a JSON object"))
                continue
            found[f"{folder.name}/{rel}"] = AttachedFile(LibraryEntry.from_json(entry), list_name)
    return found, problems
