"""WARC writing and replay, the fetch manifest, and replay of the shared offline snapshot."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest

from dmlqa.acquire.archive import ArchiveReplay, ArchiveWriter
from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.manifest import Manifest
from dmlqa.acquire.resolve import fetch_resource
from dmlqa.catalog.urls import spelling_key
from dmlqa.errors import ArchiveError
from dmlqa.models import FetchResult
from dmlqa.settings import FetchConfig

SNAPSHOT_DIR = Path(__file__).resolve().parents[2] / "shared" / "websnap"
SNAPSHOT = SNAPSHOT_DIR / "snapshot.warc.gz"
HTML = b"<!DOCTYPE html><html><body><p>page b</p></body></html>"


def write_sample(directory: Path) -> Path:
    with ArchiveWriter(directory) as writer:
        assert writer.path is None  # nothing written, no file yet
        writer.write(
            url="https://example.org/a",
            status=301,
            reason="Moved Permanently",
            headers=[("Location", "/b"), ("Content-Type", "text/html")],
            body=b"moved",
            fetched_at="2026-03-01T10:00:00Z",
        )
        writer.write(
            url="https://example.org/b",
            status=200,
            reason="OK",
            headers=[
                ("Content-Type", "text/html; charset=utf-8"),
                ("ETag", '"b1"'),
                ("X-Custom", "kept"),
                ("Content-Encoding", "gzip"),
                ("Content-Length", "3"),
            ],
            body=HTML,
            fetched_at="2026-03-01T10:00:01+00:00",
        )
        writer.write(
            url="https://example.org/missing",
            status=404,
            reason="Not Found",
            headers=[("Content-Type", "text/html")],
            body=b"no such page",
            fetched_at="2026-03-01T10:00:02Z",
        )
        assert writer.records == 3
        assert writer.path is not None
        return writer.path


def test_writer_names_files_by_utc_time_and_never_reuses_one(tmp_path: Path) -> None:
    first = write_sample(tmp_path)
    second = write_sample(tmp_path)
    assert re.fullmatch(r"dmlqa-\d{8}T\d{6}Z(-\d+)?\.warc\.gz", first.name)
    assert first != second and first.exists() and second.exists()


def test_round_trip_status_headers_body_and_redirects(tmp_path: Path) -> None:
    replay = ArchiveReplay([write_sample(tmp_path)])
    assert len(replay) == 3
    assert replay.urls() == ["https://example.org/a", "https://example.org/b", "https://example.org/missing"]

    page = replay.get("https://example.org/a")  # follows the stored 301 to /b
    assert page is not None
    assert (page.url, page.final_url, page.status) == ("https://example.org/a", "https://example.org/b", 200)
    assert page.body == HTML and page.content_type == "text/html" and page.from_archive
    assert page.headers["x-custom"] == "kept" and page.etag == '"b1"'
    # the stored headers match the stored (decoded) body
    assert "content-encoding" not in page.headers and page.headers["content-length"] == str(len(HTML))
    assert page.fetched_at == "2026-03-01T10:00:01Z"

    redirect = replay.lookup("https://example.org/a")  # one record, not followed
    assert redirect is not None and redirect.status == 301 and redirect.body == b"moved"

    missing = replay.get("https://example.org/missing")
    assert missing is not None and missing.status == 404 and missing.body == b"no such page"
    assert replay.get("https://example.org/nowhere") is None


def test_lookup_tolerates_trivial_differences_but_prefers_exact(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path) as writer:
        for url, body in [
            ("https://www.example.org/docs/", b"docs"),
            ("http://example.com/p", b"http copy"),
            ("https://example.com/p", b"https copy"),
        ]:
            writer.write(
                url=url,
                status=200,
                reason="OK",
                headers=[("Content-Type", "text/plain")],
                body=body,
                fetched_at="2026-03-01T10:00:00Z",
            )
    assert writer.path is not None
    replay = ArchiveReplay([writer.path])
    for variant in [
        "http://example.org/docs",
        "https://example.org/docs/",
        "https://WWW.example.org:443/docs",
    ]:
        hit = replay.get(variant)
        assert hit is not None and hit.body == b"docs" and hit.url == variant
    assert replay.get("http://example.com/p").body == b"http copy"  # type: ignore[union-attr]
    assert replay.get("https://example.com/p").body == b"https copy"  # type: ignore[union-attr]
    assert replay.get("https://example.com/p/").body == b"https copy"  # type: ignore[union-attr]
    assert spelling_key("HTTP://www.Example.org:80/a/?q=1#frag") == "example.org/a?q=1"


def test_scheme_redirect_is_no_answer_for_its_own_target(tmp_path: Path) -> None:
    """The snapshot holds http://arxiv.org/abs/X → https://arxiv.org/abs/X without the target."""
    with ArchiveWriter(tmp_path) as writer:
        writer.write(
            url="http://arxiv.org/abs/1802.09941",
            status=301,
            reason="Moved Permanently",
            headers=[("Location", "https://arxiv.org/abs/1802.09941")],
            body=b"",
            fetched_at="2026-03-01T10:00:00Z",
        )
    assert writer.path is not None
    replay = ArchiveReplay([writer.path])
    assert replay.get("https://arxiv.org/abs/1802.09941") is None
    unresolved = replay.get("http://arxiv.org/abs/1802.09941")
    assert unresolved is not None and unresolved.status == 301  # its target is not archived


