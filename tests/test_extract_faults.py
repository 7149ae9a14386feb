"""One local file whose extraction raises an unexpected error is a failed resource, never a stopped build."""

from __future__ import annotations

from pathlib import Path

import pytest

import dmlqa
from dmlqa.extract import documents as extract_documents
from dmlqa.index.docstore import DocStore
from dmlqa.pipeline import stages


def test_a_parser_bug_on_one_local_file_fails_only_that_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no time limit: extraction runs in this process, where the patched parser is
    monkeypatch.setenv("DMLQA_BUILD_EXTRACT_TIMEOUT_S", "0")
    kb = dmlqa.KnowledgeBase(tmp_path / "home", create=True)
    good, bad = tmp_path / "good.md", tmp_path / "bad.md"
    good.write_text("# Ring all-reduce\n\nEach worker sends a slice of its gradient to its neighbour.\n", "utf-8")
    bad.write_text("# Parameter servers\n\nWorkers push gradients and pull weights.\n", "utf-8")
    kb.add([good, bad])
    real = extract_documents.extract_file

    def flaky(path: Path, *args: object, **kwargs: object):  # noqa: ANN202 - mirrors extract_file
        if path.name == "bad.md":
            raise RuntimeError("a bug in a parser")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(extract_documents, "extract_file", flaky)
    monkeypatch.setattr("dmlqa.extract.extract_file", flaky, raising=False)  # the package caches what it hands out
    with DocStore(kb.settings.paths.documents) as store:
        result = stages.local_documents(kb.settings, store)
    assert [d.title for d in result.documents] == ["Ring all-reduce"]
    [failure] = result.failed
    assert failure.url.endswith("bad.md") and failure.stage == "extract"
    assert "unexpected error: RuntimeError('a bug in a parser')" in failure.error
