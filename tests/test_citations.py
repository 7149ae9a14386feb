"""Citation checking of generated answers: markers, renumbering, quotes, unsupported sentences, refusals."""

from __future__ import annotations

import pytest

from dmlqa.models import Hit
from dmlqa.query.citations import (
    REFUSAL_PREFIX,
    best_quote,
    check_citations,
    locate_quote,
    normalise_markers,
    split_sentences,
    strip_reasoning,
    supporting_passage,
)


def hit(n: int, text: str, *, chunk_id: str | None = None, page: int | None = None) -> Hit:
    return Hit(
        rank=n, score=1.0 / n, doc_id=f"doc{n}", url=f"https://example.org/paper{n}", title=f"Paper {n}",
        page=page, section=None, text=text, chunk_id=chunk_id if chunk_id is not None else f"doc{n}#0",
        venue="OSDI", year=2020 + n,
    )


RING = (
    "Ring all-reduce arranges the workers in a logical ring.\n"
    "Each worker sends and receives 2(N-1) messages per all-reduce,\nso the bandwidth cost is independent of the "
    "number of workers. This makes it popular for data-parallel training."
)
ZERO = (
    "ZeRO partitions the optimizer states, gradients and parameters across data-parallel ranks. "
    "Stage 1 partitions only the optimizer states, e.g. Adam's moment estimates, which cuts their memory by the "
    "data-parallel degree."
)
PIPE = "GPipe splits a model into stages placed on different accelerators and pipelines micro-batches through them."
PASSAGES = [hit(1, RING, page=2), hit(2, ZERO, page=5), hit(3, PIPE)]


def norm(text: str) -> str:
    return " ".join(text.split())


# -- sentences ---------------------------------------------------------------------------------------------


def test_split_sentences_handles_abbreviations_markers_and_lists() -> None:
    text = (
        "ZeRO shards state, e.g. Adam moments, across ranks [2]. Li et al. (2020) describe PyTorch DDP [1]. "
        "Speedups of 3.5x are common. [3] Is it always faster? No.\n\n"
        "- Data parallelism replicates the model [1]\n"
        "- Pipeline parallelism splits layers [3]\n"
        "## Summary\nDone."
    )
    assert split_sentences(text) == [
        "ZeRO shards state, e.g. Adam moments, across ranks [2].",
        "Li et al. (2020) describe PyTorch DDP [1].",
        "Speedups of 3.5x are common. [3]",
        "Is it always faster?",
        "No.",
        "Data parallelism replicates the model [1]",
        "Pipeline parallelism splits layers [3]",
        "Summary\nDone.",
    ]


def test_split_sentences_keeps_wrapped_pdf_lines_together() -> None:
    assert split_sentences(RING)[1].startswith("Each worker sends and receives 2(N-1) messages per all-reduce,\nso")
    assert len(split_sentences(RING)) == 3


# -- markers -----------------------------------------------------------------------------------------------


def test_invented_citation_is_removed_and_flagged_while_real_one_stays() -> None:
    text = (
        "Ring all-reduce cost is independent of the worker count [1][9]. "
        "GPipe pipelines micro-batches in stages [9]."
    )
    checked = check_citations(text, PASSAGES)
    assert checked.text == (
        "Ring all-reduce cost is independent of the worker count [1]. GPipe pipelines micro-batches in stages."
    )
    assert "removed citation [9]: no such source" in checked.flags
    assert [c.n for c in checked.citations] == [1]
    assert checked.citations[0].url == "https://example.org/paper1"
    # The sentence that cited only the invented source is now unsupported.
    assert checked.unsupported == ("GPipe pipelines micro-batches in stages.",)
    assert "unsupported: GPipe pipelines micro-batches in stages." in checked.flags
    assert not checked.refused


def test_zero_and_out_of_range_numbers_are_invalid() -> None:
    checked = check_citations("ZeRO partitions optimizer states across ranks [0, 2, 4].", PASSAGES)
    assert checked.text == "ZeRO partitions optimizer states across ranks [1]."
    assert [f for f in checked.flags if f.startswith("removed")] == [
        "removed citation [0]: no such source",
        "removed citation [4]: no such source",
    ]
    assert checked.citations[0].title == "Paper 2"


