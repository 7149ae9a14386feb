"""The chat app without a browser: formatting, links, filters, examples, and the service over a real index."""

from __future__ import annotations

import re
import socket
import threading
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, Reply
from test_index_search import build_index

from dmlqa.app.ui import exposure_warning, ui_password
from dmlqa.app.ui_chat import chat_steps, describe_filters, follow_up_query, make_filters, year_choices
from dmlqa.app.ui_examples import Example, answers_example, example_candidates, facets
from dmlqa.app.ui_render import (
    answer_html,
    friendly_error,
    question_html,
    related_html,
    rich_text,
    safe_url,
    source_href,
    status_html,
    streaming_html,
    text_with_links,
    undated_note,
)
from dmlqa.app.ui_service import ChatService
from dmlqa.errors import IndexMissingError
from dmlqa.index.versions import DocRecord
from dmlqa.models import Answer, Citation
from dmlqa.query.answer import Asker
from dmlqa.query.llm import LLMBackend, LLMConfig
from dmlqa.query.search import Filters, Searcher
from dmlqa.settings import load_settings

EVIL = '<img src=x onerror=alert(1)>'


def doc(doc_id: str, title: str, *, kind: str = "paper", topics: tuple[str, ...] = (), year: int | None = 2020,
        is_card: bool = False, n_chunks: int = 3, content_type: str = "pdf", source_url: str = "") -> DocRecord:
    return DocRecord(doc_id, f"https://example.org/{doc_id}", source_url, title, kind, content_type, (), None, year,
                     topics, is_card, n_chunks, 0)


def cite(n: int, **kw) -> Citation:  # noqa: ANN003
    base = {"url": "https://arxiv.org/abs/1910.02054", "title": "ZeRO", "page": 3, "quote": "ZeRO partitions states.",
            "doc_id": "arxiv:1910.02054", "venue": "SC", "year": 2020}
    base.update(kw)
    return Citation(n=n, **base)


# -- links and escaping ----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["javascript:alert(1)", "data:text/html,<b>x</b>", "file:///etc/passwd", "http://",
                                 "https://exa mple.org/", "//evil.example/x", "", None, "local:notes.md",
                                 "JaVaScRiPt:alert(1)", "https://x.org/\nhttps://y"])
def test_only_http_links(url: str | None) -> None:
    assert safe_url(url) is None


def test_pdf_citations_open_at_the_page() -> None:
    assert safe_url("https://arxiv.org/abs/1") == "https://arxiv.org/abs/1"
    # the canonical URL is the landing page; the PDF the passage came from takes #page=N
    assert source_href("https://arxiv.org/abs/1910.02054", 3, source_url="https://arxiv.org/pdf/1910.02054",
                       content_type="pdf") == "https://arxiv.org/pdf/1910.02054#page=3"
    assert source_href("https://x.org/a.pdf#frag", 2, content_type="pdf") == "https://x.org/a.pdf#page=2"
    assert source_href("https://x.org/page", 2, content_type="html") == "https://x.org/page"
    assert source_href("https://x.org/page", None, content_type="pdf") == "https://x.org/page"
    assert source_href("javascript:alert(1)", 2, source_url="javascript:x", content_type="pdf") is None


def test_markers_become_links_and_text_is_escaped() -> None:
    cites = [cite(1), cite(2, url="https://github.com/horovod/horovod", title="Horovod", page=None)]
    hrefs = {1: "https://arxiv.org/pdf/1910.02054#page=3", 2: "https://github.com/horovod/horovod"}
    out = text_with_links(f"ZeRO shards {EVIL} states [1]. Horovod uses ring-allreduce [2][9].", cites, hrefs)
    assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out
    assert re.search(r'<a href="https://arxiv.org/pdf/1910.02054#page=3"[^>]*class="dmlqa-cite"[^>]*>\[1\]</a>', out)
    assert 'href="https://github.com/horovod/horovod"' in out
    assert out.endswith("[9].</p>")  # a marker naming no citation stays text


