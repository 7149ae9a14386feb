"""LLM replies as real local models send them, through the real ``openai`` client against tests/fake_openai.py.

Reasoning (``<think>`` blocks, ``reasoning_content``/``reasoning`` deltas) never reaches the answer or the
stream, however the deltas cut it; every citation style becomes the answer's own ``[n]``; markers naming
no passage are removed and flagged; marker-less answers are attributed or flagged; ``dmlqa eval --llm``
scores an LLM backend.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply
from test_index_search import build_index
from typer.testing import CliRunner

from dmlqa.models import Hit
from dmlqa.query.citations import REFUSAL_PREFIX, check_citations
from dmlqa.query.llm import LLMBackend, LLMConfig, LLMError
from dmlqa.query.reasoning import ReasoningFilter

RING = "Ring all-reduce arranges the workers in a logical ring, so its bandwidth cost is independent of the workers."
ZERO = "ZeRO partitions the optimizer states, gradients and parameters across the data-parallel ranks."
PIPE = "GPipe splits a model into stages and pipelines micro-batches through them to keep accelerators busy."
FILLER = [
    "Horovod uses MPI to launch one process per GPU.",
    "Parameter servers hold the model while workers push gradients.",
    "Mixed precision keeps a master copy of the weights in fp32.",
    "Tensor parallelism splits matrix multiplications across devices.",
    "Gradient accumulation sums gradients over several micro-batches.",
]
REASONING = (
    "Okay, so the user asks how ZeRO saves memory. Let me look: source 2 says it partitions states [2]. "
    "I should also mention the ring from source 1 [1]. SECRET-THOUGHT"
)
ANSWER = "ZeRO partitions the optimizer states across data-parallel ranks [2]. GPipe pipelines micro-batches [3]."
CHECKED = "ZeRO partitions the optimizer states across data-parallel ranks [1]. GPipe pipelines micro-batches [2]."


def hit(n: int, text: str) -> Hit:
    return Hit(rank=n, score=1.0, doc_id=f"doc{n}", url=f"https://example.org/{n}", title=f"Paper {n}", page=None,
               section=None, text=text, chunk_id=f"doc{n}#0")


PASSAGES = [hit(i + 1, t) for i, t in enumerate([RING, ZERO, PIPE, *FILLER])]  # 8 passages
MARKER = re.compile(r"\[(\d+)\]")


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=["fake-model"]) as fake:
        yield fake


def backend(server: FakeOpenAI, **kw: Any) -> LLMBackend:
    # Generous by default: a busy machine can be slow to answer.
    return LLMBackend(LLMConfig(base_url=server.url, model="fake-model", timeout=kw.pop("timeout", 60.0), **kw))


def no_reasoning(text: str) -> None:
    """Nothing of REASONING, and no piece of a think tag, is in ``text``."""
    assert "SECRET" not in text and "Okay, so" not in text and "the user" not in text
    assert not re.search(r"</?th|ink>|nking>", text), text


def markers_are_citations(checked_text: str, citations: tuple) -> None:
    """The text's only markers are [n] naming one of its citations; no other citation style is left."""
    numbers = {int(n) for n in MARKER.findall(checked_text)}
    assert numbers and numbers <= {c.n for c in citations}
    assert not re.search(r"【|】|\^|\(\s*source|\[\s*source|\[\s*\d+\s*[,\-–;]", checked_text, re.IGNORECASE)


# -- reasoning -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 11])
def test_think_block_split_anywhere_never_streams(server: FakeOpenAI, size: int) -> None:
    """<think>…</think> cut every ``size`` characters: no delta holds reasoning or a piece of a tag."""
    server.queue(Reply(text=f"<think>\n{REASONING}\n</think>\n\n{ANSWER}", chunk_size=size))
    deltas = list(backend(server).stream("How does ZeRO save memory?", PASSAGES))
    for d in deltas:
        no_reasoning(d)
    assert "".join(deltas) == ANSWER
    assert len(deltas) > 1  # still streamed, not one block at the end


