"""The user's own documents: ``dmlqa add PATH...`` copies them into ``corpus/local/``.

Copying (rather than remembering a path) keeps the home self-contained: the knowledge base can
be moved, backed up or rebuilt on another machine. The next build indexes every file there beside
the catalog. A JSON Lines file is a collection of records (``{"id","title","text"}``, BEIR's
``{"_id","title","text"}`` too, optional ``url``, ``authors``, ``year``), each its own document
whose ``doc_id`` is the record's id (a ``url`` that is not an http(s) address is dropped: readers
follow it). A reference library named on its own (``library.bib``, CSL-JSON ``library.json``) is
added by :mod:`dmlqa.catalog.library`: its attached files land here too, under ``<library file
name>/``, with the library's metadata beside them.

Bad input is isolated, never fatal: a bad record is skipped and reported with its file, line and
reason (by ``add`` as a warning, by the build as a ``local`` failure) while the rest of its file is
indexed; a file over the download size cap (``fetch.max_bytes``) is refused by ``add`` and skipped
by the build; a symlink that leads out of an added folder (or out of ``corpus/local``) is never
followed. Files are hashed and parsed by streaming, never loaded whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dmlqa.catalog.bibformats import LIBRARY_FORMATS
from dmlqa.errors import DiskFullError, is_disk_full
from dmlqa.fsutil import format_size
from dmlqa.models import Block, Document, Failure, is_linkable
from dmlqa.paths import LOCAL_DIR
from dmlqa.textsafe import REPLACEMENT, replace_lone_surrogates

SUPPORTED_SUFFIXES = {".pdf", ".html", ".htm", ".md", ".markdown", ".txt", ".text", ".rst", ".jsonl"}
#: The years a record may give (anything else is a typo or junk such as "²" or 1e25).
YEAR_MIN, YEAR_MAX = 1000, 2100
#: Bad records of one file listed one by one; the rest are counted in one line.
MAX_LISTED_BAD_RECORDS = 100


@dataclass(frozen=True)
class AddReport:
    added: tuple[str, ...]  # paths relative to corpus/local
    skipped: tuple[tuple[str, str], ...]  # (path, reason): not copied
    #: Paths named on the command line that are missing or were refused themselves (not a file in a folder).
    failed: tuple[str, ...] = ()
    #: ("file:line", reason): records of a copied JSON Lines file that the build will skip.
    bad_records: tuple[tuple[str, str], ...] = ()
    #: Catalog ids a library's entries without an attachment were put under (the next build fetches them).
    cataloged: tuple[str, ...] = ()
    #: The catalog lists they went under (one per library: ``library:<file name>``).
    catalog_lists: tuple[str, ...] = ()
    #: ("library.bib:12 (key)", reason): library entries that were not added at all.
    bad_entries: tuple[tuple[str, str], ...] = ()
    #: ("library.bib:12 (key)", note): entries added with something of them ignored or replaced.
    entry_notes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def combine(cls, reports: Sequence[AddReport]) -> AddReport:
        """One report for several adds, each field in the order of ``reports``."""
        return cls(**{f.name: tuple(x for r in reports for x in getattr(r, f.name)) for f in fields(cls)})


def too_large_reason(size: int, cap: int) -> str:
    """Why a file over the size cap is refused; ``add``, the build and the extractor say it alike."""
    return f"too large: {format_size(size)} is over the {format_size(cap)} limit (setting fetch.max_bytes)"


def add_paths(paths: Sequence[Path], corpus_dir: Path, *, max_bytes: int | None = None) -> AddReport:
    """Copy files (or the supported files of folders) into ``corpus_dir/local``.

    Every path is tried: a missing or refused one is reported (and listed in ``failed``) without
    stopping the others, so a call that names one bad path among good ones still adds the good ones.
    """
    target_root = corpus_dir / LOCAL_DIR
    added: list[str] = []
    skipped: list[tuple[str, str]] = []
    failed: list[str] = []
    bad_records: list[tuple[str, str]] = []
    for given in paths:
        src = Path(given).expanduser()
        try:
            src.stat()
        except (FileNotFoundError, NotADirectoryError):
            pass  # told below, with a broken symlink told apart
        except OSError as exc:  # a folder on the way that cannot be entered (permission denied)
            skipped.append((str(given), f"cannot read: {exc.strerror or exc}"))
            failed.append(str(given))
            continue
        if src.is_dir():
            candidates = list(_walk(src, "the added folder", name_inner_links=True))
            base = src.name or src.resolve().name
            named = False
            if any(f == src and problem for f, _rel, problem in candidates):  # the folder itself cannot be listed
                failed.append(str(given))
        elif src.is_file():  # a symlink named on the command line is the user's choice: followed
            candidates = [(src, Path(src.name), None)]
            named = True
        elif src.exists() or src.is_symlink():
            reason = "broken symlink" if src.is_symlink() and not src.exists() else "not a regular file or folder"
            skipped.append((str(given), reason))
            failed.append(str(given))
            continue
        else:
            skipped.append((str(given), "no such file or folder"))
            failed.append(str(given))
            continue
        for f, rel, problem in candidates:
            if not named:
                rel = Path(base) / rel
            if problem is None:
                problem, bad = _check_file(f, rel, max_bytes)
                bad_records.extend(bad)
            if problem is not None:
                skipped.append((str(f), problem))
                if named:
                    failed.append(str(given))
                continue
            dest = target_root / rel
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                copy_file(f, dest)
            except OSError as exc:
                if is_disk_full(exc):  # every later copy would fail alike: one line, not one per file
                    raise DiskFullError(f"disk full while writing {dest} (a copy of {f}): free space and run "
                                        f"`dmlqa add` again ({len(added)} file(s) were added before it)") from None
                skipped.append((str(f), f"cannot copy: {exc.strerror or exc}"))
                if named:
                    failed.append(str(given))
                continue
            added.append(rel.as_posix())
    return AddReport(tuple(added), tuple(skipped), tuple(failed), tuple(bad_records))


def copy_file(src: Path, dest: Path) -> None:
    """Copy by streaming; never through a symlink that sits at the destination."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with src.open("rb") as fin, tmp.open("wb") as fout:
            for block in iter(lambda: fin.read(1 << 20), b""):
                fout.write(block)
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)


