"""End to end over the real web snapshot (../shared/websnap), built once per test session.

Skipped with a reason in a user's clone, where ../shared does not exist.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dmlqa.cli import app

pytestmark = pytest.mark.snapshot
runner = CliRunner()


def dmlqa(*args: str) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def built(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    home = tmp_path_factory.mktemp("snapshot-home")
    snapshot = shared_dir / "websnap" / "snapshot.warc.gz"
    dmlqa("--home", str(home), "init")
    lists = sorted((shared_dir / "seeds").glob("*")) + [shared_dir / "websnap" / "extra-resources.md"]
    dmlqa("--home", str(home), "catalog", "import", *map(str, lists))
    args = ("--home", str(home), "build", "--offline", "--archive", str(snapshot), "--json")
    first = json.loads(dmlqa(*args))
    second = json.loads(dmlqa(*args))
    return home, first, second


def test_counts(built: tuple[Path, dict, dict]) -> None:
    _, first, _ = built
    # 181 resources from the five seeds + 57 from extra-resources.md.
    assert first["resources"] == 238
    # Full text for 97 of them; the rest (not in the snapshot, 404 or no text) are catalog cards.
    assert first["documents"] == 97 and first["cards"] == 141
    assert first["from_archive"] == 97 and first["fetched"] == 0
    # ~2.9 M characters at ≤200 tokens a chunk; the exact number moves with chunking changes.
    assert 4000 <= first["chunks"] <= 6000
    assert first["embedded"] + first["reused_embeddings"] == first["chunks"]
    reasons = {f["error"] for f in first["failed"]}
    assert "HTTP 404 Not Found" in reasons and "not in the archive (offline)" in reasons
    assert all(set(f) == {"url", "stage", "error"} for f in first["failed"])


def test_rebuild_reembeds_nothing(built: tuple[Path, dict, dict]) -> None:
    _, first, second = built
    assert second["embedded"] == 0 and second["reused_embeddings"] == second["chunks"] == first["chunks"]
    assert second["documents"] == first["documents"] and second["reused_documents"] == first["documents"]
    assert second["index_version"] != first["index_version"]


def test_zero_query_ranks_a_zero_source_top5(built: tuple[Path, dict, dict]) -> None:
    home, _, _ = built
    hits = json.loads(dmlqa("--home", str(home), "search",
                            "ZeRO stages partition optimizer states gradients parameters", "-k", "5", "--json"))
    assert len(hits) == 5
    assert any("zero" in (h["title"] + h["url"]).lower() or "deepspeed" in h["url"] for h in hits)
    assert all(set(h) == {"rank", "score", "doc_id", "url", "title", "page", "section", "text"} for h in hits)


def test_pdf_hits_carry_pages_and_catalog_urls(built: tuple[Path, dict, dict]) -> None:
    home, _, _ = built
    hits = json.loads(dmlqa("--home", str(home), "search", "GPipe micro-batches pipeline bubble re-materialization",
                            "-k", "10", "--per-doc", "--json"))
    gpipe = [h for h in hits if "gpipe" in h["title"].lower()]
    assert gpipe and isinstance(gpipe[0]["page"], int) and gpipe[0]["page"] >= 1
    assert len({h["doc_id"] for h in hits}) == len(hits)
    catalog = {json.loads(x)["url"] for x in (home / "corpus" / "catalog.jsonl").read_text().splitlines()}
    assert {h["url"] for h in hits} <= catalog


def test_status(built: tuple[Path, dict, dict]) -> None:
    home, _, second = built
    st = json.loads(dmlqa("--home", str(home), "status", "--json"))
    assert st["index_version"] == second["index_version"]
    assert (st["resources"], st["documents"], st["cards"], st["chunks"]) == (
        238, second["documents"], second["cards"], second["chunks"])
    assert st["failed"] == second["failed"]