def test_brackets_in_code_are_code_not_citations() -> None:
    """An answer's code keeps its indexing: ``datasets[0]`` is neither removed as source 0 nor renumbered."""
    text = (
        "ZeRO partitions optimizer states across ranks [2].\n\n"
        "```\nloader = DataLoader(datasets[0], batch_size=8)\nx = batch[3]\n```\n\n"
        "Index `outputs[1]` for the loss; GPipe pipelines micro-batches through stages [3]."
    )
    checked = check_citations(text, PASSAGES)
    assert "DataLoader(datasets[0], batch_size=8)\nx = batch[3]\n```" in checked.text
    assert "Index `outputs[1]` for the loss" in checked.text
    assert checked.text.startswith("ZeRO partitions optimizer states across ranks [1].")
    assert checked.text.endswith("micro-batches through stages [2].")
    assert [c.title for c in checked.citations] == ["Paper 2", "Paper 3"]
    assert not [f for f in checked.flags if f.startswith("removed")]
    # the code block cites nothing: it is flagged as it stands, its brackets kept
    assert any(f.startswith("unsupported: ```") and "datasets[0]" in f for f in checked.flags)
    # a marker-less answer whose only brackets are code is attributed by overlap, not read as citing source 0
    bare = check_citations("ZeRO partitions the optimizer states across ranks: `states[0]` is rank 0's.", PASSAGES)
    assert [c.title for c in bare.citations] == ["Paper 2"] and "`states[0]`" in bare.text
    # other citation styles inside code stay too
    assert normalise_markers("Run `x^2` and `a【1】`; see ZeRO^1.") == "Run `x^2` and `a【1】`; see ZeRO [1]."


def test_citations_are_renumbered_in_order_of_first_use() -> None:
    text = (
        "GPipe places stages on different accelerators [3]. "
        "ZeRO stage 1 partitions only the optimizer states [2, 3]. "
        "Ring all-reduce sends 2(N-1) messages per worker [1-2]. "
        "GPipe pipelines micro-batches through the stages [3]."
    )
    checked = check_citations(text, PASSAGES)
    assert checked.text == (
        "GPipe places stages on different accelerators [1]. "
        "ZeRO stage 1 partitions only the optimizer states [1][2]. "
        "Ring all-reduce sends 2(N-1) messages per worker [2][3]. "
        "GPipe pipelines micro-batches through the stages [1]."
    )
    assert [(c.n, c.doc_id) for c in checked.citations] == [(1, "doc3"), (2, "doc2"), (3, "doc1")]
    first = checked.citations[2]
    assert (first.title, first.page, first.chunk_id, first.venue, first.year) == ("Paper 1", 2, "doc1#0", "OSDI", 2021)
    assert checked.flags == ()


def test_marker_styles_are_understood() -> None:
    text = "ZeRO partitions optimizer states across ranks [Source 2]; see also [source: 1]."
    checked = check_citations(text, PASSAGES)
    assert checked.text == "ZeRO partitions optimizer states across ranks [1]; see also [2]."
    assert [c.doc_id for c in checked.citations] == ["doc2", "doc1"]


def test_the_same_chunk_retrieved_twice_gets_one_number() -> None:
    passages = [hit(1, RING), hit(2, RING, chunk_id="doc1#0"), hit(3, PIPE)]
    checked = check_citations("Ring all-reduce is bandwidth-optimal [2]. Workers form a logical ring [1].", passages)
    assert checked.text == "Ring all-reduce is bandwidth-optimal [1]. Workers form a logical ring [1]."
    assert len(checked.citations) == 1


def test_years_in_brackets_are_not_citations() -> None:
    checked = check_citations("GPipe appeared in NeurIPS [2019] and pipelines micro-batches [3].", PASSAGES)
    assert checked.text == "GPipe appeared in NeurIPS [2019] and pipelines micro-batches [1]."
    assert checked.flags == ()


# -- quotes ------------------------------------------------------------------------------------------------


def test_quotes_are_verified_substrings_of_the_cited_passage() -> None:
    text = (
        "With ring all-reduce each worker sends 2(N-1) messages, so its bandwidth cost does not grow with the "
        "number of workers [1]. ZeRO stage 1 partitions only the optimizer states such as Adam's moments [2]."
    )
    checked = check_citations(text, PASSAGES)
    ring, zero = checked.citations
    assert ring.quote == (
        "Each worker sends and receives 2(N-1) messages per all-reduce, so the bandwidth cost is independent of the "
        "number of workers."
    )
    assert zero.quote.startswith("Stage 1 partitions only the optimizer states")
    for c, passage in ((ring, RING), (zero, ZERO)):
        assert c.quote and c.quote in norm(passage)
        assert len(c.quote) <= 300


def test_best_quote_cuts_long_sentences_on_a_word_boundary_around_the_claim() -> None:
    filler = " ".join(f"word{i}" for i in range(80))
    passage = f"Intro sentence here. {filler} the gradient bucket size is 25 MB by default {filler}. Tail."
    quote = best_quote(passage, "DDP buckets gradients, 25 MB by default", max_chars=120)
    assert len(quote) <= 120
    assert quote in norm(passage)
    assert "bucket size is 25 MB by default" in quote
    assert not quote.startswith(" ") and " " + quote.split(" ")[0] + " " in " " + passage + " "  # whole words


@pytest.mark.parametrize(
    "claim", ["", "completely unrelated words", "bandwidth", "ring ring ring", "x" * 1000, "[1] [2]"]
)
def test_best_quote_is_always_a_substring(claim: str) -> None:
    for passage in (RING, ZERO, PIPE, "no full stop at all " * 40, "A.\n\nB?  C!"):
        quote = best_quote(passage, claim)
        assert quote and quote in norm(passage) and len(quote) <= 300


