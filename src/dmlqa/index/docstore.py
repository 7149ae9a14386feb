"""Extracted documents kept between builds (``corpus/documents.sqlite``).

This is what makes rebuilds incremental and failures harmless: a resource whose source bytes
have the same sha256 as last time is not extracted again, and a resource that was fetched
before but fails now keeps its previous text instead of vanishing from the index.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from dmlqa.models import Document


class DocStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path))
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS documents (doc_id TEXT PRIMARY KEY, sha256 TEXT, is_card INTEGER, "
            "stored_at TEXT DEFAULT CURRENT_TIMESTAMP, document TEXT)"
        )

    def get(self, doc_id: str) -> Document | None:
        row = self._db.execute("SELECT document FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
        return Document.from_json(json.loads(row[0])) if row else None

    def put_many(self, docs: Iterable[Document]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO documents (doc_id, sha256, is_card, document) VALUES (?,?,?,?)",
                [
                    (d.doc_id, d.sha256, int(d.is_card), json.dumps(d.to_json(), ensure_ascii=False))
                    for d in docs
                ],
            )

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
