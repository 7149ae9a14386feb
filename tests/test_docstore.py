"""The document store rewrites only documents whose stored form changed (issue 20)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from dmlqa.index.docstore import DocStore, read_document
from dmlqa.models import Block, Document


def _doc(i: int, text: str = "Pipeline parallelism splits the model into stages.") -> Document:
    return Document(doc_id=f"d{i}", url=f"https://example.org/{i}", title=f"Paper {i}",
                    blocks=(Block(f"{text} ({i})", page=1),), content_type="pdf", sha256=f"{i:064x}")


def _row(path: Path, doc_id: str) -> tuple:
    with sqlite3.connect(path) as db:
        query = "SELECT rowid, stored_at, document, digest FROM documents WHERE doc_id=?"
        return db.execute(query, (doc_id,)).fetchone()


def test_only_new_and_changed_documents_are_written(tmp_path: Path) -> None:
    path = tmp_path / "documents.sqlite"
    docs = [_doc(i) for i in range(1200)]  # more than one SELECT's worth of ids
    with DocStore(path) as store:
        assert store.put_many(docs) == 1200
        assert store.put_many(docs) == 0
        before = _row(path, "d7")
        changed = replace(docs[7], blocks=(Block("Tensor parallelism splits each layer.", page=2),))
        assert store.put_many([*docs[:10], changed, _doc(5000)]) == 2
        assert store.get("d7") == changed and store.get("d5000") == _doc(5000)
        assert store.ids() == {d.doc_id for d in docs} | {"d5000"}
    after = _row(path, "d7")
    assert after[2] != before[2] and after[3] != before[3]
    assert read_document(path, "d7") == changed


def test_a_repeated_id_keeps_the_last_and_counts_once(tmp_path: Path) -> None:
    first, last = _doc(1, "First text."), _doc(1, "Second text.")
    with DocStore(tmp_path / "documents.sqlite") as store:
        assert store.put_many([first, last]) == 1
        assert store.get("d1") == last
        assert store.put_many([last, first]) == 1 and store.get("d1") == first


def test_put_reads_digests_never_the_stored_json(tmp_path: Path) -> None:
    with DocStore(tmp_path / "documents.sqlite") as store:
        store.put_many([_doc(i) for i in range(20)])
        statements: list[str] = []
        store._db.set_trace_callback(statements.append)
        assert store.put_many([_doc(i) for i in range(20)]) == 0
        store._db.set_trace_callback(None)
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert selects and all("document " not in s.split("FROM")[0] for s in selects)
    assert not any(s.lstrip().upper().startswith(("INSERT", "UPDATE")) for s in statements)


def test_a_store_written_before_digests_keeps_its_texts(tmp_path: Path) -> None:
    path = tmp_path / "documents.sqlite"
    old = _doc(1)
    with sqlite3.connect(path) as db:  # the table as earlier builds created it
        db.execute("CREATE TABLE documents (doc_id TEXT PRIMARY KEY, sha256 TEXT, is_card INTEGER, "
                   "stored_at TEXT DEFAULT CURRENT_TIMESTAMP, document TEXT)")
        db.execute("INSERT INTO documents (doc_id, sha256, is_card, document) VALUES (?,?,?,?)",
                   (old.doc_id, old.sha256, 0, json.dumps(old.to_json(), ensure_ascii=False)))
    with DocStore(path) as store:
        assert store.get("d1") == old  # a resource failing now still has its earlier text
        assert store.put_many([old]) == 1  # no digest yet: written once
        assert store.put_many([old]) == 0