def test_code_renders_as_code_with_its_indentation_and_no_links() -> None:
    text = ("Wrap the loader [1]:\n```\nfor batch in loader:\n    x = batch[2] <b>\n```\n"
            "then read `outputs[1]` [2].")
    out = text_with_links(text, [cite(1), cite(2)], {1: "https://x.org/1", 2: "https://x.org/2"})
    assert "\n" not in out
    assert '<pre class="dmlqa-code"><code>for batch in loader:&#10;    x = batch[2] &lt;b&gt;</code></pre>' in out
    assert "<code>outputs[1]</code>" in out  # inline code: its brackets are no citation
    assert out.count('class="dmlqa-cite"') == 2 and out.endswith('[2]</a>.</p>')
    # a block still open (an answer streaming) is shown as code so far
    assert rich_text("Run:\n```\nray start --head") == ('<p class="dmlqa-p">Run:</p>'
                                                       '<pre class="dmlqa-code"><code>ray start --head</code></pre>')


def test_list_items_render_as_lists_and_stay_escaped() -> None:
    # what the extractive answerer writes for quoted list items: one per line, "- item [n]"
    text = (f"Horovod tunes tensor fusion with these settings: [1]\n- HOROVOD_FUSION_THRESHOLD {EVIL} [1]\n"
            "- HOROVOD_CYCLE_TIME sets the cycle [2]\nThe defaults suit most jobs. [1]")
    out = text_with_links(text, [cite(1), cite(2)], {1: "https://x.org/1", 2: "https://x.org/2"})
    assert "\n" not in out and "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out
    assert re.fullmatch(
        r'<p class="dmlqa-p">Horovod tunes .*?<a [^>]*>\[1\]</a></p>'
        r"<ul><li>HOROVOD_FUSION_THRESHOLD &lt;img[^<]*<a [^>]*>\[1\]</a></li>"
        r"<li>HOROVOD_CYCLE_TIME .*?\[2\]</a></li></ul>"
        r'<p class="dmlqa-p">The defaults suit most jobs\. <a [^>]*>\[1\]</a></p>', out)
    # "* " and "• " bullets too; numbered lines need two in a row; blank lines separate paragraphs
    assert rich_text("* a\n• b") == "<ul><li>a</li><li>b</li></ul>"
    assert rich_text("1. one\n2) two") == "<ol><li>one</li><li>two</li></ol>"
    assert rich_text("2. a lone numbered line") == '<p class="dmlqa-p">2. a lone numbered line</p>'
    assert rich_text("a\nb\n\nc") == '<p class="dmlqa-p">a<br>b</p><p class="dmlqa-p">c</p>'
    assert rich_text("- <b>x</b>\n-not a bullet") == ('<ul><li>&lt;b&gt;x&lt;/b&gt;</li></ul>'
                                                     '<p class="dmlqa-p">-not a bullet</p>')
    # the whole answer, and an LLM answer while it streams
    answer = Answer(question="q", answer=text, citations=(cite(1), cite(2)), backend="extractive", refused=False)
    html_out = answer_html(answer)
    assert "\n" not in html_out and html_out.count("<li>") == 2 and "<img" not in html_out
    streaming = streaming_html(f"Two ways:\n- ring {EVIL}\n- tree")
    assert "<ul><li>ring &lt;img" in streaming and "<img" not in streaming
    assert "▍" in streaming and "\n" not in streaming


def test_undated_documents_left_out_are_noted() -> None:
    assert undated_note(0) is None
    assert undated_note(1) == "1 document of unknown year was left out by the year filter"
    answer = Answer(question="q", answer="x [1]", citations=(cite(1),), backend="extractive", refused=False,
                    undated_excluded=3)
    out = answer_html(answer)
    assert "3 documents of unknown year were left out by the year filter" in out and "keep documents of unknown" in out
    assert "unknown year" not in answer_html(Answer(question="q", answer="x [1]", citations=(cite(1),),
                                                    backend="extractive", refused=False))


