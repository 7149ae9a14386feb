"""Every ordinary mistake ends in one line on stderr and a non-zero exit, never a traceback, and
leaves the published index as it was (issue 9, item 6).

The checks run the installed ``dmlqa`` command in a subprocess: that is the honest test of "no
traceback" (an in-process runner catches what a user would see as one). One small home with a
local markdown file is built once for the module; tests that damage it work on copies.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rebuild_fixtures import mount_tmpfs

from dmlqa.errors import DmlqaError, SettingsError
from dmlqa.settings import load_settings

DMLQA = str(Path(sys.executable).with_name("dmlqa"))

NOTES = """# Parallelism notes

ZeRO partitions the optimizer states, gradients and parameters across data-parallel ranks, so the
memory each GPU needs falls as more GPUs join the job.

## Pipelines

GPipe splits every mini-batch into micro-batches and pipelines them across accelerators; the idle
time at the start and the end of each step is called the pipeline bubble.
"""


def dmlqa(*args: str | bytes, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    return subprocess.run([DMLQA, *args], capture_output=True, text=True, env=full_env, timeout=300,
                          errors="replace")


def one_line_error(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The single ``error: ...`` line of a failed command (asserting there is nothing else)."""
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0].removeprefix("error: ")


def published(home: Path) -> tuple[str, list[str], dict[str, int]]:
    """CURRENT, the version folders, and the published version's file sizes and mtimes (unchanged?)."""
    index = home / "index"
    current = (index / "CURRENT").read_text() if (index / "CURRENT").exists() else ""
    versions = sorted(p.name for p in (index / "versions").iterdir()) if (index / "versions").is_dir() else []
    files: dict[str, int] = {}
    if current.strip():
        for f in sorted((index / "versions" / current.strip()).rglob("*")):
            if f.is_file():
                files[str(f.relative_to(index))] = f.stat().st_size * 10**12 + f.stat().st_mtime_ns % 10**12
    return current, versions, files


@pytest.fixture(scope="module")
def built_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("errors")
    home = root / "kb"
    assert dmlqa("--home", str(home), "init").returncode == 0
    notes = root / "notes.md"
    notes.write_text(NOTES, encoding="utf-8")
    assert dmlqa("--home", str(home), "add", str(notes)).returncode == 0
    result = dmlqa("--home", str(home), "build", "--offline", "--json")
    assert result.returncode == 0, result.stderr
    return home


