"""Incremental rebuilds: exactly the changed documents change, and nothing unchanged is re-embedded.

Two builds replay two WARC archives offline. Between them one page changed (a section appended),
one catalog entry was removed and one added. The new version must differ from the old in exactly
those three documents, the build must embed only the chunk texts the old version did not have, and
a searcher opened before the rebuild must serve the new version on its next query, no restart.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from rebuild_fixtures import build_json, make_home, page_markdown, set_catalog, write_archive

from dmlqa.extract import sentences
from dmlqa.index.versions import VERSIONS, IndexVersion, current_version, dense_text
from dmlqa.pipeline.runs import read_runs
from dmlqa.query.search import Searcher, SearchOptions


def version_contents(index_dir: Path, name: str) -> tuple[dict[str, tuple], dict[str, list[str]]]:
    """Per doc id: its document row (without row positions) and its chunks' dense texts, in order."""
    db = sqlite3.connect(f"file:{index_dir / VERSIONS / name / 'store.sqlite'}?mode=ro", uri=True)
    try:
        docs = {r[0]: r[1:] for r in db.execute(
            "SELECT doc_id, url, source_url, title, kind, content_type, authors, venue, year, topics, is_card, "
            "sha256, n_chunks FROM documents")}
    finally:
        db.close()
    version = IndexVersion(index_dir / VERSIONS / name)
    try:
        chunks: dict[str, list[str]] = {}
        for doc_id in docs:
            rows = version.doc_rows(doc_id)
            records = version.chunks(rows)
            title = version.docs[doc_id].title
            chunks[doc_id] = [dense_text(title, records[r].section, records[r].text) for r in rows]
            if not chunks[doc_id]:
                del chunks[doc_id]
    finally:
        version.close()
    return docs, chunks


def test_rebuild_changes_exactly_the_changed_documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = ["zero", "gpipe", "horovod", "ring"]
    settings = make_home(tmp_path / "kb", keys)
    home, index_dir = settings.home, settings.index_dir
    first = build_json(home, write_archive(tmp_path / "a1", {k: page_markdown(k) for k in keys}))
    assert first["documents"] == 4 and not first["failed"]
    assert first["changes"] == {"added": ["web:gpipe", "web:horovod", "web:ring", "web:zero"],
                                "updated": [], "removed": []}
    v1 = first["index_version"]

    searcher = Searcher(settings)  # a long-lived reader, like the running app
    options = SearchOptions(k=3, per_doc=True)
    assert searcher.search("tensor fusion batches small allreduce operations", options)[0].doc_id == "web:horovod"
    assert searcher.pin().name == v1

    # gpipe gains a section, horovod leaves the catalog, megatron joins it; zero and ring stay as they were.
    set_catalog(settings, ["zero", "gpipe", "ring", "megatron"])
    pages = {"zero": page_markdown("zero"), "gpipe": page_markdown("gpipe", version=2),
             "ring": page_markdown("ring"), "megatron": page_markdown("megatron")}
    second = build_json(home, write_archive(tmp_path / "a2", pages))
    v2 = second["index_version"]
    assert v2 != v1 and current_version(index_dir) == v2
    assert second["changes"] == {"added": ["web:megatron"], "updated": ["web:gpipe"], "removed": ["web:horovod"]}
    assert second["reused_documents"] == 2 and second["extracted"] == 2  # zero and ring were not re-extracted

    docs1, chunks1 = version_contents(index_dir, v1)
    docs2, chunks2 = version_contents(index_dir, v2)
    assert set(docs1) - set(docs2) == {"web:horovod"} and set(docs2) - set(docs1) == {"web:megatron"}
    differing = {d for d in set(docs1) & set(docs2) if docs1[d] != docs2[d] or chunks1[d] != chunks2[d]}
    assert differing == {"web:gpipe"}

    # Only chunk texts the old version did not have were embedded: megatron's, and gpipe's new section.
    old_texts = {t for texts in chunks1.values() for t in texts}
    new_texts = {t for texts in chunks2.values() for t in texts} - old_texts
    gpipe_new = [t for t in chunks2["web:gpipe"] if t not in old_texts]
    assert gpipe_new and len(gpipe_new) < len(chunks2["web:gpipe"])  # the unchanged sections were reused
    assert second["embedded"] == len(new_texts) == len(gpipe_new) + len(chunks2["web:megatron"])
    assert second["reused_embeddings"] == second["chunks"] - second["embedded"]

    # The same searcher serves the new version on its very next query.
    hits = searcher.search("Megatron-LM splits attention heads across tensor parallel GPUs", options)
    assert searcher.pin().name == v2 and hits[0].doc_id == "web:megatron"
    assert all(h.doc_id != "web:horovod" for h in searcher.search("tensor fusion allreduce buffer",
                                                                  SearchOptions(k=20)))
    assert searcher.search("elastic resharding revision", options)[0].doc_id == "web:gpipe"

    # A third build with nothing changed changes nothing and embeds nothing.
    third = build_json(home, write_archive(tmp_path / "a3", pages))
    assert third["changes"] == {"added": [], "updated": [], "removed": []} and third["embedded"] == 0
    assert third["kept_documents"] == 4

    # A change to how texts are split into sentences (a new SPLIT_VERSION) indexes every document again from the
    # texts it has, so no sentence keeps a role the code no longer gives; no passage is embedded again for it
    monkeypatch.setattr(sentences, "SPLIT_VERSION", sentences.SPLIT_VERSION + 1)
    fourth = build_json(home, write_archive(tmp_path / "a4", pages))
    assert fourth["kept_documents"] == 0 and fourth["index_version"] != third["index_version"]
    assert fourth["changes"] == {"added": [], "updated": [], "removed": []} and fourth["embedded"] == 0
    assert version_contents(index_dir, fourth["index_version"]) == version_contents(index_dir, third["index_version"])
    monkeypatch.undo()

    runs = read_runs(index_dir)
    assert [r.ok for r in runs] == [True, True, True, True]
    assert (runs[1].added, runs[1].updated, runs[1].removed) == (["web:megatron"], ["web:gpipe"], ["web:horovod"])
    assert runs[1].previous_version == v1 and runs[1].index_version == v2
    assert runs[1].counts["embedded"] == second["embedded"]