def test_answer_html_shows_sources_backend_and_notices() -> None:
    evil = cite(1, title=f"Evil {EVIL} <script>alert(2)</script>", quote=f"quoted {EVIL}", url="javascript:alert(3)")
    answer = Answer(question="q", answer="Partitioning saves memory [1]. Pipelines too [2].",
                    citations=(evil, cite(2, page=None, venue=None, year=2019)), backend="llm:llama3.1",
                    refused=False, seconds=1.234,
                    notice="LLM unavailable (connection refused); showing the extractive answer",
                    flags=("removed invented citation [9]",))
    docs = {"arxiv:1910.02054": doc("arxiv:1910.02054", "ZeRO", source_url="https://arxiv.org/pdf/1910.02054")}
    out = answer_html(answer, docs, extra_notice="read as a follow-up")
    assert "\n" not in out  # one HTML block: the chat's markdown renderer leaves it alone
    assert "<img" not in out and "<script" not in out and "javascript:" not in out
    assert "Evil &lt;img src=x onerror=alert(1)&gt; &lt;script&gt;" in out and "quoted &lt;img" in out
    # [1]: its canonical URL is unusable, the PDF it was read from is not; [2]: no page, so the canonical URL
    assert 'href="https://arxiv.org/pdf/1910.02054#page=3"' in out and 'href="https://arxiv.org/abs/1910.02054"' in out
    assert "LLM llama3.1" in out and "1.23 s" in out
    assert "LLM unavailable" in out and "read as a follow-up" in out and "removed invented citation [9]" in out
    assert "SC 2020 · p. 3" in out and ">Sources<" in out
    refused = Answer(question="q", answer="The knowledge base has nothing on this.", citations=(cite(1, quote=""),),
                     backend="extractive", refused=True)
    out = answer_html(refused)
    assert "Nearest sources" in out and "extractive" in out and "blockquote" not in out


def test_question_html_escapes_and_shortens_a_huge_paste() -> None:
    assert question_html(EVIL) == '<div class="dmlqa-question">&lt;img src=x onerror=alert(1)&gt;</div>'
    out = question_html("zero " * 10_000)
    assert len(out) < 1000 and "50,000 characters in all" in out


# -- filters and follow-ups -------------------------------------------------------------------------------


def test_make_filters() -> None:
    f, note = make_filters(["paper", "Repo", "bogus"], 2023, 2019.0, ["Pipeline Parallelism", " "])
    assert f == Filters(kinds=("paper", "repo"), since=2019, until=2023, topics=("Pipeline Parallelism",))
    assert note and "bogus" in note and "reversed" in note
    assert describe_filters(f) == "kind paper, repo · 2019–2023 · topic Pipeline Parallelism"
    f, note = make_filters(None, 0, None, None)  # an empty number box sends 0
    assert f == Filters() and not f.active() and note is None
    f, note = make_filters([], 20201, "x", [])
    assert f.since is None and f.until is None and "20201" in note and "x" in note
    assert describe_filters(Filters(since=2020)) == "2020–…"
    f, note = make_filters([], "any", "2021", [])  # what the year dropdowns send
    assert f == Filters(until=2021) and note is None
    f, _ = make_filters([], "2020", "any", [], True)  # "keep documents of unknown year" ticked
    assert f == Filters(since=2020, include_undated=True) and describe_filters(f) == "2020–… · undated kept"


def test_follow_up_query() -> None:
    prev = ["How does ZeRO partition optimizer states?"]
    assert follow_up_query("What about its stage 3?", prev) == f"{prev[0]} What about its stage 3?"
    assert follow_up_query("and the communication cost", prev).endswith("and the communication cost")
    assert follow_up_query("What is pipeline parallelism in GPipe?", prev) is None  # stands alone
    assert follow_up_query("What about it?", []) is None
    assert follow_up_query("why is it " + "very " * 20 + "slow", prev) is None  # long: read alone


# -- facets, examples, related, status -------------------------------------------------------------------

DOCS = [
    doc("a", "GPipe: Efficient Training of Giant Neural Networks", topics=("Papers", "Pipeline Parallelism")),
    doc("b", "PipeDream: Fast and Efficient Pipeline Parallel DNN Training", topics=("Papers", "Pipeline Parallelism"),
        year=2019),
    doc("c", "Horovod", kind="repo", topics=("Frameworks",), year=None, content_type="markdown"),
    doc("d", "Some card: with a colon", kind="article", topics=("Tensor Movement",), is_card=True),
    doc("e", "Megatron-LM: Training Multi-Billion Parameter Language Models", topics=("Tensor Movement",), year=2021),
    doc("f", "Ray docs", kind="docs", topics=("Ray Train documentation",), year=2023),
    doc("g", "Ray docs 2", kind="docs", topics=("Ray Train documentation",), year=2023),
]