def test_locate_quote_finds_the_quote_across_line_breaks() -> None:
    quote = best_quote(RING, "bandwidth cost independent of the number of workers")
    start, end = locate_quote(RING, quote)
    assert norm(RING[start:end]) == quote and "\n" in RING[start:end]
    assert locate_quote(RING, "not in the passage") is None


def test_best_quote_of_an_empty_passage_is_empty() -> None:
    assert best_quote("   \n", "anything") == ""


def test_citation_whose_passage_shares_no_words_is_flagged_weak() -> None:
    checked = check_citations("Tensor parallelism shards matrix multiplications [3].", PASSAGES)
    assert any(f.startswith("weak citation [1]") for f in checked.flags)


# -- unsupported sentences and refusals --------------------------------------------------------------------


def test_factual_sentence_without_marker_is_unsupported_but_connectives_are_not() -> None:
    text = (
        "Ring all-reduce keeps the bandwidth cost independent of the number of workers [1]. "
        "It was invented at Baidu in 2017. In short, it scales well. Why does that matter? "
        "The sources do not say how it compares with parameter servers. Yes."
    )
    checked = check_citations(text, PASSAGES)
    assert checked.unsupported == ("It was invented at Baidu in 2017.",)
    unsupported = [f for f in checked.flags if f.startswith("unsupported")]
    assert unsupported == ["unsupported: It was invented at Baidu in 2017."]


def test_refusal_phrase_sets_refused() -> None:
    checked = check_citations(f"{REFUSAL_PREFIX}: none of the sources covers quantum annealing.", PASSAGES)
    assert checked.refused
    assert checked.citations == ()
    assert checked.unsupported == ()


def test_refusal_in_markdown_bold_is_detected() -> None:
    assert check_citations(f"**{REFUSAL_PREFIX}.**", PASSAGES).refused


def test_partial_answer_is_not_a_refusal() -> None:
    text = f"GPipe pipelines micro-batches through stages [3]. {REFUSAL_PREFIX} part: its bubble overhead."
    checked = check_citations(text, PASSAGES)
    assert not checked.refused
    assert checked.unsupported == ()


@pytest.mark.parametrize(
    "text", ["I don't know.", "The provided sources do not mention GaLore.", "There is no information on this."]
)
def test_loose_refusals_without_citations_are_detected(text: str) -> None:
    checked = check_citations(text, PASSAGES)
    assert checked.refused and checked.unsupported == ()


def test_answer_without_refusal_phrase_is_not_refused() -> None:
    assert not check_citations("GPipe pipelines micro-batches through the stages [3].", PASSAGES).refused


def test_no_passages_means_every_marker_is_invented() -> None:
    checked = check_citations("GPipe pipelines micro-batches through the stages [1].", [])
    assert checked.text == "GPipe pipelines micro-batches through the stages."
    assert checked.flags[0] == "removed citation [1]: no such source"
    assert checked.citations == ()


# -- replies as models send them -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>plan</think>\n\nAnswer.", "Answer."),
        ("Answer. <THINK>aside</THINK> More.", "Answer.  More."),
        ("<think>never closed", ""),
        ("Answer first. <thinking>then it thought", "Answer first."),
        ("reasoning the template opened</think>\nAnswer.", "Answer."),
        ("No tags <b>at</b> all.", "No tags <b>at</b> all."),
    ],
)
def test_strip_reasoning(text: str, expected: str) -> None:
    assert strip_reasoning(text) == expected


def test_caret_markers_are_not_confused_with_powers() -> None:
    assert normalise_markers("Cost grows as O(N^2) and 2^10 bytes, x^2.") == "Cost grows as O(N^2) and 2^10 bytes, x^2."
    assert normalise_markers("ZeRO shards state^1 and more.^2") == "ZeRO shards state [1] and more [2]."


def test_runs_of_markers_are_merged_in_order() -> None:
    checked = check_citations("ZeRO partitions optimizer states [3][2] and GPipe pipelines [2] [1].", PASSAGES)
    assert checked.text == "ZeRO partitions optimizer states [1][2] and GPipe pipelines [2][3]."
    # The flagged [9] goes; a run is one citation group whatever its spelling.
    checked = check_citations("ZeRO partitions optimizer states [2]【9】 (Source 3).", PASSAGES)
    assert checked.text == "ZeRO partitions optimizer states [1][2]."
    assert checked.flags[0] == "removed citation [9]: no such source"


def test_supporting_passage_needs_real_overlap() -> None:
    assert supporting_passage("ZeRO partitions the optimizer states across ranks.", PASSAGES) == 2
    assert supporting_passage("GPipe places stages on different accelerators.", PASSAGES) == 3
    assert supporting_passage("Stage 3 was released in 2021 by a large company.", PASSAGES) is None
    assert supporting_passage("Anything at all.", []) is None


def test_marker_less_refusal_is_not_attributed() -> None:
    checked = check_citations("The provided sources do not mention GaLore.", PASSAGES)
    assert checked.refused and checked.citations == () and checked.flags == ()
