"""One index version per request: a build published in the middle of a question never mixes versions.

Each test builds a real home (FAISS + BM25 + stored sentences, the bundled encoder), writes a second
version beside the first, and publishes it at the worst moment: after retrieval, before the answer is
assembled (or in the middle of a front end's request). Everything the request returns must come from
the version it started on, and the next request must read the new one.
"""

from __future__ import annotations

import ast
import asyncio
import re
import shutil
from pathlib import Path

import pytest
from test_index_search import CORPUS, make_docs_and_chunks

import dmlqa
import dmlqa.query.answer as answer_module
from dmlqa.app.mcp import _Library
from dmlqa.app.ui_service import ChatService
from dmlqa.extract.sentences import split_document
from dmlqa.index.embed import embed_texts
from dmlqa.index.versions import current_version, dense_text, publish, write_version
from dmlqa.query.search import Filters, Searcher

SRC = Path(__file__).resolve().parents[1] / "src" / "dmlqa"

QUESTION = "How does ZeRO partition optimizer states across data-parallel processes?"
ZERO = "arxiv:1910.02054"
RAY = "web:docs.ray.io/abc"

#: The second version: ZeRO's text rewritten (same doc id, other sentences) and Ray Train gone, so
#: any read of it shows up in what a request returns.
SECOND = {doc_id: value for doc_id, value in CORPUS.items() if doc_id != RAY}
SECOND[ZERO] = ("ZeRO, revised edition", "paper", 2020, ("Memory Efficient Training",), [
    "ZeRO shards the optimizer states over the data-parallel ranks, so that each rank keeps only its own "
    "slice of them and gathers the rest when a step needs it.",
    "With ZeRO each data-parallel rank updates only the optimizer states it owns and then shares the new "
    "parameters with the others.",
])


def _write(home: Path, encoder, corpus: dict, *, published: bool) -> str:  # noqa: ANN001
    """A complete version of ``corpus`` as a build writes it (chunks, vectors, quotable sentences)."""
    docs, chunks = make_docs_and_chunks(corpus=corpus)
    vecs = embed_texts([dense_text(c.title, c.section, c.text) for c in chunks], encoder).vectors
    kept = [(o, x) for d in docs for o, x in enumerate(split_document(d)) if x.quotable]
    svecs = embed_texts([x.text for _, x in kept], encoder).vectors
    meta = {"model": "bundled:all-MiniLM-L6-v2", "encoder": "onnx-int8", "encoder_key": encoder.key,
            "resources": len(docs), "failed": []}
    name = write_version(home / "index", docs, chunks, vecs, meta, ann_threshold=1000, sentences=kept,
                         sentence_vectors=svecs)
    if published:
        publish(home / "index", name)
    return name


def _texts(corpus: dict) -> str:
    return " ".join(" ".join(passages) for *_, passages in corpus.values())


def _squash(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, encoder) -> tuple[Path, str, str]:  # noqa: ANN001
    home = tmp_path_factory.mktemp("pinning")
    first = _write(home, encoder, CORPUS, published=True)
    second = _write(home, encoder, SECOND, published=False)
    return home, first, second


@pytest.fixture()
def homes(template: tuple[Path, str, str], tmp_path: Path) -> tuple[Path, str, str]:
    """A home serving the first version, with the second written beside it but not published yet
    (a copy of one built home: each test publishes in its own)."""
    source, first, second = template
    home = tmp_path / "home"
    shutil.copytree(source, home)
    assert first != second and current_version(home / "index") == first
    return home, first, second