@pytest.fixture()
def home_copy(built_home: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "kb"
    shutil.copytree(built_home, copy)
    return copy


# -- 1. a build with nothing to build ------------------------------------------------------------


def test_build_of_an_empty_home_says_what_to_do_and_leaves_nothing_behind(tmp_path: Path) -> None:
    home = tmp_path / "empty"
    assert dmlqa("--home", str(home), "init").returncode == 0
    message = one_line_error(dmlqa("--home", str(home), "build"))
    assert message == (
        "nothing to build: the catalog is empty and corpus/local has no documents; "
        "run `dmlqa catalog import LIST.md` or `dmlqa add FILE`"
    )
    assert published(home) == ("", [], {})  # no version, no half-written .building- folder
    runs = (home / "index" / "runs.jsonl").read_text().splitlines()
    assert json.loads(runs[-1])["ok"] is False  # the failed run is in the history


# -- 2. --home that is missing or a file -------------------------------------------------------------


@pytest.mark.parametrize("command", [["status"], ["search", "zero"], ["build"], ["ask", "what?"],
                                     ["related", "zero"], ["catalog", "import", "list.md"]])
def test_home_that_does_not_exist_or_is_a_file(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "nowhere"
    message = one_line_error(dmlqa("--home", str(missing), *command))
    assert message == f"no dmlqa home at {missing} (run `dmlqa init --home {missing}`)"
    assert not missing.exists()  # never created silently
    a_file = tmp_path / "file.txt"
    a_file.write_text("not a home")
    assert one_line_error(dmlqa("--home", str(a_file), *command)) == f"{a_file} is a file, not a dmlqa home"


def test_init_may_create_a_home_but_not_over_a_file(tmp_path: Path) -> None:
    assert dmlqa("init", "--home", str(tmp_path / "new")).returncode == 0
    assert (tmp_path / "new" / "dmlqa.toml").is_file()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    assert one_line_error(dmlqa("--home", str(a_file), "init")) == f"{a_file} is a file, not a dmlqa home"


# -- 3. bytes that are not UTF-8 on the command line ---------------------------------------------------


@pytest.mark.parametrize(("command", "what"), [("search", "query"), ("related", "query"), ("ask", "question")])
def test_non_utf8_argument(built_home: Path, command: str, what: str) -> None:
    before = published(built_home)
    result = dmlqa("--home", str(built_home), command, b"zero \xff redundancy")
    assert one_line_error(result, 2) == (
        f"the {what} is not valid UTF-8 text (byte 0xff at position 6); check your terminal's encoding"
    )
    assert published(built_home) == before


# -- 4. --queries / --questions files ---------------------------------------------------------------


def test_queries_and_questions_files(built_home: Path, tmp_path: Path) -> None:
    home = str(built_home)
    missing = tmp_path / "missing.jsonl"
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"id": "1", "text": "ok", "question": "ok"}\n{"id": "2", "text": "caf\xe9"}\n')
    not_json = tmp_path / "notjson.jsonl"
    not_json.write_text('{"id": "1", "text": "zero"}\nzero redundancy\n')
    no_field = tmp_path / "nofield.jsonl"
    no_field.write_text('{"id": "1", "text": "zero"}\n{"id": "2"}\n')
    for flag, cmd in (("--queries", "search"), ("--questions", "ask")):
        assert one_line_error(dmlqa("--home", home, cmd, flag, str(missing))) == (
            f"{flag} file {missing} does not exist")
        assert one_line_error(dmlqa("--home", home, cmd, flag, str(tmp_path))) == (
            f"{flag} file {tmp_path} is a folder, not a JSONL file")
        assert one_line_error(dmlqa("--home", home, cmd, flag, str(latin1))) == (
            f"{flag} file {latin1} is not UTF-8 text (byte 0xe9 on line 2)")
    assert one_line_error(dmlqa("--home", home, "search", "--queries", str(not_json))) == (
        f"{not_json}:2: not a JSON object")
    assert one_line_error(dmlqa("--home", home, "search", "--queries", str(no_field))) == (
        f'{no_field}:2: a query needs "id" (or "_id") and "text"')
    assert one_line_error(dmlqa("--home", home, "ask", "--questions", str(no_field))) == (
        f'{no_field}:1: a question needs "id" and "question"')
    assert one_line_error(dmlqa("--home", home, "eval", "--questions", str(missing))) == (
        f"--questions file {missing} does not exist")


# -- 5. a damaged index version ------------------------------------------------------------------------


@pytest.mark.parametrize(("part", "damage", "what"), [
    ("meta.json", b'{"version": ', "meta.json is not valid JSON"),
    ("store.sqlite", b"this is not a database" * 100, "store.sqlite cannot be read (file is not a database)"),
    ("segments/*/vectors.npy", b"garbage" * 50, "segment s*: vectors.npy cannot be read ("),
    ("segments/*/vectors.npy", None, "segment s*: vectors.npy cannot be read ("),  # None: truncated to half
    ("segments/*/rows.sqlite", b"this is not a database" * 100, "segment s*: rows.sqlite cannot be read (file is"),
    ("segments/*/bm25/tf.npy", b"\x93NUMPY garbage", "segment s*: bm25/ or sentence vectors cannot be read ("),
])
def test_damaged_index_version_is_named(home_copy: Path, part: str, damage: bytes | None, what: str) -> None:
    name = (home_copy / "index" / "CURRENT").read_text().strip()
    [target] = (home_copy / "index" / "versions" / name).glob(part)
    if "segments/" in part:  # the message names the segment: segments/<id>/...
        what = what.replace("s*", target.relative_to(home_copy / "index" / "versions" / name).parts[1], 1)
    target.write_bytes(damage if damage is not None else target.read_bytes()[: target.stat().st_size // 2])
    before = published(home_copy)
    for command in (["status"], ["status", "--json"], ["search", "zero"], ["related", "zero"],
                    ["ask", "What is the pipeline bubble?"]):
        message = one_line_error(dmlqa("--home", str(home_copy), *command))
        assert message.startswith(f"index version {name} is damaged: {what}"), (command, message)
        assert message.endswith("; run `dmlqa build`")
    assert published(home_copy) == before


def test_encoder_mismatch_is_one_line(home_copy: Path) -> None:
    from dmlqa.index.embed import EncoderError

    assert issubclass(EncoderError, DmlqaError)
    name = (home_copy / "index" / "CURRENT").read_text().strip()
    meta_path = home_copy / "index" / "versions" / name / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["encoder_key"] = "some-other-encoder"
    meta_path.write_text(json.dumps(meta))
    message = one_line_error(dmlqa("--home", str(home_copy), "search", "zero"))
    assert message.startswith("the index was built with encoder some-other-encoder but ")
    assert message.endswith("rebuild the index (`dmlqa build`)")


# -- 6. settings --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("toml", "message"), [
    ("chunk_tokens = 0", "setting chunk_tokens from {toml}: expected an integer from 16 to 8192, got 0"),
    ("chunk_tokens = 100\nchunk_overlap = 100",
     "setting chunk_overlap from {toml}: expected chunk_overlap from 0 to half of chunk_tokens (50), "
     "got chunk_overlap = 100 with chunk_tokens = 100"),
    ('encoder = "onnx-fast"', "setting encoder from {toml}: expected one of onnx-int8, onnx, torch, got 'onnx-fast'"),
    ('reranker = "/no/such/cross-encoder"',
     "setting reranker from {toml}: expected a model name or an existing local folder (no such path), "
     "got '/no/such/cross-encoder'"),
    ('batch_size = "many"', "setting batch_size from {toml}: expected an integer from 1 to 4096, got 'many'"),
    ("batch_size = 2.5", "setting batch_size from {toml}: expected an integer from 1 to 4096, got 2.5"),
    ("keep_versions = true", "setting keep_versions from {toml}: expected an integer from 0 to 10000, got True"),
    ("[fetch]\ntimeout = -1", "setting fetch.timeout from {toml}: expected a number above 0, got -1.0"),
    ("llm_model = 3", "setting llm_model from {toml}: expected a string, got 3"),
])
def test_settings_in_the_toml_are_validated(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "dmlqa.toml").write_text(toml + "\n")
    expected = message.format(toml=tmp_path / "dmlqa.toml")
    with pytest.raises(SettingsError) as info:
        load_settings(tmp_path, env={})
    assert str(info.value) == expected
    assert isinstance(info.value, ValueError)  # callers that caught ValueError still do


def test_settings_from_the_environment_and_the_cli(built_home: Path) -> None:
    with pytest.raises(SettingsError, match=r"^setting batch_size from DMLQA_BATCH_SIZE: expected an integer "
                                            r"from 1 to 4096, got -4$"):
        load_settings(built_home, env={"DMLQA_BATCH_SIZE": "-4"})
    with pytest.raises(SettingsError, match=r"^setting fetch.timeout from DMLQA_FETCH_TIMEOUT: expected a number "
                                            r"above 0, got 0.0$"):
        load_settings(built_home, env={"DMLQA_FETCH_TIMEOUT": "0"})
    before = published(built_home)
    result = dmlqa("--home", str(built_home), "search", "zero", env={"DMLQA_CHUNK_OVERLAP": "150"})
    assert one_line_error(result) == (
        "setting chunk_overlap from DMLQA_CHUNK_OVERLAP: expected chunk_overlap from 0 to half of chunk_tokens "
        "(100), got chunk_overlap = 150 with chunk_tokens = 200")
    result = dmlqa("--home", str(built_home), "build", "--encoder", "fast")
    assert one_line_error(result) == (
        "setting encoder from --encoder: expected one of onnx-int8, onnx, torch, got 'fast'")
    assert published(built_home) == before


def test_bad_toml_reaches_the_user_as_one_line(home_copy: Path) -> None:
    toml = home_copy / "dmlqa.toml"
    toml.write_text("chunk_tokens = 0\n")
    before = published(home_copy)
    for command in (["status"], ["build", "--offline"], ["search", "zero"]):
        assert one_line_error(dmlqa("--home", str(home_copy), *command)) == (
            f"setting chunk_tokens from {toml}: expected an integer from 16 to 8192, got 0")
    assert published(home_copy) == before


# -- 7. disk full ------------------------------------------------------------------------------------------


def test_disk_full_while_writing_the_index(home_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC injected into the index writer (in process): one line, nothing published, nothing left."""
    from typer.testing import CliRunner

    from dmlqa.app.cli import app
    from dmlqa.index import postings

    (home_copy / "corpus" / "local" / "more.md").write_text("# More\n\nTensor parallelism splits matrices.\n")
    before = published(home_copy)

    def full(self, path) -> None:  # noqa: ANN001
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "partial.npy").write_bytes(b"\0" * 100)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(postings.Postings, "save", full)
    result = CliRunner().invoke(app, ["--home", str(home_copy), "build", "--offline"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith("error: disk full while writing index version v")
    assert lines[0].endswith(": free space and run again (the published version is unchanged)")
    assert published(home_copy) == before  # no .building- folder either


def test_disk_full_on_a_real_small_disk(tmp_path: Path) -> None:
    """A real 8 MB tmpfs, filled up before the second build (needs root; skipped otherwise)."""
    disk = tmp_path / "disk"
    if not mount_tmpfs(disk, "8m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        home = disk / "kb"
        assert dmlqa("--home", str(home), "init").returncode == 0
        (home / "corpus" / "local" / "notes.md").write_text(NOTES)
        assert dmlqa("--home", str(home), "build", "--offline").returncode == 0
        before = published(home)
        more = " ".join(f"Shard {i} of the tensor-parallel layer holds a slice of the weights." for i in range(200))
        (home / "corpus" / "local" / "more.md").write_text("# More\n\n" + more)
        filler = disk / "filler"
        with filler.open("wb") as fh:
            fh.write(b"\0" * max(0, shutil.disk_usage(disk).free - 8 * 1024))
        message = one_line_error(dmlqa("--home", str(home), "build", "--offline"))
        assert message.startswith("disk full while writing ") and "free space and run again" in message
        assert published(home) == before
        filler.unlink()
        assert dmlqa("--home", str(home), "build", "--offline").returncode == 0
        current, versions, _ = published(home)
        assert current != before[0] and not [v for v in versions if v.startswith(".building-")]
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# -- 8. serve on an address it cannot use ------------------------------------------------------------------


def test_serve_with_an_invalid_host_or_a_busy_port(built_home: Path) -> None:
    assert one_line_error(dmlqa("--home", str(built_home), "serve", "--host", "999.1.1.1"), 2) == (
        "invalid --host '999.1.1.1': not an IP address or a host name")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = dmlqa("--home", str(built_home), "serve", "--port", str(port))
    assert one_line_error(result) == f"cannot listen on 127.0.0.1:{port}: Address already in use"
