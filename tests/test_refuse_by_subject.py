"""Refusal by subject (dmlqa.query.subjects): a question asking what a thing named in plain lower-case words is,
or how it works, is refused naming it when no document writes that phrase; a phrase the index holds, or any
question whose subject is a property ("the default ...") or whose verb the check does not know, is left alone.

The index of :mod:`test_refuse_by_name` (passages written there, random vectors: the check reads only passage
texts, titles and addresses), and the shared fixture corpus with the real encoder for the asker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, Reply
from test_index_search import build_index
from test_refuse_by_name import _index

from dmlqa.index.versions import IndexVersion
from dmlqa.query.answer import Asker
from dmlqa.query.llm import LLMBackend, LLMConfig
from dmlqa.query.names import unknown_names
from dmlqa.query.search import Searcher
from dmlqa.query.subjects import asked_subject, unknown_subject
from dmlqa.settings import load_settings


@pytest.mark.parametrize(("question", "subject"), [
    ("What is tree attention and how does it parallelize decoding across GPUs?", "tree attention"),
    ("What is a rail-optimized network topology for GPU clusters?", "rail-optimized network topology"),
    ("What's sequence packing?", "sequence packing"),
    ("What are worker nodes for?", "worker nodes"),
    ("How does soft MoE avoid dropping tokens?", "soft MoE"),  # a short acronym may end it
    ("How does pipeline parallelism work?", "pipeline parallelism"),
    ("how do gradient buckets reduce latency?", "gradient buckets"),
    ("How does expert choice routing avoid load imbalance?", "expert choice routing"),  # the longer first
    ("How is the critical batch size used to pick a learning rate?", "critical batch size"),  # "the", then a verb
    ("How does in-network aggregation on programmable switches speed up allreduce?", "in-network aggregation"),
    ("How do gradient buckets in DDP help overlap communication?", "gradient buckets"),
    ("Does liquid cooling let GPU nodes sustain higher clocks?", "liquid cooling"),  # whether it does something
    ("Do gradient buckets reduce latency?", "gradient buckets"),
])
def test_the_subject_of_what_is_and_how_does_questions(question: str, subject: str) -> None:
    assert asked_subject(question) == subject


@pytest.mark.parametrize("question", [
    "What is the default gradient bucket size?",  # "the": a property, which the corpus may word otherwise
    "What's a typical hourly price for renting a GPU node?",  # words of judgement, not a thing's name
    "How does sharding work on TPUs?",  # one word; "work" is the verb, never part of the subject
    "How do workers communicate in a parameter server?",  # a verb the check does not know: X ends nowhere
    "What are gradients accumulated for?",  # a participle: "accumulated" is the verb
    "What is parallelism?",  # one word: the name check's
    "How does elastic RayExecutor differ from the non-elastic one?",  # a name: the name check's
    "Which paper introduced tree attention?",  # not a what-is or how-does question
    "What is tree attention about in this paper, compared with ring attention and more?",  # "about": no end
    "How is the learning rate warmed up?",  # "the" with a verb the check does not know
    "How does data parallelism on many nodes behave?",  # a preposition, but no verb of the list after it
    "How is pipeline parallelism on TPUs used?",  # the preposition form is for "how does/do" only
    "How is a pipeline schedule on TPUs used?",
    "Does the optimizer state let me resume training?",  # "the": a property of a thing
    "Do I need pipeline parallelism for a 7B model?",  # "I": the asker, no subject
    "Does data parallelism need more memory?",  # a verb the check does not know
])
def test_no_subject_is_read_where_the_question_does_not_name_a_thing(question: str) -> None:
    assert asked_subject(question) is None


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> IndexVersion:
    v = _index(tmp_path_factory.mktemp("subjects"))
    yield v
    v.close()


@pytest.mark.parametrize("question", [
    "What is tensor parallelism in Megatron-LM?",  # "... across GPUs with tensor parallelism."
    "What is continuous batching and how does vLLM use it?",
    "What are worker nodes for?",  # "onto worker nodes": a plural written as the passage writes it
    "How does all-to-all communication work in Ulysses?",  # the hyphens as the passage writes them
    "What are parallelization strategies?",  # "searches parallelization strategies"
])
def test_a_subject_some_passage_writes_is_no_refusal(version: IndexVersion, question: str) -> None:
    assert unknown_subject(version, question) == []


@pytest.mark.parametrize(("question", "subject"), [
    ("What is tree attention and how does it parallelize decoding across GPUs?", "tree attention"),
    ("How does soft MoE avoid dropping tokens?", "soft MoE"),
    ("What are parallelization trees?", "parallelization trees"),  # each word known, never together
])
def test_a_subject_no_passage_writes_is_unknown(version: IndexVersion, question: str, subject: str) -> None:
    assert [u.name for u in unknown_subject(version, question)] == [subject]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, encoder) -> Path:  # noqa: ANN001
    h = tmp_path_factory.mktemp("subject-home")
    build_index(h, encoder)
    return h


def test_the_asker_refuses_a_subject_no_document_writes_and_names_it(home: Path) -> None:
    searcher = Searcher(load_settings(home))
    question = "What is tree attention and how does it speed up decoding?"
    assert unknown_names(searcher.pin(), question) == []  # no name by its shape: the name check lets it pass
    a = Asker(searcher).ask(question)
    assert a.refused and a.answer.startswith("The knowledge base has nothing on tree attention; nearest: [1] ")
    assert a.citations and all(c.quote == "" for c in a.citations)
    known = Asker(searcher).ask("What is pipeline parallelism in GPipe?")  # GPipe's title writes it
    assert "nothing on pipeline parallelism" not in known.answer


def test_the_llm_is_not_asked_about_a_subject_no_document_writes(home: Path) -> None:
    with FakeOpenAI() as server:
        server.queue(Reply(text="Tree attention splits decoding across GPUs [1]."))
        llm = LLMBackend(LLMConfig(base_url=server.url, model="fake-model", timeout=60.0))
        a = Asker(Searcher(load_settings(home)), llm).ask("What is tree attention and how does it speed up decoding?")
        assert a.refused and "nothing on tree attention" in a.answer and not server.requests