def test_facets() -> None:
    f = facets(DOCS)
    assert f.kinds == ("paper", "repo", "docs", "article")
    assert f.topics[:3] == ("Papers", "Pipeline Parallelism", "Ray Train documentation")
    assert f.years == (2019, 2023)
    assert year_choices(f) == ["any", "2023", "2022", "2021", "2020", "2019"] and year_choices(facets([])) == ["any"]


EXAMPLE_DOCS = [
    doc("gpipe", "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism", n_chunks=30,
        topics=("Papers", "Pipeline Parallelism")),
    doc("zero", "ZeRO: memory optimizations toward training trillion parameter models", n_chunks=40,
        topics=("Papers", "Memory Efficient Training")),
    doc("swap", "SwapAdvisor: Pushing Deep Learning Beyond the GPU Memory Limit via Smart Swapping", n_chunks=20),
    doc("switch", "Switch Transformers: Scaling to Trillion Parameter Models with Simple and Efficient Sparsity",
        n_chunks=25),
    doc("pipedream", "PipeDream: Fast and Efficient Pipeline Parallel DNN Training", n_chunks=10,
        topics=("Pipeline Parallelism",)),
    doc("recompute", "Reducing Activation Recomputation in Large Transformer Models", n_chunks=12),
    doc("ghub", "GitHub - hpcaitech/ColossalAI: Making large AI models cheaper, faster and more accessible",
        kind="repo", content_type="html"),
    doc("fusion", "Tensor Fusion", kind="docs", topics=("Horovod documentation",), content_type="html"),
    doc("elastic", "Elastic Horovod", kind="docs", topics=("Horovod documentation",), content_type="html"),
    doc("start", "Getting Started", kind="docs", topics=("DeepSpeed documentation",), content_type="html"),
    doc("fail", "Handling Failures and Node Preemption", kind="docs", topics=("Ray Train documentation",),
        content_type="html"),
    doc("path", "NVIDIA/Megatron-LM/docs/user-guide/parallelism-guide.md", kind="docs",
        topics=("Megatron-LM documentation",), content_type="markdown"),
    doc("url", "d2l.ai/chapter_computational-performance/multiple-gpus.html", kind="docs", content_type="html"),
    doc("card", "Tell me: A catalog card", kind="article", is_card=True),
    doc("evil", f"Evil: Training {EVIL}", kind="paper"),
    doc("evil2", f"{EVIL} with Horovod", kind="docs", topics=("Horovod documentation",), content_type="html"),
]


def test_example_candidates_read_like_questions_from_the_index() -> None:
    examples = example_candidates(EXAMPLE_DOCS)
    qs = [e.question for e in examples]
    assert set(qs) == {
        "How does ZeRO optimize memory?",
        "How does GPipe train giant neural networks?",
        "How do Switch Transformers scale to trillion parameter models?",
        "How does SwapAdvisor push deep learning beyond the GPU memory limit?",
        "How does ColossalAI make large AI models cheaper?",
        "How does PipeDream work?",
        "What is tensor fusion in Horovod?",
        "What is Elastic Horovod?",
        "How does Ray Train handle failures and node preemption?",
        "How can I reduce activation recomputation in large transformer models?",
        "What is pipeline parallelism?",
    }
    # the kinds alternate, so the few candidates that are checked cover different documents
    assert qs[:4] == ["How does ZeRO optimize memory?", "What is Elastic Horovod?",
                      "How can I reduce activation recomputation in large transformer models?",
                      "What is pipeline parallelism?"]
    by_q = {e.question: e for e in examples}
    assert by_q["How does ZeRO optimize memory?"] == Example("How does ZeRO optimize memory?", "zero", "ZeRO")
    assert by_q["What is tensor fusion in Horovod?"].subject == "Horovod"
    assert all(q.endswith("?") and "GitHub" not in q and "/" not in q and ":" not in q for q in qs)
    assert example_candidates([]) == [] and example_candidates([EXAMPLE_DOCS[-1]]) == []


