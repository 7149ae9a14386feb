"""The library API (dmlqa.KnowledgeBase) driven as a script would, on a small real home."""

from __future__ import annotations

from pathlib import Path

import pytest

import dmlqa
from dmlqa.errors import HomeError, SettingsError


def test_public_surface_is_pinned() -> None:
    assert sorted(dmlqa.__all__) == ["Answer", "Citation", "DmlqaError", "Document", "Hit", "KnowledgeBase",
                                     "Resource", "__version__"]
    for name in dmlqa.__all__:
        assert hasattr(dmlqa, name)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> dmlqa.KnowledgeBase:
    root = tmp_path_factory.mktemp("api")
    notes = root / "notes"
    notes.mkdir()
    (notes / "fusion.md").write_text(
        "# Tensor Fusion\n\nHorovod batches small allreduce operations into one larger buffer. "
        "The fusion buffer is 128 MB by default.\n\n## Timeline\n\nThe Horovod timeline records what each "
        "worker does over time; open it in chrome://tracing to find slow reductions.\n", encoding="utf-8")
    (notes / "zero.md").write_text(
        "# ZeRO\n\nZeRO stage 1 partitions optimizer states across data parallel ranks. Stage 2 also "
        "partitions gradients, and stage 3 partitions the parameters as well.\n", encoding="utf-8")
    kb = dmlqa.KnowledgeBase(root / "kb", create=True)
    added = kb.add([notes])
    assert len(added.added) == 2
    report = kb.build(offline=True)
    assert report.index_version and report.documents == 2 and not report.failed
    return kb


def test_search_ask_stream_related_status(kb: dmlqa.KnowledgeBase) -> None:
    hits = kb.search("fusion buffer size", k=3)
    assert hits and isinstance(hits[0], dmlqa.Hit) and "fusion" in hits[0].doc_id
    answer = kb.ask("What is the default size of the fusion buffer?")
    assert isinstance(answer, dmlqa.Answer) and not answer.refused and "128 MB" in answer.answer
    assert answer.citations and isinstance(answer.citations[0], dmlqa.Citation)
    stream = kb.ask_stream("How does ZeRO partition optimizer states?")
    tokens = list(stream)
    assert "".join(tokens) and stream.result.answer.startswith(tokens[0][:20])
    follow = kb.ask("what about stage 3?", previous=stream.result)
    assert not follow.refused and "stage 3" in follow.answer.lower()
    rel = kb.related(hits[0].doc_id, k=5)
    assert rel.target == hits[0].doc_id and all(i.doc_id != hits[0].doc_id for i in rel.items)
    st = kb.status()
    assert st["documents"] == 2 and st["index_version"]


def test_citation_graph_methods_on_a_home_without_papers(kb: dmlqa.KnowledgeBase) -> None:
    from dmlqa.errors import NotInIndexError

    report_keys = {"references", "references_resolved", "references_skipped"}
    assert report_keys <= set(kb.build(offline=True).to_json())  # markdown notes: no reference lists read
    doc_id = kb.search("fusion buffer", k=1)[0].doc_id
    cites = kb.cites(doc_id)
    assert cites.target.doc_id == doc_id and cites.items == () and "not a PDF" in (cites.notice or "")
    assert kb.cited_by("Tensor Fusion").target.doc_id == doc_id  # a title names the document
    assert kb.suggest(k=5).items == ()
    with pytest.raises(NotInIndexError, match="names no document"):
        kb.cites("2101.99999")
    both = kb.related([doc_id, "ZeRO"], k=5)
    assert len(both.targets) == 2 and not set(both.targets) & {i.doc_id for i in both.items}


def test_errors_are_dmlqa_errors_with_what_and_why(tmp_path: Path) -> None:
    with pytest.raises(HomeError, match="no dmlqa home at"):
        dmlqa.KnowledgeBase(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(HomeError, match="is a file"):
        dmlqa.KnowledgeBase(tmp_path / "file")
    with pytest.raises(SettingsError, match="chunk_tokens"):
        dmlqa.KnowledgeBase(tmp_path / "kb2", create=True, chunk_tokens=0)
    with pytest.raises(dmlqa.DmlqaError, match="no index"):
        dmlqa.KnowledgeBase(tmp_path / "kb3", create=True).search("anything")