def test_later_records_win_and_truncated_successes_are_skipped(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path) as writer:
        writer.write(
            url="https://e.org/x",
            status=200,
            reason="OK",
            headers=[],
            body=b"old",
            fetched_at="2026-03-01T10:00:00Z",
        )
        writer.write(
            url="https://e.org/x",
            status=200,
            reason="OK",
            headers=[],
            body=b"new",
            fetched_at="2026-03-02T10:00:00Z",
        )
        writer.write(
            url="https://e.org/big",
            status=200,
            reason="OK",
            headers=[],
            body=b"",
            truncated=True,
            fetched_at="2026-03-02T10:00:00Z",
        )
    assert writer.path is not None
    replay = ArchiveReplay([writer.path])
    assert replay.get("https://e.org/x").body == b"new"  # type: ignore[union-attr]
    assert replay.get("https://e.org/big") is None


def test_replay_refuses_bad_files_clearly(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="archive file not found"):
        ArchiveReplay([tmp_path / "nope.warc.gz"])
    with pytest.raises(ArchiveError, match="not a file"):
        ArchiveReplay([tmp_path])
    text = tmp_path / "notes.txt"
    text.write_text("hello, I am not an archive\n")
    with pytest.raises(ArchiveError, match="not a WARC file"):
        ArchiveReplay([text])
    gz = tmp_path / "other.gz"
    gz.write_bytes(gzip.compress(b"just some gzipped text"))
    with pytest.raises(ArchiveError, match="not a WARC file"):
        ArchiveReplay([gz])


def test_cut_off_archive_keeps_the_complete_records(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-20])  # an interrupted build: the last record is incomplete
    replay = ArchiveReplay([path])
    assert replay.get("https://example.org/b") is not None


# -- manifest -------------------------------------------------------------------------------------


def _result(url: str, body: bytes, **kw: object) -> FetchResult:
    fields: dict[str, object] = {
        "url": url,
        "final_url": url,
        "status": 200,
        "content_type": "text/html",
        "body": body,
        "etag": '"e"',
        "last_modified": "Sun, 01 Mar 2026 10:00:00 GMT",
        "sha256": hashlib.sha256(body).hexdigest(),
        "fetched_at": "2026-03-01T10:00:00Z",
    }
    fields.update(kw)
    return FetchResult(**fields)  # type: ignore[arg-type]


def test_manifest_rows(tmp_path: Path) -> None:
    url = "https://example.org/b"
    with ArchiveWriter(tmp_path / "archive") as writer:
        writer.write(
            url="https://example.org/other",
            status=200,
            reason="OK",
            headers=[],
            body=b"other",
            fetched_at="2026-03-01T10:00:00Z",
        )
        offset = writer.write(
            url=url,
            status=200,
            reason="OK",
            headers=[("Content-Type", "text/html")],
            body=HTML,
            fetched_at="2026-03-01T10:00:00Z",
        )
        warc = writer.path
    assert warc is not None and offset > 0
    with Manifest(tmp_path / "manifest.sqlite") as manifest:
        assert manifest.validators(url) is None
        manifest.record(_result(url, HTML), warc_path=str(warc), warc_offset=offset)
        assert manifest.validators(url) == ('"e"', "Sun, 01 Mar 2026 10:00:00 GMT")
        entry = manifest.entry(url)
        assert entry is not None and entry.warc_path == f"archive/{warc.name}"  # relative to the home
        previous = manifest.previous_copy(url)
        assert previous is not None and previous.body == HTML

        manifest.record(url=url, error="timed out after 30s (4 attempts)")
        entry = manifest.entry(url)
        assert (
            entry is not None and entry.error == "timed out after 30s (4 attempts)" and entry.status is None
        )
        assert manifest.validators(url) == ('"e"', "Sun, 01 Mar 2026 10:00:00 GMT")  # survive a failure

        manifest.record(
            _result(
                url,
                b"",
                status=304,
                not_modified=True,
                etag='"f"',
                last_modified=None,
                fetched_at="2026-03-05T00:00:00Z",
            )
        )
        entry = manifest.entry(url)
        assert entry is not None and entry.status == 304 and entry.error is None
        assert entry.sha256 == _result(url, HTML).sha256  # still the body we have
        assert manifest.validators(url) == ('"f"', "Sun, 01 Mar 2026 10:00:00 GMT")

        manifest.record(url="https://example.org/never", error="HTTP 404 Not Found", status=404)
        assert manifest.validators("https://example.org/never") is None
        assert len(manifest) == 2
    with Manifest(tmp_path / "manifest.sqlite") as reopened:  # persisted
        assert reopened.entry(url) is not None


# -- the shared offline snapshot ------------------------------------------------------------------


@pytest.mark.snapshot
@pytest.mark.skipif(not SNAPSHOT.is_file(), reason=f"offline snapshot not found at {SNAPSHOT}")
def test_real_snapshot_replay() -> None:
    replay = ArchiveReplay([SNAPSHOT])
    assert len(replay) == 138
    megatron = replay.get("https://github.com/NVIDIA/Megatron-LM")
    assert megatron is not None and megatron.status == 200 and megatron.content_type == "text/html"
    assert b"Megatron" in megatron.body

    landing_urls = []
    for line in (SNAPSHOT_DIR / "manifest.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("kind") == "landing-page" and ("usenix.org" in row["url"] or "dl.acm.org" in row["url"]):
            landing_urls.append(row["url"])
    assert landing_urls
    usenix = next(u for u in landing_urls if "usenix.org" in u)

    async def go() -> None:
        async with Fetcher(FetchConfig(), replay=replay, offline=True) as fetcher:
            for url in (usenix, landing_urls[0]):
                resolved = await fetch_resource(fetcher, url)
                assert resolved.document.content_type == "application/pdf"
                assert resolved.document.body.startswith(b"%PDF")
                assert resolved.landing is not None and resolved.landing.final_url == url
                assert resolved.document.final_url != url
            assert fetcher.stats["requests"] == 0

    asyncio.run(go())
