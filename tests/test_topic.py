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
from dmlqa.query.topic import (
    PROBES,
    TOPIC_SENTENCES,
    FieldCheck,
    FieldCheckError,
    about_a_named_work,
    background,
    field_check,
    names_a_work,
    nearness,
    topic_cosine,
)
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


# -- the field check ----------------------------------------------------------------------------------------


def _check(**kw: object) -> FieldCheck:
    """A check that reads the first coordinate: a question vector of (1, 0, ...) is off the field (p 0.98)."""
    data = {"model": "m", "coef": [8.0, 0.0, 0.0], "intercept": -4.0, "above": 0.9, "guard": 0.4} | kw
    return FieldCheck.from_json(data)


def test_the_field_check_refuses_a_vector_of_another_field_only_where_nearness_leaves_room() -> None:
    check = _check()
    off, on = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    assert check.probability(off) == pytest.approx(1 / (1 + np.exp(-4.0)))
    assert check.off_field(off, "m", near=0.2) and not check.off_field(on, "m", near=0.2)
    assert not check.off_field(off, "m", near=0.4)  # as near as the typical answerable question: never refused
    assert not check.off_field(off, "other-model", near=0.2)  # another embedder's vectors: another space
    assert not check.off_field(None, "m", near=0.2) and not check.off_field(np.ones(4), "m", near=0.2)
    again = FieldCheck.from_json(check.to_json())
    assert (again.model, again.intercept, again.above, again.guard) == ("m", -4.0, 0.9, 0.4)
    assert again.coef.tolist() == [8.0, 0.0, 0.0]


@pytest.mark.parametrize("data", [{"coef": "x"}, {"above": 1.5}, {"coef": []}, {"model": None, "coef": [[1.0]]}])
def test_malformed_field_check_weights_are_told(data: dict) -> None:
    with pytest.raises(FieldCheckError, match="malformed"):
        _check(**data)
    with pytest.raises(FieldCheckError, match="malformed"):
        FieldCheck.from_json({"model": "m"})


def test_a_missing_weights_file_is_told_by_name() -> None:
    from dmlqa.query.shipped import shipped_json

    with pytest.raises(FieldCheckError, match="cannot read the field check weights no-such.json"):
        shipped_json("no-such.json", FieldCheckError, "field check weights")


def test_the_shipped_field_check_is_made_for_the_bundled_embedder() -> None:
    from dmlqa.settings import BUNDLED_MODEL

    check = field_check()
    assert check.model == f"bundled:{BUNDLED_MODEL}" or check.model.endswith(BUNDLED_MODEL)
    assert len(check.coef) == 384 and 0.5 <= check.above < 1.0 and check.guard > default_selector().off_topic_margin


@pytest.mark.parametrize(("question", "other_field"), [
    # neighbouring fields, whose words the corpus uses: none is a training question
    ("How do I rebase my feature branch onto main in git?", True),
    ("How do I compute a confidence interval for a mean?", True),
    ("How do I drop duplicate rows from a pandas DataFrame?", True),
    ("How does ZeRO partition the optimizer states?", False),
    ("What is Horovod?", False),
    ("How does ring allreduce work?", False),
    ("which papers reduce pipeline bubbles?", False),
    ("How do I pin each Horovod process to one GPU?", False),
])
def test_the_shipped_field_check_tells_neighbouring_fields_in_a_small_corpus(home: Path, question: str,
                                                                              other_field: bool) -> None:
    searcher = Searcher(load_settings(home))
    version = searcher.pin()
    options = AskOptions(use_llm=False)
    pool, _ = scored_pool(searcher, version, question, retrieve(searcher, version, question, options), options)
    near = nearness(version, pool.cosines, functools.partial(candidate_cosines, searcher, version))
    assert field_check().off_field(pool.qvec, version.meta["model"], near) is other_field