@pytest.mark.parametrize("size", [1, 3, 8])
def test_close_tag_without_opening_tag_drops_what_came_before(server: FakeOpenAI, size: int) -> None:
    """DeepSeek-R1-style templates open the block in the prompt: the stream starts inside the reasoning."""
    server.queue(Reply(text=f"{REASONING}\n</think>\n\n{ANSWER}", chunk_size=size))
    llm = backend(server)
    deltas = list(llm.stream("q?", PASSAGES))
    for d in deltas:
        no_reasoning(d)
    assert "".join(deltas) == ANSWER
    # The endpoint is now known to open blocks in the template: even reasoning that opens like an answer
    # (a cited first sentence) is held back until its </think>.
    sneaky = "ZeRO is in source 2 [2]. Then I check source 3 [3]. SECRET-THOUGHT"
    server.queue(Reply(text=f"{sneaky}</think>{ANSWER}", chunk_size=size))
    deltas = list(llm.stream("q?", PASSAGES))
    assert "".join(deltas) == ANSWER and not any("SECRET" in d for d in deltas)


def test_reasoning_content_deltas_are_never_shown(server: FakeOpenAI) -> None:
    """vLLM/llama.cpp/DeepSeek send reasoning in ``reasoning_content``; Ollama and newer vLLM in ``reasoning``."""
    for field in ("reasoning_content", "reasoning"):
        server.queue(Reply(text=ANSWER, chunk_size=6, reasoning=[REASONING[i : i + 9] for i in range(0, 90, 9)],
                           reasoning_field=field))
        deltas = list(backend(server).stream("q?", PASSAGES))
        for d in deltas:
            no_reasoning(d)
        assert "".join(deltas) == ANSWER
    # Both fields in one delta, content arriving while reasoning still trickles in.
    server.queue(Reply(events=[
        {"reasoning_content": "Okay, so the user asks. SECRET", "content": None},
        {"reasoning_content": " more SECRET", "content": "ZeRO partitions the optimizer states "},
        {"reasoning": "SECRET", "content": "across data-parallel ranks [2]."},
    ]))
    answer = backend(server).complete("q?", PASSAGES)
    assert answer == "ZeRO partitions the optimizer states across data-parallel ranks [2]."


def test_long_reasoning_keeps_the_stream_alive(server: FakeOpenAI) -> None:
    """Reasoning deltas are not shown, but they count as the model working: no 'no reply' timeout."""
    # 3 s of reasoning against a 2 s "no reply" limit, with gaps (0.1 s) far inside it even on a busy machine.
    server.queue(Reply(text=ANSWER, reasoning=["thinking SECRET "] * 30, delay_between=0.1))
    assert backend(server, timeout=2.0).complete("q?", PASSAGES) == ANSWER


def test_a_reply_that_is_only_reasoning_is_an_error(server: FakeOpenAI) -> None:
    # An unclosed <think> at the start: the model ran out of tokens while thinking.
    server.queue(Reply(text=f"<think>{REASONING} and so on", chunk_size=5, finish_reason="length"))
    with pytest.raises(LLMError, match=r"sent only reasoning and no answer: model 'fake-model' ran out of tokens "
                                       r"\(max_tokens 512\) after \d+ characters of reasoning"):
        list(backend(server).stream("q?", PASSAGES))
    server.queue(Reply(chunks=[], reasoning=["Hmm SECRET"]))
    with pytest.raises(LLMError, match="sent only reasoning and no answer: model 'fake-model' stopped"):
        backend(server).complete("q?", PASSAGES)


def test_uncited_reasoning_opening_is_held_and_plain_text_still_arrives() -> None:
    """The filter alone: what it cannot yet tell from reasoning is held, never lost."""
    f = ReasoningFilter()
    assert f.feed("Let me think about ZeRO. ") == "" and f.feed("It partitions states. ") == ""
    assert f.flush() == "Let me think about ZeRO. It partitions states. "  # no </think> came: it was the answer
    f = ReasoningFilter()
    shown = f.feed("ZeRO partitions the optimizer states. ") + f.feed("GPipe pipelines micro-batches. ")
    assert shown == "ZeRO partitions the optimizer states. GPipe pipelines micro-batches. "  # two plain sentences
    f = ReasoningFilter()
    assert f.feed("ZeRO<thi") + f.feed("nk>SECRET</th") + f.feed("ink> shards state [1].") + f.flush() == (
        "ZeRO shards state [1]."
    )


