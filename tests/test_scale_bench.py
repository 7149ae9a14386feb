"""bench/scale.py: the scale benchmark runs the real pipeline on generated papers and reports every figure.

One small run (3,000 passages, the shipped sentences, so it needs no ../shared) through the script as
a user runs it; the assertions are about what was built and reused, never about timings. Expected
counts come from what the benchmark generated (papers, the papers it changed), and the encoder key
from the version's own meta.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchload import bench_script

ROOT = Path(__file__).resolve().parents[1]
SCALE = ROOT / "bench" / "scale.py"
BENCH = ROOT / "bench"

TOP_KEYS = {"chunks", "documents", "full", "no_change", "one_percent", "version_mib", "home_mib", "open_s",
            "reader_rss_mib", "search_p50_cpu_ms", "search_p95_cpu_ms", "filtered_search_p95_cpu_ms",
            "ask_p95_cpu_ms"}
STEP_KEYS = {"cpu_s", "wall_s", "peak_rss_mib", "embed_cpu_s", "cpu_s_minus_embedding"}


def scale(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCALE), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, check=False)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    home = tmp_path_factory.mktemp("scale") / "home"
    # generous: three builds and a reader take ~40 s on a quiet 2-core machine, minutes on a busy one
    proc = scale("--chunks", "3000", "--json", "--shipped-text", "--home", str(home))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), home


def test_reports_every_figure_the_issue_names(run: tuple[dict, Path]) -> None:
    result, home = run
    assert TOP_KEYS <= result.keys()
    for step in ("full", "no_change", "one_percent"):
        assert STEP_KEYS <= result[step].keys()
        assert result[step]["cpu_s"] > 0 and result[step]["peak_rss_mib"] > 0
        assert 0 <= result[step]["embed_cpu_s"] < result[step]["cpu_s"]
    assert result["full"]["embed_cpu_s"] > 0 and result["no_change"]["embedded"] == 0
    assert "added_mib" in result["one_percent"]
    assert 0 < result["version_mib"] <= result["home_mib"]
    assert result["sentence_source"] == "shipped"
    assert len(result["versions"]) == 3  # three builds, each published a version; none pruned yet


def test_builds_the_size_asked_for_with_the_standin(run: tuple[dict, Path]) -> None:
    result, home = run
    assert abs(result["chunks"] - 3000) <= 300
    assert result["documents"] == result["papers"]  # every generated paper is indexed, none merged or lost
    index = home / "index"
    meta = json.loads((index / "versions" / (index / "CURRENT").read_text().strip() / "meta.json").read_text())
    assert meta["encoder_key"] == "standin-hash-384"
    assert meta["chunks"] == result["one_percent"]["chunks"]  # the last build's version is the published one


def test_rebuilds_reuse_what_did_not_change(run: tuple[dict, Path]) -> None:
    result, _ = run
    full, same, one = result["full"], result["no_change"], result["one_percent"]
    assert full["embedded"] > 0 and full["failed"] == 0
    assert same["embedded"] == 0 and same["embedded_sentences"] == 0
    assert same["changes"] == {"added": 0, "updated": 0, "removed": 0}
    changed = max(1, round(result["papers"] / 100))
    assert one["changed_documents"] == changed
    assert one["changes"] == {"added": 0, "updated": changed, "removed": 0}
    # a few sentences of one paper changed: a few passages embedded again, not the paper or the corpus
    assert 0 < one["embedded"] < full["embedded"] / 10


def test_reader_finds_and_answers(run: tuple[dict, Path]) -> None:
    reader = run[0]["reader"]
    # every query is words of the sentences the papers are made of, so each finds passages
    assert reader["searches_with_hits"] == 100
    assert reader["filtered_with_hits"] > 0
    assert reader["reader_rss_mib"] > 0 and reader["reader_hwm_mib"] >= reader["reader_rss_mib"]


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--chunks", "10"], "--chunks must be at least 500"), ([], "--chunks N is required")],
)
def test_bad_arguments_are_one_line_errors(args: list[str], message: str) -> None:
    proc = scale(*args, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr.strip().splitlines()[-1]


def test_refuses_a_home_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    proc = scale("--chunks", "3000", "--home", str(tmp_path), timeout=120)
    assert proc.returncode == 2
    assert "is not a new or empty folder" in proc.stderr
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_standin_vectors_do_not_depend_on_the_process() -> None:
    """The reader queries vectors another process wrote: Python's salted hash() would break that."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import standin; "
            "print(standin.StandinEncoder().encode(['ring all-reduce of gradients']).tobytes().hex())")
    out = {subprocess.run([sys.executable, "-c", code, str(BENCH)], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120).stdout for seed in ("1", "2")}
    assert len(out) == 1


def test_standin_is_an_encoder_whose_vectors_follow_shared_words() -> None:
    import numpy as np

    standin = bench_script("standin")
    enc = standin.StandinEncoder()
    vecs = enc.encode(["pipeline parallelism splits layers into stages",
                       "pipeline parallelism assigns layers to stages",
                       "the learning rate warms up", ""])
    assert vecs.shape == (4, enc.dim) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]
    assert enc.encode([]).shape == (0, enc.dim)
