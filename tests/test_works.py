"""Address vs identity, and one record per work (issue 9, items 1, 2 and 4).

The unit tests pin :mod:`dmlqa.pipeline.works` and :mod:`dmlqa.pipeline.coverage` on documents built here; the
end-to-end test imports a markdown list of plain ``http://`` links into a home, as a user does, and
builds it against a real HTTP server on 127.0.0.1 (no TLS, as most test servers and many real sites).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures_docs import build_pdf, html_page, landing_page, prose
from httpserver import LocalServer, Reply
from typer.testing import CliRunner

from dmlqa.app.cli import app
from dmlqa.models import Block, Document, Failure, Resource
from dmlqa.pipeline.coverage import coverage, no_network, reason_kind
from dmlqa.pipeline.works import merge_works, title_key, work_id

runner = CliRunner()


def doc(doc_id: str, *, url: str = "", source_url: str = "", sha: str = "", title: str = "Some page",
        kind: str = "docs", card: bool = False, lists: tuple[str, ...] = ("l",)) -> Document:
    url = url or f"https://example.org/{doc_id.replace(':', '/')}"
    return Document(doc_id=doc_id, url=url, title=title, blocks=(Block("text"),), source_url=source_url,
                    kind=kind, is_card=card, sha256=sha, lists=lists, aliases=(url,))


# -- unit: merge_works --------------------------------------------------------------------------------


def test_landing_page_whose_pdf_is_another_entry_merges_into_that_entry() -> None:
    arxiv = doc("arxiv:1910.02054", url="https://arxiv.org/abs/1910.02054",
                source_url="https://arxiv.org/pdf/1910.02054", sha="a", kind="paper", lists=("a",))
    acm = doc("doi:10.5555/3433701.3433727", url="https://dl.acm.org/doi/10.5555/3433701.3433727",
              source_url="https://arxiv.org/pdf/1910.02054", sha="a", kind="paper", lists=("b",))
    merged, dups = merge_works([acm, arxiv])
    assert [d.doc_id for d in merged] == ["arxiv:1910.02054"]
    assert merged[0].lists == ("a", "b")
    assert "https://dl.acm.org/doi/10.5555/3433701.3433727" in merged[0].aliases
    assert len(dups) == 1 and dups[0].doc_id == acm.doc_id and dups[0].of == "arxiv:1910.02054"
    assert "arxiv.org/pdf/1910.02054" in dups[0].reason


def test_redirect_to_another_repository_merges_and_keeps_the_target() -> None:
    old = doc("github:uber/horovod", url="https://github.com/uber/horovod",
              source_url="https://raw.githubusercontent.com/horovod/horovod/HEAD/README.md", sha="x", kind="repo")
    new = doc("github:horovod/horovod", url="https://github.com/horovod/horovod",
              source_url="https://raw.githubusercontent.com/horovod/horovod/HEAD/README.md", sha="x", kind="repo")
    merged, dups = merge_works([old, new])
    assert [d.doc_id for d in merged] == ["github:horovod/horovod"]
    assert dups[0].doc_id == "github:uber/horovod"


def test_byte_identical_copies_and_same_titled_papers_merge_but_short_titles_do_not() -> None:
    a = doc("arxiv:2006.15704", sha="s1", kind="paper", title="PyTorch Distributed: Experiences")
    b = doc("web:vldb.org/1", sha="s1", kind="paper", title="p3005-li.pdf")
    offload = "ZeRO-Offload: Democratizing Billion-Scale Model Training"
    c = doc("web:usenix.org/2", sha="s2", kind="paper", title=offload)
    d = doc("arxiv:2101.06840", sha="s3", kind="paper", title=offload.lower().replace(" ", "  ") + ".")
    e = doc("github:uber/horovod", sha="h1", kind="repo", title="Horovod")
    f = doc("github:horovod/horovod", sha="h2", kind="repo", title="Horovod")
    merged, dups = merge_works([a, b, c, d, e, f])
    assert {m.doc_id for m in merged} == {"arxiv:2006.15704", "arxiv:2101.06840", "github:uber/horovod",
                                          "github:horovod/horovod"}
    assert {x.doc_id: x.of for x in dups} == {"web:vldb.org/1": "arxiv:2006.15704",
                                              "web:usenix.org/2": "arxiv:2101.06840"}
    assert title_key("Horovod") is None  # a name, not a title: never a reason to merge


def test_full_text_wins_over_a_card_of_the_same_paper() -> None:
    card = doc("arxiv:1811.06965", kind="paper", card=True, title="GPipe: Efficient Training of Giant Neural Networks")
    full = doc("web:neurips/1", kind="paper", sha="g", title="GPipe: efficient training of giant neural networks")
    merged, dups = merge_works([card, full])
    assert [m.doc_id for m in merged] == ["web:neurips/1"] and not merged[0].is_card
    assert dups[0].doc_id == "arxiv:1811.06965"


def test_work_id_of_raw_readme_is_its_repository_but_a_subfolder_readme_is_not() -> None:
    assert work_id("https://raw.githubusercontent.com/Horovod/Horovod/HEAD/README.md") == "github:horovod/horovod"
    assert work_id("https://raw.githubusercontent.com/o/r/main/docs/README.md") != "github:o/r"
    assert work_id("https://arxiv.org/pdf/1910.02054v3") == "arxiv:1910.02054"
    assert work_id("") is None and work_id("file:///etc/passwd") is None


# -- unit: coverage ------------------------------------------------------------------------------------


def test_coverage_counts_per_list_and_host_with_reasons() -> None:
    res = [
        Resource(id="a", url="https://a.org/x", title="A", lists=("one",), aliases=("http://a.org/x",)),
        Resource(id="b", url="https://b.org/y", title="B", lists=("one", "two"), aliases=("https://b.org/y",)),
        Resource(id="c", url="https://b.org/z", title="C", lists=("two",), aliases=("https://b.org/z",)),
        Resource(id="d", url="https://a.org/d", title="D", lists=("two",), aliases=("https://a.org/d",)),
    ]
    docs = [doc("a", url="https://a.org/x"), doc("b", card=True), doc("c", card=True)]
    failures = [Failure("https://b.org/y", "fetch", "HTTP 403 Forbidden"),
                Failure("https://b.org/z", "fetch", "not in the archive (offline)")]
    cov = coverage(res, docs, failures, {"d": "a"})
    assert cov["total"] == {"resources": 4, "full_text": 2, "abstract_only": 0, "cards": 2, "duplicates": 1,
                            "reasons": {"HTTP 403 (forbidden or paywall)": 1, "offline (not in the archive)": 1}}
    assert cov["by_list"]["two"]["cards"] == 2 and cov["by_list"]["one"]["full_text"] == 1
    assert cov["by_host"]["a.org"]["full_text"] == 2 and cov["by_host"]["b.org"]["cards"] == 2


def test_reason_kinds_and_the_no_network_line() -> None:
    assert reason_kind("refused by robots.txt") == "robots.txt"
    assert reason_kind("body larger than the 50 MB limit") == "too large"
    assert reason_kind("timed out after 30s (3 attempts)") == "timeout"
    dns = [Failure(f"https://h{i}.org", "fetch", f"DNS lookup failed for h{i}.org") for i in range(3)]
    line = no_network(dns, fetched_ok=0, responses=0)
    assert line is not None and "3 of 3 fetches failed to resolve or connect" in line and "--offline" in line
    assert "(first: https://h0.org: DNS lookup failed for h0.org)" in line
    assert no_network(dns, fetched_ok=1, responses=0) is None
    assert no_network(dns, fetched_ok=0, responses=1) is None  # a server answered something (robots.txt)
    assert no_network([*dns, Failure("x", "fetch", "HTTP 404 Not Found")], fetched_ok=0, responses=0) is None
    refused = Failure("http://127.0.0.1:9/x", "fetch", "connection refused (4 attempts)")
    assert no_network([*dns, refused], fetched_ok=0, responses=0) is not None


# -- end to end: a list of plain http:// links against a local server ------------------------------------


@pytest.fixture()
def site() -> LocalServer:
    s = LocalServer()
    s.route("/robots.txt", Reply(404, body=b""))
    page = html_page("Tensor fusion guide", [("Fusion", [
        "Tensor Fusion batches small allreduce operations into one buffer of 128 MB by default. " + prose(5)])])
    s.route("/Docs/Fusion-Guide.html", Reply(200, body=page.encode()))  # case-sensitive path
    readme = html_page("Horovod", [("About", ["Horovod is a distributed training framework. " + prose(5, seed=1)])])
    s.route("/horovod/horovod", Reply(200, body=readme.encode()))
    s.route("/uber/horovod", Reply(301, headers=[("Location", "/horovod/horovod")]))
    paper = build_pdf(["ZeRO: Memory optimizations toward training trillion parameter models. " + prose(8, seed=2),
                       "ZeRO-3 partitions the parameters across data parallel processes. " + prose(8, seed=3)])
    s.route("/pdf/zero.pdf", Reply(200, body=paper, content_type="application/pdf"))
    s.route("/doi/zero", Reply(200, body=landing_page("ZeRO", "We develop ZeRO.", "/pdf/zero.pdf").encode()))
    s.route("/mirror/zero-copy.pdf", Reply(200, body=paper, content_type="application/octet-stream"))
    yield s
    s.close()


def test_http_list_is_fetched_as_written_and_copies_become_one_work(tmp_path: Path, site: LocalServer) -> None:
    base = site.url("/").rstrip("/")
    assert base.startswith("http://127.0.0.1:")
    listing = tmp_path / "awesome.md"
    listing.write_text(
        "# Awesome test\n\n## Docs\n\n"
        f"- [Tensor Fusion]({base}/Docs/Fusion-Guide.html)\n"
        f"- [Horovod (old name)]({base}/uber/horovod)\n"
        f"- [Horovod]({base}/horovod/horovod)\n\n"
        "## Papers\n\n"
        f"- [ZeRO landing page]({base}/doi/zero)\n"
        f"- [ZeRO: Memory Optimizations Toward Training Trillion Parameter Models]({base}/pdf/zero.pdf)\n"
        f"- [ZeRO copy]({base}/mirror/zero-copy.pdf)\n",
        encoding="utf-8",
    )
    home = tmp_path / "kb"
    assert runner.invoke(app, ["--home", str(home), "init"]).exit_code == 0
    assert runner.invoke(app, ["--home", str(home), "catalog", "import", str(listing)]).exit_code == 0
    catalog = [json.loads(x) for x in (home / "corpus" / "catalog.jsonl").read_text().splitlines()]
    fusion = next(r for r in catalog if "fusion" in r["url"].lower())
    # Identity is canonical (https), the address is kept exactly as listed.
    assert fusion["url"].startswith("https://") and fusion["aliases"] == [f"{base}/Docs/Fusion-Guide.html"]

    result = runner.invoke(app, ["--home", str(home), "build", "--json", "--allow-private-hosts"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    # Every request went to http:// on the path as written (the server has no https and no lower-case path).
    assert site.hits("/Docs/Fusion-Guide.html") == 1 and site.hits("/docs/fusion-guide.html") == 0
    assert report["resources"] == 6 and not report["failed"], report["failed"]
    # Three works: the fusion page, Horovod (redirect), ZeRO (landing page, PDF and a byte copy).
    assert report["documents"] == 3 and report["cards"] == 0
    # each merged-away entry is named by its address as listed (http://, not the https identity)
    dups = {d["url"].removeprefix(f"{base}/"): d for d in report["duplicates"]}
    assert set(dups) == {"uber/horovod", "doi/zero", "mirror/zero-copy.pdf"}
    assert report["coverage"]["total"]["full_text"] == 6 and report["coverage"]["total"]["duplicates"] == 3

    hits = json.loads(runner.invoke(app, ["--home", str(home), "search", "ZeRO-3 partitions parameters", "-k", "10",
                                          "--json"]).stdout)
    assert len({h["doc_id"] for h in hits if "zero" in h["title"].lower()}) == 1
    # The merged-away addresses still find the work.
    rel = runner.invoke(app, ["--home", str(home), "related", f"{base}/uber/horovod", "--format", "json"])
    assert rel.exit_code == 0, rel.output
    out = json.loads(rel.stdout)
    assert out["target"].startswith("web:127.0.0.1/")
    horovod = next(h for h in json.loads(runner.invoke(app, ["--home", str(home), "search", "Horovod framework",
                                                              "--json"]).stdout) if h["title"] == "Horovod")
    assert out["target"] == horovod["doc_id"] and horovod["url"].endswith("/horovod/horovod")
    assert all("horovod" not in (i.get("url") or "") for i in out["items"])  # itself, under no other name
