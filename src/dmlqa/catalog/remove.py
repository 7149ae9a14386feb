"""Taking something back: ``dmlqa remove TARGET`` withdraws catalog entries and files of corpus/local.

Only the inputs of a build change here: an entry leaves ``corpus/catalog.jsonl``, a file (or an added
folder) leaves ``corpus/local``. The next build then drops the document from the index and the
document store, as it drops anything the catalog and corpus/local no longer name, while every other
document, chunk and vector is reused. The index is not edited in place: a published version is
immutable, and the build that replaces it is incremental anyway.

This module finds entries by identity (ids and canonical URLs, which the caller derives from the
target, see :meth:`dmlqa.KnowledgeBase.remove`) and files by their path; it knows nothing of the
index. A list that names a removed entry still names it: importing that list again (or a refresh)
brings the entry back.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from dmlqa.catalog.local import LOCAL_PREFIX, file_sha256, safe_id, scan_local
from dmlqa.catalog.store import read_catalog, write_catalog
from dmlqa.catalog.urls import canonicalize
from dmlqa.models import Resource
from dmlqa.paths import LOCAL_DIR


@dataclass(frozen=True)
class Removal:
    """What one remove takes out: catalog entries (all copies of one work) and paths under corpus/local.

    ``folder`` is set when a whole added folder goes (``files`` then lists the documents it held).
    """

    target: str
    entries: tuple[Resource, ...] = ()
    files: tuple[str, ...] = ()
    folder: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "catalog": [{"id": r.id, "url": r.address, "title": r.title} for r in self.entries],
            "local": list(self.files),
            "folder": self.folder,
        }


def _canonical(url: str) -> str:
    try:
        return canonicalize(url)
    except ValueError:
        return url


def matching_entries(entries: Sequence[Resource], *, ids: Collection[str] = (),
                     urls: Collection[str] = ()) -> list[Resource]:
    """The entries whose id is in ``ids`` or whose canonical URL, or a listed address, is in ``urls``
    (canonical URLs): the identity rules imports merge copies by, so a URL finds its entry however a
    list spelled it."""
    wanted = {_canonical(u) for u in urls}
    return [r for r in entries if r.id in ids or r.url in wanted or any(_canonical(a) in wanted for a in r.aliases)]


def local_files_named(corpus_dir: Path, target: str) -> tuple[list[str], str | None]:
    """The documents of corpus/local that ``target`` names, and the folder when it names an added folder.

    ``target`` may be the doc id (``local:papers/x.pdf``), the path under corpus/local, that path
    with ``corpus/local/`` (or the home) before it, a file name that is unique there, or the original
    file that ``dmlqa add`` copied (matched by name and content).
    """
    root = corpus_dir / LOCAL_DIR
    files, _problems = scan_local(corpus_dir)
    rels = sorted(p.relative_to(root).as_posix() for p in files)
    by_id = {safe_id(r): r for r in rels}
    text = target.strip()
    given = text.removeprefix(LOCAL_PREFIX)
    tries = [given]
    path = Path(given).expanduser()
    if path.exists():
        try:
            tries.insert(0, path.resolve().relative_to(root.resolve()).as_posix())
        except ValueError:  # a file outside the home: the original of a copy, if any
            if path.is_file():
                same = [r for r in rels if PurePosixPath(r).name == path.name]
                digest = file_sha256(path) if same else ""
                copies = [r for r in same if file_sha256(root / r) == digest]
                if copies:
                    return copies, None
    for prefix in (f"{corpus_dir.name}/{LOCAL_DIR}/", f"{LOCAL_DIR}/"):
        if given.startswith(prefix):
            tries.append(given.removeprefix(prefix))
    for rel in tries:
        rel = by_id.get(rel.strip("/"), rel.strip("/"))  # a doc id shows an odd file name escaped
        if rel in ("", ".") or ".." in PurePosixPath(rel).parts:
            continue
        if rel in rels:
            return [rel], None
        if (root / rel).is_dir() and not (root / rel).is_symlink():
            inside = [r for r in rels if r.startswith(rel + "/")]
            return inside, rel
    if "/" not in given:
        named = [r for r in rels if PurePosixPath(r).name == given]
        if len(named) == 1:
            return named, None
    return [], None


def local_names(corpus_dir: Path) -> list[str]:
    """Every document path under corpus/local (what an unknown target's closest matches are drawn from)."""
    root = corpus_dir / LOCAL_DIR
    return sorted(p.relative_to(root).as_posix() for p in scan_local(corpus_dir)[0])


def apply_removal(corpus_dir: Path, catalog_path: Path, removal: Removal) -> None:
    """Take ``removal`` out: the catalog is rewritten atomically, then the files are deleted.

    Empty folders left under corpus/local go too (never corpus/local itself), so a removed
    folder's structure does not linger.
    """
    if removal.entries:
        ids = {r.id for r in removal.entries}
        write_catalog(catalog_path, [r for r in read_catalog(catalog_path) if r.id not in ids])
    root = corpus_dir / LOCAL_DIR
    real_root = root.resolve()
    if removal.folder is not None:
        folder = root / removal.folder
        if folder.resolve().is_relative_to(real_root) and folder.resolve() != real_root:
            shutil.rmtree(folder)
        return
    for rel in removal.files:
        path = root / rel
        path.unlink(missing_ok=True)
        parent = path.parent
        while parent.resolve() != real_root and parent.resolve().is_relative_to(real_root):
            try:
                parent.rmdir()  # only when empty
            except OSError:
                break
            parent = parent.parent