def test_an_example_counts_only_when_answered_about_its_subject() -> None:
    ex = Example("How does ZeRO optimize memory?", "arxiv:1910.02054", "ZeRO")
    good = Answer(question=ex.question, answer="It partitions states [1].", citations=(cite(1),),
                  backend="extractive", refused=False)
    assert answers_example(ex, good)
    other = cite(1, doc_id="web:x", title="Pipelines", url="https://x.org")
    assert not answers_example(ex, Answer(question="q", answer="Pipelines split batches [1].", citations=(other,),
                                          backend="extractive", refused=False))
    assert answers_example(ex, Answer(question="q", answer="ZeRO shards [1].", citations=(other,),
                                      backend="extractive", refused=False))
    refused = Answer(question="q", answer="The knowledge base has nothing on this.", citations=(cite(1),),
                     backend="extractive", refused=True)
    assert not answers_example(ex, refused) and not answers_example(Example("What is pipeline parallelism?"), refused)


def test_related_html_escapes_and_offers_ask() -> None:
    rows = [{"doc_id": "x", "title": f"T {EVIL}", "url": "https://arxiv.org/abs/1", "year": 2020, "venue": "ICML",
             "kind": "paper", "reason": f"because {EVIL}"},
            {"doc_id": "y", "title": "No link", "url": "javascript:alert(1)", "year": None, "venue": None,
             "kind": "repo", "reason": ""}]
    out = related_html(rows, "arXiv id 9999.99999 is not in the index", target={"title": "ZeRO <b>",
                                                                               "url": "https://arxiv.org/abs/2"})
    assert "<img" not in out and "javascript:" not in out and "ZeRO &lt;b&gt;" in out
    assert out.count('class="dmlqa-ask-about" data-row=') == 2 and "ICML 2020" in out
    assert 'href="https://arxiv.org/abs/1"' in out and "not in the index" in out
    assert "No related documents" in related_html([])
    graph = {"cites": [{"doc_id": "g", "title": "GPipe", "url": "https://arxiv.org/abs/1811.06965", "year": 2019,
                        "context": f"pipelines as in [12] {EVIL}"}],
             "cited_by": [{"doc_id": f"c{i}", "title": f"Paper {i}", "url": f"https://e.org/{i}", "year": None,
                           "context": ""} for i in range(11)]}
    out = related_html(rows, target={"title": "ZeRO", "url": "https://arxiv.org/abs/2"}, graph=graph)
    assert "<strong>Cites 1</strong> in the knowledge base: " in out and "GPipe</a> (2019)" in out
    assert "<strong>Cited by 11</strong>" in out and "Paper 7" in out and "Paper 8" not in out and "3 more" in out
    assert "<img" not in out and 'title="pipelines as in [12]' in out
    empty = related_html(rows, target={"title": "ZeRO", "url": "https://arxiv.org/abs/2"},
                         graph={"cites": [], "cited_by": []})
    assert "<strong>Cited by 0</strong> in the knowledge base</p>" in empty


def test_status_html() -> None:
    st = {"index_version": "v1", "built_at": "2026-11-20T10:00:00+00:00", "documents": 3, "cards": 1, "chunks": 9,
          "resources": 4, "model": "m", "encoder": "onnx-int8",
          "failed": [{"url": "https://dead.example/x", "stage": "fetch", "error": f"HTTP 404 {EVIL}"}]}
    out = status_html(st)
    assert "v1" in out and ">9<" in out and "<details" in out and "1 resource(s) failed" in out
    assert "<img" not in out and 'href="https://dead.example/x"' in out
    assert "dmlqa build" in status_html(None, "no index")


def test_binding_warning_and_password() -> None:
    assert exposure_warning("127.0.0.1", password=False) is None
    assert exposure_warning("::1", password=False) is None and exposure_warning("localhost", password=False) is None
    msg = exposure_warning("0.0.0.0", password=False)
    assert msg and "anyone" in msg and "DMLQA_UI_PASSWORD" in msg
    assert "DMLQA_UI_PASSWORD" not in exposure_warning("192.168.1.5", password=True)
    settings = load_settings("/nonexistent-home", env={})
    assert ui_password(settings, {"DMLQA_UI_PASSWORD": "s3cret"}) == "s3cret" and ui_password(settings, {}) is None