def _check_file(f: Path, rel: Path, max_bytes: int | None) -> tuple[str | None, list[tuple[str, str]]]:
    """Why ``f`` must not be copied (or None), and the bad records of a JSON Lines file."""
    if f.suffix.lower() not in SUPPORTED_SUFFIXES:
        if f.suffix.lower() in LIBRARY_FORMATS:  # a library is read only when named: it may attach these files
            return f"a library is added by name, not inside a folder: dmlqa add {f}", []
        return f"unsupported file type {f.suffix or '(none)'}", []
    if any(part.startswith(".") for part in rel.parts):
        return "hidden file", []
    try:
        size = f.stat().st_size
        with f.open("rb"):  # readable? (stat needs only the folder's permission); said before any copy starts
            pass
    except OSError as exc:
        return f"cannot read file: {exc.strerror or exc}", []
    if max_bytes is not None and size > max_bytes:
        return too_large_reason(size, max_bytes), []
    if f.suffix.lower() == ".jsonl":
        return _check_jsonl(f, rel.as_posix(), str(f))
    return None, []


def _check_jsonl(path: Path, rel: str, label: str) -> tuple[str | None, list[tuple[str, str]]]:
    """Refuse a file without a single good record; list the bad records of one with some."""
    good = more = 0
    bad: list[tuple[str, str]] = []
    try:
        for item in iter_records(path, rel, label):
            if not isinstance(item, Failure):
                good += 1
            elif len(bad) < MAX_LISTED_BAD_RECORDS:
                bad.append((item.url, item.error))
            else:
                more += 1
    except OSError as exc:
        return f"cannot read file: {exc.strerror or exc}", []
    if good:
        if more:
            bad.append((label, f"{more} more bad records"))
        return None, bad
    if not bad:
        return "empty file", []
    where, reason = bad[0]
    return f"not JSON Lines: no valid record (line {where.rsplit(':', 1)[1]}: {reason})", []


# -- what a build finds under corpus/local ---------------------------------------------------------


#: Why ``add`` skips a symlink to a folder inside the added folder (its files come from where they are).
LINKED_FOLDER = "symbolic link to a folder, not followed (its files are added from {target})"


