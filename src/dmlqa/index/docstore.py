"""Extracted documents kept between builds (``corpus/documents.sqlite``).

This is what makes rebuilds incremental and failures harmless: a resource whose source bytes
have the same sha256 as last time is not extracted again, and a resource that was fetched
before but fails now keeps its previous text instead of vanishing from the index.

Writing follows change too: each row keeps the sha256 of its serialised document (``digest``), and
:meth:`DocStore.put_many` rewrites only the documents whose serialised form differs, so a rebuild
of a large corpus where little changed writes little.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import fields, replace
from pathlib import Path

from dmlqa.models import Document

#: Document ids per ``SELECT ... IN (...)``: well under SQLite's limit on bound parameters.
_IDS_PER_QUERY = 500


class DocStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path))
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS documents (doc_id TEXT PRIMARY KEY, sha256 TEXT, is_card INTEGER, "
            "stored_at TEXT DEFAULT CURRENT_TIMESTAMP, document TEXT, digest TEXT)"
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(documents)")}
        if "digest" not in columns:
            # A store written before digests: add the column rather than recreate the store, whose texts
            # stand in for resources that fail to fetch now. Its rows (digest NULL) are rewritten once.
            with self._db:
                self._db.execute("ALTER TABLE documents ADD COLUMN digest TEXT")

    def get(self, doc_id: str) -> Document | None:
        row = self._db.execute("SELECT document FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
        return Document.from_json(json.loads(row[0])) if row else None

    def put_many(self, docs: Iterable[Document]) -> int:
        """Store ``docs`` (the last one wins for a repeated id); returns how many rows were written.

        A document whose serialised form has the same sha256 as its stored row is not written again:
        only the digests of the given ids are read to find out, never the stored JSON. A document without
        blocks is never written: the build lets the text of stored documents go (:func:`without_text`) and
        must not overwrite it with nothing.
        """
        given: dict[str, tuple[Document, str]] = {}
        for d in docs:
            if not d.blocks:  # a copy whose text was let go (its text is stored already), or no text at all
                continue
            given[d.doc_id] = (d, digest(d))
        stored = self._digests(list(given))
        changed = [(d.doc_id, d.sha256, int(d.is_card), json.dumps(d.to_json(), ensure_ascii=False), dig)
                   for doc_id, (d, dig) in given.items() if stored.get(doc_id) != dig]
        if changed:
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO documents (doc_id, sha256, is_card, document, digest) VALUES (?,?,?,?,?)",
                    changed,
                )
        return len(changed)

    def _digests(self, doc_ids: list[str]) -> dict[str, str | None]:
        """The stored digest of each of ``doc_ids`` that has a row."""
        out: dict[str, str | None] = {}
        for i in range(0, len(doc_ids), _IDS_PER_QUERY):
            batch = doc_ids[i : i + _IDS_PER_QUERY]
            marks = ",".join("?" * len(batch))
            out.update(self._db.execute(f"SELECT doc_id, digest FROM documents WHERE doc_id IN ({marks})", batch))
        return out

    def ids(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT doc_id FROM documents")}

    def delete(self, doc_ids: Iterable[str]) -> None:
        with self._db:
            self._db.executemany("DELETE FROM documents WHERE doc_id=?", [(i,) for i in doc_ids])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> DocStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_document(path: Path, doc_id: str) -> Document | None:
    """One stored document, read without writing anything: a reader (``dmlqa show``, the app) must
    not create the store, switch its journal mode or wait on a build's write lock to read a text."""
    if not path.is_file():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT document FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:  # not written yet, or being replaced: the caller falls back to the index's chunks
        return None
    return Document.from_json(json.loads(row[0])) if row else None


def digest(doc: Document) -> str:
    """A sha256 that changes whenever the stored form of ``doc`` would: its facts, and its text — stood for by
    the sha256 of the source bytes the text was extracted from when there is one (the text is kept while
    those bytes are), so an unchanged paper is compared without serialising its text."""
    facts = {f.name: getattr(doc, f.name) for f in fields(doc) if f.name != "blocks"}
    if doc.sha256:
        text = f"{len(doc.blocks)}:{sum(len(b.text) for b in doc.blocks)}"
    else:
        text = json.dumps([[b.text, b.page, b.section] for b in doc.blocks], ensure_ascii=False)
    body = json.dumps([facts, text], ensure_ascii=False, default=list)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def without_text(doc: Document) -> Document:
    """``doc`` without its text, once the store holds it: a build keeps every document's facts in memory but
    only one batch's texts (a catalog card, whose text is its facts and which is never stored, stays whole)."""
    return doc if doc.is_card or not doc.blocks else replace(doc, blocks=())


def with_text(doc: Document, store: DocStore) -> Document:
    """``doc`` with its text read back from ``store`` when :func:`without_text` let it go."""
    if doc.is_card or doc.blocks:
        return doc
    stored = store.get(doc.doc_id)
    return replace(doc, blocks=stored.blocks) if stored is not None else doc
