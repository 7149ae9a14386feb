"""Off-topic questions (dmlqa.query.topic): a question the knowledge base is not about is refused before
either answerer, measured against the version's own background so that the cut fitted on the snapshot
holds in a corpus of a few dozen sentences. The index is the shared fixture corpus with the real encoder."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from fake_openai import FakeOpenAI, Reply
from test_index_search import build_index

from dmlqa.query.answer import REFUSAL, Asker, AskOptions, candidate_cosines, retrieve, scored_pool
from dmlqa.query.llm import LLMBackend, LLMConfig
from dmlqa.query.search import Searcher
from dmlqa.query.selector import default_selector
from dmlqa.query.topic import PROBES, TOPIC_SENTENCES, background, nearness, topic_cosine
from dmlqa.settings import load_settings


def test_nearness_is_the_mean_of_the_best_few_cosines() -> None:
    assert TOPIC_SENTENCES == 2
    assert topic_cosine(np.array([0.1, 0.7, 0.2, 0.5])) == pytest.approx(0.6)
    assert topic_cosine(np.array([0.4])) == pytest.approx(0.4) and topic_cosine(np.zeros(0)) == 0.0


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, encoder) -> Path:  # noqa: ANN001
    h = tmp_path_factory.mktemp("topic-home")
    build_index(h, encoder)
    return h


def _nearness(searcher: Searcher, question: str) -> float:
    version = searcher.pin()
    options = AskOptions(use_llm=False)
    pool, _ = scored_pool(searcher, version, question, retrieve(searcher, version, question, options), options)
    return nearness(version, pool.cosines, functools.partial(candidate_cosines, searcher, version))


def test_the_background_is_the_versions_own_and_worked_out_once(home: Path) -> None:
    """In a corpus of a few dozen sentences everyday questions meet nothing near (the snapshot's 27,000
    give them 0.3); the second call reads it from the version's cache."""
    searcher = Searcher(load_settings(home))
    version = searcher.pin()
    asked: list[str] = []

    def cosines_of(question: str) -> np.ndarray:
        asked.append(question)
        return candidate_cosines(searcher, version, question)

    first = background(version, cosines_of)
    assert -0.1 < first < 0.15 and asked == list(PROBES) and len(PROBES) >= 10
    assert background(version, cosines_of) == first and len(asked) == len(PROBES)


@pytest.mark.parametrize(("question", "on_topic"), [
    ("How does ZeRO partition the optimizer states?", True),
    ("What is Horovod?", True),
    ("How does ring allreduce work?", True),
    ("which papers reduce pipeline bubbles?", True),
    ("who won the football match last night?", False),
    ("how do I make bread?", False),
])
def test_the_shipped_margin_tells_on_topic_questions_in_a_small_corpus(home: Path, question: str,
                                                                       on_topic: bool) -> None:
    """The margin was fitted on the snapshot; over this corpus's own background it still passes questions
    the corpus holds a sentence or two about, and refuses the everyday ones."""
    assert default_selector().off_topic(_nearness(Searcher(load_settings(home)), question)) is not on_topic


def test_an_off_topic_question_is_refused_before_either_answerer(home: Path) -> None:
    """Refused with the nearest sources, the LLM not asked; an on-topic question still reaches it."""
    with FakeOpenAI() as server:
        server.queue(Reply(text="ZeRO-3 partitions the parameters, gradients and optimizer states [1]."))
        llm = LLMBackend(LLMConfig(base_url=server.url, model="fake-model", timeout=60.0))
        asker = Asker(Searcher(load_settings(home)), llm)
        a = asker.ask("who won the football match last night?")
        assert a.refused and a.answer.startswith(REFUSAL) and not server.requests
        assert a.notice == "no passage is about this question"
        assert a.retrieved and a.citations and all(f"[{c.n}] {c.title}" in a.answer for c in a.citations)
        ok = asker.ask("How does ZeRO partition the optimizer states?")
        assert not ok.refused and ok.backend == "llm:fake-model" and len(server.requests) == 1