def test_checked_answer_drops_reasoning_whatever_the_stream_showed() -> None:
    assert check_citations(f"<think>{REASONING}</think>\n{ANSWER}", PASSAGES).text == CHECKED
    assert check_citations(f"{REASONING}</think>{ANSWER}", PASSAGES).text == CHECKED
    assert check_citations(f"{ANSWER}<think>{REASONING}", PASSAGES).text == CHECKED


# -- citation styles -----------------------------------------------------------------------------------

STYLES = [
    # (reply, checked text); passages 2 (ZeRO) and 3 (GPipe) become [1] and [2] in order of first use.
    ("ZeRO partitions optimizer states [2, 3]. GPipe pipelines micro-batches [3].",
     "ZeRO partitions optimizer states [1][2]. GPipe pipelines micro-batches [2]."),
    ("ZeRO partitions optimizer states [2][3]. GPipe pipelines micro-batches [3].",
     "ZeRO partitions optimizer states [1][2]. GPipe pipelines micro-batches [2]."),
    ("ZeRO partitions optimizer states [2-3]. Ring all-reduce arranges the workers in a ring [1–3].",
     "ZeRO partitions optimizer states [1][2]. Ring all-reduce arranges the workers in a ring [1][2][3]."),
    ("ZeRO partitions optimizer states 【2】. GPipe pipelines micro-batches 【3†source】.", CHECKED_S := (
        "ZeRO partitions optimizer states [1]. GPipe pipelines micro-batches [2].")),
    ("ZeRO partitions optimizer states [Source 2]. GPipe pipelines micro-batches (Source 3).", CHECKED_S),
    ("ZeRO partitions optimizer states [source: 2]. GPipe pipelines micro-batches [Sources 3].", CHECKED_S),
    ("ZeRO partitions optimizer states^2. GPipe pipelines micro-batches.^3", CHECKED_S),
    ("ZeRO partitions optimizer states^[2]. GPipe pipelines micro-batches [^3].", CHECKED_S),
    ("ZeRO partitions optimizer states [^2]. GPipe pipelines micro-batches [^3].\n\n"
     "[^2]: ZeRO paper\n[^3]: GPipe paper", CHECKED_S),
    ("ZeRO partitions optimizer states [2]. GPipe pipelines micro-batches [3].\n\nSources:\n[2] Paper 2\n[3] Paper 3",
     CHECKED_S),
]


@pytest.mark.parametrize(("reply", "expected"), STYLES)
def test_citation_styles_become_the_answers_own_markers(server: FakeOpenAI, reply: str, expected: str) -> None:
    server.queue(Reply(text=reply, chunk_size=3))  # markers split across deltas
    checked = check_citations(backend(server).complete("q?", PASSAGES), PASSAGES)
    assert checked.text == expected
    markers_are_citations(checked.text, checked.citations)
    assert not [f for f in checked.flags if not f.startswith("weak citation")]


def test_marker_beyond_the_passages_is_removed_and_flagged(server: FakeOpenAI) -> None:
    server.queue(Reply(text="ZeRO partitions optimizer states 【2】【9】. GPipe pipelines micro-batches [7-9].",
                       chunk_size=4))
    checked = check_citations(backend(server).complete("q?", PASSAGES), PASSAGES)  # 8 passages
    assert checked.text == "ZeRO partitions optimizer states [1]. GPipe pipelines micro-batches [2][3]."
    assert checked.flags.count("removed citation [9]: no such source") == 1
    assert [c.url for c in checked.citations] == [f"https://example.org/{n}" for n in (2, 7, 8)]
    markers_are_citations(checked.text, checked.citations)


