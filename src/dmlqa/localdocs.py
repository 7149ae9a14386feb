"""The user's own documents: ``dmlqa add PATH...`` copies them into ``corpus/local/``.

Copying (rather than remembering a path) keeps the home self-contained: the knowledge base can
be moved, backed up or rebuilt on another machine. The next build indexes every file there beside
the catalog. A JSON Lines file is a collection of records (``{"id","title","text"}``, BEIR's
``{"_id","title","text"}`` too, optional ``url``, ``authors``, ``year``), each its own document
whose ``doc_id`` is the record's id.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dmlqa.models import Block, Document, Failure

SUPPORTED_SUFFIXES = {".pdf", ".html", ".htm", ".md", ".markdown", ".txt", ".text", ".rst", ".jsonl"}
LOCAL_DIR = "local"


@dataclass(frozen=True)
class AddReport:
    added: tuple[str, ...]  # paths relative to corpus/local
    skipped: tuple[tuple[str, str], ...]  # (path, reason)


def add_paths(paths: Sequence[Path], corpus_dir: Path) -> AddReport:
    """Copy files (or the supported files of folders) into ``corpus_dir/local``."""
    target_root = corpus_dir / LOCAL_DIR
    added: list[str] = []
    skipped: list[tuple[str, str]] = []
    for given in paths:
        src = Path(given).expanduser()
        if not src.exists():
            skipped.append((str(given), "no such file or folder"))
            continue
        if src.is_dir():
            files = [p for p in sorted(src.rglob("*")) if p.is_file()]
            pairs = [(p, Path(src.name) / p.relative_to(src)) for p in files]
        else:
            pairs = [(src, Path(src.name))]
        for f, rel in pairs:
            if f.suffix.lower() not in SUPPORTED_SUFFIXES:
                skipped.append((str(f), f"unsupported file type {f.suffix or '(none)'}"))
                continue
            if any(part.startswith(".") for part in rel.parts):
                skipped.append((str(f), "hidden file"))
                continue
            if f.suffix.lower() == ".jsonl":
                problem = _check_jsonl(f)
                if problem:
                    skipped.append((str(f), problem))
                    continue
            dest = target_root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest)
            added.append(rel.as_posix())
    return AddReport(tuple(added), tuple(skipped))


def _check_jsonl(path: Path) -> str | None:
    """Reject a file that is not records at all (bad lines inside a good file are reported at build)."""
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    rec = json.loads(line)
                    if not isinstance(rec, dict) or not ({"id", "_id"} & rec.keys()) or "text" not in rec:
                        return 'first record lacks "id"/"_id" or "text"'
                    return None
    except (UnicodeDecodeError, ValueError) as exc:
        return f"not JSON Lines: {exc}"
    return "empty file"


def local_files(corpus_dir: Path) -> list[Path]:
    root = corpus_dir / LOCAL_DIR
    if not root.is_dir():
        return []
    return [p for p in sorted(root.rglob("*")) if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES]


def file_doc_id(corpus_dir: Path, path: Path) -> str:
    return "local:" + path.relative_to(corpus_dir / LOCAL_DIR).as_posix()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def jsonl_documents(path: Path, corpus_dir: Path) -> Iterator[Document | Failure]:
    """One Document per good record; a Failure (with the line number) per bad one."""
    rel = path.relative_to(corpus_dir / LOCAL_DIR).as_posix()
    seen: set[str] = set()
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{rel}:{n}"
            try:
                rec = json.loads(line)
            except ValueError as exc:
                yield Failure(where, "extract", f"invalid JSON: {exc}")
                continue
            if not isinstance(rec, dict):
                yield Failure(where, "extract", "record is not a JSON object")
                continue
            doc_id = str(rec.get("id") or rec.get("_id") or "").strip()
            text = rec.get("text")
            if not doc_id:
                yield Failure(where, "extract", 'record has no "id" (or "_id")')
                continue
            if not isinstance(text, str) or not text.strip():
                yield Failure(where, "extract", f'record {doc_id} has no "text"')
                continue
            if doc_id in seen:
                yield Failure(where, "extract", f"duplicate record id {doc_id}")
                continue
            seen.add(doc_id)
            title = str(rec.get("title") or "").strip()
            year = rec.get("year")
            authors = rec.get("authors") or ()
            if isinstance(authors, str):
                authors = (authors,)
            body = " ".join(text.split())
            yield Document(
                doc_id=doc_id,
                url=str(rec.get("url") or f"{rel}#{doc_id}"),
                title=title or doc_id,
                blocks=(Block(text=body, section=None),),
                source_url=f"{rel}#{doc_id}",
                content_type="text",
                kind=str(rec.get("kind") or "article"),
                authors=tuple(str(a) for a in authors),
                year=int(year) if isinstance(year, int | str) and str(year).isdigit() else None,
                sha256=hashlib.sha256((title + "\n" + body).encode("utf-8")).hexdigest(),
            )