def test_friendly_error_never_shows_a_traceback() -> None:
    assert "dmlqa build" in friendly_error(IndexMissingError("x"))
    assert "replaced" in friendly_error(OSError("gone"))
    msg = friendly_error(KeyError("boom"))
    assert "KeyError" in msg and "Traceback" not in msg and "boom" not in msg


# -- the service over a real small index ------------------------------------------------------------------


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, encoder) -> Path:  # noqa: ANN001
    h = tmp_path_factory.mktemp("ui-home")
    build_index(h, encoder)
    return h


@pytest.fixture(scope="module")
def service(home: Path) -> ChatService:
    return ChatService(load_settings(home))


def test_service_answers_with_links_and_filters(service: ChatService) -> None:
    parts = list(service.stream_html("How does ZeRO partition optimizer states?", Filters()))
    final = parts[-1]
    assert 'class="dmlqa-cite"' in final and 'href="https://arxiv.org/abs/1910.02054#page=' in final
    assert "extractive" in final
    repo_only = list(service.stream_html("distributed training framework", Filters(kinds=("repo",))))[-1]
    assert "github.com/horovod/horovod" in repo_only and "arxiv.org" not in repo_only
    assert "documents with full text" in service.status()
    f = service.facets()
    assert "Pipeline Parallelism" in f.topics and f.kinds == ("paper", "repo", "docs")


def test_huge_paste_and_markup_get_messages(service: ChatService) -> None:
    final = list(service.stream_html("ZeRO partitions optimizer states " * 2000, Filters()))[-1]
    assert "66,000 characters; the limit is 20,000" in final and "Traceback" not in final  # refused in one line
    final = list(service.stream_html("ZeRO partitions optimizer states " * 200, Filters()))[-1]
    assert "characters long" in final  # within the limit: answered from its start, and the answer says so
    final = list(service.stream_html(EVIL, Filters()))[-1]
    # refused (its words are no English: "please ask it in English"); the markup never comes back as a tag
    assert "<img" not in final and "please ask it in English" in final


def test_examples_are_answerable(home: Path) -> None:
    service = ChatService(load_settings(home))
    assert service.examples(wait=False) == []  # never blocks: computed in a background thread...
    assert service._examples_thread is not None
    service._examples_thread.join(60)
    examples = service.examples(wait=False)  # ...and cached for the index version
    assert examples == service.examples() and service.examples_seconds is not None
    assert examples == ["How does ZeRO optimize memory?", "How does GPipe train giant neural networks?",
                        "How does Ray Train work?"]
    for q in examples:
        answer = service.kb.ask(q)
        assert not answer.refused and answer.citations


def test_related_rows(service: ChatService) -> None:
    rows, out = service.related_rows("1910.02054")
    assert rows and all(r["doc_id"] != "arxiv:1910.02054" for r in rows)
    assert "Related to" in out and "ZeRO: Memory Optimizations" in out and "unknown year" not in out
    assert "<strong>Cites " in out and "<strong>Cited by " in out  # the graph's lines under the target
    _, out = service.related_rows("distributed training", since=2019)  # Horovod's year is unknown
    assert "1 document of unknown year was left out by “since 2019”" in out


def test_year_filter_notes_undated_documents_in_the_answer(service: ChatService) -> None:
    final = list(service.stream_html("distributed training framework", Filters(since=2019)))[-1]
    assert "1 document of unknown year was left out by the year filter" in final
    final = list(service.stream_html("distributed training framework", Filters(since=2019, include_undated=True)))[-1]
    assert "unknown year" not in final


