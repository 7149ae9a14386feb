"""Small homes for the rebuild tests (schedule, crash safety, incremental builds, run history).

Pages live in WARC files written with the project's own :class:`ArchiveWriter`, and builds replay
them with ``--offline``: no server and no network, the same bytes every time, and a changed page is
just a second archive. Pages are markdown, so extraction is cheap and chunk boundaries predictable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from fixtures_docs import prose
from typer.testing import CliRunner

from dmlqa.acquire.archive import ArchiveWriter
from dmlqa.app.cli import app
from dmlqa.catalog.store import write_catalog
from dmlqa.models import Resource
from dmlqa.pipeline.home import init_home
from dmlqa.settings import Settings, load_settings

runner = CliRunner()
BASE = "https://example.org/dml"

#: Topic sentences, so every page is about something different and searchable by it.
TOPICS = {
    "zero": "ZeRO partitions optimizer states, gradients and parameters across data parallel ranks.",
    "gpipe": "GPipe splits a mini-batch into micro-batches to fill the pipeline and shrink the bubble.",
    "horovod": "Horovod tensor fusion batches small allreduce operations into one larger buffer.",
    "megatron": "Megatron-LM splits the attention heads and MLP matrices across tensor parallel GPUs.",
    "ring": "Ring allreduce sends each gradient chunk around the ring so bandwidth use is optimal.",
    "fsdp": "Fully sharded data parallel gathers each layer's parameters just before it runs.",
}


def page_markdown(key: str, version: int = 1, paragraphs: int = 3) -> str:
    """A markdown page about ``key``; another ``version`` changes its last section only."""
    body = [f"# Notes on {key}", "", "## Idea", "", TOPICS.get(key, f"{key} is a distributed training method.")]
    for i in range(paragraphs):
        body += ["", f"## Part {i + 1}", "", prose(4, seed=zlib.crc32(key.encode()) % 1000 + i)]
    if version > 1:
        body += ["", "## Update", "", f"Revision {version}: the {key} authors added elastic resharding. "
                 + prose(3, seed=900 + version)]
    return "\n".join(body) + "\n"


def url_of(key: str) -> str:
    return f"{BASE}/{key}.md"


def resource(key: str) -> Resource:
    return Resource(id=f"web:{key}", url=url_of(key), title=f"Notes on {key}", kind="docs", topics=("Testing",))


def write_archive(directory: Path, pages: Mapping[str, str]) -> Path:
    """One WARC with a 200 text/markdown response per ``{key: markdown}``."""
    with ArchiveWriter(directory) as writer:
        for key, text in pages.items():
            writer.write(
                url=url_of(key), status=200, reason="OK",
                headers=[("Content-Type", "text/markdown; charset=utf-8")],
                body=text.encode("utf-8"), fetched_at="2026-11-01T03:00:00Z",
            )
        assert writer.path is not None
        return writer.path


def make_home(root: Path, keys: Sequence[str]) -> Settings:
    """An initialised home whose catalog names ``keys``."""
    settings = load_settings(root)
    init_home(settings)
    set_catalog(settings, keys)
    return settings


def set_catalog(settings: Settings, keys: Sequence[str]) -> None:
    write_catalog(settings.catalog_path, [resource(k) for k in keys])


def cli(*args: str) -> object:
    return runner.invoke(app, list(args), catch_exceptions=False)


def build_json(home: Path, archive: Path, *extra: str) -> dict:
    """``dmlqa build --offline --archive A --json`` in process; the report."""
    result = cli("--home", str(home), "build", "--offline", "--archive", str(archive), "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def mount_tmpfs(path: Path, size: str) -> bool:
    """A real small disk of ``size`` at ``path`` (a new folder), for disk-full tests; False when not root."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0
