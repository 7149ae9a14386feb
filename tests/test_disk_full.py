"""A full disk anywhere in a build (or an add) ends in one ``error: disk full while writing ...`` line, and
folders or files ``add`` cannot read are named, one line each (issue 19, item 7 and two smaller items).

Every check runs the real ``dmlqa`` command in a subprocess: "no traceback" is only honest on the stderr a
user sees. Two ways to fill the disk:

- a real tmpfs of a few MB (root only; skipped elsewhere), filled to several levels before a build, so that
  the disk runs out at whatever write comes then, in whatever form the library reports it;
- one write point of a version at a time (the embedding cache, FAISS, BM25, SQLite, ``sentences.q.npy``, the
  last ``meta.json`` write, the rename into place, the publish of ``CURRENT``, the run history), made to fail
  in the very form the real library fails in on a full disk (NumPy's short write has no errno, FAISS says it
  inside a RuntimeError, SQLite says "database or disk is full"), by a wrapper around the CLI.

Either way the published version must be the one before, still answer a search, and leave no debris.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rebuild_fixtures import mount_tmpfs

from dmlqa.paths import IN_PROGRESS_FILE

DMLQA = str(Path(sys.executable).with_name("dmlqa"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

NOTES = """# Parallelism notes

ZeRO partitions the optimizer states, gradients and parameters across data-parallel ranks, so the
memory each GPU needs falls as more GPUs join the job.

## Pipelines

GPipe splits every mini-batch into micro-batches and pipelines them across accelerators; the idle
time at the start and the end of each step is called the pipeline bubble.
"""


def more_text(tag: str, sentences: int = 60) -> str:
    """A document that needs new vectors (``tag`` makes its sentences new to the embedding cache)."""
    body = " ".join(f"Shard {i} of the {tag} tensor-parallel layer holds slice {i} of the weights." for i in
                    range(sentences))
    return f"# More on {tag}\n\n{body}\n"


def dmlqa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DMLQA, *args], capture_output=True, text=True, env=ENV, timeout=600, errors="replace")


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The single ``error: ...`` line of a failed command (nothing else on stderr: no warning, no traceback)."""
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0].removeprefix("error: ")


def published(home: Path) -> tuple[str, list[str], dict[str, tuple[int, int]]]:
    """CURRENT, every folder under index/versions, and the published version's files (size, mtime)."""
    index = home / "index"
    current = (index / "CURRENT").read_text().strip() if (index / "CURRENT").exists() else ""
    versions = sorted(p.name for p in (index / "versions").iterdir()) if (index / "versions").is_dir() else []
    files = {}
    if current:
        for f in sorted((index / "versions" / current).rglob("*")):
            if f.is_file():
                files[str(f.relative_to(index))] = (f.stat().st_size, f.stat().st_mtime_ns)
    return current, versions, files


def assert_still_answers(home: Path) -> None:
    """The published version opens and finds the notes it was built from."""
    result = dmlqa("--home", str(home), "search", "pipeline bubble micro-batches", "--json")
    assert result.returncode == 0, result.stderr
    assert "GPipe" in result.stdout


def run_history(home: Path) -> list[dict]:
    path = home / "index" / "runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- one write point at a time ----------------------------------------------------------------------