def test_a_question_of_another_field_is_refused_before_either_answerer(home: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """In this corpus of a few dozen sentences a neighbouring field's question is already under the off-topic cut;
    here the check is one that reads the direction of one on-topic question's real vector, so that only it can
    refuse that question: refused with the nearest sources and its own notice, the LLM not asked."""
    import dmlqa.query.topic as topic

    searcher = Searcher(load_settings(home))
    version = searcher.pin()
    asked = "How does ring allreduce work?"
    direction = searcher.embed_query(asked, version).astype(np.float64)
    check = FieldCheck(version.meta["model"], 40.0 * direction, -36.0, 0.9, 10.0)
    monkeypatch.setattr(topic, "field_check", lambda: check)
    with FakeOpenAI() as server:
        server.queue(Reply(text="ZeRO-3 partitions the parameters, gradients and optimizer states [1]."))
        asker = Asker(searcher, LLMBackend(LLMConfig(base_url=server.url, model="fake-model", timeout=60.0)))
        a = asker.ask(asked)
        assert a.refused and a.answer.startswith(REFUSAL) and not server.requests
        assert a.notice == "the question is about another field"
        assert a.citations and all(c.quote == "" for c in a.citations)
        ok = asker.ask("How does ZeRO partition the optimizer states?")
        assert not ok.refused and ok.backend == "llm:fake-model" and len(server.requests) == 1
        # asked after another question in a conversation, it is about the answer before: the check stays silent
        server.queue(Reply(text="Ring allreduce passes chunks around a ring of workers [1]."))
        after = asker.ask(asked, previous="What is Horovod?")
        assert not after.refused and after.backend == "llm:fake-model" and len(server.requests) == 2


def test_a_question_naming_a_work_the_index_holds_is_of_its_field(home: Path) -> None:
    """"How do I cite the ZeRO paper?" reads like a question about writing, but ZeRO's paper is in the index (its
    title holds the name): the field check does not refuse it. A name no title or address holds does not count."""
    version = Searcher(load_settings(home)).pin()
    assert names_a_work(version, "How do I cite the ZeRO paper?")
    assert names_a_work(version, "What license does Horovod use?")  # a repository's address names it
    assert names_a_work(version, "How do I cite Ray Train?")  # a title's first word, an English word too
    assert not names_a_work(version, "How do I resolve a merge conflict in git?")
    assert not names_a_work(version, "Is the RTX 4060 good enough for Cyberpunk 2077?")


@pytest.mark.parametrize(("question", "about"), [
    ("Does Horovod's pip install pull in MXNet and Keras?", True),  # its name, and two words of its passage
    ("What does horovodrun -np 4 do with train.py in Horovod?", True),
    ("Which recipe does GPipe's cookbook recommend for banana bread?", False),  # its name, but none of its words
    ("Who won the Horovod football cup last night?", False),
    ("Who won the Ray Charles award?", False),  # "Ray" is a title's first word, "Ray Charles" names no work
    ("How does pip install keras for mxnet?", False),  # its words, but no work's name
])
def test_a_question_about_a_named_work_names_it_and_shares_its_words(home: Path, question: str, about: bool) -> None:
    """No off-topic cut refuses a question that names a work the index holds and shares words with a passage of
    it: over the snapshot "What does JetLag's generic app run ...?" sits as far from its terse README as an
    everyday question from the corpus (tests/test_e2e_snapshot.py asks it)."""
    searcher = Searcher(load_settings(home))
    version = searcher.pin()
    hits = retrieve(searcher, version, question, AskOptions(use_llm=False))
    assert about_a_named_work(version, question, hits) is about


def test_an_off_topic_question_naming_a_work_by_the_way_is_still_refused(home: Path) -> None:
    asker = Asker(Searcher(load_settings(home)), None)
    question = "Which recipe does GPipe's cookbook recommend for banana bread?"
    assert default_selector().off_topic(_nearness(Searcher(load_settings(home)), question))
    a = asker.ask(question)
    assert a.refused and a.notice == "no passage is about this question"