def _walk(root: Path, inside: str, *, name_inner_links: bool = False) -> Iterator[tuple[Path, Path, str | None]]:
    """``(path, path relative to root, problem)`` for every file under ``root``.

    Symlinked folders are not descended; a symlink that leads out of ``root`` (or nowhere) comes
    with its problem instead of being followed, and with ``name_inner_links`` one to a folder inside
    ``root`` too (``add`` names everything it does not copy; a build finds those files anyway). Hidden
    folders are pruned (one entry each). A folder that cannot be listed (permission denied) comes
    as an entry with its reason: silently missing files are the worst kind of missing.
    """
    real_root = root.resolve()
    unreadable: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=unreadable.append):
        yield from _unreadable_folders(unreadable, root)
        d = Path(dirpath)
        keep = []
        for name in sorted(dirnames):
            p = d / name
            if p.is_symlink():
                problem = _symlink_problem(p, real_root, inside)
                if problem:
                    yield p, p.relative_to(root), problem
                elif name_inner_links:  # otherwise quiet: its files are reached where they really are
                    target = p.resolve().relative_to(real_root)
                    shown = (Path(real_root.name) / target).as_posix()
                    yield p, p.relative_to(root), LINKED_FOLDER.format(target=shown)
            elif name.startswith("."):
                yield p, p.relative_to(root), "hidden folder"
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            p = d / name
            problem = _symlink_problem(p, real_root, inside) if p.is_symlink() else None
            if problem is None and not p.is_file():
                problem = "not a regular file"
            yield p, p.relative_to(root), problem
    yield from _unreadable_folders(unreadable, root)


def _unreadable_folders(errors: list[OSError], root: Path) -> Iterator[tuple[Path, Path, str]]:
    """The folders ``os.walk`` could not list (its ``onerror`` calls), as entries with their reason."""
    while errors:
        exc = errors.pop(0)
        p = Path(exc.filename) if exc.filename else root
        yield p, p.relative_to(root) if p.is_relative_to(root) else Path(), f"cannot read folder: {exc.strerror or exc}"


def _symlink_problem(link: Path, real_root: Path, inside: str) -> str | None:
    try:
        target = link.resolve()
    except (OSError, RuntimeError):  # a loop
        return f"symlink to {os.readlink(link)}: it is a symlink loop"
    if not target.is_relative_to(real_root):
        return f"symlink to {target}: it leads outside {inside}"
    if not target.exists():
        return f"symlink to {target}: its target does not exist"
    return None


def scan_local(corpus_dir: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The supported files under ``corpus_dir/local``, and ``(path, reason)`` for what is skipped.

    Only problems worth telling are listed (symlinks out of corpus/local, special files); files of
    other types are ignored as before.
    """
    root = corpus_dir / LOCAL_DIR
    if not root.is_dir():
        return [], []
    files: list[Path] = []
    problems: list[tuple[Path, str]] = []
    for p, _rel, problem in _walk(root, "corpus/local"):
        if problem == "hidden folder" or p.name.startswith("."):
            continue  # our own temporary files, editor backups
        if problem and (p.is_symlink() or p.is_dir()):  # told whatever its name (a folder it cannot list too)
            problems.append((p, problem))
            continue
        if p.suffix.lower() not in SUPPORTED_SUFFIXES:
            continue
        if problem:
            problems.append((p, problem))
        else:
            files.append(p)
    return files, problems


def local_files(corpus_dir: Path) -> list[Path]:
    return scan_local(corpus_dir)[0]


#: The prefix of a local file's doc id (``local:notes.md``), as search results show it.
LOCAL_PREFIX = "local:"


def file_doc_id(corpus_dir: Path, path: Path) -> str:
    """``local:`` and the file's path under corpus/local, made :func:`safe_id` (the file itself keeps its name)."""
    return LOCAL_PREFIX + safe_id(path.relative_to(corpus_dir / LOCAL_DIR).as_posix())


#: What a doc id must not carry: control characters and line separators (a newline in an id splits
#: every line that shows it: results, errors, the build report), and surrogates (the undecodable
#: bytes of a file name, as Python keeps them).
_UNSAFE_IN_ID = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def safe_id(text: str) -> str:
    """``text`` with each unsafe character percent-escaped as in a URL (``a\\nb.txt`` → ``a%0Ab.txt``; an
    undecodable file-name byte → ``%FF``): still one readable line. (A name spelling ``%0A`` itself would
    collide with one holding the newline: the build refuses the second file of one id.)"""
    return _UNSAFE_IN_ID.sub(_percent_escape, text) if _UNSAFE_IN_ID.search(text) else text


def _percent_escape(m: re.Match[str]) -> str:
    try:
        data = m.group().encode("utf-8", "surrogateescape")  # a lone \udcXX is the file name's byte XX
    except UnicodeEncodeError:  # any other lone surrogate: no byte behind it
        data = REPLACEMENT.encode("utf-8")
    return "".join(f"%{b:02X}" for b in data)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- JSON Lines records ----------------------------------------------------------------------------


def jsonl_documents(
    path: Path, corpus_dir: Path, seen: dict[str, str] | None = None
) -> Iterator[Document | Failure]:
    """One Document per good record; a Failure (stage ``local``, ``file:line``) per bad one.

    The file is read line by line. Past :data:`MAX_LISTED_BAD_RECORDS` bad records, the rest of
    them are counted in one last Failure instead of one each.
    """
    rel = path.relative_to(corpus_dir / LOCAL_DIR).as_posix()
    label = f"{LOCAL_DIR}/{rel}"
    more = 0
    listed = 0
    for item in iter_records(path, rel, label, seen):
        if isinstance(item, Failure):
            if listed >= MAX_LISTED_BAD_RECORDS:
                more += 1
                continue
            listed += 1
        yield item
    if more:
        yield Failure(label, "local", f"{more} more bad records skipped (the first {listed} are listed)")


def iter_records(
    path: Path, rel: str, label: str, seen: dict[str, str] | None = None
) -> Iterator[Document | Failure]:
    """Parse a JSON Lines file of records; the checks ``add`` and the build share.

    ``rel`` (the path under corpus/local) goes into each document's ``source_url``; ``label``
    names the file in failures (``label:line``). ``seen`` maps the ids other files already gave
    to those files; this file's ids are added to it.
    """
    mine: set[str] = set()
    seen = {} if seen is None else seen
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            where = f"{label}:{n}"
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield Failure(where, "local", f"line is not UTF-8 (byte {exc.start + 1})")
                continue
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError) as exc:
                yield Failure(where, "local", f"invalid JSON: {str(exc)[:200]}")
                continue
            result = parse_record(rec, rel)
            if isinstance(result, str):
                yield Failure(where, "local", result)
                continue
            if result.doc_id in mine:
                yield Failure(where, "local", f"duplicate record id {result.doc_id}")
                continue
            if result.doc_id in seen:
                yield Failure(where, "local", f"duplicate record id {result.doc_id} (also in {seen[result.doc_id]})")
                continue
            mine.add(result.doc_id)
            seen[result.doc_id] = label
            yield result