def test_answer_without_markers_is_attributed_or_flagged(server: FakeOpenAI) -> None:
    reply = ("ZeRO partitions the optimizer states and gradients across data-parallel ranks. "
             "GPipe pipelines micro-batches through the stages of a model. "
             "It was first released by a large search company in 2019.")
    server.queue(Reply(text=reply, chunk_size=5))
    checked = check_citations(backend(server).complete("q?", PASSAGES), PASSAGES)
    assert checked.text == (
        "ZeRO partitions the optimizer states and gradients across data-parallel ranks [1]. "
        "GPipe pipelines micro-batches through the stages of a model [2]. "
        "It was first released by a large search company in 2019."
    )
    assert [c.url for c in checked.citations] == ["https://example.org/2", "https://example.org/3"]
    assert checked.unsupported == ("It was first released by a large search company in 2019.",)
    assert "no citation markers in the answer: 2 of 3 sentences attributed to sources by word overlap" in checked.flags
    assert checked.citations[0].quote == ZERO  # the quote is the supporting sentence


def test_reply_with_reasoning_and_odd_markers_end_to_end(server: FakeOpenAI) -> None:
    """All at once, cut into 2-character deltas: what streams and what is kept are both clean."""
    reply = f"<think>{REASONING}</think>\n\nZeRO partitions optimizer states 【2†source】. GPipe splits models [3, 12]."
    server.queue(Reply(text=reply, chunk_size=2, reasoning=["SECRET via field"]))
    deltas = list(backend(server).stream("q?", PASSAGES))
    for d in deltas:
        no_reasoning(d)
    checked = check_citations("".join(deltas), PASSAGES)
    assert checked.text == "ZeRO partitions optimizer states [1]. GPipe splits models [2]."
    assert checked.flags == ("removed citation [12]: no such source",)
    markers_are_citations(checked.text, checked.citations)


# -- through the answerer and `dmlqa eval --llm` -----------------------------------------------------------

runner = CliRunner()
SOURCE = re.compile(r'<source n="(\d+)"[^>]*>\n(.*?)\n</source>', re.DOTALL)
QUESTION = re.compile(r"<question>\n(.*?)\n</question>", re.DOTALL)


def responder(body: Any) -> Reply:
    """A 'model' that thinks aloud, then answers from source 1 in an odd citation style (or refuses)."""
    user = body["messages"][1]["content"]
    question = QUESTION.search(user).group(1)
    if "egg" in question or "meaning of life" in question:
        return Reply(text=f"<think>Nothing about that. SECRET</think>{REFUSAL_PREFIX}.", chunk_size=4)
    sources = dict(SOURCE.findall(user))
    first = re.split(r"(?<=[.!?])\s", sources["1"])[0].rstrip(".")
    return Reply(text=f"{first} 【1†source】. It is also in source nine [9].", chunk_size=3,
                 reasoning=["Okay, the user asks. ", "SECRET plan. "])


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, encoder) -> Path:  # noqa: ANN001
    h = tmp_path_factory.mktemp("llm-styles-home")
    build_index(h, encoder)
    return h


def test_asker_streams_no_reasoning_and_keeps_only_its_citations(home: Path) -> None:
    from dmlqa.query.answer import Asker
    from dmlqa.query.search import Searcher
    from dmlqa.settings import load_settings

    with FakeOpenAI(models=["fake-model"], responder=responder) as server:
        asker = Asker(Searcher(load_settings(home)), backend(server))
        stream = asker.stream("How does ZeRO partition optimizer states?")
        deltas = list(stream.deltas)
        answer = stream.result
    for d in deltas:
        no_reasoning(d)
    assert answer.backend == "llm:fake-model" and not answer.refused
    markers_are_citations(answer.answer, answer.citations)
    assert "removed citation [9]: no such source" in answer.flags
    assert answer.citations[0].url == "https://arxiv.org/abs/1910.02054"