def test_no_index_gives_messages_not_errors(tmp_path: Path) -> None:
    s = ChatService(load_settings(tmp_path))
    assert s.examples() == [] and s.examples(wait=False) == [] and s.facets().kinds == ()
    out = list(s.stream_html("what is zero?", Filters()))
    assert len(out) == 1 and "dmlqa build" in out[0] and "Traceback" not in out[0]
    assert "dmlqa build" in s.status()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_llm_answer_streams_and_a_dead_endpoint_falls_back(home: Path) -> None:
    settings = load_settings(home)
    with FakeOpenAI() as server:
        server.queue(Reply(text="ZeRO partitions optimizer states across data-parallel ranks [1]."))
        llm = LLMBackend(LLMConfig(base_url=server.url, model="fake-model", timeout=60.0))  # generous: busy machines
        parts = list(ChatService(settings, Asker(Searcher(settings), llm)).stream_html("How does ZeRO save memory?",
                                                                                          Filters()))
    assert len(parts) > 3 and "▍" in parts[1] and "dmlqa-streaming" in parts[1]
    assert "LLM fake-model" in parts[-1] and 'class="dmlqa-cite"' in parts[-1]
    dead = LLMBackend(LLMConfig(base_url=f"http://127.0.0.1:{_free_port()}/v1", model="m", timeout=2.0))
    final = list(ChatService(settings, Asker(Searcher(settings), dead)).stream_html("How does ZeRO save memory?",
                                                                                     Filters()))[-1]
    assert "LLM unavailable" in final and "Answered by <span class=\"dmlqa-backend\">extractive" in final


def test_each_question_stays_above_its_answer_while_it_streams(home: Path) -> None:
    settings = load_settings(home)
    with FakeOpenAI() as server:
        server.queue(Reply(text="ZeRO partitions optimizer states across data-parallel ranks [1]."),
                     Reply(text="Stage 3 partitions the parameters too [1]:\n- less memory [1]\n- more traffic [1]"))
        service = ChatService(settings, Asker(Searcher(settings), LLMBackend(LLMConfig(base_url=server.url,
                                                                                     model="fake-model", timeout=60))))
        state: tuple[list, list] = ([], [])
        snapshots = []
        for q in ("How does ZeRO save memory?", "What about stage 3?"):
            for turns, questions, _clear, _notice in chat_steps(service, q, *state, (Filters(), None)):
                snapshots.append([dict(m) for m in turns])
                state = (turns, questions)
        asked = state[1]
    assert len(snapshots) > 6  # the placeholder, the growing answer (several deltas), the final answer, twice
    for snap in snapshots:  # at every step: question, answer, question, answer: no message replaced another
        assert [m["role"] for m in snap] == ["user", "assistant"] * (len(snap) // 2)
        assert snap[0]["content"] == question_html("How does ZeRO save memory?")
        if len(snap) == 4:
            assert snap[2]["content"] == question_html("What about stage 3?")
            assert "ZeRO partitions optimizer states" in snap[1]["content"]  # the first answer stays too
    assert any("dmlqa-streaming" in s[-1]["content"] for s in snapshots)
    final = snapshots[-1][-1]["content"]
    assert "<ul><li>less memory" in final and "read as a follow-up" in final
    assert asked == ["How does ZeRO save memory?", "How does ZeRO save memory? What about stage 3?"]
    # an empty message changes nothing and says why
    (steps,) = list(chat_steps(service, "  ", snapshots[-1], asked, (Filters(), None)))
    assert steps[0] == snapshots[-1] and steps[2] is False and "Type a question first" in steps[3]


def test_new_index_version_is_picked_up_without_dropping_a_request(tmp_path: Path, encoder) -> None:  # noqa: ANN001
    first = build_index(tmp_path, encoder)
    settings = load_settings(tmp_path)
    gate = threading.Event()
    with FakeOpenAI() as server:
        server.queue(Reply(text="Horovod uses ring-allreduce [1].", gate=gate, gate_after=1))
        # The gated reply waits for a whole index build below: a generous timeout, not a race with it.
        llm = LLMBackend(LLMConfig(base_url=server.url, model="fake-model", timeout=300.0))
        service = ChatService(settings, Asker(Searcher(settings), llm))
        assert first in service.status()
        stream = service.stream_html("What does Horovod use?", Filters())
        assert "dmlqa-streaming" in next(stream)  # in flight: retrieval done on the first version
        second = build_index(tmp_path, encoder, extra="Horovod also supports elastic training with horovodrun.")
        gate.set()
        final = list(stream)[-1]
    assert "github.com/horovod/horovod" in final and "LLM fake-model" in final
    assert second != first and second in service.status()
    answer = service.answer("Does Horovod support elastic training?", Filters(), use_llm=False)
    assert any("elastic" in h.text for h in answer.retrieved)


def test_http_api_answers_over_the_running_app(service: ChatService) -> None:
    """The Blocks app builds, serves on 127.0.0.1 and answers through its ``/ask`` HTTP endpoint."""
    import httpx

    from dmlqa.app.ui import build_app

    demo = build_app(service)
    port = _free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, share=False,
                ssr_mode=False, mcp_server=False)
    try:
        base = f"http://127.0.0.1:{port}/gradio_api/call/ask"
        results = {}
        for question in ("What does GPipe split a mini-batch into?", "   "):
            event = httpx.post(base, json={"data": [question, ["paper"], None, None, None, False]}, timeout=30)
            event_id = event.json()["event_id"]
            body = httpx.get(f"{base}/{event_id}", timeout=30).text
            assert "event: complete" in body, body
            results[question] = body
        assert "https://arxiv.org/abs/1811.06965" in results["What does GPipe split a mini-batch into?"]
        assert '"error": "empty question"' in results["   "]
    finally:
        demo.close()