def parse_record(rec: Any, rel: str) -> Document | str:
    """The Document a decoded record makes, or the reason it cannot make one."""
    if not isinstance(rec, dict):
        return f"record is not a JSON object (it is {_json_type(rec)})"
    doc_id = ""
    for key in ("id", "_id"):
        value = rec.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            return f'"{key}" must be a string or an integer, not {_json_type(value)}'
        doc_id = safe_id(replace_lone_surrogates(str(value)).strip())
        break
    if not doc_id:
        return 'record has no "id" (or "_id")'
    text = rec.get("text")
    if text is None or (isinstance(text, str) and not text.strip()):
        return f'record {doc_id} has no "text"'
    if not isinstance(text, str):
        return f'record {doc_id}: "text" must be a string, not {_json_type(text)}'
    fields: dict[str, str] = {}
    for key in ("title", "url", "kind"):
        value = rec.get(key)
        if value is not None and not isinstance(value, str):
            return f'record {doc_id}: "{key}" must be a string, not {_json_type(value)}'
        fields[key] = replace_lone_surrogates(value or "").strip()
    authors = rec.get("authors")
    if authors is None:
        authors = []
    elif isinstance(authors, str):
        authors = [authors]
    elif not (isinstance(authors, list) and all(isinstance(a, str) for a in authors)):
        return f'record {doc_id}: "authors" must be a string or a list of strings, not {_json_type(authors)}'
    year = parse_year(rec.get("year"))
    if isinstance(year, str):
        return f"record {doc_id}: {year}"
    title = fields["title"]
    body = " ".join(replace_lone_surrogates(text).split())
    # the url is what readers are shown and follow: a javascript:/data:/file: one is kept by no one
    url = fields["url"] if is_linkable(fields["url"]) else ""
    return Document(
        doc_id=doc_id,
        url=url or f"{rel}#{doc_id}",
        title=title or doc_id,
        blocks=(Block(text=body, section=None),),
        source_url=f"{rel}#{doc_id}",
        content_type="text",
        kind=fields["kind"] or "article",
        authors=tuple(a for a in (" ".join(replace_lone_surrogates(a).split()) for a in authors) if a),
        year=year,
        sha256=hashlib.sha256((title + "\n" + body).encode("utf-8")).hexdigest(),
    )


def parse_year(value: Any) -> int | None | str:
    """A year, None when the record gives none, or the reason the value is not a year."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    year: int | None = None
    if isinstance(value, bool):
        year = None
    elif isinstance(value, int):
        year = value
    elif isinstance(value, float) and value.is_integer():
        year = int(value)
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        year = int(value.strip())
    if year is not None and YEAR_MIN <= year <= YEAR_MAX:
        return year
    shown = json.dumps(value, ensure_ascii=False) if not isinstance(value, dict | list) else _json_type(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f'bad "year" {shown}: not a whole number from {YEAR_MIN} to {YEAR_MAX}'


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
