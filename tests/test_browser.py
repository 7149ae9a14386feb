"""The chat app in a real browser: Playwright driving Debian's Chromium (headless) against ``app.py``.

The app runs as its own process on 127.0.0.1 over a small fixture index (the one of
test_index_search, plus a document whose title is an XSS attempt). Screenshots are saved under
``artifacts/browser/`` (``DMLQA_ARTIFACTS`` overrides), which CI keeps as test artifacts.
Playwright's own browser download does not work here: ``.ci/run`` installs ``chromium`` with apt.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from test_index_search import make_docs_and_chunks

from dmlqa.extract.sentences import split_document
from dmlqa.index.embed import embed_texts
from dmlqa.index.versions import dense_text, publish, write_version
from dmlqa.models import Block, Chunk, CitationLink, Document, Reference

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("DMLQA_ARTIFACTS", ROOT / "artifacts")) / "browser"

if not CHROMIUM.exists():
    pytest.skip("/usr/bin/chromium is missing (apt-get install chromium; .ci/run does it)", allow_module_level=True)
try:
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:
    pytest.skip("playwright is not installed (pip install -e '.[test]')", allow_module_level=True)

EVIL_TITLE = 'Ring tricks <img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
EVIL_TEXT = ("Butterfly allreduce exchanges gradient halves between partner workers in log p rounds, "
             "which keeps every network link busy during synchronisation.")
#: A documentation page with a list: its items are quoted as list items and shown as bullets.
FUSION_TEXT = ("Tensor fusion in Horovod batches small allreduce operations into one buffer before sending them.\n"
               "Horovod tunes tensor fusion with these settings:\n"
               "- HOROVOD_FUSION_THRESHOLD sets the size of the fusion buffer in bytes.\n"
               "- HOROVOD_CYCLE_TIME sets how long Horovod waits between fusion cycles in milliseconds.\n"
               "- HOROVOD_CACHE_CAPACITY sets how many allreduce responses are cached between steps.")

#: A documentation page with code: the answer quotes its lines as a code block.
TRAIN_TEXT = ("Ray Train runs one training function on a group of workers.\n"
              "Configure the number of workers and their GPUs with a ScalingConfig:\n\n"
              "```python\nscaling_config = ray.train.ScalingConfig(num_workers=2, use_gpu=True)\n"
              "trainer = TorchTrainer(train_func, scaling_config=scaling_config)\n"
              "result = trainer.fit()\n```\n")

#: The fixture's citation links (citing → cited), as a build would have resolved its papers' references.
FIXTURE_CITES = {
    "arxiv:1811.06965": ["github:horovod/horovod"],
    "arxiv:1910.02054": ["arxiv:1811.06965", "web:docs.ray.io/abc"],
}


def build_fixture_index(home: Path, encoder) -> None:  # noqa: ANN001
    docs, chunks = make_docs_and_chunks()
    evil = Document(doc_id="web:evil.example/ring", url="https://evil.example/ring", title=EVIL_TITLE,
                    blocks=(Block(text=EVIL_TEXT),), kind="article", year=2024, topics=("Communication",),
                    content_type="html")
    fusion = Document(doc_id="web:horovod.readthedocs.io/fusion", title="Tensor Fusion",
                      url="https://horovod.readthedocs.io/en/stable/tensor-fusion_include.html",
                      blocks=(Block(text=FUSION_TEXT),), kind="docs", year=2023, topics=("Horovod documentation",),
                      content_type="html")
    train = Document(doc_id="web:docs.ray.io/train", title="Getting started with PyTorch",
                     url="https://docs.ray.io/en/latest/train/getting-started-pytorch.html",
                     blocks=(Block(text=TRAIN_TEXT),), kind="docs", year=2024, topics=("Ray documentation",),
                     content_type="html")
    for d, text in ((evil, EVIL_TEXT), (fusion, FUSION_TEXT), (train, TRAIN_TEXT)):
        docs.append(d)
        chunks.append(Chunk(chunk_id=f"{d.doc_id}#0", doc_id=d.doc_id, url=d.url, title=d.title, text=text, start=0,
                            end=len(text)))
    vecs = embed_texts([dense_text(c.title, c.section, c.text) for c in chunks], encoder).vectors
    meta = {"model": "bundled:all-MiniLM-L6-v2", "encoder": "onnx-int8", "encoder_key": encoder.key,
            "resources": len(docs), "failed": [{"url": "https://dead.example/paper.pdf", "stage": "fetch",
                                                "error": "HTTP 404 <b>not found</b>"}]}
    titles = {d.doc_id: d.title for d in docs}
    rows = [(CitationLink(a, Reference(raw=titles[b], ordinal=i, title=titles[b]), b, how="title"), f"doc:{b}")
            for a, bs in FIXTURE_CITES.items() for i, b in enumerate(bs, start=1)]
    # the quotable sentences and their vectors, as a build stores them (code lines know their role)
    kept = [(o, x) for d in docs for o, x in enumerate(split_document(d)) if x.quotable]
    svecs = embed_texts([x.text for _, x in kept], encoder).vectors
    publish(home / "index", write_version(home / "index", docs, chunks, vecs, meta, ann_threshold=1000,
                                          citations=rows, sentences=kept, sentence_vectors=svecs))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory, encoder) -> str:  # noqa: ANN001
    home = tmp_path_factory.mktemp("browser-home")
    build_fixture_index(home, encoder)
    port = _free_port()
    log = (home / "app.log").open("w")
    env = {**os.environ, "DMLQA_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--port", str(port)], cwd=home, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"app.py exited with {proc.returncode}: {(home / 'app.log').read_text()[-2000:]}")
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"app.py did not answer within 60 s: {(home / 'app.log').read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture()
def page(browser, app_url: str):  # noqa: ANN001, ANN201
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    pg.dialogs = []  # any alert() would land here
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.set_default_timeout(20_000)
    pg.goto(app_url)
    pg.locator("#dmlqa-question textarea").wait_for()  # never "networkidle": Gradio keeps a connection open
    yield pg
    ctx.close()


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def ask(page: Page, question: str) -> None:
    box = page.locator("#dmlqa-question textarea")
    box.fill(question)
    box.press("Enter")


def test_chat_answers_with_citation_links(page: Page) -> None:
    ask(page, "How does ZeRO partition optimizer states across data-parallel processes?")
    answer = page.locator("#dmlqa-chat .dmlqa-answer:has(.dmlqa-meta)").last
    expect(answer).to_contain_text("Answered by extractive")
    cite = answer.locator("a.dmlqa-cite").first
    expect(cite).to_have_text("[1]")
    href = cite.get_attribute("href") or ""
    assert href.startswith("/source/arxiv:1910.02054?page=")  # the archived view; the live page beside it
    original = answer.locator("a.dmlqa-original").first.get_attribute("href") or ""
    assert original.split("#")[0] == "https://arxiv.org/abs/1910.02054" and "#page=" in original
    expect(answer.locator(".dmlqa-sources")).to_contain_text("ZeRO: Memory Optimizations")
    shot(page, "chat.png")
    ask(page, "What about stage 3?")  # a follow-up leans on the previous question
    second = page.locator("#dmlqa-chat .dmlqa-answer:has(.dmlqa-meta)").nth(1)
    expect(second).to_contain_text("read as a follow-up")
    expect(second.locator("a.dmlqa-cite[href^='/source/arxiv:1910.02054']").first).to_be_visible()


def test_a_source_link_opens_the_archived_view_with_the_quote_marked(page: Page) -> None:
    ask(page, "How does ZeRO partition optimizer states across data-parallel processes?")
    answer = page.locator("#dmlqa-chat .dmlqa-answer:has(.dmlqa-meta)").last
    expect(answer).to_contain_text("Answered by extractive")
    quote = answer.locator(".dmlqa-quote").first.inner_text().strip("“”")
    with page.context.expect_page() as opened:
        answer.locator("a.dmlqa-source-title").first.click()
    view = opened.value
    view.wait_for_load_state()
    assert view.url.split("?")[0].endswith("/source/arxiv:1910.02054")
    mark = view.locator("mark#quote")
    expect(mark).to_be_visible()
    words = quote.rstrip("…").split()[:4]  # the shown quote may be shortened; its start is marked
    expect(mark).to_contain_text(" ".join(words))
    expect(view.locator("h1")).to_contain_text("ZeRO")
    assert page.dialogs == []
    shot(view, "source-view.png")


ANSWERS = "#dmlqa-chat .dmlqa-answer:has(.dmlqa-meta)"


def test_examples_read_like_questions_and_answer(page: Page) -> None:
    examples = page.locator("#dmlqa-chat button.example")
    expect(examples.first).to_be_visible()  # computed in the background at start, shown when ready
    texts = [t.strip() for t in examples.all_inner_texts()]
    assert "How does GPipe train giant neural networks?" in texts and "What is tensor fusion in Horovod?" in texts
    assert all(t.endswith("?") and ":" not in t for t in texts) and len(texts) <= 4
    question = "How does GPipe train giant neural networks?"
    examples.filter(has_text=question).click()
    expect(page.locator("#dmlqa-chat .dmlqa-question").first).to_have_text(question)
    answer = page.locator(ANSWERS).first
    expect(answer).to_contain_text("Answered by extractive")
    expect(answer).not_to_contain_text("nothing on this")
    expect(answer.locator("a.dmlqa-cite").first).to_be_visible()


def test_questions_stay_above_their_answers_and_the_chat_follows(browser, app_url: str) -> None:  # noqa: ANN001
    ctx = browser.new_context(viewport={"width": 1100, "height": 700})  # a short window: the chat must scroll
    page = ctx.new_page()
    page.set_default_timeout(20_000)
    page.goto(app_url)
    page.locator("#dmlqa-question textarea").wait_for()
    asked = ["How does ZeRO partition optimizer states across data-parallel processes?",
             "What settings does Horovod tensor fusion have?"]
    questions = page.locator("#dmlqa-chat .dmlqa-question")
    for i, q in enumerate(asked):
        ask(page, q)
        expect(questions.nth(i)).to_have_text(q)  # shown at once, while the answer is still coming
        expect(page.locator(ANSWERS).nth(i)).to_be_visible()
    expect(questions).to_have_text(asked)  # the questions are still there, not replaced by the answers
    answers = page.locator(ANSWERS)
    assert answers.count() == 2
    for i in range(2):  # each question above its own answer
        q_box, a_box = questions.nth(i).bounding_box(), answers.nth(i).bounding_box()
        assert q_box and a_box and q_box["y"] + q_box["height"] <= a_box["y"]
    assert questions.nth(1).bounding_box()["y"] > answers.nth(0).bounding_box()["y"]
    # the conversation is taller than the chat area: it scrolled to the newest question and answer
    chat = page.locator("#dmlqa-chat")
    scrolled = chat.evaluate("""c => [c, ...c.querySelectorAll('*')].some(
        e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowY) && e.scrollHeight > e.clientHeight + 1
             && e.scrollTop > 0)""")
    assert scrolled
    expect(questions.nth(1)).to_be_in_viewport()
    expect(answers.nth(1).locator(".dmlqa-text")).to_be_in_viewport()
    # bullets are bullets
    items = answers.nth(1).locator(".dmlqa-text ul > li")
    expect(items.first).to_contain_text("HOROVOD_FUSION_THRESHOLD")
    assert items.count() >= 2
    assert items.first.evaluate("e => getComputedStyle(e).display") == "list-item"
    assert items.first.evaluate("e => getComputedStyle(e.parentElement).listStyleType") == "disc"
    # a long answer is not clipped: scrolled to, its last line is on screen
    meta = answers.nth(1).locator(".dmlqa-meta")
    meta.scroll_into_view_if_needed()
    expect(meta).to_be_in_viewport()
    box = chat.bounding_box()
    assert box and 360 <= box["height"] <= 700  # grows to the window, not a fixed small box
    shot(page, "scroll.png")
    ctx.close()


def test_quoted_code_shows_as_a_code_block(page: Page) -> None:
    ask(page, "How do I configure the number of Ray Train workers and their GPUs?")
    answer = page.locator("#dmlqa-chat .dmlqa-answer:has(.dmlqa-meta)").last
    code = answer.locator("pre.dmlqa-code code")
    expect(code).to_contain_text("ScalingConfig(num_workers=2, use_gpu=True)")
    lines = code.inner_text().split("\n")
    assert lines[-2:] == ["trainer = TorchTrainer(train_func, scaling_config=scaling_config)",
                          "result = trainer.fit()"], lines  # one line each, as quoted
    expect(answer.locator("a.dmlqa-cite").first).to_have_text("[1]")
    shot(page, "code.png")


def test_html_in_questions_and_titles_renders_as_text(page: Page) -> None:
    payload = "<img src=x onerror=alert(1)>"
    ask(page, payload)
    expect(page.locator("#dmlqa-chat .dmlqa-answer:has(.dmlqa-meta)").last).to_be_visible()
    expect(page.locator("#dmlqa-chat .dmlqa-question").last).to_have_text(payload)
    ask(page, "How does butterfly allreduce exchange gradient halves between workers?")
    answer = page.locator("#dmlqa-chat .dmlqa-answer:has(.dmlqa-meta)").last
    expect(answer.locator(".dmlqa-sources")).to_contain_text('<img src=x onerror="window.__xss=1">')
    expect(answer.locator("a.dmlqa-original").first).to_have_attribute("href", "https://evil.example/ring")
    page.wait_for_timeout(500)
    shot(page, "xss.png")
    assert page.dialogs == []
    assert page.evaluate("window.__xss") is None
    assert page.locator("#dmlqa-chat img[src='x']").count() == 0
    # its archived view shows the title as text too, and runs nothing
    with page.context.expect_page() as opened:
        answer.locator("a.dmlqa-cite").first.click()
    view = opened.value
    expect(view.locator("h1")).to_have_text(EVIL_TITLE)
    expect(view.locator("mark#quote")).to_contain_text("Butterfly allreduce")
    view.wait_for_timeout(500)
    assert view.evaluate("window.__xss") is None and view.locator("img[src='x']").count() == 0
    assert page.dialogs == []


def test_empty_submit_says_so(page: Page) -> None:
    page.locator("#dmlqa-ask").click()
    expect(page.locator("#dmlqa-input-notice")).to_contain_text("Type a question first")
    assert page.locator("#dmlqa-chat .dmlqa-question").count() == 0


def test_related_papers_and_ask_about_one(page: Page) -> None:
    page.get_by_role("tab", name="Related papers").click()
    page.locator("#dmlqa-related-query textarea, #dmlqa-related-query input").first.fill("1811.06965")
    page.locator("#dmlqa-related-go").click()
    table = page.locator("#dmlqa-related-results table.dmlqa-related")
    expect(table).to_be_visible()
    expect(page.locator("#dmlqa-related-results")).to_contain_text("Related to GPipe")
    rows = table.locator("tbody tr")
    assert rows.count() >= 3
    hrefs = [a.get_attribute("href") or "" for a in table.locator("a.dmlqa-related-title").all()]
    assert hrefs and all(h.startswith("https://") for h in hrefs)
    assert "https://arxiv.org/abs/1811.06965" not in hrefs  # the paper itself is not related to itself
    shot(page, "related.png")
    title = rows.first.locator("a.dmlqa-related-title").inner_text()
    rows.first.locator("button.dmlqa-ask-about").click()
    expect(page.locator("#dmlqa-chat .dmlqa-question").last).to_contain_text(f"What is {title} about?")
    expect(page.locator("#dmlqa-chat .dmlqa-answer:has(.dmlqa-meta)").last).to_be_visible()


def test_related_tab_draws_the_citation_map_and_a_click_recentres_it(page: Page) -> None:
    target = "arxiv:1811.06965"
    # read off FIXTURE_CITES: the target, what it cites, what cites it, and what those citing it also cite
    citers = [a for a, bs in FIXTURE_CITES.items() if target in bs]
    nodes = {target, *FIXTURE_CITES.get(target, []), *citers, *(b for a in citers for b in FIXTURE_CITES[a])}
    edges = {(a, b) for a, bs in FIXTURE_CITES.items() for b in bs if a in nodes and b in nodes}
    page.get_by_role("tab", name="Related papers").click()
    page.locator("#dmlqa-related-query textarea, #dmlqa-related-query input").first.fill("1811.06965")
    page.locator("#dmlqa-related-go").click()
    cmap = page.locator("#citation-map")
    expect(cmap).to_have_attribute("data-nodes", str(len(nodes)))
    expect(cmap).to_have_attribute("data-edges", str(len(edges)))
    expect(cmap.locator(".main-svg").first).to_be_visible()  # drawn by plotly.js, served by the app itself
    expect(cmap.locator("path.point")).to_have_count(len(nodes))
    expect(cmap).to_contain_text("GPipe (2019)")
    shot(page, "citation-map.png")
    # a click on ZeRO's node re-centres the map on ZeRO (it cites GPipe and the Ray docs; nothing cites it)
    zero = cmap.locator("path.point").nth(
        page.evaluate("""() => {
            const gd = document.getElementById('citation-map');
            const ids = gd.data.filter((t) => t.customdata).flatMap((t) => t.customdata);
            return ids.indexOf('arxiv:1910.02054');
        }"""))
    zero.click(force=True)
    expect(cmap).to_have_attribute("data-target", "arxiv:1910.02054")
    zero_nodes = {"arxiv:1910.02054", *FIXTURE_CITES["arxiv:1910.02054"]}
    expect(cmap).to_have_attribute("data-nodes", str(len(zero_nodes)))
    expect(page.locator("#dmlqa-related-results")).to_contain_text("Related to ZeRO")


def test_status_tab(page: Page) -> None:
    page.get_by_role("tab", name="Status").click()
    status = page.locator("#dmlqa-status")
    expect(status).to_contain_text("documents with full text")
    status.locator("summary").click()
    expect(status).to_contain_text("HTTP 404 <b>not found</b>")
    chart = page.locator("#dmlqa-year-chart")
    expect(chart.locator(".main-svg").first).to_be_visible()
    expect(chart).to_contain_text("Horovod documentation")  # a list section of the fixture, in the legend
    shot(page, "status.png")
