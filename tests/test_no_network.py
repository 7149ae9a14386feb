"""Failures a scheduler can see (issue 18, item 6): a build that reaches no server exits non-zero with one
line, a host that fails DNS is asked once per build (and never waited for), ``status`` says the last run
failed and why, summed up by reason, and ``dmlqa schedule`` counts failed runs in a row.

"No network" is made for real: names under ``.invalid`` never resolve (RFC 2606), and a port on
127.0.0.1 that nobody listens on refuses connections. The builds run the installed ``dmlqa`` command
in a subprocess, the honest test of an exit status and of "one line".
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from httpserver import LocalServer, Reply
from rebuild_fixtures import page_markdown

from dmlqa.acquire.archive import ArchiveWriter
from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.http import EARLIER
from dmlqa.acquire.openaccess import PaperHints, find_open_copy
from dmlqa.acquire.pacing import _PACERS, host_key, paced_fetch, set_min_interval
from dmlqa.app import render
from dmlqa.app.ui_render import status_html
from dmlqa.errors import FetchError
from dmlqa.pipeline.home import init_home, run_history
from dmlqa.pipeline.report import BuildOptions
from dmlqa.pipeline.schedule import run_once
from dmlqa.settings import FetchConfig, load_settings

DMLQA = str(Path(sys.executable).with_name("dmlqa"))
ARXIV_API = "https://export.nonexistent.invalid/api/query"
OPENALEX_API = "https://openalex.nonexistent.invalid"
#: Look-ups and retries pointed where they fail at once: the tests never touch the real internet.
ENV = {"DMLQA_FETCH_RETRIES": "0", "DMLQA_FETCH_ARXIV_API": ARXIV_API, "DMLQA_FETCH_OPENALEX_API": OPENALEX_API,
       "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def dead_port() -> int:
    """A port on 127.0.0.1 that nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dmlqa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DMLQA, *args], capture_output=True, text=True, env={**os.environ, **ENV}, timeout=600,
                          errors="replace")