class CountingEncoder:
    key = "fake@1/onnx-int8"
    dim = 3

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], int]] = []

    def encode(self, texts, *, batch_size: int = 32):  # noqa: ANN001, ANN201
        import numpy as np

        self.calls.append((list(texts), batch_size))
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32).reshape(len(texts), 3)


def test_cached_encoder_remembers_vectors() -> None:
    from dmlqa.index.embed import CachedEncoder

    inner = CountingEncoder()
    enc = CachedEncoder(inner, max_items=3)
    first = enc.encode(["a", "bb", "a"], batch_size=64)
    assert first.shape == (3, 3) and first[0][0] == first[2][0] == 1 and first[1][0] == 2
    assert inner.calls == [(["a", "bb"], 16)]  # each text once, in batches of at most 16
    again = enc.encode(["bb", "ccc"])
    assert inner.calls[-1][0] == ["ccc"] and again[0][0] == 2 and again[1][0] == 3
    enc.encode(["dddd"])  # over max_items: the least recently used ("a") is forgotten
    enc.encode(["a"])
    assert inner.calls[-1][0] == ["a"] and enc.key == "fake@1/onnx-int8" and enc.dim == 3
    assert enc.encode([]).shape == (0, 3)


def test_service_uses_one_caching_asker(service: ChatService) -> None:
    from dmlqa.index.embed import CachedEncoder

    asker = service.kb.asker
    assert service.kb.pinned().asker is asker  # a request's view shares the loaded model and index
    service.answer("What does GPipe split a mini-batch into?", Filters(), use_llm=False)
    enc = asker.searcher.encoder_for(asker.searcher.pin())
    assert isinstance(enc, CachedEncoder) and enc.misses > 0
    hits = enc.hits
    service.answer("What does GPipe split a mini-batch into?", Filters(), use_llm=False)
    assert enc.hits > hits


def test_prewarm_is_skipped_when_the_version_stores_sentence_vectors(home: Path) -> None:
    service = ChatService(load_settings(home))
    assert service.prewarm() == 0 and service.health()["ready"]
    version = service.kb.asker.searcher.pin()
    enc = service.kb.asker.searcher.encoder_for(version)
    misses = enc.misses
    service.answer("What does GPipe split a mini-batch into?", Filters(), use_llm=False)
    assert enc.misses == misses + 1  # only the question itself was embedded


def test_prewarm_makes_answers_hit_the_cache(tmp_path: Path, encoder) -> None:  # noqa: ANN001
    """A version built before sentence vectors were stored: the app embeds them once at start."""
    from dmlqa.query.prewarm import candidate_sentences

    home = tmp_path
    build_index(home, encoder, sentences=False)
    service = ChatService(load_settings(home))
    assert service.health()["ready"] is False
    version = service.kb.asker.searcher.pin()
    sentences = candidate_sentences(version)
    assert sentences and len(sentences) == len(set(sentences))
    assert service.prewarm() == len(sentences)
    h = service.health()
    assert h["ready"] and h["index_version"] == version.name and h["embedded"] == h["sentences"] == len(sentences)
    enc = service.kb.asker.searcher.encoder_for(version)
    misses = enc.misses
    service.answer("What does GPipe split a mini-batch into?", Filters(), use_llm=False)
    assert enc.misses == misses + 1  # only the question itself was embedded