#: The CLI with one write of the build failing as it does on a full disk. ``FAIL_AT`` names the write.
FAILING_CLI = r'''
import errno, os, sqlite3, sys
from pathlib import Path

import dmlqa.index.versions as versions
from dmlqa.app.cli import main

where = os.environ["FAIL_AT"]
ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def enospc(path):
    return OSError(errno.ENOSPC, "No space left on device", str(path))


if where == "cache":
    from dmlqa.index.embed_cache import EmbeddingCache

    def put_many(self, encoder, items):
        raise sqlite3.OperationalError("database or disk is full")

    EmbeddingCache.put_many = put_many
elif where == "faiss":
    import faiss

    os.environ["DMLQA_INDEX_ANN_THRESHOLD"] = "1"  # every segment gets an HNSW index: FAISS writes it

    def write_index(index, path):
        Path(path).write_bytes(b"IxF2" * 100)
        raise RuntimeError(
            "Error in void faiss::write_index(const Index*, IOWriter*, int) at index_write.cpp:499: Error: "
            f"'ret == (size * 4)' failed: write error in {path}: 65491 != 512000 (No space left on device)")

    faiss.write_index = write_index
elif where == "bm25":
    from dmlqa.index.postings import Postings

    def save(self, path):
        Path(path).mkdir(parents=True, exist_ok=True)
        raise enospc(Path(path) / "rows.npy")

    Postings.save = save
elif where in ("sentences", "meta", "rename", "publish", "runs", "runs+faiss"):
    pass
else:
    raise SystemExit(f"unknown FAIL_AT {where}")

if where == "sentences":  # the sentence vectors' .npy, written from the segment's spill file, cut short
    import dmlqa.index.segments as segments

    real_raw_to_npy = segments._raw_to_npy

    def raw_to_npy(raw, target, *args, **kwargs):
        if str(target).endswith("sentences.q.npy"):
            Path(target).write_bytes(b"\x93NUMPY" + b"\0" * 100)
            raise enospc(target)
        return real_raw_to_npy(raw, target, *args, **kwargs)

    segments._raw_to_npy = raw_to_npy
if where == "meta":  # the version's last write: meta.json once the citations are in
    real_write_text = Path.write_text

    def write_text(self, data, *args, **kwargs):
        if self.name == "meta.json" and '"citations"' in data:
            real_write_text(self, data[: len(data) // 2], *args, **kwargs)
            raise enospc(self)
        return real_write_text(self, data, *args, **kwargs)

    Path.write_text = write_text
if where == "rename":  # a directory that must grow a block to take the new name
    real_rename = os.rename

    def rename(src, dst, *args, **kwargs):
        if Path(src).name.startswith(versions.BUILDING_PREFIX):
            raise enospc(dst)
        return real_rename(src, dst, *args, **kwargs)

    versions.os.rename = rename
if where == "publish":
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name == "CURRENT":
            raise enospc(src)
        return real_replace(src, dst, *args, **kwargs)

    versions.os.replace = replace
if where.startswith("runs"):
    import dmlqa.pipeline.runs as runs

    real_append = runs.append_run

    def append_run(index_dir, record):
        if record.pid == os.getpid():  # this run's line; an earlier run's recovery line is written
            raise enospc(Path(index_dir) / runs.RUNS_FILE)
        return real_append(index_dir, record)

    runs.append_run = append_run
    if where == "runs+faiss":
        import faiss

        os.environ["DMLQA_INDEX_ANN_THRESHOLD"] = "1"
        def write_index(index, path):
            raise RuntimeError(f"write error in {path}: 1 != 2 (No space left on device)")

        faiss.write_index = write_index

sys.argv = ["dmlqa", *sys.argv[1:]]
main()
'''


@pytest.fixture(scope="module")
def built_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("diskfull") / "kb"
    assert dmlqa("--home", str(home), "init").returncode == 0
    (home / "corpus" / "local" / "notes.md").write_text(NOTES)
    result = dmlqa("--home", str(home), "build", "--offline")
    assert result.returncode == 0, result.stderr
    return home


@pytest.fixture()
def home_copy(built_home: Path, tmp_path: Path) -> Path:
    home = tmp_path / "kb"
    shutil.copytree(built_home, home, symlinks=True)
    (home / "corpus" / "local" / "more.md").write_text(more_text("sharded"))
    return home