@pytest.fixture()
def resolver_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every name lookup made in this process, by host: the real resolver, counted where both the
    fetcher's own address check and httpx's connect (through the event loop) call it."""
    calls: Counter[str] = Counter()
    real = socket.getaddrinfo

    def counting(host: Any, *args: Any, **kwargs: Any) -> Any:
        calls[host.decode() if isinstance(host, bytes) else str(host)] += 1
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    return calls


# -- the fetcher: one lookup per host, no pacing for a host that does not resolve ---------------------------


@pytest.mark.parametrize("allow_private", [False, True])
def test_a_host_that_fails_dns_is_looked_up_once(resolver_calls: Counter[str], allow_private: bool) -> None:
    host = "papers.nonexistent.invalid"
    urls = [f"https://{host}/{name}" for name in ("a.pdf", "b.html", "c.html", "d.pdf")]

    async def go() -> list[str]:
        async with Fetcher(FetchConfig(retries=2, allow_private_hosts=allow_private)) as fetcher:
            first = await asyncio.gather(*(fetcher.fetch(u) for u in urls[:3]), return_exceptions=True)
            later = await asyncio.gather(fetcher.fetch(urls[3]), return_exceptions=True)
            assert fetcher.unresolvable(urls[0]) and not fetcher.unresolvable("https://example.org/")
        assert all(isinstance(r, FetchError) for r in (*first, *later))
        return [r.reason for r in (*first, *later)]  # type: ignore[union-attr]

    reasons = asyncio.run(asyncio.wait_for(go(), 120))
    assert resolver_calls[host] == 1  # four URLs, three of them at once: one lookup
    assert reasons.count(f"DNS lookup failed for {host}") == 1
    assert reasons.count(f"DNS lookup failed for {host} (earlier in this build)") == 3


def test_paced_look_ups_never_wait_for_a_host_that_failed_dns(resolver_calls: Counter[str]) -> None:
    """arXiv's 3 s pacing (here an hour) is not waited out for a name that did not resolve, in the
    open-access look-ups too; a host that answers is still paced."""
    server = LocalServer()
    server.route("/api", Reply(200, body=b"<feed/>", content_type="application/atom+xml"))
    api_host = "export.nonexistent.invalid"

    async def go() -> None:
        config = FetchConfig(retries=0, allow_private_hosts=True, respect_robots=False, arxiv_api=ARXIV_API,
                             openalex_api=OPENALEX_API, max_retry_after=7200.0)
        async with Fetcher(config) as fetcher:
            set_min_interval(fetcher, ARXIV_API, 3600.0)
            for n in range(3):
                with pytest.raises(FetchError, match="DNS lookup failed"):
                    await paced_fetch(fetcher, f"{ARXIV_API}?search_query=ti:{n}")
            pacer = _PACERS[fetcher]
            assert host_key(ARXIV_API) not in pacer.next_at  # nothing reached the host: no wait was planned
            first = await find_open_copy(fetcher, PaperHints(titles=("Pipelined training of giant models",),
                                                            doi="10.1234/pipe.1"))
            second = await find_open_copy(fetcher, PaperHints(titles=("Sharded optimizer states at scale",)))
            assert first.copy is None and second.copy is None
            assert any("OpenAlex" in t and "DNS lookup failed" in t for t in first.tried), first.tried
            assert any("arXiv API" in t and "(earlier in this build)" in t for t in second.tried), second.tried
            # The control: a host that answers is paced after its request.
            local = server.url("/api")
            set_min_interval(fetcher, local, 3600.0)
            await paced_fetch(fetcher, local)
            assert host_key(local) in pacer.next_at

    try:
        asyncio.run(asyncio.wait_for(go(), 120))  # a pacing wait would be an hour: this would time out
    finally:
        server.close()
    assert resolver_calls[api_host] == 1 and resolver_calls["openalex.nonexistent.invalid"] == 1


# -- the command: exit status, one line, status, --failures -------------------------------------------------


@pytest.fixture(scope="module")
def failing_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], subprocess.CompletedProcess[str]]:
    """A home whose list points only at names that do not resolve and a port that refuses, built once."""
    root = tmp_path_factory.mktemp("nonet")
    home = root / "kb"
    assert dmlqa("--home", str(home), "init").returncode == 0
    urls = ["https://papers.nonexistent.invalid/pipeline.pdf", "https://papers.nonexistent.invalid/zero.html",
            "https://blog.nonexistent.invalid/ring-allreduce", f"http://127.0.0.1:{dead_port()}/notes.md"]
    names = ["Pipeline parallel training", "ZeRO memory optimisations", "Ring allreduce explained", "Notes"]
    listing = root / "list.md"
    listing.write_text("# Distributed training\n\n## Reading\n\n"
                       + "".join(f"- [{n}]({u}) - about {n.lower()}.\n" for n, u in zip(names, urls, strict=True)))
    assert dmlqa("--home", str(home), "catalog", "import", str(listing)).returncode == 0
    return home, urls, dmlqa("--home", str(home), "build", "--allow-private-hosts")


def test_a_build_that_reaches_no_server_fails_with_one_line(failing_home: tuple) -> None:
    home, urls, result = failing_home
    assert "Traceback" not in result.stderr
    assert result.returncode == 3, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: no network: {len(urls)} of {len(urls)} fetches failed to resolve or connect")
    assert "`dmlqa build --offline --archive" in lines[0] and "check the connection" in lines[0]
    assert not (home / "index" / "CURRENT").exists()  # nothing published: cards would hide the outage


def test_status_shows_the_failed_run_summed_up_by_reason(failing_home: tuple) -> None:
    home, urls, _ = failing_home
    result = dmlqa("--home", str(home), "status", "--json")
    assert result.returncode == 1 and "no index" in result.stderr  # no version yet, and it says so
    st = json.loads(result.stdout)
    assert st["index_version"] is None and st["ok"] is False and st["consecutive_failures"] >= 1
    assert st["last_error"].startswith("no network:") and st["runs"][0]["ok"] is False
    by_reason = {g["reason"]: g for g in st["last_failures"]["by_reason"]}
    assert st["last_failures"]["total"] == len(urls)
    assert by_reason["DNS lookup failed"]["count"] == 3 and by_reason["connection failed"]["count"] == 1
    assert by_reason["connection failed"]["urls"] == [urls[3]]
    assert set(by_reason["DNS lookup failed"]["urls"]) == set(urls[:3])

    text = " ".join(dmlqa("--home", str(home), "status").stdout.split())
    assert "Last run: failed" in text and "--offline" in text and "DNS lookup failed" in text
    assert "dmlqa status --failures" in text


def test_failures_lists_every_one_with_its_reason(failing_home: tuple) -> None:
    home, urls, _ = failing_home
    result = dmlqa("--home", str(home), "status", "--failures", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["failed"]
    assert sorted(r["url"] for r in rows) == sorted(urls) and {r["stage"] for r in rows} == {"fetch"}
    same_host = [r["error"] for r in rows if "papers.nonexistent.invalid" in r["url"]]
    # the host's second URL did not ask the resolver again
    assert sorted(same_host) == ["DNS lookup failed for papers.nonexistent.invalid",
                                 f"DNS lookup failed for papers.nonexistent.invalid {EARLIER}"]
    table = " ".join(dmlqa("--home", str(home), "status", "--failures").stdout.split())
    assert all(u in table for u in urls) and "connection refused" in table


def test_saved_pages_are_pointed_at_and_an_offline_build_recovers(failing_home: tuple) -> None:
    home, urls, _ = failing_home
    page = page_markdown("ring")
    with ArchiveWriter(home / "corpus" / "archive") as writer:
        writer.write(url=urls[2], status=200, reason="OK", headers=[("Content-Type", "text/markdown")],
                     body=page.encode(), fetched_at="2026-11-01T03:00:00Z")
        archive = writer.path
    assert archive is not None
    again = dmlqa("--home", str(home), "build", "--allow-private-hosts")
    assert again.returncode == 3 and "(this home has 1 in corpus/archive/)" in again.stderr
    st = json.loads(dmlqa("--home", str(home), "status", "--json").stdout)
    assert st["ok"] is False and st["consecutive_failures"] >= 2
    assert "failed runs in a row" in dmlqa("--home", str(home), "status").stdout

    offline = dmlqa("--home", str(home), "build", "--offline", "--archive", str(archive), "--json")
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["from_archive"] == 1
    st = json.loads(dmlqa("--home", str(home), "status", "--json").stdout)
    assert st["ok"] is True and st["consecutive_failures"] == 0 and st["index_version"]


def _can_unshare() -> bool:
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not _can_unshare(), reason="`unshare -n` (an empty network namespace) needs root and util-linux")
def test_a_build_in_an_empty_network_namespace(tmp_path: Path) -> None:
    """No network for real: real host names, nothing to resolve them with, nothing to connect to."""
    home = tmp_path / "kb"
    assert dmlqa("--home", str(home), "init").returncode == 0
    urls = ["https://arxiv.org/abs/1910.02054", "https://arxiv.org/abs/1811.06965", "https://www.deepspeed.ai/"]
    listing = tmp_path / "list.md"
    items = "".join(f"- [Item {i}]({u}) - item {i}.\n" for i, u in enumerate(urls))
    listing.write_text("# L\n\n## Reading\n\n" + items)
    assert dmlqa("--home", str(home), "catalog", "import", str(listing)).returncode == 0
    result = subprocess.run(["unshare", "-n", DMLQA, "--home", str(home), "build"], capture_output=True, text=True,
                            env={**os.environ, **ENV}, timeout=600)
    assert result.returncode == 3 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"error: no network: {len(urls)} of {len(urls)} fetches failed")
    assert "DNS lookup failed for" in result.stderr and EARLIER not in result.stderr.split("(first: ", 1)[1]
    rows = json.loads(dmlqa("--home", str(home), "status", "--failures", "--json").stdout)["failed"]
    assert sorted(r["url"] for r in rows) == sorted(urls)
    assert all(r["error"].startswith("DNS lookup failed for ") for r in rows)
    # each arXiv entry tries its PDF, then its abstract page: one lookup of arxiv.org, the rest answered at once
    assert any(EARLIER in r["error"] for r in rows if "arxiv.org" in r["url"])


def test_the_app_status_tab_shows_failed_runs_in_a_row() -> None:
    history = {"ok": False, "consecutive_failures": 3, "last_error": "no network: 2 of 2 fetches failed <b>",
               "last_failures": {"total": 2, "by_reason": [{"reason": "DNS lookup failed", "count": 2, "urls": []}]}}
    page = status_html(None, "no index yet", history)
    assert "3 failed runs in a row" in page and "2 DNS lookup failed" in page and "<b>" not in page
    ok = status_html({"index_version": "v1", "ok": True, "consecutive_failures": 0, "failed": []})
    assert "Last build run: ok" in ok and "in a row" not in ok


# -- the scheduler counts failed runs in a row --------------------------------------------------------------


def test_the_scheduler_counts_failed_runs_in_a_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from datetime import UTC, datetime

    from dmlqa.catalog.store import import_lists

    settings = load_settings(tmp_path / "kb", env=ENV)
    init_home(settings)
    listing = tmp_path / "list.md"
    listing.write_text("# L\n\n## Papers\n\n- [A](https://a.nonexistent.invalid/a.pdf) - a.\n"
                       "- [B](https://b.nonexistent.invalid/b.pdf) - b.\n")
    import_lists([listing], settings.corpus_dir)
    outcomes = [run_once(settings, BuildOptions(), datetime.now(UTC)) for _ in range(2)]
    assert [o.ok for o in outcomes] == [False, False]
    assert [o.consecutive_failures for o in outcomes] == [1, 2]
    assert all(o.error and o.error.startswith("no network: 2 of 2") for o in outcomes)
    history = run_history(settings)
    assert history["ok"] is False and history["consecutive_failures"] == 2
    assert [r["trigger"] for r in history["runs"]] == ["schedule", "schedule"]
    render.run(outcomes[1], as_json=False)
    assert "failed (2 in a row)" in capsys.readouterr().out
    render.run(outcomes[1], as_json=True)
    assert json.loads(capsys.readouterr().out)["consecutive_failures"] == 2
