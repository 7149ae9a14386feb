from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dmlqa.catalog.local import add_paths, jsonl_documents, local_files
from dmlqa.errors import BuildLockedError
from dmlqa.models import Document, Failure
from dmlqa.pipeline.lock import WriterLock


def test_second_writer_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from dmlqa.pipeline.lock import WriterLock
            with WriterLock(Path({str(tmp_path)!r}), "build"):
                print("locked", flush=True)
                time.sleep(30)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(BuildLockedError, match=rf"PID {holder.pid}"):
            WriterLock(tmp_path).acquire()
    finally:
        holder.kill()  # like kill -9: the kernel drops the flock
        holder.wait()
    with WriterLock(tmp_path) as lock:  # the stale lock file does not block the next writer
        assert json.loads(lock.path.read_text())["what"] == "build"


def test_add_copies_supported_files_and_reports_the_rest(tmp_path: Path) -> None:
    src = tmp_path / "mine"
    (src / "sub").mkdir(parents=True)
    (src / "notes.md").write_text("# Notes\nTensor parallelism splits matrices.")
    (src / "sub" / "paper.txt").write_text("Plain text paper.")
    (src / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / "records.jsonl").write_text('{"_id": "d1", "title": "T", "text": "body"}\n')
    (tmp_path / "bad.jsonl").write_text("not json\n")
    corpus = tmp_path / "home" / "corpus"
    rep = add_paths([src, tmp_path / "records.jsonl", tmp_path / "bad.jsonl", tmp_path / "missing.pdf"], corpus)
    assert sorted(rep.added) == ["mine/notes.md", "mine/sub/paper.txt", "records.jsonl"]
    reasons = dict(rep.skipped)
    assert "unsupported file type .png" in reasons[str(src / "image.png")]
    assert reasons[str(tmp_path / "missing.pdf")] == "no such file or folder"
    assert reasons[str(tmp_path / "bad.jsonl")].startswith("not JSON Lines")
    assert len(local_files(corpus)) == 3


def test_jsonl_records_become_documents_and_bad_lines_failures(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "local").mkdir(parents=True)
    f = corpus / "local" / "c.jsonl"
    f.write_text("\n".join([
        json.dumps({"_id": "4983", "title": "Microstructural development", "text": "Alterations of the  brain."}),
        json.dumps({"id": "x2", "text": "Second", "url": "https://example.org/x2", "year": 2021, "authors": "A"}),
        "{broken",
        json.dumps({"id": "x3"}),
        json.dumps({"id": "x2", "text": "dup"}),
    ]) + "\n")
    items = list(jsonl_documents(f, corpus))
    docs = [i for i in items if isinstance(i, Document)]
    fails = [i for i in items if isinstance(i, Failure)]
    assert [d.doc_id for d in docs] == ["4983", "x2"]
    assert docs[0].title == "Microstructural development" and docs[0].blocks[0].text == "Alterations of the brain."
    assert docs[1].url == "https://example.org/x2" and docs[1].year == 2021 and docs[1].authors == ("A",)
    assert [(x.url, x.error.split(":")[0]) for x in fails] == [
        ("local/c.jsonl:3", "invalid JSON"),
        ("local/c.jsonl:4", 'record x3 has no "text"'),
        ("local/c.jsonl:5", "duplicate record id x2"),
    ]
