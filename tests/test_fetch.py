"""Fetcher behaviour against a real HTTP server on 127.0.0.1 (see tests/httpserver.py).

Backoffs are tiny so the file runs in a few seconds; timeouts are generous (a busy machine can take
seconds to answer), except where a timeout is what is tested, and then the server never answers in
time. Timing assertions only check lower bounds (a busy machine can be slow, never fast).
"""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from httpserver import LocalServer, Reply
from warcio.archiveiterator import ArchiveIterator

from dmlqa.acquire import http as http_module
from dmlqa.acquire.archive import ArchiveReplay, ArchiveWriter
from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.http import parse_retry_after
from dmlqa.acquire.manifest import Manifest
from dmlqa.errors import FetchError
from dmlqa.fsutil import format_size
from dmlqa.media import sniff_content_type
from dmlqa.models import FetchResult
from dmlqa.settings import FetchConfig

T = TypeVar("T")
HTML = b"<!DOCTYPE html><html><head><title>t</title></head><body><p>hello</p></body></html>"
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"


def config(**changes: Any) -> FetchConfig:
    """Test defaults: the local server is allowed, retries are quick, a slow answer still arrives."""
    base: dict[str, Any] = {
        "allow_private_hosts": True,
        "timeout": 60.0,
        "retries": 2,
        "backoff": 0.01,
        "max_retry_after": 5.0,
    }
    base.update(changes)
    return FetchConfig(**base)


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def fetch_one(cfg: FetchConfig, url: str, **kwargs: Any) -> FetchResult:
    async with Fetcher(cfg, **kwargs) as fetcher:
        return await fetcher.fetch(url)


def fetch_error(cfg: FetchConfig, url: str, **kwargs: Any) -> FetchError:
    with pytest.raises(FetchError) as info:
        run(fetch_one(cfg, url, **kwargs))
    assert info.value.url == url
    return info.value


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def server() -> Any:
    s = LocalServer()
    yield s
    s.close()