def failing_build(home: Path, where: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "failing_cli.py"
    script.write_text(FAILING_CLI)
    return subprocess.run([sys.executable, str(script), "--home", str(home), "build", "--offline"],
                          capture_output=True, text=True, env={**ENV, "FAIL_AT": where}, timeout=600,
                          errors="replace")


@pytest.mark.parametrize("where", ["cache", "faiss", "bm25", "sentences", "meta", "rename", "publish", "runs+faiss"])
def test_a_full_disk_at_each_write_of_a_version(home_copy: Path, tmp_path: Path, where: str) -> None:
    before = published(home_copy)
    runs_before = run_history(home_copy)
    message = one_line_error(failing_build(home_copy, where, tmp_path))
    assert message.startswith("disk full while writing ") and "free space and run again" in message, message
    if where in ("faiss", "bm25", "sentences", "meta", "rename", "publish", "runs+faiss"):
        assert message.endswith("(the published version is unchanged)"), message
    assert published(home_copy) == before  # no .building- folder, no unpublished version left either
    assert not list((home_copy / "index").glob(".CURRENT.*"))
    history = run_history(home_copy)
    if where == "runs+faiss":
        assert history == runs_before  # nothing written, and no half line either
    else:  # the failed run is recorded with the same reason
        assert len(history) == len(runs_before) + 1 and history[-1]["ok"] is False
        assert history[-1]["error"] == message
    assert not (home_copy / "index" / IN_PROGRESS_FILE).exists()  # or the next run would call this one killed
    assert_still_answers(home_copy)
    if where in ("sentences", "publish"):  # space again: the next build just works (once is enough to see it)
        result = dmlqa("--home", str(home_copy), "build", "--offline")
        assert result.returncode == 0, result.stderr
        assert published(home_copy)[0] != before[0]


def test_a_full_disk_while_recording_a_published_run(home_copy: Path, tmp_path: Path) -> None:
    """The version was published before the history line failed: the line says so, and the new version answers."""
    before = published(home_copy)
    message = one_line_error(failing_build(home_copy, "runs", tmp_path))
    current = published(home_copy)[0]
    assert current != before[0]
    assert message == (f"disk full while writing {home_copy / 'index' / 'runs.jsonl'}: index version {current} "
                       "is published, but the run history misses this run; free space")
    assert_still_answers(home_copy)


# -- a real small disk ---------------------------------------------------------------------------------


@pytest.fixture()
def small_disk(tmp_path: Path):  # noqa: ANN201 - a generator fixture
    disk = tmp_path / "disk"
    if not mount_tmpfs(disk, "16m"):
        pytest.skip("cannot mount a tmpfs here (needs root and mount)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A file that takes all of ``disk``'s free space but ``leave`` bytes."""
    filler = disk / "filler"
    with filler.open("wb") as fh:
        fh.write(b"\0" * max(0, shutil.disk_usage(disk).free - leave))
    return filler


def test_builds_on_a_disk_filled_to_several_levels(small_disk: Path) -> None:
    """From no space at all to just not enough: every level is one line, the old version answers."""
    home = small_disk / "kb"
    assert dmlqa("--home", str(home), "init").returncode == 0
    (home / "corpus" / "local" / "notes.md").write_text(NOTES)
    base = shutil.disk_usage(small_disk).used
    assert dmlqa("--home", str(home), "build", "--offline").returncode == 0
    need = shutil.disk_usage(small_disk).used - base  # what a build of a home this size takes
    failed = 0
    for n, share in enumerate((0.0, 0.2, 0.5, 0.8, 1.0, 1.3)):
        before = published(home)
        more = home / "corpus" / "local" / "more.md"
        more.write_text(more_text(f"level{n}"))  # new text each time: every level embeds and writes it all
        filler = fill(small_disk, int(need * share))
        result = dmlqa("--home", str(home), "build", "--offline")
        filler.unlink()
        if result.returncode == 0:  # enough space after all (the published files are shared, not copied)
            assert not result.stderr.strip(), result.stderr
            continue
        failed += 1
        message = one_line_error(result)
        assert message.startswith("disk full while writing ") and "free space" in message, (share, message)
        assert published(home) == before
        assert not list((home / "index").glob(".CURRENT.*"))
        assert_still_answers(home)
    assert failed >= 3  # the lower levels cannot hold a build
    assert dmlqa("--home", str(home), "build", "--offline").returncode == 0
    assert not [v for v in published(home)[1] if v.startswith(".")]


def test_runs_history_keeps_whole_lines_on_a_full_disk(small_disk: Path) -> None:
    """A history line that does not fit is cut back out: the next line is not glued to half of it."""
    from dmlqa.pipeline.runs import RunRecord, append_run, read_runs

    index = small_disk / "index"
    append_run(index, RunRecord(started_at="2026-01-01T00:00:00Z", ok=True))
    filler = fill(small_disk, 4096)
    with pytest.raises(OSError) as caught:
        append_run(index, RunRecord(started_at="2026-01-02T00:00:00Z", ok=False, error="x" * 200_000))
    from dmlqa.errors import is_disk_full

    assert is_disk_full(caught.value)
    filler.unlink()
    append_run(index, RunRecord(started_at="2026-01-03T00:00:00Z", ok=True))
    assert [r.started_at for r in read_runs(index)] == ["2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"]


def test_add_onto_a_full_disk(small_disk: Path, tmp_path: Path) -> None:
    home = small_disk / "kb"
    assert dmlqa("--home", str(home), "init").returncode == 0
    big = tmp_path / "big.md"
    big.write_text("# Big\n\n" + "All-reduce sums gradients across ranks. " * 20_000)  # 800 KB
    filler = fill(small_disk, 64 * 1024)
    message = one_line_error(dmlqa("--home", str(home), "add", str(big)))
    filler.unlink()
    local = home / "corpus" / "local"
    assert message == (f"disk full while writing {local / 'big.md'} (a copy of {big}): free space and run "
                       "`dmlqa add` again (0 file(s) were added before it)")
    assert sorted(p.name for p in local.iterdir()) == []  # no half copy for the next build to index


# -- add: what cannot be read is named -------------------------------------------------------------------


def _unprivileged() -> list[str]:
    """A prefix that runs a command without root's right to read anything (chmod 000 then denies)."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: chmod 000 cannot deny root")
    probe = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"setpriv cannot drop root's read rights here: {probe.stderr.decode().strip()}")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def add_unprivileged(home: Path, *paths: Path | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_unprivileged(), DMLQA, "--home", str(home), "add", *map(str, paths)],
                          capture_output=True, text=True, env=ENV, timeout=300, cwd=cwd)


@pytest.fixture()
def empty_home(tmp_path: Path) -> Path:
    home = tmp_path / "kb"
    assert dmlqa("--home", str(home), "init").returncode == 0
    return home


def test_add_names_an_unreadable_file(empty_home: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nNot for you.\n")
    good = tmp_path / "good.md"
    good.write_text("# Good\n\nRing all-reduce.\n")
    secret.chmod(0)
    try:
        result = add_unprivileged(empty_home, "secret.md", "good.md", cwd=tmp_path)
    finally:
        secret.chmod(0o644)
    assert "Traceback" not in result.stderr and "╭" not in result.stderr and "Usage:" not in result.stderr
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == ["error: secret.md: cannot read file: Permission denied"]
    assert sorted(p.name for p in (empty_home / "corpus" / "local").iterdir()) == ["good.md"]  # the other is added


def test_add_names_a_file_in_a_folder_it_cannot_enter(empty_home: Path, tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir()
    (closed / "x.md").write_text("# X\n")
    (closed / "lib.bib").write_text("@article{a, title={A}}\n")
    closed.chmod(0)
    try:
        result = add_unprivileged(empty_home, "closed/x.md", "closed/lib.bib", cwd=tmp_path)
    finally:
        closed.chmod(0o755)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == ["error: closed/x.md: cannot read: Permission denied",
                                                  "error: closed/lib.bib: cannot read: Permission denied"]


def test_add_folder_names_what_it_skips(empty_home: Path, tmp_path: Path) -> None:
    """A sub-folder it cannot list and a symlinked folder are each named; everything else is copied."""
    papers = tmp_path / "papers"
    (papers / "ok").mkdir(parents=True)
    (papers / "ok" / "a.md").write_text("# A\n\nZeRO stage 3.\n")
    (papers / "denied").mkdir()
    (papers / "denied" / "b.md").write_text("# B\n\nHidden from the user.\n")
    (papers / "real").mkdir()
    (papers / "real" / "c.md").write_text("# C\n\nTensor parallel.\n")
    (papers / "link").symlink_to("real", target_is_directory=True)
    (papers / "denied").chmod(0)
    try:
        result = add_unprivileged(empty_home, "papers", cwd=tmp_path)
    finally:
        (papers / "denied").chmod(0o755)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert sorted(result.stderr.strip().splitlines()) == [
        "skipped papers/denied: cannot read folder: Permission denied",
        "skipped papers/link: symbolic link to a folder, not followed (its files are added from papers/real)",
    ]
    local = empty_home / "corpus" / "local" / "papers"
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*.md")) == ["ok/a.md", "real/c.md"]
    assert "Added 2 file(s)" in result.stdout


def test_add_a_folder_it_cannot_list_fails(empty_home: Path, tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir()
    (closed / "x.md").write_text("# X\n")
    closed.chmod(0)
    try:
        result = add_unprivileged(empty_home, "closed", cwd=tmp_path)
    finally:
        closed.chmod(0o755)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == ["error: closed: cannot read folder: Permission denied"]
