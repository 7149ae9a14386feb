"""Crash safety and one writer at a time, with real processes and real signals.

A build is run as ``python -m dmlqa.app.cli ... build`` in a subprocess and killed with SIGKILL (no
handler runs, no ``finally``): the published version must stay intact and searchable, the next
build must clean the debris up and succeed, and the run history must say the killed run was
interrupted. Two builds started together must not both run.

The moments of the kill are made deterministic rather than raced: a build waiting on a server
route that does not answer yet (the fetch stage), and a build whose version folder is being
written (the index stage, held open by a wrapper that slows the final fsync of ``.building-*``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from httpserver import LocalServer, Reply, SeenRequest
from rebuild_fixtures import build_json, cli, make_home, page_markdown, resource, set_catalog, url_of, write_archive

from dmlqa.catalog.store import write_catalog
from dmlqa.index.versions import BUILDING_PREFIX, VERSIONS, current_version, open_current
from dmlqa.models import Resource
from dmlqa.pipeline.runs import IN_PROGRESS_FILE, read_runs
from dmlqa.query.search import Searcher, SearchOptions

KEYS = ["zero", "gpipe", "horovod"]

#: The CLI, with the fsync of a finished version folder delayed: the folder exists, half-published.
SLOW_PUBLISH = """
import sys, time
import dmlqa.index.writer as index
from dmlqa.app.cli import main
slow = index.fsync_path
def paused(path):
    time.sleep(120)
    slow(path)
index.fsync_path = paused
sys.argv = ["dmlqa", *sys.argv[1:]]
main()
"""

#: The CLI, killed by SIGKILL (no handler, no ``finally``) the first time the build reaches one step of
#: writing and publishing a segmented version: ``sys.argv[1]`` names it as ``module:attribute``.
KILL_AT = """
import importlib, os, signal, sys
from dmlqa.app.cli import main
where, sys.argv = sys.argv[1], ["dmlqa", *sys.argv[2:]]
module, _, name = where.partition(":")
owner = importlib.import_module(module)
for part in name.split(".")[:-1]:
    owner = getattr(owner, part)