class FailingTransport(httpx.AsyncBaseTransport):
    """Fails the test if the fetcher ever tries the network."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"network used for {request.url}")


# -- plain answers --------------------------------------------------------------------------------


def test_200_html(server: LocalServer) -> None:
    server.route("/page", Reply(200, body=HTML, headers=[("ETag", '"abc"'), ("X-Thing", "1")]))
    cfg = config()
    result = run(fetch_one(cfg, server.url("/page")))
    assert result.status == 200
    assert result.body == HTML
    assert result.content_type == "text/html"
    assert result.final_url == result.url == server.url("/page")
    assert result.etag == '"abc"'
    assert result.headers["x-thing"] == "1"
    assert len(result.sha256) == 64 and result.fetched_at.endswith("Z")
    assert not result.from_archive and not result.not_modified
    (request,) = server.seen("/page")
    assert request.headers["User-Agent"] == cfg.user_agent


@pytest.mark.parametrize(("status", "reason"), [(404, "HTTP 404 Not Found"), (410, "HTTP 410 Gone")])
def test_client_errors_are_not_retried(server: LocalServer, status: int, reason: str) -> None:
    server.route("/gone", Reply(status, body=b"nope"))
    error = fetch_error(config(), server.url("/gone"))
    assert error.reason == reason
    assert error.status == status
    assert server.hits("/gone") == 1


def test_500_then_200_is_retried(server: LocalServer) -> None:
    server.route("/flaky", [Reply(500), Reply(200, body=HTML)])

    async def go() -> tuple[FetchResult, dict[str, int]]:
        async with Fetcher(config()) as fetcher:
            return await fetcher.fetch(server.url("/flaky")), fetcher.stats

    result, stats = run(go())
    assert result.status == 200 and result.body == HTML
    assert server.hits("/flaky") == 2
    assert stats["retries"] == 1


def test_persistent_500_gives_up_after_all_attempts(server: LocalServer) -> None:
    server.route("/down", Reply(500))
    error = fetch_error(config(retries=3), server.url("/down"))
    assert error.reason == "HTTP 500 Internal Server Error after 4 attempts"
    assert error.status == 500
    assert server.hits("/down") == 4


def test_503_retry_after_is_honoured(server: LocalServer) -> None:
    server.route("/busy", [Reply(503, headers=[("Retry-After", "1")]), Reply(200, body=HTML)])
    result = run(fetch_one(config(), server.url("/busy")))
    assert result.status == 200
    first, second = server.seen("/busy")
    assert second.at - first.at >= 0.95


def test_429_with_too_long_retry_after_gives_up_at_once(server: LocalServer) -> None:
    server.route("/slow-down", Reply(429, headers=[("Retry-After", "3600")]))
    error = fetch_error(config(max_retry_after=5), server.url("/slow-down"))
    assert error.reason == "HTTP 429 Too Many Requests with Retry-After 3600s (over the 5s limit)"
    assert error.status == 429
    assert server.hits("/slow-down") == 1  # no second attempt, so no wait for one either


def test_parse_retry_after() -> None:
    now = time.time()
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 0 ") == 0.0
    in_a_minute = email.utils.formatdate(now + 60, usegmt=True)
    assert 55 <= (parse_retry_after(in_a_minute, now=now) or 0) <= 61
    assert parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_timeout_is_retried_then_reported(server: LocalServer) -> None:
    server.route("/sleepy", Reply(200, body=HTML, delay=600))  # never in time; closing the server ends it
    error = fetch_error(config(timeout=0.5, retries=1), server.url("/sleepy"))
    assert error.reason == "timed out after 0.5s (2 attempts)"
    assert error.status is None
    assert server.hits("/sleepy") == 2


def test_connection_refused() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    error = fetch_error(config(retries=1), f"http://127.0.0.1:{port}/x")
    assert error.reason == "connection refused (2 attempts)"


def test_dns_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_such_host(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(http_module, "_getaddrinfo", no_such_host)
    error = fetch_error(
        config(allow_private_hosts=False), "https://example.invalid/x", transport=FailingTransport()
    )
    assert error.reason == "DNS lookup failed for example.invalid"


# -- redirects --------------------------------------------------------------------------------------


def test_redirects_are_followed(server: LocalServer) -> None:
    server.route("/old", Reply(301, headers=[("Location", "/mid")]))
    server.route("/mid", Reply(302, headers=[("Location", server.url("/new"))]))
    server.route("/new", Reply(200, body=HTML))
    result = run(fetch_one(config(), server.url("/old")))
    assert result.url == server.url("/old")
    assert result.final_url == server.url("/new")
    assert result.body == HTML


def test_redirect_loop_stops(server: LocalServer) -> None:
    server.route("/loop", Reply(302, headers=[("Location", "/loop")]))
    error = fetch_error(config(max_redirects=3), server.url("/loop"))
    assert error.reason == "too many redirects (more than 3)"
    assert server.hits("/loop") == 4


# -- size cap -------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_body_over_the_cap_is_refused_without_reading_it(server: LocalServer, chunked: bool) -> None:
    block = b"x" * 65536
    server.route(
        "/huge",
        Reply(
            200,
            body=block,
            repeat=400,
            chunked=chunked,  # 26 MB on offer
            content_type="application/octet-stream",
        ),
    )
    error = fetch_error(config(max_bytes=16 * 1024), server.url("/huge"))
    assert error.reason == "body larger than the 16 KB limit"
    assert wait_for(lambda: "/huge" in server.aborted)
    assert server.bytes_sent["/huge"] < len(block) * 400


def test_format_size() -> None:
    assert format_size(50 * 1024 * 1024) == "50 MB"
    assert format_size(16 * 1024) == "16 KB"
    assert format_size(1536 * 1024) == "1.5 MB"
    assert format_size(900) == "900 bytes"


# -- archive of network responses -----------------------------------------------------------------


def test_gzip_response_is_archived_decoded_and_replayable(server: LocalServer, tmp_path: Path) -> None:
    text = b"<html><body>" + b"compressible words " * 500 + b"</body></html>"
    server.route("/gz", Reply(200, body=gzip.compress(text), headers=[("Content-Encoding", "gzip")]))
    with ArchiveWriter(tmp_path / "archive") as archive:
        result = run(fetch_one(config(), server.url("/gz"), archive=archive))
        warc = archive.path
    assert result.body == text
    assert "content-encoding" not in result.headers
    assert result.headers["content-length"] == str(len(text))
    assert warc is not None and warc.name.startswith("dmlqa-") and warc.name.endswith(".warc.gz")
    with open(warc, "rb") as fh:
        stored = {}
        for record in ArchiveIterator(fh):
            if record.rec_type == "response":
                uri = record.rec_headers.get_header("WARC-Target-URI")
                stored[uri] = (dict(record.http_headers.headers), record.content_stream().read())
    assert set(stored) == {server.url("/robots.txt"), server.url("/gz")}  # robots.txt (a 404) too
    stored_headers, stored_body = stored[server.url("/gz")]
    assert stored_body == text
    assert "Content-Encoding" not in stored_headers and "Transfer-Encoding" not in stored_headers
    assert stored_headers["Content-Length"] == str(len(text))
    replay = ArchiveReplay([warc])
    replayed = replay.get(server.url("/gz"))
    assert replayed is not None and replayed.from_archive
    assert replayed.body == text
    assert "content-encoding" not in replayed.headers
    assert replayed.headers["content-length"] == str(len(text))


def test_every_response_is_archived_including_errors_and_redirects(
    server: LocalServer, tmp_path: Path
) -> None:
    server.route("/robots.txt", Reply(200, body=b"User-agent: *\nAllow: /\n", content_type="text/plain"))
    server.route("/a", Reply(301, headers=[("Location", "/b")]))
    server.route("/b", [Reply(503), Reply(200, body=HTML)])
    server.route("/c", Reply(404, body=b"missing"))

    async def go() -> None:
        async with Fetcher(config(), archive=archive) as fetcher:
            await fetcher.fetch(server.url("/a"))
            with pytest.raises(FetchError):
                await fetcher.fetch(server.url("/c"))

    with ArchiveWriter(tmp_path) as archive:
        run(go())
    assert archive.path is not None
    with open(archive.path, "rb") as fh:
        seen = [
            (r.rec_headers.get_header("WARC-Target-URI"), r.http_headers.get_statuscode())
            for r in ArchiveIterator(fh)
            if r.rec_type == "response"
        ]
    assert seen == [
        (server.url("/robots.txt"), "200"),
        (server.url("/a"), "301"),
        (server.url("/b"), "503"),
        (server.url("/b"), "200"),
        (server.url("/c"), "404"),
    ]


# -- conditional GET ------------------------------------------------------------------------------


def test_conditional_get_uses_manifest_validators(server: LocalServer, tmp_path: Path) -> None:
    last_modified = "Wed, 21 Oct 2026 07:28:00 GMT"

    def answer(request: Any) -> Reply:
        if request.headers.get("If-None-Match") == '"v1"':
            return Reply(304, headers=[("ETag", '"v1"')])
        return Reply(
            200,
            body=PDF,
            content_type="application/pdf",
            headers=[("ETag", '"v1"'), ("Last-Modified", last_modified)],
        )

    server.route("/paper.pdf", answer)
    url = server.url("/paper.pdf")

    async def go(manifest: Manifest, archive: ArchiveWriter) -> list[FetchResult]:
        async with Fetcher(config(), manifest=manifest, archive=archive) as fetcher:
            first = await fetcher.fetch(url)
            second = await fetcher.fetch(url)
            forced = await fetcher.fetch(url, conditional=False)
            assert fetcher.stats["not_modified"] == 1
            return [first, second, forced]

    with Manifest(tmp_path / "manifest.sqlite") as manifest, ArchiveWriter(tmp_path / "archive") as archive:
        first, second, forced = run(go(manifest, archive))
        assert manifest.validators(url) == ('"v1"', last_modified)
        entry = manifest.entry(url)
        assert entry is not None and entry.sha256 == first.sha256 and entry.warc_offset is not None
        previous = manifest.previous_copy(url)
        assert previous is not None and previous.body == PDF
    assert first.status == 200 and first.body == PDF and not first.not_modified
    assert second.not_modified and second.body == b"" and second.status == 304
    assert second.content_type == "application/pdf" and second.sha256 == first.sha256
    assert forced.status == 200 and forced.body == PDF
    requests = server.seen("/paper.pdf")
    assert "If-None-Match" not in requests[0].headers
    assert requests[1].headers["If-None-Match"] == '"v1"'
    assert requests[1].headers["If-Modified-Since"] == last_modified
    assert "If-None-Match" not in requests[2].headers


def test_manifest_records_failures_and_keeps_validators(server: LocalServer, tmp_path: Path) -> None:
    server.route("/doc", [Reply(200, body=HTML, headers=[("ETag", '"e1"')]), Reply(404)])
    url = server.url("/doc")

    async def go(manifest: Manifest) -> None:
        async with Fetcher(config(), manifest=manifest) as fetcher:
            await fetcher.fetch(url)
            with pytest.raises(FetchError):
                await fetcher.fetch(url, conditional=False)

    with Manifest(tmp_path / "m.sqlite") as manifest:
        run(go(manifest))
        entry = manifest.entry(url)
        assert entry is not None
        assert entry.status == 404 and entry.error == "HTTP 404 Not Found"
        assert manifest.validators(url) == ('"e1"', None)


# -- robots.txt -----------------------------------------------------------------------------------


def test_robots_disallow_is_honoured_and_fetched_once(server: LocalServer) -> None:
    server.route(
        "/robots.txt", Reply(200, body=b"User-agent: *\nDisallow: /private\n", content_type="text/plain")
    )
    server.route("/public", Reply(200, body=HTML))
    server.route("/private/x", Reply(200, body=HTML))

    async def go() -> list[FetchResult | BaseException]:
        async with Fetcher(config()) as fetcher:
            urls = [server.url("/public"), server.url("/private/x"), server.url("/public")]
            return await asyncio.gather(*(fetcher.fetch(u) for u in urls), return_exceptions=True)

    ok, refused, again = run(go())
    assert isinstance(ok, FetchResult) and isinstance(again, FetchResult)
    assert isinstance(refused, FetchError) and refused.reason == "disallowed by robots.txt"
    assert server.hits("/robots.txt") == 1
    assert server.hits("/private/x") == 0


def test_robots_group_for_our_agent(server: LocalServer) -> None:
    server.route(
        "/robots.txt",
        Reply(
            200,
            body=b"User-agent: dmlqa\nDisallow: /\n\nUser-agent: *\nAllow: /\n",
            content_type="text/plain",
        ),
    )
    server.route("/x", Reply(200, body=HTML))
    assert fetch_error(config(), server.url("/x")).reason == "disallowed by robots.txt"
    assert run(fetch_one(config(respect_robots=False), server.url("/x"))).status == 200


@pytest.mark.parametrize("status", [401, 403, 404])
def test_unavailable_robots_allows_everything(server: LocalServer, status: int) -> None:
    server.route("/robots.txt", Reply(status))
    server.route("/x", Reply(200, body=HTML))
    assert run(fetch_one(config(), server.url("/x"))).status == 200


def test_unreachable_robots_disallows_everything(server: LocalServer) -> None:
    server.route("/robots.txt", Reply(503))
    server.route("/x", Reply(200, body=HTML))
    error = fetch_error(config(retries=1), server.url("/x"))
    assert error.reason.startswith("robots.txt unreachable (HTTP 503 Service Unavailable after 2 attempts)")
    assert "RFC 9309" in error.reason
    assert server.hits("/x") == 0


# -- safety ---------------------------------------------------------------------------------------


def test_private_addresses_are_refused_without_contacting_them(server: LocalServer) -> None:
    port = server.port
    hint = "(pass --allow-private-hosts to allow)"
    cases = {
        f"http://127.0.0.1:{port}/": f"refused: 127.0.0.1 is a loopback address {hint}",
        f"http://[::1]:{port}/": f"refused: ::1 is a loopback address {hint}",
        "http://10.1.2.3/": f"refused: 10.1.2.3 is a private address {hint}",
        "http://169.254.169.254/latest/meta-data/": "refused: 169.254.169.254 is a link-local address",
        "http://0.0.0.0/": "refused: 0.0.0.0 is an unspecified address",
        "http://224.0.0.1/": "refused: 224.0.0.1 is a multicast address",
        "http://[::ffff:127.0.0.1]/": "refused: ::ffff:127.0.0.1 is a loopback address",
    }
    cfg = config(allow_private_hosts=False)
    for url, reason in cases.items():
        assert fetch_error(cfg, url, transport=FailingTransport()).reason.startswith(reason)
    localhost = fetch_error(cfg, f"http://localhost:{port}/")
    assert localhost.reason.startswith("refused: localhost resolves to ")
    assert "loopback address (pass --allow-private-hosts to allow)" in localhost.reason
    assert server.requests == []


def test_names_resolving_to_private_addresses_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return {"public.test": ["93.184.216.34"], "sneaky.test": ["93.184.216.34", "10.0.0.7"]}[host]

    monkeypatch.setattr(http_module, "_getaddrinfo", resolve)
    cfg = config(allow_private_hosts=False, respect_robots=False)
    error = fetch_error(cfg, "https://sneaky.test/x", transport=FailingTransport())
    assert error.reason == (
        "refused: sneaky.test resolves to 10.0.0.7, a private address (pass --allow-private-hosts to allow)"
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"Location": "http://127.0.0.1/admin"})

    error = fetch_error(cfg, "https://public.test/start", transport=httpx.MockTransport(handler))
    assert error.reason == (
        "redirected to http://127.0.0.1/admin: refused: 127.0.0.1 is a loopback "
        "address (pass --allow-private-hosts to allow)"
    )


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        ("file:///etc/passwd", "file"),
        ("ftp://example.org/x", "ftp"),
        ("data:text/plain,hi", "data"),
        ("gopher://example.org/", "gopher"),
    ],
)
def test_only_http_and_https(url: str, scheme: str) -> None:
    error = fetch_error(config(), url, transport=FailingTransport())
    assert error.reason == f"refused: only http and https URLs are fetched (got {scheme!r})"


def test_redirect_to_file_url_is_refused(server: LocalServer) -> None:
    server.route("/evil", Reply(302, headers=[("Location", "file:///etc/passwd")]))
    error = fetch_error(config(), server.url("/evil"))
    assert error.reason == (
        "redirected to file:///etc/passwd: refused: only http and https URLs are fetched (got 'file')"
    )


# -- concurrency ----------------------------------------------------------------------------------


def test_per_host_and_overall_concurrency_bounds(server: LocalServer) -> None:
    def once_peak(peak: int) -> Callable[[Any], Reply]:
        """Hold answers until ``peak`` requests were in flight at once, so a busy machine cannot make the
        fetcher look stricter than it is; then a little longer, so a request beyond the bound shows."""

        def answer(_request: Any) -> Reply:
            deadline = time.monotonic() + 60
            while server.max_in_flight < peak and time.monotonic() < deadline:
                time.sleep(0.01)
            return Reply(200, body=HTML, delay=0.3)

        return answer

    async def burst(cfg: FetchConfig, n: int) -> None:
        async with Fetcher(cfg) as fetcher:
            await asyncio.gather(*(fetcher.fetch(server.url(f"/slow?i={i}")) for i in range(n)))

    server.route("/slow", once_peak(2))
    run(burst(config(concurrency=8, per_host=2, respect_robots=False), 6))
    assert server.max_in_flight == 2
    server.max_in_flight = 0
    server.route("/slow", once_peak(3))
    run(burst(config(concurrency=3, per_host=8, respect_robots=False), 6))
    assert server.max_in_flight == 3


# -- sniffing -------------------------------------------------------------------------------------


def test_pdf_served_as_octet_stream_is_a_pdf(server: LocalServer) -> None:
    server.route("/file", Reply(200, body=PDF, content_type="application/octet-stream"))
    result = run(fetch_one(config(), server.url("/file")))
    assert result.content_type == "application/pdf"


@pytest.mark.parametrize(
    ("body", "declared", "url", "expected"),
    [
        (PDF, "application/octet-stream", "", "application/pdf"),
        (PDF, "text/html", "", "application/pdf"),
        (b"\n  %PDF-1.7 ...", None, "", "application/pdf"),
        (HTML, "application/pdf", "", "text/html"),
        (b"<!-- x -->\n<html><p>hi</p></html>", None, "", "text/html"),
        (b"plain words", "text/html; charset=utf-8", "", "text/html"),
        (
            b"# Title\n\ntext",
            "text/plain; charset=utf-8",
            "https://raw.githubusercontent.com/o/r/HEAD/README.md",
            "text/markdown",
        ),
        (b"# Title", "text/markdown", "", "text/markdown"),
        (b"just text", "text/plain", "", "text/plain"),
        (b"Some text", None, "", "text/plain"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "image/png", "", "image/png"),
        (b"\x00\x01\x02binary", "application/octet-stream", "", "application/octet-stream"),
    ],
)
def test_sniff_content_type(body: bytes, declared: str | None, url: str, expected: str) -> None:
    assert sniff_content_type(body, declared, url) == expected


# -- replay and offline ---------------------------------------------------------------------------


def test_replay_first_then_network(server: LocalServer, tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path) as writer:
        writer.write(
            url=server.url("/archived"),
            status=200,
            reason="OK",
            headers=[("Content-Type", "text/html")],
            body=b"<html>from the archive</html>",
            fetched_at="2026-01-02T03:04:05Z",
        )
    assert writer.path is not None
    replay = ArchiveReplay([writer.path])
    server.route("/live", Reply(200, body=HTML))

    async def go() -> tuple[FetchResult, FetchResult, dict[str, int]]:
        async with Fetcher(config(), replay=replay) as fetcher:
            archived = await fetcher.fetch(server.url("/archived"))
            live = await fetcher.fetch(server.url("/live"))
            return archived, live, fetcher.stats

    archived, live, stats = run(go())
    assert archived.from_archive and archived.body == b"<html>from the archive</html>"
    assert archived.fetched_at == "2026-01-02T03:04:05Z"
    assert not live.from_archive and live.body == HTML
    assert server.hits("/archived") == 0 and server.hits("/live") == 1
    assert stats["from_archive"] == 1


def test_offline_replay_never_touches_the_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dns(*args: object, **kwargs: object) -> None:
        raise AssertionError("DNS used while offline")

    monkeypatch.setattr(http_module, "_getaddrinfo", no_dns)
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setattr(socket.socket, "connect", no_dns)
    with ArchiveWriter(tmp_path) as writer:
        writer.write(
            url="https://example.org/old",
            status=301,
            reason="Moved Permanently",
            headers=[("Location", "https://example.org/new")],
            body=b"",
            fetched_at="2026-01-01T00:00:00Z",
        )
        writer.write(
            url="https://example.org/new",
            status=200,
            reason="OK",
            headers=[("Content-Type", "text/html")],
            body=HTML,
            fetched_at="2026-01-01T00:00:01Z",
        )
    assert writer.path is not None
    replay = ArchiveReplay([writer.path])

    async def go() -> tuple[FetchResult, FetchError, dict[str, int]]:
        async with Fetcher(
            config(allow_private_hosts=False), replay=replay, offline=True, transport=FailingTransport()
        ) as fetcher:
            found = await fetcher.fetch("https://example.org/old")
            with pytest.raises(FetchError) as info:
                await fetcher.fetch("https://example.org/missing")
            return found, info.value, fetcher.stats

    found, missing, stats = run(go())
    assert found.final_url == "https://example.org/new" and found.body == HTML and found.from_archive
    assert missing.reason == "not in the archive (offline)"
    assert missing.url == "https://example.org/missing"
    assert stats["requests"] == 0


def test_offline_without_archive() -> None:
    error = fetch_error(config(), "https://example.org/", offline=True, transport=FailingTransport())
    assert error.reason == "not in the archive (offline)"


def test_fetched_bodies_stay_out_of_reprs() -> None:
    """asyncio.run reprs the main task's result when it checks the SIGINT handler; with bodies in
    the repr, fetching the snapshot peaked at 960 MiB instead of ~110 MiB (measured)."""
    import asyncio

    from dmlqa.acquire.archive import ArchivedResponse
    from dmlqa.models import FetchResult

    body = b"%PDF-1.4 " + b"x" * 5_000_000
    result = FetchResult(url="https://e.org/a.pdf", final_url="https://e.org/a.pdf", status=200,
                         content_type="application/pdf", body=body)
    archived = ArchivedResponse(url="https://e.org/a.pdf", status=200, reason="OK", headers=[], body=body,
                                fetched_at="", path=Path("a.warc.gz"), offset=0)
    assert len(repr(result)) < 1000 and len(repr([archived] * 3)) < 3000

    async def main() -> list[FetchResult]:
        return [result] * 50

    assert asyncio.run(main())[0].body is body