def write_questions(path: Path) -> Path:
    rows = [
        {"id": "1", "question": "How does ZeRO partition optimizer states?", "answerable": True,
         "gold_urls": ["https://arxiv.org/pdf/1910.02054v3"], "keywords": ["partition"]},
        {"id": "2", "question": "What is the pipeline bubble in GPipe?", "answerable": True,
         "gold_urls": ["http://arxiv.org/abs/1811.06965"], "keywords": []},
        # off-topic in common words only: refused as off-topic before the LLM is asked (tests/test_topic.py), as
        # a rare word such as "boil" would be by name (tests/test_refuse_by_name.py)
        {"id": "3", "question": "What is the meaning of life?", "answerable": False, "gold_urls": [],
         "keywords": []},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_cli_eval_llm_scores_the_llm_backend(home: Path, tmp_path: Path) -> None:
    qfile = write_questions(tmp_path / "dev.jsonl")
    with FakeOpenAI(models=["fake-model"], responder=responder) as server:
        env = {"DMLQA_LLM_BASE_URL": server.url, "DMLQA_LLM_MODEL": "fake-model", "DMLQA_LLM_TIMEOUT": "10"}
        r = runner.invoke(app(), ["--home", str(home), "eval", "--llm", "--questions", str(qfile), "--json"], env=env)
        assert r.exit_code == 0, r.output
        asked = [QUESTION.search(q.body["messages"][1]["content"]).group(1) for q in server.requests]
    s = json.loads(r.stdout)
    questions = [json.loads(line) for line in qfile.read_text().splitlines()]
    first = next(q["question"] for q in questions if q.get("answerable", True))  # the untimed warm-up
    assert asked == [first, *(q["question"] for q in questions if q["answerable"])]  # the off-topic one: not asked
    assert s["backend"] == "llm:fake-model" and s["fallbacks"] == 0 and s["retrieval"] == "hybrid"
    assert s["answerable"] == 2 and s["unanswerable"] == 1
    assert s["recall@1"] == 1.0 and s["citation_hit_rate"] == 1.0 and s["keyword_hit_rate"] == 1.0
    assert s["refusal_accuracy"] == 1.0 and s["false_refusal_rate"] == 0.0
    assert s["answers_with_dangling_markers"] == 0
    assert s["removed_citations"] == 2  # the invented [9] of each answerable question
    assert s["median_words"] > 0 and s["latency_ms_p95"] > 0

    # Plain table output works too.
    with FakeOpenAI(models=["fake-model"], responder=responder) as server:
        env = {"DMLQA_LLM_BASE_URL": server.url, "DMLQA_LLM_MODEL": "fake-model"}
        r = runner.invoke(app(), ["--home", str(home), "eval", "--llm", "--questions", str(qfile)], env=env)
    assert r.exit_code == 0 and "llm:fake-model" in r.stdout and "citation_hit_rate" in r.stdout


def test_cli_eval_llm_needs_a_working_endpoint(home: Path, tmp_path: Path) -> None:
    qfile = write_questions(tmp_path / "dev.jsonl")
    r = runner.invoke(app(), ["--home", str(home), "eval", "--llm", "--questions", str(qfile)],
                      env={"DMLQA_LLM_BASE_URL": "", "DMLQA_LLM_MODEL": ""})
    assert r.exit_code == 1 and "--llm needs an LLM endpoint" in r.output
    with FakeOpenAI(models=["other-model"]) as server:  # the model is not served: fail at once, not per question
        env = {"DMLQA_LLM_BASE_URL": server.url, "DMLQA_LLM_MODEL": "fake-model"}
        r = runner.invoke(app(), ["--home", str(home), "eval", "--llm", "--questions", str(qfile)], env=env)
        assert len(server.requests) == 1
    assert r.exit_code == 1 and "LLM backend failed on a first question" in r.output
    assert "model 'fake-model' not found" in r.output
    # --no-llm scores the extractive answerer even with an LLM set.
    r = runner.invoke(app(), ["--home", str(home), "eval", "--no-llm", "--questions", str(qfile), "--json"],
                      env={"DMLQA_LLM_BASE_URL": "http://127.0.0.1:9/v1", "DMLQA_LLM_MODEL": "m"})
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["backend"] == "extractive" and s["fallbacks"] == 0


def app():  # noqa: ANN201 - imported late: the CLI module is heavy
    from dmlqa.app.cli import app as cli_app

    return cli_app