def _publish_after_retrieval(monkeypatch: pytest.MonkeyPatch, home: Path, name: str) -> list[int]:
    """Make the asker's retrieval publish ``name`` right after it returns (once); returns the call count."""
    real = answer_module.retrieve
    calls: list[int] = []

    def retrieve_then_publish(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        hits = real(*args, **kwargs)
        if not calls:
            publish(home / "index", name)
        calls.append(1)
        return hits

    monkeypatch.setattr(answer_module, "retrieve", retrieve_then_publish)
    return calls


def _quotes_from(answer: dmlqa.Answer, corpus: dict) -> bool:
    texts = _squash(_texts(corpus))
    return bool(answer.citations) and all(_squash(c.quote) in texts for c in answer.citations)


def test_an_answer_reads_one_version_though_a_build_publishes_mid_question(
    homes: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, first, second = homes
    kb = dmlqa.KnowledgeBase(home)
    calls = _publish_after_retrieval(monkeypatch, home, second)
    answer = kb.ask(QUESTION, use_llm=False)
    assert calls and current_version(home / "index") == second  # the publish did happen mid-question
    assert not answer.refused and answer.citations
    # passages, quotes and citations: all of the first version, none of the second's rewritten text
    first_text = _squash(_texts(CORPUS))
    assert all(_squash(h.text) in first_text for h in answer.retrieved)
    assert _quotes_from(answer, CORPUS) and not _quotes_from(answer, SECOND)
    assert {c.doc_id for c in answer.citations} <= set(CORPUS)
    assert all(c.title == CORPUS[c.doc_id][0] for c in answer.citations)

    # the next question reads the new version
    again = kb.ask(QUESTION, use_llm=False)
    assert not again.refused and _quotes_from(again, SECOND) and not _quotes_from(again, CORPUS)
    assert RAY not in {h.doc_id for h in kb.search("Ray Train TorchTrainer cluster", k=10)}


def test_a_pinned_view_reads_its_version_until_it_is_done(homes: tuple[Path, str, str]) -> None:
    home, first, second = homes
    kb = dmlqa.KnowledgeBase(home)
    view = kb.pinned()  # reads nothing yet: pinned at its first read
    assert view.search("ZeRO optimizer states", k=1)[0].doc_id == ZERO
    publish(home / "index", second)

    assert view.index_version() == first and kb.index_version() == second
    assert view.document(ZERO).title == CORPUS[ZERO][0] and kb.document(ZERO).title == SECOND[ZERO][0]
    assert RAY in view.documents() and kb.document(RAY) is None
    hit = view.search("ZeRO optimizer states", k=1)[0]
    assert _squash(hit.text) in _squash(_texts(CORPUS)) and hit.title == CORPUS[ZERO][0]
    assert RAY in {r.doc_id for r in view.related(ZERO, k=10).items}
    assert RAY not in {r.doc_id for r in kb.related(ZERO, k=10).items}
    assert view.cites(ZERO).target.title == CORPUS[ZERO][0]
    assert view.undated_excluded(since=2019) == kb.undated_excluded(since=2019) == 1  # Horovod: no year
    # a later view reads the new version
    assert kb.pinned().index_version() == second


def test_the_chat_app_answers_and_links_from_one_version(
    homes: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, first, second = homes
    service = ChatService(dmlqa.KnowledgeBase(home))
    _publish_after_retrieval(monkeypatch, home, second)
    final = list(service.stream_html(QUESTION, Filters(), use_llm=False))[-1]
    assert CORPUS[ZERO][0] in final and SECOND[ZERO][0] not in final
    assert "shards the optimizer states" not in final  # no sentence of the second version
    assert service.kb.index_version() == second
    final = list(service.stream_html(QUESTION, Filters(), use_llm=False))[-1]
    assert SECOND[ZERO][0] in final


def test_the_chat_app_does_not_retry_a_failed_answer(homes: tuple[Path, str, str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure is reported once; asking again behind the user's back hid version mix-ups."""
    home, _, _ = homes
    service = ChatService(dmlqa.KnowledgeBase(home))
    calls: list[str] = []

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append("retrieve")
        raise RuntimeError("disk went away")

    monkeypatch.setattr(answer_module, "retrieve", broken)
    out = list(service.stream_html(QUESTION, Filters(), use_llm=False))
    assert len(out) == 1 and "Traceback" not in out[0] and calls == ["retrieve"]
    with pytest.raises(RuntimeError, match="disk went away"):
        service.answer(QUESTION, Filters(), use_llm=False)
    assert calls == ["retrieve", "retrieve"]


def test_each_mcp_call_reads_one_version(homes: tuple[Path, str, str]) -> None:
    home, first, second = homes
    lib = _Library(lambda: dmlqa.KnowledgeBase(home))
    seen: list[str] = []

    def work(kb: dmlqa.KnowledgeBase) -> dict:
        seen.append(kb.index_version())
        publish(home / "index", second)  # a build lands while the tool is working
        seen.append(kb.index_version())
        return {"title": kb.document(ZERO).title}

    result = asyncio.run(lib.call(work))  # a call runs on a worker thread of its own
    assert seen == [first, first] and result.structured_content == {"title": CORPUS[ZERO][0]}
    later = asyncio.run(lib.call(lambda kb: {"version": kb.index_version()}))
    assert later.structured_content == {"version": second}


def test_a_searcher_opens_a_version_once_and_follows_publishes(homes: tuple[Path, str, str]) -> None:
    home, first, second = homes
    searcher = Searcher(dmlqa.KnowledgeBase(home).settings)
    v1 = searcher.pin()
    assert v1.name == first and searcher.pin() is v1  # CURRENT unchanged: the opened version is reused
    publish(home / "index", second)
    assert searcher.pin().name == second and v1.docs[ZERO].title == CORPUS[ZERO][0]  # v1 still readable
    # a request pinned to the old version keeps reading it
    assert searcher.search("ZeRO optimizer states", version=v1)[0].title == CORPUS[ZERO][0]
    assert not hasattr(Searcher, "version")  # no property that re-reads CURRENT on every access


# -- the front ends use the library API only -------------------------------------------------------------

#: Names that reach past :class:`dmlqa.KnowledgeBase` into the query stage's objects.
REACH_AROUNDS = {"asker", "_asker", "_asker_", "searcher", "encoder_for", "pin"}


def _attributes(path: Path) -> set[str]:
    return {node.attr for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute)}


@pytest.mark.parametrize("path", sorted((SRC / "app").glob("*.py")), ids=lambda p: p.name)
def test_front_ends_do_not_reach_into_the_asker(path: Path) -> None:
    assert _attributes(path) & REACH_AROUNDS == set(), f"{path.name} reaches past the library API"


def test_no_request_reads_the_version_twice() -> None:
    """Nothing in the library asks a searcher for "the version now" in the middle of a request: the
    query stage takes a pinned version as an argument, and only entry points pin."""
    pins: dict[str, int] = {}
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"searcher\.version\b", text), path
        n = len(re.findall(r"\.pin\(\)", text))
        if n:
            pins[str(path.relative_to(SRC))] = n
    # the entry points: the API (once per call or view), and the query stage's own when called without one
    assert set(pins) <= {"api.py", "query/answer.py", "query/related.py", "query/search.py", "query/batch.py"}, pins
