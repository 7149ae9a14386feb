"""Typos in plain words (dmlqa.query.spelling): read as the word meant, never refused as a name no document mentions.

The index here is built from passages written in the test (the correction reads only the BM25 lexicon), the
front-end test uses the shared fixture corpus with the real encoder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_index_search import build_index

from dmlqa.index.versions import IndexVersion, publish, write_version
from dmlqa.models import Block, Chunk, Document
from dmlqa.query.answer import Asker
from dmlqa.query.names import unknown_names
from dmlqa.query.search import Searcher
from dmlqa.query.spelling import corrected, edits
from dmlqa.settings import load_settings

#: "pipeline", "parallelism" and "optimizer" in five passages or more: the index's own words; "pipelime" (a
#: made-up product one edit from "pipeline") in one.
PASSAGES = [
    "GPipe splits the pipeline into stages and feeds micro-batches through the pipeline.",
    "PipeDream keeps the pipeline full with one forward and one backward pass in turn.",
    "A pipeline bubble is the idle time of pipeline parallelism at the start and end of a batch.",
    "Interleaved schedules shrink the pipeline bubble of pipeline parallelism.",
    "Zero bubble pipeline parallelism splits the backward pass in two.",
    "Tensor parallelism and pipeline parallelism combine with data parallelism; the optimizer is sharded.",
    "ZeRO partitions the optimizer states across data-parallel ranks.",
    "The optimizer step runs after the gradients are reduced.",
    "An optimizer such as Adam keeps two moments per parameter.",
    "Offloading the optimizer to the CPU frees GPU memory.",
    "Pipelime schedules stages on spare GPUs.",
]


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> IndexVersion:
    home = tmp_path_factory.mktemp("spelling")
    url = "https://example.org/pipelines"
    doc = Document(doc_id="web:0", url=url, title="Pipelines", kind="docs", content_type="html",
                   blocks=tuple(Block(text=p) for p in PASSAGES))
    chunks, offset = [], 0
    for i, p in enumerate(PASSAGES):
        chunks.append(Chunk(chunk_id=f"web:0#{i}", doc_id="web:0", url=url, title="Pipelines", text=p, page=None,
                            section=None, start=offset, end=offset + len(p)))
        offset += len(p) + 2
    vectors = np.random.default_rng(0).normal(size=(len(chunks), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    name = write_version(home / "index", [doc], chunks, vectors, {"model": "bundled:all-MiniLM-L6-v2", "failed": []},
                         ann_threshold=1000)
    publish(home / "index", name)
    v = IndexVersion(home / "index" / "versions" / name)
    yield v
    v.close()


def test_edits_are_one_letter_dropped_added_changed_or_two_swapped() -> None:
    near = edits("shrad")
    assert {"shad", "shard", "shrads", "shred"} <= near  # dropped, swapped, added, changed
    assert "shrad" not in near and "hard" not in near  # two edits away


@pytest.mark.parametrize(("question", "read", "fixes"), [
    ("what is pipline parallelism", "what is pipeline parallelism", [("pipline", "pipeline")]),
    ("how is the optimzer sharded in ZeRO?", "how is the optimizer sharded in ZeRO?", [("optimzer", "optimizer")]),
    ("Pipline parallelism?", "Pipeline parallelism?", [("Pipline", "Pipeline")]),  # opening the question
    # the index uses neither word: the one frequent English word a letter away
    ("why do ranks never recieve the gradients?", "why do ranks never receive the gradients?",
     [("recieve", "receive")]),
])
def test_a_misspelt_word_is_read_as_the_word_the_index_uses(version: IndexVersion, question: str, read: str,
                                                             fixes: list[tuple[str, str]]) -> None:
    assert corrected(version, question) == (read, fixes)


@pytest.mark.parametrize("question", [
    "How does pipelime schedule stages?",  # one passage uses it: a name, though "pipeline" is a letter away
    "Does torchtitan shard the optimizer?",  # nothing a letter away: a name, for the name check
    "How does DeepSpeed use Piplines?",  # capitalised inside the question: it may be a name
    "how does shrad work?",  # too short to tell from a product's name ("dstack", "kueue")
    "what is pipeline parallelism",  # spelt right
])
def test_names_and_short_words_are_left_as_written(version: IndexVersion, question: str) -> None:
    assert corrected(version, question) == (question, [])


def test_the_corrected_question_names_nothing_unknown(version: IndexVersion) -> None:
    question = "what is pipline parallelism"
    assert [u.name for u in unknown_names(version, question)] == ["pipline"]  # as written: refused by name
    assert unknown_names(version, corrected(version, question)[0]) == []


def test_the_asker_answers_a_misspelt_question_and_says_how_it_read_it(tmp_path: Path, encoder) -> None:  # noqa: ANN001
    build_index(tmp_path, encoder)
    a = Asker(Searcher(load_settings(tmp_path))).ask("How does ZeRO partiton the optimizer states?")
    assert not a.refused and a.citations
    assert "partitioning" in a.answer.lower() or "partitions" in a.answer.lower()
    assert a.notice is not None and "read 'partiton' as 'partition'" in a.notice


def test_search_matches_what_was_typed_and_offers_the_corrected_query(tmp_path: Path, encoder) -> None:  # noqa: ANN001
    """`dmlqa search` does not correct silently (its results are what the words match as typed), it says "did you
    mean" on stderr; a query with no typo gets no such line, and --json stays the results alone."""
    from typer.testing import CliRunner

    from dmlqa.api import KnowledgeBase
    from dmlqa.app.cli import app

    build_index(tmp_path, encoder)
    kb = KnowledgeBase(tmp_path)
    assert kb.spelling("how does ZeRO partiton the optimizer states") == "how does ZeRO partition the optimizer states"
    assert kb.spelling("how does ZeRO partition the optimizer states") is None
    runner = CliRunner()
    typo = runner.invoke(app, ["--home", str(tmp_path), "search", "ZeRO partiton optimizer states", "-k", "2"])
    assert typo.exit_code == 0, typo.output
    assert "did you mean: ZeRO partition optimizer states" in typo.stderr
    assert "1. " in typo.stdout
    plain = runner.invoke(app, ["--home", str(tmp_path), "search", "ZeRO partition optimizer states", "-k", "2"])
    assert plain.exit_code == 0 and "did you mean" not in plain.stderr
    as_json = runner.invoke(app, ["--home", str(tmp_path), "search", "ZeRO partiton optimizer states", "--json"])
    assert as_json.exit_code == 0 and "did you mean" not in as_json.output
