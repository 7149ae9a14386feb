"""The Ray executor builds the same index as the local one (``dmlqa build --executor ray``).

A local Ray (2 CPUs) is started by the test. The fixture corpus is a few markdown pages replayed
from a WARC archive (a dead link among them, so a catalog card goes through too) plus a local
markdown file. Both builds must give the same documents, chunk ids and texts, the same index type,
and the same vectors: the Ray embed actors are handed exactly the local build's encoder batches,
so the int8 encoder sees the same batch mates (measured max |difference|: 0.0).
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import astuple
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason='Ray is not installed: pip install "dmlqa[ray]" to test the Ray executor')
pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'ray[data]'")

from rebuild_fixtures import build_json, make_home, page_markdown, write_archive  # noqa: E402

from dmlqa.index.versions import IndexVersion  # noqa: E402
from dmlqa.paths import LOCAL_DIR  # noqa: E402

KEYS = ["zero", "gpipe", "horovod", "megatron"]


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Short socket paths: the temp dir ends up in Unix socket names, limited to 107 bytes.
    tmp = Path("/tmp") / f"ray-{os.getpid()}"
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(tmp), log_to_driver=False)
    yield
    ray.shutdown()


def _home(root: Path, archive: Path) -> Path:
    settings = make_home(root, KEYS + ["missing"])  # "missing" has no archived page: a catalog card
    local = settings.corpus_dir / LOCAL_DIR
    local.mkdir(parents=True, exist_ok=True)
    (local / "notes.md").write_text(page_markdown("fsdp", paragraphs=2), encoding="utf-8")
    return settings.home


def _version(home: Path) -> Path:
    name = (home / "index" / "CURRENT").read_text(encoding="utf-8").strip()
    return home / "index" / "versions" / name


def _rows(path: Path, sql: str, home: Path) -> list[tuple]:
    """Rows of a version's store, the home's own path replaced (local files' URLs name it)."""
    db = sqlite3.connect(str(path / "store.sqlite"))
    try:
        return [tuple(v.replace(str(home), "<home>") if isinstance(v, str) else v for v in r) for r in db.execute(sql)]
    finally:
        db.close()


def _vectors(path: Path) -> np.ndarray:
    version = IndexVersion(path)
    try:
        return version.vectors(list(range(version.size)))
    finally:
        version.close()


def _chunks(path: Path, home: Path) -> list[tuple]:
    """Every passage of a version in row order, the home's own path replaced."""
    version = IndexVersion(path)
    try:
        rows = version.chunks(range(version.size))
        return [tuple(v.replace(str(home), "<home>") if isinstance(v, str) else v
                      for v in astuple(rows[r])) for r in sorted(rows)]
    finally:
        version.close()


def test_ray_build_equals_local_build(tmp_path: Path, local_ray: None) -> None:
    archive = write_archive(tmp_path / "warc", {k: page_markdown(k) for k in KEYS})
    home_a = _home(tmp_path / "a", archive)
    home_b = _home(tmp_path / "b", archive)

    local = build_json(home_a, archive)
    distributed = build_json(home_b, archive, "--executor", "ray")

    for key in ("resources", "documents", "cards", "chunks", "embedded", "reused_embeddings", "from_archive",
                "local_documents", "extracted"):
        assert distributed[key] == local[key], key
    assert [f["url"] for f in distributed["failed"]] == [f["url"] for f in local["failed"]]
    assert local["documents"] == len(KEYS) + 1 and local["cards"] == 1

    va, vb = _version(home_a), _version(home_b)
    docs = "SELECT doc_id, url, title, is_card, sha256, n_chunks, first_row FROM documents ORDER BY doc_id"
    assert _rows(vb, docs, home_b) == _rows(va, docs, home_a)
    assert _chunks(vb, home_b) == _chunks(va, home_a)

    meta_a = json.loads((va / "meta.json").read_text(encoding="utf-8"))
    meta_b = json.loads((vb / "meta.json").read_text(encoding="utf-8"))
    for key in ("index_type", "encoder_key", "chunks", "documents", "cards", "dim"):
        assert meta_b[key] == meta_a[key], key

    a, b = _vectors(va), _vectors(vb)
    assert a.shape == b.shape and len(a) == local["chunks"]
    cosine = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cosine.min() > 0.99, cosine.min()
    print(f"vectors: max |local - ray| = {np.abs(a - b).max():.2e}, min cosine = {cosine.min():.6f}")
    assert np.abs(a - b).max() < 1e-4  # the same encoder batches: equal up to float noise

    # A second Ray build reuses every vector from the cache, as the local build would.
    again = build_json(home_b, archive, "--executor", "ray")
    assert again["embedded"] == 0 and again["reused_embeddings"] == local["chunks"]