attr = name.split(".")[-1]
def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
setattr(owner, attr, killed)
main()
"""

#: Every step of a segmented write and publish, in order; those before ``publish`` leave the old version.
SEGMENT_STEPS = [
    "dmlqa.index.writer:SegmentBuilder.write",  # a new segment (the batch of new and changed documents)
    "dmlqa.index.writer:link_segment",  # sharing an unchanged segment with the new version
    "dmlqa.index.writer:VersionWriter._merge_one",  # merging small segments
    "dmlqa.index.writer:VersionWriter._write_store",  # the document table and the citation graph
    "dmlqa.index.writer:Lexicon.save",  # BM25 collection statistics
    "dmlqa.index.writer:fsync_path",  # flushing the manifest
    "dmlqa.index.writer:os.rename",  # renaming the folder into place
    "dmlqa.pipeline.indexing:publish",  # replacing CURRENT
    "dmlqa.pipeline.indexing:prune",  # after publishing: the new version must be complete
]


@pytest.mark.parametrize("step", SEGMENT_STEPS, ids=[s.rsplit(":", 1)[1] for s in SEGMENT_STEPS])
def test_sigkill_at_every_step_of_a_segmented_publish(tmp_path: Path, step: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """One document a segment, so that the rebuild writes a segment, shares the others and merges them all."""
    monkeypatch.setenv("DMLQA_INDEX_SEGMENT_ROWS", "1")  # read by the in-process builds and the child alike
    settings = make_home(tmp_path / "kb", KEYS)
    archive = write_archive(tmp_path / "a", {k: page_markdown(k) for k in [*KEYS, "megatron"]})
    v1 = build_json(settings.home, archive)["index_version"]
    # from now on exact segments holding more than 5 rows together merge: the rebuild merges
    monkeypatch.setenv("DMLQA_INDEX_ANN_THRESHOLD", "5")
    set_catalog(settings, [*KEYS, "megatron"])
    args = ["--home", str(settings.home), "build", "--offline", "--archive", str(archive)]
    proc = spawn([step, *args], code=KILL_AT)
    proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, f"the build never reached {step}"
    published = current_version(settings.index_dir)
    if step.endswith(":prune"):
        assert published != v1
        opened = open_current(settings.index_dir)
        assert "web:megatron" in opened.docs
        opened.close()
    else:
        assert_old_version_serves(settings, v1)
    again = build_json(settings.home, archive)
    assert not building_dirs(settings.index_dir)
    opened = open_current(settings.index_dir)
    try:
        assert opened.name == again["index_version"] and "web:megatron" in opened.docs
        assert opened.meta["chunks"] == again["chunks"] and len(opened.docs) == 4
    finally:
        opened.close()
    hits = Searcher(settings).search("ZeRO partitions optimizer states across ranks", SearchOptions(k=1))
    assert hits[0].doc_id == "web:zero"


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the build ended (rc {proc.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def building_dirs(index_dir: Path) -> list[Path]:
    root = index_dir / VERSIONS
    return [p for p in root.iterdir() if p.name.startswith(BUILDING_PREFIX)] if root.is_dir() else []


def spawn(args: list[str], *, code: str | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "dmlqa.app.cli", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill9(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def assert_old_version_serves(settings, version: str) -> None:  # noqa: ANN001
    """The published version is the old one, it opens, and a fresh searcher finds its documents."""
    assert current_version(settings.index_dir) == version
    opened = open_current(settings.index_dir)
    try:
        assert opened.name == version and "web:megatron" not in opened.docs and opened.size > 0
    finally:
        opened.close()
    hits = Searcher(settings).search("ZeRO partitions optimizer states across ranks", SearchOptions(k=1))
    assert hits[0].doc_id == "web:zero"


def test_sigkill_while_writing_the_version_keeps_the_published_one(tmp_path: Path) -> None:
    settings = make_home(tmp_path / "kb", KEYS)
    pages = {k: page_markdown(k) for k in [*KEYS, "megatron"]}
    archive = write_archive(tmp_path / "a", pages)
    v1 = build_json(settings.home, archive)["index_version"]

    set_catalog(settings, [*KEYS, "megatron"])
    proc = spawn(["--home", str(settings.home), "build", "--offline", "--archive", str(archive)], code=SLOW_PUBLISH)
    wait_for(lambda: bool(building_dirs(settings.index_dir)), proc, "a .building- folder appeared")
    kill9(proc)

    debris = building_dirs(settings.index_dir)
    assert debris and (settings.index_dir / IN_PROGRESS_FILE).is_file()
    assert_old_version_serves(settings, v1)

    again = build_json(settings.home, archive)
    assert again["index_version"] not in (None, v1) and "web:megatron" in again["changes"]["added"]
    assert not building_dirs(settings.index_dir) and not any(p.exists() for p in debris)
    assert not (settings.index_dir / IN_PROGRESS_FILE).exists()
    assert not list(settings.index_dir.glob(".CURRENT.*"))
    runs = read_runs(settings.index_dir)
    assert [r.ok for r in runs] == [True, False, True]
    assert runs[1].error.startswith("interrupted") and runs[1].pid == proc.pid
    assert runs[1].previous_version == v1 and runs[2].previous_version == v1
    status = json.loads(cli("--home", str(settings.home), "status", "--json").stdout)
    assert status["index_version"] == again["index_version"]
    assert [r["ok"] for r in status["runs"]] == [True, False, True]  # newest first


def blocking_route(release: threading.Event, body: bytes) -> Callable[[SeenRequest], Reply]:
    """A route that answers only once ``release`` is set (or after 60 s, not to hang a broken test)."""

    def handler(request: SeenRequest) -> Reply:
        release.wait(60)
        return Reply(200, body=body, content_type="text/markdown; charset=utf-8")

    return handler


@pytest.fixture()
def server() -> LocalServer:
    s = LocalServer()
    s.route("/robots.txt", Reply(404))
    yield s
    s.close()


def slow_home(tmp_path: Path, server: LocalServer) -> tuple:  # noqa: ANN001
    """A home built once from an archive, whose catalog then gains one page served (slowly) by ``server``."""
    settings = make_home(tmp_path / "kb", KEYS)
    archive = write_archive(tmp_path / "a", {k: page_markdown(k) for k in KEYS})
    v1 = build_json(settings.home, archive)["index_version"]
    slow = Resource(id="web:megatron", url=server.url("/megatron.md"), title="Notes on megatron", kind="docs")
    write_catalog(settings.catalog_path, [*(resource(k) for k in KEYS), slow])
    args = ["--home", str(settings.home), "build", "--archive", str(archive), "--allow-private-hosts", "--json"]
    return settings, v1, args


def test_sigkill_while_fetching_keeps_the_published_one(tmp_path: Path, server: LocalServer) -> None:
    release = threading.Event()
    server.route("/megatron.md", blocking_route(release, page_markdown("megatron").encode()))
    settings, v1, args = slow_home(tmp_path, server)
    proc = spawn(args)
    wait_for(lambda: server.hits("/megatron.md") > 0, proc, "the build asked for the page")
    kill9(proc)
    assert_old_version_serves(settings, v1)

    release.set()
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert "web:megatron" in json.loads(result.stdout)["changes"]["added"]
    assert not building_dirs(settings.index_dir)
    assert [r.ok for r in read_runs(settings.index_dir)] == [True, False, True]


def test_two_concurrent_builds_exactly_one_runs(tmp_path: Path, server: LocalServer) -> None:
    release = threading.Event()
    server.route("/megatron.md", blocking_route(release, page_markdown("megatron").encode()))
    settings, v1, args = slow_home(tmp_path, server)
    first = spawn(args)
    try:
        wait_for(lambda: server.hits("/megatron.md") > 0, first, "the first build held the lock and fetched")
        second = subprocess.run([sys.executable, "-m", "dmlqa.app.cli", *args], capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 1 and not second.stdout
        assert "another dmlqa build is running" in second.stderr and f"PID {first.pid}" in second.stderr
        assert current_version(settings.index_dir) == v1  # the refused build published nothing
    finally:
        release.set()
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    report = json.loads(out)
    assert report["changes"]["added"] == ["web:megatron"] and current_version(settings.index_dir) != v1
    runs = read_runs(settings.index_dir)
    assert len(runs) == 2 and all(r.ok for r in runs) and runs[1].pid == first.pid  # the refused one left no run
    opened = open_current(settings.index_dir)
    assert url_of("zero") in {d.url for d in opened.docs.values()}
    opened.close()
