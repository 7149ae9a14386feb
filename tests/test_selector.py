"""The learned sentence selector (issue 21): its features, its weights file, and the reading rules of
:func:`dmlqa.query.quotes.choose`, on sentences written here (never on the validation questions)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from benchload import BENCH, bench_script

from dmlqa.extract.sentences import CAPTION, ITEM, LISTING, PROSE, ROW, SNIPPET
from dmlqa.models import Hit
from dmlqa.query.compose import compose
from dmlqa.query.extractive import Candidate, Pool, question_terms
from dmlqa.query.features import (
    FEATURES,
    Place,
    QuestionFacts,
    asked_kinds,
    bm25,
    compare_match,
    compared_terms,
    feature_matrix,
    furniture,
    idf_weights,
    kind_match,
    kind_miss,
    leans,
    overlap,
    points_away,
    refers_back,
    standalone,
    title_like,
)
from dmlqa.query.glued import heading_end
from dmlqa.query.quotes import asks_for_resource, choose
from dmlqa.query.selector import SelectorModelError, default_selector, load_selector
from dmlqa.settings import BUNDLED_MODEL

# -- features -------------------------------------------------------------------------------------------


def test_the_kind_of_answer_asked_for() -> None:
    assert asked_kinds("How much memory does ZeRO-3 save on 64 GPUs?") == {"number"}
    assert "name" in asked_kinds("Which library implements tensor parallelism for Megatron?")
    assert asked_kinds("When was Horovod released?") == {"year"}
    assert "compare" in asked_kinds("How much faster than Megatron-LM is it?")
    assert asked_kinds("Why is pipeline parallelism useful?") == frozenset()
    # "when" that sets a scene asks no date
    assert "year" not in asked_kinds("When running on 8 GPUs, what batch size is used?")
    # how to do something, which command or flag: often a line of code answers
    assert asked_kinds("How do I launch DeepSpeed on nodes without SSH?") == {"code"}
    assert "code" in asked_kinds("Which flag turns on Horovod's autotuning?")
    assert "code" in asked_kinds("What command starts the head node of a Ray cluster?")
    assert "code" not in asked_kinds("How does ZeRO-3 partition the parameters?")


def test_a_sentence_holds_the_asked_kind_or_misses_it() -> None:
    kinds = asked_kinds("How much faster is the fused kernel?")
    assert kind_match("The fused kernel is 2.3x faster on A100.", kinds) == 1.0
    assert kind_miss("The fused kernel is much faster on modern GPUs.", kinds) == 1.0
    assert kind_miss("Anything at all.", frozenset()) == 0.0  # nothing asked: nothing missed
    assert kind_match("Horovod appeared in 2017 as an open-source project.", asked_kinds("When was it released?"))


def test_a_comparison_answer_names_what_it_is_compared_against() -> None:
    q = "How much faster than Megatron-LM is the new schedule?"
    assert compared_terms(q) == {"megatron", "lm"}
    against_other = "Our schedule is 1.5x faster than GPipe on 64 GPUs."
    against_asked = "Our schedule is 1.3x faster than Megatron-LM on 64 GPUs."
    compared = compared_terms(q)
    assert compare_match(set(question_terms(against_asked)), against_asked, compared) == 1.0
    assert compare_match(set(question_terms(against_other)), against_other, compared) == 0.0
    assert compare_match({"megatron", "lm"}, "Megatron-LM is a library.", compared) == 0.0  # names it, compares not


def test_idf_weighted_overlap_counts_the_rare_term_most() -> None:
    idf = {"fusion": 3.0, "buffer": 2.0, "size": 0.5}
    weights = idf_weights(["fusion", "buffer", "size"], lambda ts: np.array([idf[t] for t in ts]))
    assert overlap({"fusion", "buffer"}, weights) == pytest.approx(5.0 / 5.5)
    assert overlap({"size"}, weights) == pytest.approx(0.5 / 5.5)
    # a term the index never saw is the most specific the question has: it gets the top weight
    assert idf_weights(["zerobubble", "fusion"], lambda ts: np.array([0.0, 3.0]))["zerobubble"] == 3.0


def test_bm25_prefers_the_sentence_with_more_of_the_rare_terms_and_fewer_words() -> None:
    weights = {"fusion": 3.0, "buffer": 2.0}
    s = bm25([["fusion", "buffer", "default"], ["buffer", "default"],
              ["fusion", "buffer"] + ["filler"] * 40, []], weights)
    assert s[0] > s[2] > 0 and s[0] > s[1] > 0 and s[3] == 0


def test_openings_that_only_look_like_leaning_back_stand_alone() -> None:
    assert standalone("veScale is an internal PyTorch Distributed library for hyperscale training.")
    assert standalone("go-mxnet-predictor is a Go binding for the MXNet predict API.")
    assert standalone("This repository contains reference architectures for distributed training.")
    assert standalone("For this tutorial, we will configure an 18 billion parameter GPT-2 model.")  # the page itself
    assert not standalone("For this reason, we will configure an 18 billion parameter GPT-2 model.")
    assert standalone("Horovod is a backend in PyTorch Lightning from v0.7.4 and above.")
    assert standalone("However, ZeRO-3 also partitions the parameters.")  # a connective: readable alone
    assert standalone("- it saves up to 70% of the cost with spot instances")  # a list item's way
    assert standalone("Table 4 shows that SuperNeurons trains 12.97x deeper ResNets than Caffe.")
    assert not standalone("and the model is split across the stages.")
    assert not standalone("It uses a 64 MB fusion buffer.")
    # a paper's run-in enumeration: the sentence is what follows the marker, which may still lean
    assert standalone("iv) CPU overhead reduction with our Adam implementation with 6x speedup over PyTorch.")
    assert standalone("b) DP is memory inefficient as model states are stored redundantly.")
    assert not standalone("c) It keeps all the model states during the whole training.")
    assert not standalone("(a) Instances with 8 1080Tis (private cluster).")  # a figure's panel


def test_a_linking_opener_before_a_named_subject_does_not_lean() -> None:
    """Who does what is said, so the sentence is quoted without the one before it."""
    assert not leans("In contrast, ZeRO-Offload is designed to fit a larger model on one GPU.")
    assert not leans("For example, DeepSpeed can attain 64 teraflops.")
    assert not leans("In contrast, PyTorch 1.9 and above supports it.")  # a version range is no "above"
    assert leans("However, it fails.") and leans("In contrast, the model above fails.")
    assert leans("However, the second stage shards them.")  # "the second stage": of what came before


def test_standalone_sentences_carry_their_own_context() -> None:
    assert standalone("ZeRO partitions the optimizer states across data-parallel ranks.")
    assert not standalone("Algorithm 3 uses such a model to plan the schedule.")
    assert not standalone("It uses a fusion buffer of 64 MB by default.")
    assert not standalone("Such a scheme halves the memory of activations.")
    assert not standalone("As shown above, the bubble shrinks with more micro-batches.")
    assert not standalone("As noted earlier, the ring uses the network well only for large tensors.")
    assert not standalone("The following figure gives an overview of the scheduler.")  # a figure no quote shows
    assert not standalone("The diagram below shows the ring of eight workers.")


def test_the_latter_leans_back_only_when_the_sentence_names_no_pair_before_it() -> None:
    assert not standalone("The latter halves the memory of activations.")
    assert not standalone("The former only depends on the batch size, while the latter depends on the depth.")
    # the pair is the sentence's own: it reads alone, and quoting it brings nothing before it
    assert standalone("DDP and RPC are built on c10d, where the former uses collective communications.")
    assert not refers_back("Activations or gradients are kept, of which the latter two are only used in training.")


def test_headings_captions_legends_and_run_together_words_are_furniture() -> None:
    assert furniture("Throughput of HybridParallelism.Figure14bshows the scaling on 512 GPUs.")
    assert furniture("ZeRO: Zero Redundancy Optimizer ZeRO removes the memory redundancies.")
    assert furniture("Figure 3: Throughput of GPT-3 training on 1024 GPUs.")
    assert furniture("ABSTRACT In this section we describe the scheduler.")
    assert furniture("weobservethatthetrainingthroughputdropswhenthebatchgrows")
    assert not furniture("ZeRO removes the memory redundancies across data-parallel processes.")
    assert not furniture("DeepSpeed and PyTorch FSDP both shard parameters, as Table 2 shows.")
    # a caption run into a sentence, its first word a panel's label; a figure's labels before its number
    assert furniture("Heuristic decides policy for t (e.g., evict) Figure 1: (Top) Pseudocode for DTR's basic logic.")
    assert furniture("(a) (b) Figure 2: (a) Memory requirements for massive models.")
    assert furniture("The GA-based search measures the Scheduler Memory Allocator Swap Planner Simulator Figure 2.")
    assert not furniture("We highlight three key findings from Table 1: (1) Switch Transformers are faster.")
    assert not furniture("The GA-based search uses the simulator to score schedules, as shown in Figure 2.")
    # a figure's number written without a space is a reference, not a legend, unless words run on from it
    assert not furniture("Fig.11 demonstrates up to 33.33% performance loss without using Tensor Cache.")
    assert not furniture("Fig.3b and 3c show two simple examples of join and fan nonlinear connections.")
    assert furniture("Figure14bshows the scaling of the hybrid plan on 512 GPUs.")
    assert not furniture("Wrap the optimizer in hvd.DistributedOptimizer and pass HybridParallelPlugin to Booster.")
    # a page's table of contents flattened into one line
    assert furniture("Table of contents: * Sparkle: Deep Learning on Spark * Introduction * Getting started")
    assert furniture("* Overview * Installation * Basic usage * Hyper-parameter search")
    assert not furniture("The memory of each layer is 2 * 3 * 4 * 5 bytes in this toy example.")
    # a paragraph's run-in title before "Figure N shows"; "As Figure N shows" is a sentence
    assert furniture("Model Speed: Figure 5a: Throughput on 512 GPUs.")
    assert not furniture("As Figure 5a shows, the throughput grows on 512 GPUs.")
    assert not furniture("In Figure 5a the throughput grows on 512 GPUs.")
    # a paper's outline says where things are, not what they are
    assert furniture("In this paper, we discuss the training setup (Section 2) and the data (Section 3).")
    assert furniture("Then, Section 6 discusses lessons learned, and Section 7 surveys related work.")
    assert not furniture("ZeRO partitions the model states instead of replicating them (Section 5).")


def test_the_feature_matrix_has_one_named_column_per_feature() -> None:
    facts = QuestionFacts({"fusion": 3.0, "buffer": 2.0}, asked_kinds("How large is the fusion buffer?"),
                          frozenset())
    texts = ["The fusion buffer is 128 MB by default.", "It can be changed at run time."]
    places = [Place(PROSE, 0, 0, 0.1, True), Place(ITEM, None, 3, 0.9, False)]
    x = feature_matrix(facts, texts, places, np.array([0.7, 0.5], np.float32))
    col = {name: x[:, i] for i, name in enumerate(FEATURES)}
    assert x.shape == (2, len(FEATURES))
    assert col["cosine_gap"].tolist() == pytest.approx([0.0, -0.2])
    assert col["kind_match"].tolist() == [1.0, 0.0] and col["kind_miss"].tolist() == [0.0, 1.0]
    assert col["overlap"].tolist() == [1.0, 0.0] and col["bm25"][0] == 1.0
    assert col["standalone"].tolist() == [1.0, 0.0] and col["is_item"].tolist() == [0.0, 1.0]
    assert col["passage_rank"].tolist() == [1.0, 0.0] and col["doc_rank"].tolist() == [1.0, 0.25]
    assert col["section_first"].tolist() == [1.0, 0.0]
    assert col["position"].tolist() == pytest.approx([0.1, 0.9]) and col["is_row"].tolist() == [0.0, 0.0]
    assert col["cosine_rank"].tolist() == [1.0, 0.5] and col["bm25_rank"].tolist() == [1.0, 0.5]
    assert col["length"].tolist() == pytest.approx([np.log1p(8), np.log1p(7)])


def test_the_rarest_question_term_marks_the_sentences_about_what_is_asked() -> None:
    """"fusion" weighs more than "buffer": a sentence holding only "buffer" is not about the fusion buffer."""
    facts = QuestionFacts({"fusion": 3.0, "buffer": 2.0}, frozenset(), frozenset())
    texts = ["Tensor fusion batches small tensors.", "The buffer is freed after each step.", "Nothing here."]
    places = [Place(PROSE, 0, 0, 0.1, False), Place(PROSE, 0, 0, 0.2, False), Place(PROSE, 0, 0, 0.3, False)]
    x = feature_matrix(facts, texts, places, np.array([0.3, 0.5, 0.1], np.float32))
    assert x[:, FEATURES.index("rarest_term")].tolist() == [1.0, 0.0, 0.0]
    no_terms = feature_matrix(QuestionFacts({}, frozenset(), frozenset()), texts, places, np.zeros(3, np.float32))
    assert not no_terms[:, FEATURES.index("rarest_term")].any()


# -- the weights file -------------------------------------------------------------------------------------


def test_the_shipped_selector_loads_and_round_trips(tmp_path) -> None:  # noqa: ANN001
    sel = default_selector()
    assert sel.features == FEATURES and 0 <= sel.refuse_below < 1 and 0 <= sel.add_above <= 1.01
    assert 0 < sel.off_topic_margin < 1
    path = tmp_path / "sel.json"
    path.write_text(json.dumps(sel.to_json()), encoding="utf-8")
    again = load_selector(path)
    x = np.random.default_rng(0).normal(size=(4, len(FEATURES)))
    assert again.scores(x) == pytest.approx(sel.scores(x), abs=1e-5)
    assert (again.diversity, again.focus, again.max_words, again.read_on) == (sel.diversity, sel.focus, sel.max_words,
                                                                               sel.read_on)


def test_weights_for_other_features_are_refused_with_a_clear_error(tmp_path) -> None:  # noqa: ANN001
    data = default_selector().to_json()
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**data, "features": data["features"][:-1]}), encoding="utf-8")
    with pytest.raises(SelectorModelError, match="other features"):
        load_selector(path)
    # weights fitted before the answer's settings included diversity: refit, not guess
    path.write_text(json.dumps({k: v for k, v in data.items() if k != "diversity"}), encoding="utf-8")
    with pytest.raises(SelectorModelError, match="malformed.*diversity"):
        load_selector(path)
    path.write_text(json.dumps({k: v for k, v in data.items() if k != "focus"}), encoding="utf-8")
    with pytest.raises(SelectorModelError, match="malformed.*focus"):
        load_selector(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(SelectorModelError, match="cannot read"):
        load_selector(path)


def test_the_shipped_selector_turns_questions_only_for_the_embedder_it_was_fitted_with(tmp_path) -> None:  # noqa: ANN001
    sel = default_selector()
    assert sel.adapter_model == BUNDLED_MODEL and sel.adapter_u is not None
    q = np.random.default_rng(1).normal(size=sel.adapter_u.shape[0]).astype(np.float32)
    q /= np.linalg.norm(q)
    turned = sel.adapt(q, BUNDLED_MODEL)
    assert np.linalg.norm(turned) == pytest.approx(1.0, abs=1e-5) and not np.allclose(turned, q)
    assert sel.adapt(q, "sentence-transformers/all-mpnet-base-v2") is q  # another space: as it is
    short = q[:100]
    assert sel.adapt(short, BUNDLED_MODEL) is short  # a vector of another size: as it is
    path = tmp_path / "sel.json"
    path.write_text(json.dumps(sel.to_json()), encoding="utf-8")
    assert load_selector(path).adapt(q, BUNDLED_MODEL) == pytest.approx(turned, abs=1e-4)
    data = sel.to_json()
    path.write_text(json.dumps({**data, "adapter": {**data["adapter"], "v": data["adapter"]["v"][:-1]}}),
                    encoding="utf-8")
    with pytest.raises(SelectorModelError, match="adapter shapes"):
        load_selector(path)


def test_a_pools_adapted_features_are_its_cosines_with_the_turned_question() -> None:
    """The pool measures its candidates again with the turned vector; without an adapter (another embedder)
    the adapted columns repeat the cosine columns, so a selector fitted on them still reads them."""
    vectors = np.eye(3, dtype=np.float32)
    q = np.array([0.8, 0.6, 0.0], np.float32)
    texts = ["Stage one holds the optimizer states.", "Stage two holds the gradients.", "Stage three holds all."]
    facts = QuestionFacts({"stage": 1.0}, frozenset(), frozenset())
    pool = Pool(_cands([(PROSE, t) for t in texts]), [Place(PROSE, 0, 0, 0.1 * i, False) for i in range(3)],
                vectors @ q, facts, [], lambda c, step: None, qvec=q, cosines_for=lambda v: vectors @ v)
    cols = [FEATURES.index(f) for f in ("adapted_cosine", "adapted_gap", "adapted_rank")]
    plain = pool.features[:, cols]
    assert plain[:, 0] == pytest.approx(pool.features[:, FEATURES.index("cosine")])
    pool.adapt(np.array([0.0, 0.6, 0.8], np.float32))
    assert pool.features[:, cols[0]] == pytest.approx([0.0, 0.6, 0.8])
    assert pool.features[:, cols[2]] == pytest.approx([1 / 3, 1 / 2, 1.0])  # the third is nearest now
    assert pool.features[:, FEATURES.index("cosine")] == pytest.approx([0.8, 0.6, 0.0])  # the cosines stay
    pool.adapt(None)
    assert pool.features[:, cols] == pytest.approx(plain)


def test_the_fitted_selector_prefers_the_sentence_that_states_the_asked_number() -> None:
    """Two sentences equally close to the question by vector and by words: the one holding the number
    a "how much" question asks for, standing alone, scores higher than one leaning on its predecessor
    without a number; a figure legend scores lower than the same words as prose."""
    q = "How much memory does activation checkpointing save for the 1.5B model?"
    facts = QuestionFacts(idf_weights(question_terms(q), lambda ts: np.ones(len(ts))), asked_kinds(q), frozenset())
    texts = ["Activation checkpointing saves 60% of the memory for the 1.5B model.",
             "It saves a large share of the memory for the model with activation checkpointing.",
             "Figure 4: Activation checkpointing saves memory for the 1.5B model."]
    places = [Place(PROSE, 1, 0, 0.3, False)] * 3
    scores = default_selector().scores(feature_matrix(facts, texts, places, np.array([0.6, 0.6, 0.6], np.float32)))
    assert scores[0] > scores[1] and scores[0] > scores[2]


# -- choosing: the reading rules ---------------------------------------------------------------------------


def _cands(texts: list[tuple[str, str]], doc: str = "d") -> list[Candidate]:
    return [Candidate(0, doc, i, t, role, 1) for i, (role, t) in enumerate(texts)]


def _neighbour(cands: list[Candidate]):  # noqa: ANN202
    by = {(c.doc_id, c.ordinal): c for c in cands}
    return lambda c, step: by.get((c.doc_id, c.ordinal + step))


def test_the_answer_leads_with_the_best_sentence_then_others_in_reading_order() -> None:
    cands = _cands([(PROSE, "Pipeline parallelism splits the layers of a model into stages."),
                    (PROSE, "Micro-batches keep every stage busy during the forward pass."),
                    (PROSE, "The bubble shrinks as the number of micro-batches grows large.")])
    chosen = choose("How does the bubble shrink?", cands, np.array([0.7, 0.6, 0.9]), neighbour=_neighbour(cands),
                    add_above=0.5)
    assert [c.ordinal for c in chosen] == [2, 0, 1]
    only = choose("How does the bubble shrink?", cands, np.array([0.7, 0.6, 0.9]), add_above=0.8)
    assert [c.ordinal for c in only] == [2]  # the others score under the cut


_FUSION = [(PROSE, "Horovod batches small tensors before the allreduce operation."),
           (PROSE, "It uses a fusion buffer of 64 MB by default."),
           (CAPTION, "Figure 2: Tensor fusion timeline."),
           (PROSE, "This gives a 20% speedup on 64 GPUs in the benchmark run.")]
_PR_MOE = [(PROSE, "Recently, we proposed a novel Pyramid-Residual MoE model architecture."),
           (PROSE, "To create such an MoE model, pass num_experts as a list and set the use_residual flag."),
           (PROSE, "Algorithm 3 uses such a model to plan the schedule of every expert."),
           (PROSE, "DeepSpeed MoE needs PyTorch 1.8 or newer to run any of the examples.")]


@pytest.mark.parametrize(("texts", "scores", "add_above", "expected"), [
    (_FUSION, [0.2, 0.9, 0.1, 0.3], 0.5, [0, 1]),  # "It uses ..." comes after the sentence it leans on
    # its predecessor is a caption: the leaning sentence cannot be quoted readably, the next best leads
    (_FUSION, [0.5, 0.1, 0.1, 0.9], 0.6, [0]),
    (_PR_MOE, [0.2, 0.9, 0.1, 0.3], 0.5, [0, 1]),  # "such an MoE model": the one the sentence before names
    # about an algorithm no quote shows: the sentence before would not make it read, so it is not quoted
    (_PR_MOE, [0.3, 0.1, 0.9, 0.2], 0.15, [0, 3]),
])
def test_a_sentence_leaning_back_comes_after_its_predecessor_or_not_at_all(
        texts: list[tuple[str, str]], scores: list[float], add_above: float, expected: list[int]) -> None:
    cands = _cands(texts)
    chosen = choose("What is it?", cands, np.array(scores), neighbour=_neighbour(cands), add_above=add_above)
    assert [c.ordinal for c in chosen] == expected


def _sectioned(texts: list[tuple[str | None, str]]) -> list[Candidate]:
    return [Candidate(0, "d", i, t, PROSE, None, section=sec) for i, (sec, t) in enumerate(texts)]


@pytest.mark.parametrize(("texts", "quoted"), [
    # the first sentence under a heading, its demonstrative naming what the heading names
    ([("Weak Scaling Results", "The weak scaled results show superlinear scaling on every model size."),
      ("Strong Scaling Results", "This test strong scales the GPT-3 model from 96 to 4,608 GPUs with one batch size.")],
     "Under “Strong Scaling Results”: This test strong scales the GPT-3 model from 96 to 4,608 GPUs with one batch "
     "size. [1]"),
    ([(None, "Pipelines are cut into stages by layer count."),
      ("Interleaved Schedule:", "These schedules require the number of micro-batches to be a multiple of the stages.")],
     "Under “Interleaved Schedule”: These schedules require the number of micro-batches to be a multiple of the "
     "stages. [1]"),
])
def test_a_sentence_opening_its_section_with_this_noun_is_quoted_under_its_heading(
        texts: list[tuple[str | None, str]], quoted: str) -> None:
    cands = _sectioned(texts)
    chosen = choose("What is it?", cands, np.array([0.1, 0.9]), neighbour=_neighbour(cands), add_above=0.5)
    assert [c.ordinal for c in chosen] == [1]  # not after the last sentence of the section before: about another thing
    hits = [Hit(1, 0.5, "d", "https://example.org/d", "D", None, None, texts[1][1], "d#0")]
    assert compose(chosen, hits)[0] == quoted
    assert compose(chosen, hits)[1][0].quote == texts[1][1]  # the citation quotes the source's words alone


def test_a_list_item_opening_its_section_with_this_noun_keeps_its_heading_in_the_list() -> None:
    """An item split from its list without a bullet ("- This plugin ..." reads as the list's way, and stands)."""
    cands = [Candidate(0, "d", 0, "Broadcast the parameters from rank 0 before training.", PROSE, None,
                       section="Setup"),
             Candidate(0, "d", 1, "This plugin implements ZeRO-3 with chunk-based memory management.", ITEM, None,
                       section="Gemini Plugin")]
    chosen = choose("What is it?", cands, np.array([0.1, 0.9]), neighbour=_neighbour(cands), add_above=0.5)
    hits = [Hit(1, 0.5, "d", "https://example.org/d", "D", None, None, "", "d#0")]
    assert compose(chosen, hits)[0] == ("- Under “Gemini Plugin”: This plugin implements ZeRO-3 with chunk-based "
                                        "memory management. [1]")


@pytest.mark.parametrize(("texts", "why"), [
    # "This is ..." stands for what came before the sentence (often a code block), which no heading carries
    ([("Setup", "Broadcast the parameters from rank 0 before training."),
      ("Horovod with PyTorch", "This is necessary to make sure every worker starts from the same weights.")],
     "a pronoun, not a demonstrative"),
    ([("Setup", "Broadcast the parameters from rank 0 before training."),
      ("Plugins", "These include the Gemini plugin and the low level zero plugin for sharding.")], "a pronoun"),
    ([("Setup", "Broadcast the parameters from rank 0 before training."),
      ("Results", "That said, the speedup holds on every cluster we measured.")], "a linking phrase"),
    # the second sentence of its section leans on the first, not on the heading
    ([("Gemini Plugin", "Gemini manages chunks of parameters across GPU and CPU memory."),
      ("Gemini Plugin", "This plugin implements ZeRO-3 with chunk-based memory management.")], "not first"),
    ([("Setup", "Broadcast the parameters from rank 0 before training."),
      ("A Much Longer Heading Than A Reader Takes In At A Glance", "This plugin implements ZeRO-3 with chunks.")],
     "a heading too long to name"),
    ([("Setup", "Broadcast the parameters from rank 0 before training."),
      ("Constant Parameters", "This example as described above keeps the cache capacity fixed during tuning.")],
     "it leans on more than its opening"),
])
def test_a_sentence_leaning_on_more_than_its_heading_is_not_quoted_under_it(
        texts: list[tuple[str | None, str]], why: str) -> None:
    cands = _sectioned(texts)
    chosen = choose("What is it?", cands, np.array([0.1, 0.9]), neighbour=_neighbour(cands), add_above=0.5)
    assert all(c.under is None for c in chosen), why
    assert [c.ordinal for c in chosen] == ([0, 1] if why == "not first" else [0]), why  # with its context, or not


def test_with_focus_a_document_not_about_the_question_lends_the_answer_nothing() -> None:
    """The best sentence's document, and one whose best sentence scores near it, fill the answer; a sentence of a
    document whose best scores under ``focus`` times the best one's does not, however much budget is left."""
    zero = _cands([(PROSE, "ZeRO partitions the optimizer states across the data-parallel processes."),
                   (PROSE, "Stage 2 also partitions the gradients, and stage 3 the parameters.")], doc="zero")
    fsdp = _cands([(PROSE, "FSDP shards parameters, gradients and optimizer states like ZeRO stage 3.")], doc="fsdp")
    kube = _cands([(PROSE, "KubeSphere is a distributed operating system for cloud-native applications.")], doc="kube")
    cands = zero + fsdp + kube
    scores = np.array([0.9, 0.3, 0.4, 0.1])
    q = "How does ZeRO partition optimizer state?"
    every = choose(q, cands, scores, add_above=0.05)
    assert [(c.doc_id, c.ordinal) for c in every] == [("zero", 0), ("fsdp", 0), ("zero", 1), ("kube", 0)]
    focused = choose(q, cands, scores, add_above=0.05, focus=0.2)  # kube's best, 0.1, is under 0.2 * 0.9
    assert [(c.doc_id, c.ordinal) for c in focused] == [("zero", 0), ("fsdp", 0), ("zero", 1)]
    # the lead's document lends its weaker sentence (0.3 under 0.5 * 0.9) where fsdp's best, 0.4, is too far
    assert [(c.doc_id, c.ordinal) for c in choose(q, cands, scores, add_above=0.05, focus=0.5)] == [
        ("zero", 0), ("zero", 1)]


def test_with_diversity_the_next_sentence_says_something_the_answer_has_not_said() -> None:
    cands = _cands([(PROSE, "GPipe splits a model into stages across accelerators for training."),
                    (PROSE, "GPipe partitions a model into stages placed on different accelerators."),
                    (PROSE, "The bubble is negligible when there are four times more micro-batches than stages.")])
    vectors = np.array([[1.0, 0.0, 0.0], [0.98, 0.2, 0.0], [0.6, 0.0, 0.8]], np.float32)
    scores = np.array([0.9, 0.8, 0.7])
    plain = choose("How does GPipe work?", cands, scores, add_above=0.5, max_sentences=2)
    assert [c.ordinal for c in plain] == [0, 1]
    varied = choose("How does GPipe work?", cands, scores, add_above=0.5, max_sentences=2, diversity=0.3,
                    vectors=lambda idx: vectors[list(idx)])
    assert [c.ordinal for c in varied] == [0, 2]  # 0.7 - 0.3 * 0.6 beats 0.8 - 0.3 * 0.98
    # the best sentence still leads, and with no vectors, or no diversity, the order is the scores'
    assert [c.ordinal for c in choose("How does GPipe work?", cands, scores, add_above=0.5, max_sentences=2,
                                      diversity=0.3)] == [0, 1]
    assert [c.ordinal for c in choose("How does GPipe work?", cands, scores, add_above=0.5, max_sentences=2,
                                      vectors=lambda idx: vectors[list(idx)])] == [0, 1]


def test_captions_and_glued_headings_are_never_quoted() -> None:
    cands = _cands([(PROSE, "ZeRO: Zero Redundancy Optimizer ZeRO removes the memory redundancies."),
                    (PROSE, "ZeRO partitions optimizer states, gradients and parameters across ranks.")])
    chosen = choose("What does ZeRO remove?", cands, np.array([0.9, 0.6]), add_above=0.5)
    assert [c.ordinal for c in chosen] == [1]


def test_the_word_budget_holds_after_the_best_sentence() -> None:
    long = "Sharded data parallel training keeps " + "one shard of every tensor on each rank " * 5 + "today."
    cands = _cands([(PROSE, "FSDP shards parameters, gradients and optimizer states across ranks."),
                    (PROSE, long), (PROSE, "Each rank gathers the full parameters just before a layer runs.")])
    chosen = choose("How does FSDP shard?", cands, np.array([0.9, 0.8, 0.7]), add_above=0.5, max_words=30)
    assert [c.ordinal for c in chosen] == [0, 2]


def test_an_announcing_sentence_brings_its_list_and_a_row_its_header() -> None:
    cands = _cands([(PROSE, "ZeRO has three stages of increasing savings:"), (ITEM, "- Stage 1 partitions optimizer "
                    "states."), (ITEM, "- Stage 2 partitions gradients as well."), (PROSE, "A closing remark here.")])
    chosen = choose("What are ZeRO's stages?", cands, np.array([0.9, 0.3, 0.3, 0.2]), neighbour=_neighbour(cands))
    assert [c.ordinal for c in chosen] == [0, 1, 2]
    rows = ((0, "| model | GPUs | TFLOPS |"), (2, "| GPT-3 | 1024 | 140 |"), (3, "| BERT | 64 | 90 |"))
    table = [Candidate(0, "t", o, text, ROW, 1) for o, text in rows]
    chosen = choose("How many TFLOPS for GPT-3?", table, np.array([0.1, 0.9, 0.8]), neighbour=_neighbour(table))
    assert [c.ordinal for c in chosen] == [0, 2]  # the header (over its |---| line, unstored), the row; not a second
    # with no |---| line under it the top row is a row of data, and a row under no header says nothing
    headless = [replace(c, ordinal=c.ordinal - (c.ordinal > 0)) for c in table]
    assert choose("How many TFLOPS for GPT-3?", headless, np.array([0.1, 0.9, 0.8]),
                  neighbour=_neighbour(headless)) == []
    hit = Hit(rank=1, score=1.0, doc_id="t", url="https://x.org/t", title="T", page=1, section=None, text="")
    body, cites = compose(chosen, [hit])
    assert body == "- model: GPT-3 · GPUs: 1024 · TFLOPS: 140 [1]" and len(cites) == 1  # each cell under its header


def test_an_announcer_whose_list_is_a_page_long_is_quoted_alone_when_it_states_something() -> None:
    """A best sentence whose block would be a page is no answer; when the page is the list it announces and the
    sentence states something of its own ("... three main components:"), it is quoted alone instead."""
    item = " ".join(["It keeps every replica of the model in step by averaging the gradients."] * 6)
    texts = [(PROSE, "As of release 1.6, its features can be categorized into three main components:"),
             *((ITEM, f"- Component {k}: {item}") for k in range(3)), (PROSE, "Another sentence on the topic.")]
    cands = _cands(texts)
    q = "How many main components does it have?"
    chosen = choose(q, cands, np.array([0.9, 0.1, 0.1, 0.1, 0.5]), neighbour=_neighbour(cands), add_above=0.3)
    assert [c.ordinal for c in chosen] == [0, 4]
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="D", page=1, section=None, text="")
    assert compose(chosen, [hit])[0].startswith("As of release 1.6, its features can be categorized into three main "
                                                "components … [1]")
    short = _cands([(PROSE, "The components are:"), *texts[1:]])  # says nothing alone: the next sentence leads
    chosen = choose(q, short, np.array([0.9, 0.1, 0.1, 0.1, 0.5]), neighbour=_neighbour(short), add_above=0.3)
    assert [c.ordinal for c in chosen] == [4]


def test_a_fragment_whose_opening_was_lost_is_not_quoted_after_a_sentence_that_ended() -> None:
    """"a baseline by training a model of 1.2 billion parameters ..." after a figure's legend: the text layer lost
    its opening at a column break, and the sentence before, which ended, is not it. After a sentence cut off
    mid-clause the two read as one; a name in lower case ("exo runs ...") is no fragment."""
    q = "How many teraflops does one GPU sustain for the baseline model?"
    for before, quoted in [("Model+data parallel (green): the same configuration with data parallelism.", [2]),
                           ("We establish", [0, 1, 2])]:
        cands = _cands([(PROSE, before), (PROSE, "a baseline by training a model of 1.2 billion parameters on one GPU, "
                                                  "that sustains 39 teraflops."),
                        (PROSE, "The baseline sustains 39 teraflops on one GPU, 30% of its peak.")])
        chosen = choose(q, cands, np.array([0.1, 0.9, 0.5]), neighbour=_neighbour(cands), add_above=0.3)
        assert [c.ordinal for c in chosen] == quoted
    cands = _cands([(PROSE, "Devices join the cluster on their own."), (PROSE, "exo runs models across devices.")])
    chosen = choose("What does exo run?", cands, np.array([0.1, 0.9]), neighbour=_neighbour(cands), add_above=0.3)
    assert [c.ordinal for c in chosen] == [0, 1]


def test_a_short_list_item_comes_under_the_sentence_leading_into_its_list_or_not_at_all() -> None:
    """"- MPICH 3.3 or later [1]" alone says nothing: a list item of a few words is quoted under the sentence before
    its list ("Usage of horovodrun requires one of the following:"), over the items between; with no such sentence it
    is not quoted, unless it names code right under it or the question asks for a name."""
    cands = _cands([(PROSE, "Usage of horovodrun requires one of the following:"), (ITEM, "- Open MPI >= 2.X"),
                    (ITEM, "- MPICH 3.3 or later"), (ITEM, "- Intel(R) MPI"),
                    (PROSE, "If you do not have MPI installed, you can run horovodrun using Gloo.")])
    scores = np.array([0.1, 0.2, 0.9, 0.2, 0.6])
    chosen = choose("Does horovodrun work with MPICH?", cands, scores, neighbour=_neighbour(cands), add_above=0.5)
    assert [c.ordinal for c in chosen] == [0, 2, 4]
    # a longer item says what it is about: it reads alone
    said = [replace(cands[2], text="- MPICH from release 3.3 on, with its own launcher")]
    assert [c.ordinal for c in choose("MPICH?", said, np.array([0.9]), neighbour=_neighbour(said))] == [2]
    # the same list with nothing leading into it: the best item is not quoted, the prose is
    headless = [c for c in cands if c.ordinal != 0]
    assert [c.ordinal for c in choose("Does horovodrun work with MPICH?", headless, scores[1:],
                                      neighbour=_neighbour(headless), add_above=0.5)] == [4]
    # a label over its code block names the code
    labelled = _cands([(ITEM, "- DistributedOptimizer"),
                       (SNIPPET, "opt = hvd.DistributedOptimizer(opt, op=hvd.Adasum)")])
    assert [c.ordinal for c in choose("How do I wrap the optimizer?", labelled, np.array([0.9, 0.2]),
                                      neighbour=_neighbour(labelled))] == [0, 1]


def test_a_line_written_as_a_title_answers_only_a_question_asking_for_a_name() -> None:
    cands = _cands([(ITEM, "- Smart Gradient Accumulation"),
                    (PROSE, "Gradient accumulation sums the gradients of several micro-batches before a step.")])
    scores = np.array([0.9, 0.8])
    how = choose("How does gradient accumulation work?", cands, scores, neighbour=_neighbour(cands), add_above=0.5)
    assert [c.ordinal for c in how] == [1]
    which = choose("Which feature accumulates gradients?", cands, scores, neighbour=_neighbour(cands), add_above=0.5)
    assert [c.ordinal for c in which][0] == 0


def test_a_question_asking_which_resource_gets_the_sources_name_first() -> None:
    cands = _cands([(PROSE, "Nerlnet simulates a whole cluster of edge devices on one machine before deploying it.")])
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="GitHub - leondavi/NErlNet: a framework",
              page=1, section=None, text="")
    for q in ("Which framework simulates a cluster of edge devices on one machine?",
              "Is there a framework for simulating a cluster of edge devices on one machine?",
              "Are there any tools that simulate a cluster of edge devices on one machine?",
              "What's the name of the library that simulates edge devices on one machine?"):
        body, _ = compose(cands, [hit], question=q)
        assert body.startswith("leondavi/NErlNet: a framework [1]:"), q
    for q in ("Is there a way to simulate a cluster of edge devices on one machine?",
              "How does the framework simulate a cluster of edge devices?"):
        assert compose(cands, [hit], question=q)[0].startswith("Nerlnet simulates"), q
    # a question naming the source itself asks for something of it: its title is no answer ("Which library shipped
    # with Ray ...?" is answered by Ray Tune, not "Ray")
    ray = replace(hit, title="Ray")
    assert compose(cands, [ray], question="Which library shipped with Ray simulates edge devices?")[0].startswith(
        "Nerlnet simulates")
    assert compose(cands, [ray], question="Which library simulates edge devices?")[0].startswith("Ray [1]:")


def test_which_paper_is_answered_by_a_title_only_when_the_source_is_a_paper() -> None:
    cands = _cands([(PROSE, "Enable virtual pipeline parallelism to reduce pipeline bubbles when PP is 2 or more.")])

    def source(kind: str, title: str) -> Hit:
        return Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title=title, page=None, section=None,
                   text="", kind=kind)
    readme = source("docs", "NVIDIA/Megatron-LM/megatron/core/transformer/moe/README.md")
    paper = source("paper", "Efficient Large-Scale Language Model Training on GPU Clusters")
    q = "Which papers reduce pipeline bubbles?"
    assert compose(cands, [readme], question=q)[0].startswith("Enable virtual")  # a README's path names no paper
    assert compose(cands, [paper], question=q)[0].startswith("Efficient Large-Scale Language Model Training on GPU "
                                                              "Clusters [1]:")
    # a framework may be named by its paper or its repository: either's title leads
    for s in (readme, paper):
        body = compose(cands, [s], question="Which framework reduces pipeline bubbles?")[0]
        assert body == f"{s.title} [1]: {cands[0].text} [1]"
    # "report" as what a paper does is no question asking for a report
    assert not asks_for_resource("What speedup does Megatron-Turbo report for GPT-3 pretraining?")
    assert asks_for_resource("Which tech report merges the all-to-all and ring approaches?")


def test_a_sentence_the_previous_answer_quoted_goes_last() -> None:
    cands = _cands([(PROSE, "ZeRO stage 1 partitions the optimizer states across ranks."),
                    (PROSE, "ZeRO stage 3 also partitions the parameters across ranks.")])
    chosen = choose("what about stage 3?", cands, np.array([0.9, 0.8]), avoid={cands[0].text}, add_above=0.5)
    assert [c.ordinal for c in chosen] == [1]
    # nothing new reaches the cut: what was said is said again rather than something that does not answer
    chosen = choose("what about stage 3?", cands, np.array([0.9, 0.3]), avoid={cands[0].text}, add_above=0.5)
    assert [c.ordinal for c in chosen][:1] == [0]


def test_features_relative_to_the_other_candidates_and_the_neighbours() -> None:
    """Rarity among the candidates, the sentence before, the document's best: what a linear model
    cannot work out from one sentence alone."""
    facts = QuestionFacts({"bucket": 2.0, "ddp": 2.0}, asked_kinds("How large is a DDP bucket?"), frozenset())
    texts = ["DDP all-reduces gradients.", "Each bucket holds 25 MB, 3 layers?",
             "The model is wrapped in bucket order.", "Unrelated words stand here."]
    places = [Place(PROSE, 0, 0, 0.1, False, "a", 4), Place(PROSE, 0, 0, 0.2, False, "a", 5),
              Place(PROSE, None, 1, 0.5, False, "b", 1), Place(PROSE, None, 1, 0.6, False, "b", 9)]
    x = feature_matrix(facts, texts, places, np.array([0.6, 0.5, 0.4, 0.1], np.float32))
    col = {name: x[:, i] for i, name in enumerate(FEATURES)}
    assert col["local_overlap"][0] > col["local_overlap"][1] > 0  # "ddp" is rarer among them than "bucket"
    assert col["overlap"][0] == col["overlap"][1]  # while the corpus-wide idf weighs them alike
    assert col["overlap_gap"].tolist() == pytest.approx([0.0, 0.0, 0.0, -0.5])
    assert col["prev_overlap"].tolist() == pytest.approx([0.0, 0.5, 0.0, 0.0])  # "a" 4 comes right before "a" 5
    assert col["next_overlap"][0] == pytest.approx(0.5) and col["prev_cosine"][1] == pytest.approx(0.6)
    assert col["doc_best_cosine"].tolist() == pytest.approx([0.6, 0.6, 0.4, 0.4])
    assert col["doc_best_overlap"].tolist() == pytest.approx([0.5, 0.5, 0.5, 0.5])
    assert col["doc_share"].tolist() == [0.5] * 4
    assert col["asks_back"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert col["numbers"][1] > 0 and col["numbers"][0] == 0.0


def test_code_is_marked_and_matched_to_a_question_asking_how() -> None:
    texts = ["Start the head node with:", "ray start --head --port=6379", "Enable it with the --autotune flag.",
             "The head node schedules tasks."]
    places = [Place(PROSE, 0, 0, 0.1, False, "a", 1), Place(SNIPPET, 0, 0, 0.2, False, "a", 2),
              Place(PROSE, 0, 0, 0.3, False, "a", 3), Place(PROSE, 0, 0, 0.4, False, "a", 4)]
    cos = np.array([0.5, 0.5, 0.5, 0.5], np.float32)
    for question, asked in (("How do I start the Ray head node?", [0.0, 1.0, 1.0, 0.0]),
                            ("Why does Ray have a head node?", [0.0] * 4)):
        facts = QuestionFacts({"head": 1.0, "node": 1.0}, asked_kinds(question), frozenset())
        col = {name: v for name, v in zip(FEATURES, feature_matrix(facts, texts, places, cos).T, strict=True)}
        assert col["is_code"].tolist() == [0.0, 1.0, 0.0, 0.0]
        assert col["code_asked"].tolist() == asked


def test_a_code_line_ranked_best_is_quoted_under_the_sentence_announcing_it() -> None:
    cands = _cands([(PROSE, "Ray clusters can be started by hand on any machines you have."),
                    (PROSE, "On the first machine, start the head node with:"),
                    (SNIPPET, "ray start --head --port=6379"),
                    (SNIPPET, "ray status"),
                    (PROSE, "Then connect each worker to the address it prints out.")])
    chosen = choose("What command starts the Ray head node?", cands, np.array([0.3, 0.05, 0.9, 0.1, 0.1]),
                    neighbour=_neighbour(cands), add_above=0.5)
    assert [c.ordinal for c in chosen] == [1, 2, 3]
    body, _ = compose(chosen, [Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="Ray",
                                   page=1, section=None, text="")])
    assert body == ("On the first machine, start the head node with: [1]\n```\nray start --head --port=6379\n"
                    "ray status\n```")
    # a code line with no sentence announcing it is never quoted alone
    alone = _cands([(SNIPPET, "ray start --head --port=6379")])
    assert choose("What command starts the Ray head node?", alone, np.array([0.9]), neighbour=_neighbour(alone)) == []
    # nor one whose "[1]" would read as a citation of the answer
    indexed = _cands([(PROSE, "Read the head node's address with:"), (SNIPPET, "address = ray.nodes()[1]")])
    assert choose("How do I read the head node's address?", indexed, np.array([0.2, 0.9]),
                  neighbour=_neighbour(indexed)) == []


def test_a_sentence_whose_terms_a_quoted_one_holds_is_not_quoted_again() -> None:
    long = _cands([(ITEM, "Wrap the optimizer in hvd.DistributedOptimizer. It averages gradients using allreduce.")])
    short = _cands([(ITEM, "Wrap the optimizer in hvd.DistributedOptimizer."),
                    (PROSE, "Horovod averages the gradients of every worker before the update.")], doc="e")
    cands = long + short
    chosen = choose("How do I make my optimizer distributed with Horovod?", cands, np.array([0.9, 0.8, 0.7]),
                    neighbour=_neighbour(cands), add_above=0.5)
    assert [(c.doc_id, c.ordinal) for c in chosen] == [("d", 0), ("e", 1)]  # the docs page's shorter copy is left out
    # a code line is quoted as written though a sentence named the same command inline
    code = _cands([(PROSE, "Start it with horovodrun -np 4 -H localhost:4 python train.py on one machine."),
                   (PROSE, "Run it on one machine like this:"),
                   (SNIPPET, "horovodrun -np 4 -H localhost:4 python train.py")], doc="f")
    chosen = choose("How do I start a Horovod job on one machine?", code, np.array([0.9, 0.6, 0.8]),
                    neighbour=_neighbour(code), add_above=0.5)
    assert [c.ordinal for c in chosen] == [0, 1, 2]


def test_a_second_copys_reworded_sentence_is_not_quoted_again_but_alike_code_and_other_figures_are() -> None:
    """An ACM page's abstract and its PDF say one thing in a few more words: quoted twice, the answer said it twice."""
    pdf = _cands([(PROSE, "We deploy Capuchin in a widely-used deep learning framework, Tensorflow, and show that "
                          "Capuchin can reduce the memory footprint by up to 85% among 6 DNNs.")])
    page = _cands([(PROSE, "We deploy Capuchin in Tensorflow and show that Capuchin can reduce the memory footprint "
                           "by up to 85% among 6 DNNs."),
                   (PROSE, "Capuchin combines swapping and recomputation guided by tensor access patterns.")], doc="e")
    cands = pdf + page
    chosen = choose("How much memory does Capuchin save?", cands, np.array([0.8, 0.9, 0.6]),
                    neighbour=_neighbour(cands), add_above=0.5)
    assert [(c.doc_id, c.ordinal) for c in chosen] == [("e", 0), ("e", 1)]  # the longer copy holds no term less
    # another figure is another fact ("18 billion" and "10 billion" for two tutorials' models)
    sizes = _cands([(PROSE, "For this tutorial, we will configure a 18 billion parameter GPT-2 model with DeepSpeed."),
                    (PROSE, "For this tutorial, we will configure a 10 billion parameter GPT-2 model with DeepSpeed.")])
    assert len(choose("How big a GPT-2 model does the tutorial configure?", sizes, np.array([0.9, 0.8]),
                      neighbour=lambda c, step: None, add_above=0.5)) == 2
    # two lines of code alike in most of their words each show their own form
    code = _cands([(PROSE, "Build the trainer with a run configuration:"),
                   (SNIPPET, "trainer = TorchTrainer(train_func, scaling_config=scaling_config, run_config=config)"),
                   (PROSE, "Or hand it the datasets:"),
                   (SNIPPET, "trainer = TorchTrainer(train_func, scaling_config=scaling_config, datasets=datasets)")])
    chosen = choose("How do I build the trainer?", code, np.array([0.1, 0.9, 0.1, 0.8]),
                    neighbour=_neighbour(code), add_above=0.5)
    assert [c.ordinal for c in chosen] == [0, 1, 2, 3]


def test_a_listing_line_is_quoted_under_the_sentence_over_its_block_unless_it_indexes() -> None:
    cands = _cands([(PROSE, "This example trains the model on two GPU workers."),
                    (LISTING, "scaling_config = ScalingConfig(num_workers=2, use_gpu=True)"),
                    (LISTING, "trainer = TorchTrainer(train_func, scaling_config=scaling_config)"),
                    (LISTING, "result = trainer.fit()")])
    chosen = choose("How do I start training with a TorchTrainer?", cands, np.array([0.2, 0.1, 0.9, 0.1]),
                    neighbour=_neighbour(cands))
    assert [c.ordinal for c in chosen] == [0, 2]  # the sentence saying what the code is, then the line
    # a line whose "[0]" would read as a citation marker of the answer is not quoted
    indexed = _cands([(PROSE, "This example trains the model on two GPU workers."),
                      (LISTING, "loader = DataLoader(datasets[0], batch_size=8)")])
    assert LISTING not in [c.role for c in choose("How do I build the DataLoader for training?", indexed,
                                                  np.array([0.2, 0.9]), neighbour=_neighbour(indexed))]


def test_a_listing_line_is_read_under_its_heading_only_for_words_beyond_its_documents_title() -> None:
    """A code block right under a heading is quoted under it when the heading names something asked about; a word
    the heading shares with the page's title ("mxnet" in every heading of the MXNet Go bindings' README) says
    nothing of why the line answers, and the line labelled by it alone is not quoted."""
    cands = [Candidate(0, "d", 0, "go-mxnet-predictor is go binding for mxnet c_predict_api.", PROSE, None,
                       section="go-mxnet-predictor"),
             Candidate(0, "d", 1, "cd /root/MXNet/mxnet && make -j2", LISTING, None, section="1.2 Get mxnet and build"),
             Candidate(0, "d", 2, "p.Forward()", LISTING, None, section="3.4 Do forward")]

    def neighbour(c: Candidate, step: int) -> Candidate | None:
        return next((x for x in cands if x.ordinal == c.ordinal + step), None)

    titles = {"d": "go-mxnet-predictor: Go binding for MXNet c_predict_api"}
    scores = np.array([0.5, 0.9, 0.1])
    asked = "At which venue was the original MXNet paper published?"
    # without the titles, "mxnet" labels the build command; with them, it is left out
    assert [c.ordinal for c in choose(asked, cands, scores, neighbour=neighbour, add_above=0.05)] == [1, 0]
    chosen = choose(asked, cands, scores, neighbour=neighbour, add_above=0.05, titles=titles)
    assert [c.ordinal for c in chosen] == [0]
    # a heading word beyond the title ("forward") still labels its line
    chosen = choose("How do I run the forward pass with go-mxnet-predictor?", cands, np.array([0.5, 0.1, 0.9]),
                    neighbour=neighbour, add_above=0.05, titles=titles)
    assert [(c.ordinal, c.under) for c in chosen] == [(2, "3.4 Do forward"), (0, None)]


def test_a_listing_line_under_the_lead_follows_the_lead_not_the_reading_order() -> None:
    """The lead "Run the following commands ...:" and its command, too long to be announced, were parted by a
    sentence from higher up the page (the rest is in reading order): the command read as the other's."""
    cands = _cands([(PROSE, "KubeSphere runs on any Kubernetes cluster, in the cloud or on premises."),
                    (PROSE, "Run the following commands to install KubeSphere on an existing Kubernetes cluster:"),
                    (LISTING, "helm upgrade --install -n kubesphere-system --create-namespace ks-core "
                              "https://charts.kubesphere.io/main/ks-core-1.1.3.tgz --debug --wait"),
                    (PROSE, "KubeSphere is hosted on several cloud providers.")])
    chosen = choose("How do I install KubeSphere on my Kubernetes cluster?", cands, np.array([0.6, 0.9, 0.5, 0.1]),
                    neighbour=_neighbour(cands), add_above=0.3)
    assert [c.ordinal for c in chosen] == [1, 2, 0]
    body, _ = compose(chosen, [Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="KubeSphere",
                                   page=None, section=None, text="")])
    assert body.startswith("Run the following commands to install KubeSphere on an existing Kubernetes cluster: [1]"
                           "\n```\nhelm upgrade --install")
    # and two documents' code lines quoted one after the other are two blocks, never one
    a, b = _cands([(PROSE, "Start the head node with:"), (SNIPPET, "ray start --head")], doc="a"), \
        _cands([(PROSE, "Install it with:"), (SNIPPET, "pip install horovod")], doc="b")
    hits = [Hit(rank=i, score=1.0, doc_id=d, url=f"https://x.org/{d}", title=d, page=None, section=None, text="")
            for i, d in enumerate("ab", 1)]
    body, _ = compose([a[0], a[1], b[1]], hits)
    assert body.count("```") == 4 and "ray start --head\npip install" not in body


def test_a_code_line_capitalised_like_a_title_is_still_quoted_as_code() -> None:
    cands = _cands([(PROSE, "The total number of GPUs is calculated as:"),
                    (SNIPPET, "Total GPUs = TP × PP × CP × EP × DP"),
                    (PROSE, "Context parallelism splits the sequence across GPUs.")])
    assert title_like(cands[1].text)  # every word capitalised, no sentence end
    chosen = choose("How is the number of GPUs computed?", cands, np.array([0.1, 0.9, 0.2]),
                    neighbour=_neighbour(cands), add_above=0.5)
    assert [c.ordinal for c in chosen] == [0, 1]
    # the same words as a line of prose are a heading: not quoted for a question asking no name
    heading = _cands([(PROSE, "Total GPUs Per Node And Cluster")])
    assert choose("How is the number of GPUs computed?", heading, np.array([0.9]), neighbour=_neighbour(heading)) == []


def test_the_same_sentence_from_a_second_copy_of_the_work_is_quoted_once() -> None:
    arxiv = _cands([(PROSE, "ZeRO removes the memory redundancies across data-parallel processes [12].")], "arxiv")
    proceedings = _cands([(PROSE, "ZeRO removes the memory redundancies across data-parallel processes.")], "sc20")
    other = _cands([(PROSE, "Stage 3 of ZeRO partitions the parameters across the processes too.")], "blog")
    cands = arxiv + proceedings + other
    chosen = choose("How does ZeRO save memory?", cands, np.array([0.9, 0.85, 0.6]), add_above=0.1)
    assert [c.doc_id for c in chosen] == ["arxiv", "blog"]


def test_two_releases_saying_the_same_but_for_a_version_are_both_quotable() -> None:
    said = ("- If you installed PyTorch from PyPI, make sure that g++-{} or above is installed; if you installed it "
            "from Conda, make sure that the gxx_linux-64 Conda package is installed.")
    new, old = _cands([(ITEM, said.format("5"))], "v2"), _cands([(ITEM, said.format("4.9"))], "v1")
    chosen = choose("Which g++ did the old release need for PyTorch from PyPI?", new + old, np.array([0.9, 0.8]),
                    add_above=0.1)
    assert [c.doc_id for c in chosen] == ["v2", "v1"]


def test_a_line_written_as_a_title_is_marked_so_the_model_can_weigh_it() -> None:
    assert title_like("- Activation Checkpointing and CPU Offload")  # a menu entry of a docs page
    assert title_like("Scaling Distributed Training with Adaptive Sharding")  # a paper's title in a reading list
    assert not title_like("Activation checkpointing trades compute for memory.")  # a sentence
    assert not title_like("Sharding")  # one word: a name, which "which" questions ask for
    assert not title_like("Model | GPUs | TFLOPs")  # a table row is is_row's
    assert not title_like("See the Examples:")  # it announces what follows


def test_a_sentence_pointing_elsewhere_is_marked_so_the_model_can_weigh_it() -> None:
    assert points_away("An example of sequence parallelism with HybridParallelPlugin can be found here.")  # a link
    assert points_away("For more information, you may read the docs.")
    assert points_away("Below, we will introduce how to use these different types of sequence parallelism.")
    assert points_away("In this tutorial, you will learn how to use pipeline parallel.")
    assert points_away("A sample config file is shown below.")  # announces code: the weight, not a rule, decides
    assert not points_away("Sequence parallelism partitions along the sequence dimension.")  # says what it is
    assert not points_away("See Section 5 for details on selective activation recomputation.")  # a paper's outline
    # what a figure or table holds is not in the text; that something is so, as a figure shows, is
    assert points_away("The results are shown in Figure 3.")
    assert points_away("Figure 7 shows the results of this benchmark.")
    assert points_away("Table 6 presents throughput in FLOPS on 64K, 80K and 120K.")
    assert points_away("Figures 5 and 6 compare the strategies.") and points_away("Fig. 10(b) plots the latency.")
    assert not points_away("Figure 8 shows that ZeRO-Offload outperforms L2L by 14% on average.")
    assert not points_away("As Figure 3 shows, DTR comes close to the optimal solutions.")
    assert not points_away("The speedups shown in Figure 3 reach 2.3x for all models.")
    # a figure by where it stands, which an answer does not show either
    assert points_away("The top figure shows the default non-interleaved 1F1B schedule.")
    assert points_away("Left figure shows the training loss for 336M and 752M BERT model.")
    assert points_away("The diagram below illustrates the pipeline.")
    assert not points_away("The plot shows that memory falls linearly with the number of GPUs.")
    assert not points_away("The model shows good scaling.")
    row = feature_matrix(QuestionFacts({"exampl": 1.0}, frozenset(), frozenset()),
                         ["More details can be found here."], [Place(PROSE, 0, 0, 0.5, False)], np.array([0.5]))
    assert row[0, FEATURES.index("points_away")] == 1.0


@pytest.mark.parametrize(("text", "expected"), [
    ("PTD-P outperforms ZeRO-3 by 70% for both models due to less cross-node communication.", False),
    # a three-level number is a section's, and where the sentence after it begins is unclear
    ("3.1.4 Pipelined Model Parallel Training", True),
    ("4.2.1 Pipeline Parallelism divides the layers into stages.", True),
    # a decimal opening a sentence is no section number
    ("2.5 GB of activations are kept per layer.", False),
    ("1.5 Tensor parallelism halves the memory of each layer.", False),
    ("See Appendix A for the full list of settings.", False),
    ("NVIDIA A100 GPUs train the model with tensor parallelism", False),
    # a running header in capitals before a page's continuation; a name in capitals opens a sentence
    ("TECHNICAL REPORT causal mask has not been addressed, the DS-Ring has load unbalancing issue.", True),
    ("PATHWAYS uses a client-server architecture.", False),
    ("NCCL is NVIDIA's library for collective communication.", False),
    # one word in capitals before a sentence: a section's title when it is English, else a name
    ("INTRODUCTION Deep learning models keep growing.", True),
    ("NVIDIA Megatron Core is a library of building blocks for large-scale training.", False),
    # a section's title, then its first subsection's, before a sentence whose start is unclear
    ("2 Related Work 2.1 Data, Model and Pipeline Parallelism Parallelization is a key strategy.", True),
    ("6.2 Experimental Results 6.2.1 Model scale As an important step, we first test the largest models.", True),
    ("8 GPUs reach 1.5 TFLOPS per GPU in total.", False),  # no section: the numbers differ
    # cut off mid-clause or at a line-end hyphen (a page or column break)
    ("Bounded-staleness schedules such as PipeMare and PipeDream-2BW do", True),
    ("The gradient of each shard is then reduced across the", True),
    ("TF is similar to our system, where we construct the same computations and ex-", True),
    # a paper's front matter
    ("Correspondence to: The Authors <authors@example.org>.", True),
    # a table's or figure's text closed by its label; prose ending on a figure holds its function words
    ("Model MemUsage OPs TensorSizes ResNet-152 180GB 882 26 Inception-4 71GB 830 64 Table 1.", True),
    ("Token 0 Token 1 Token 2 layer Dataset (infinite) batch Figure 2.", True),
    ("The memory each model needs and its operations are listed in Table 1.", False),
    # a sentence the page cut off, the label glued on at the break: prose points at a label with "in", "of", "see" ...
    ("Weak scaling is typically Table 1.", True),
    ("While we do not report detailed results, we have substantial experience Figure 9.", True),
    ("The pipeline bubble shrinks as the number of micro-batches grows, shown as Figure 7.", False),
    ("This corresponds to the left-most column of Figure 9.", False),
    ("For the results, see Fig. 2.", False),
    ("The speedups on both clusters are summarized in Table 1, Table 2.", False),  # a list of labels
    ("The speedups on both clusters are summarized in Table 1 or Table 2.", False),
])
def test_headings_glued_before_a_sentence_cut_offs_and_front_matter_are_furniture(text: str, expected: bool) -> None:
    assert furniture(text) is expected


@pytest.mark.parametrize(("text", "sentence"), [
    ("5.2 Comparison to ZeRO-3 We compare PTD-P to ZeRO-3 in Table 2 and Figure 10.",
     "We compare PTD-P to ZeRO-3 in Table 2 and Figure 10."),
    ("3.1 Activation Memory Activation memory grows with the sequence length.",
     "Activation memory grows with the sequence length."),
    ("Model Parallel Transformers We take advantage of the structure of transformer networks.",
     "We take advantage of the structure of transformer networks."),
    ("TECHNICAL REPORT Tip 7: We suggest the order TP, SP-Ulysses, SP-Ring, ZeRO-DP, PP.",
     "Tip 7: We suggest the order TP, SP-Ulysses, SP-Ring, ZeRO-DP, PP."),
    ("3 SYSTEM DESIGN In this section we describe the scheduler.", "In this section we describe the scheduler."),
    ("5 Experimental Results 5.1 Performance of Unified SP We first investigate the attention module.",
     "We first investigate the attention module."),
    ("Optimizer States Figure 3b shows that optimizer states need 4x the bandwidth of gradients.",
     "Figure 3b shows that optimizer states need 4x the bandwidth of gradients."),
    # a run-in title with small words or in lower case after its capital
    ("Bandwidth w.r.t. activation memory Figure 3c also shows that 2 GB/s sustains 50% efficiency.",
     "Figure 3c also shows that 2 GB/s sustains 50% efficiency."),
    ("Prefetching and Overlapping Figure 6d shows the throughput with prefetching turned on and off.",
     "Figure 6d shows the throughput with prefetching turned on and off."),
    # a numbered heading naming its label: the sentence begins at the capital before the first lower-case word
    ("5.2 Pg: Gradient Partitioning As each data parallel process only updates its partition, it only needs ...",
     "As each data parallel process only updates its partition, it only needs ..."),
    ("6.2 CB: Constant Size Buffers ZeRO carefully selects the sizes of the temporal-data buffers.",
     "ZeRO carefully selects the sizes of the temporal-data buffers."),
    ("6.3 MD: Memory Defragmentation Memory fragmentation occurs as a result of activation checkpointing.",
     "Memory fragmentation occurs as a result of activation checkpointing."),
    # a table's or figure's text run into the sentence after it
    ("Dataset Avg Input Length Cache Ratio ArXiv Summarization 8088 229 ~0% Poisson Process This section evaluates "
     "the end-to-end performance.", "This section evaluates the end-to-end performance."),
    ("16 GB 208 GB 1.5 TB GPU CPU Disk 12 GB/s 2 GB/s Our focus is designing offloading strategies.",
     "Our focus is designing offloading strategies."),
    # a run-in heading in title case whose words the sentence's subject says again
    ("Hybrid Model and Data Parallelism Model parallelism is orthogonal to data parallelism.",
     "Model parallelism is orthogonal to data parallelism."),
    ("Tensor Model Parallelism Tensor model parallelism (or, tensor parallelism) splits each layer.",
     "Tensor model parallelism (or, tensor parallelism) splits each layer."),
])
def test_a_heading_glued_before_a_sentence_is_cut_off_where_the_sentence_begins(text: str, sentence: str) -> None:
    # the sentence states something: it is quoted from where it begins, not dropped as furniture
    assert text[heading_end(text):] == sentence
    assert not furniture(text)


@pytest.mark.parametrize("text", [
    "NVIDIA Megatron Core is a library of building blocks.",  # a name in capitals is no heading
    "NVIDIA A100 GPUs train the model with tensor parallelism.",
    "As Figure 5a shows, the throughput grows on 512 GPUs.",
    "Results in Figure 3 show that the throughput grows.",  # a word leading into the figure: one sentence
    "Speedups as shown Table 2 lists them.",
    "Lemma A.1 tells us that the gap is bounded by L ≤ 2(N − 2) B − 1 We note that the bound is tight.",  # prose
    "Megatron Core Transformer Layer Block Spec Version 2 With GPT 3 The layer spec builds a model.",  # 2 figures
    "ZeRO: Zero Redundancy Optimizer ZeRO removes the memory redundancies.",  # no clear point: furniture instead
    "TECHNICAL REPORT causal mask has not been addressed.",  # a page's continuation: furniture instead
    "Data Parallel Training is simple to set up.",  # a subject in title case, no heading before it
    "Mixed Precision Training Tools make it easy to train in fp16.",
    "Megatron Core Model parallelism is configured per layer.",  # a name, not English words, before the sentence
])
def test_no_heading_is_cut_where_none_is_or_where_the_cut_is_unclear(text: str) -> None:
    assert heading_end(text) == 0


def test_what_leans_back_is_read_after_a_glued_heading() -> None:
    assert not standalone("TECHNICAL REPORT This reduces the memory of each stage.")
    assert standalone("TECHNICAL REPORT Tip 7: We suggest the order TP, SP-Ring, PP.")


def test_the_llm_context_is_the_best_rated_sentences_first_then_their_passage() -> None:
    from dmlqa.query.answer import AskOptions, llm_context
    from dmlqa.query.extractive import Pool

    hits = [Hit(rank=1, score=1.0, doc_id="a", url="https://a.org", title="A", page=None, section=None,
                text="Passage of A about pipelines."),
            Hit(rank=2, score=0.5, doc_id="b", url="https://b.org", title="B", page=None, section=None,
                text="Passage of B about ZeRO.")]
    cands = (_cands([(PROSE, "Pipelines keep every stage busy with micro-batches.")], "a")
             + _cands([(PROSE, "ZeRO partitions the optimizer states across the ranks."),
                       (CAPTION, "Figure 2: ZeRO memory savings.")], "b"))
    cands = [Candidate(0 if c.doc_id == "a" else 1, c.doc_id, c.ordinal, c.text, c.role, c.page) for c in cands]
    pool = Pool(cands, [], np.zeros(3, np.float32), QuestionFacts({}, frozenset(), frozenset()), hits,
                lambda c, step: None)
    sources = llm_context(pool, np.array([0.2, 0.9, 0.95]), hits, AskOptions())
    assert [s.doc_id for s in sources] == ["b", "a"] and [s.rank for s in sources] == [1, 2]  # the best first
    assert sources[0].text.splitlines()[0] == "ZeRO partitions the optimizer states across the ranks."
    assert "Figure 2" not in sources[0].text.splitlines()[0]  # a caption is no quote
    assert sources[0].text.endswith("Passage of B about ZeRO.")


def test_the_best_sentence_brings_the_sentences_after_it_it_reads_on() -> None:
    """A passage often names what was asked, then states it: "The most common reasons are ..." ->
    "The parameters do not fit on one device." The best sentence brings ``read_on`` readable ones."""
    cands = _cands([(PROSE, "Mesh TensorFlow is meant for more sophisticated parallel computation."),
                    (PROSE, "The parameters of the model may not fit on one device at all."),
                    (CAPTION, "Figure 1: A mesh of eight devices."),
                    (PROSE, "Data-parallel training alone does not need Mesh TensorFlow.")])
    scores = np.array([0.9, 0.1, 0.1, 0.5])
    alone = choose("What is Mesh TensorFlow for?", cands, scores, neighbour=_neighbour(cands), add_above=0.6)
    assert [c.ordinal for c in alone] == [0]
    read = choose("What is Mesh TensorFlow for?", cands, scores, neighbour=_neighbour(cands), add_above=0.6, read_on=2)
    assert [c.ordinal for c in read] == [0, 1]  # the caption stops the reading

    # a sentence announcing what its document does not go on to give ("... are:", then a code block not stored)
    cands = _cands([(PROSE, "Mesh TensorFlow is meant for more sophisticated parallel computation."),
                    (PROSE, "The major components of this directory are:")])
    read = choose("What is Mesh TensorFlow for?", cands, np.array([0.9, 0.1]), neighbour=_neighbour(cands),
                  add_above=0.6, read_on=1)
    assert [c.ordinal for c in read] == [0]
    cands = _cands([(PROSE, "Mesh TensorFlow is meant for more sophisticated parallel computation."),
                    (PROSE, "It offers two layouts:"), (ITEM, "- batch splitting over the mesh"),
                    (ITEM, "- model splitting over the mesh")])
    read = choose("What is Mesh TensorFlow for?", cands, np.array([0.9, 0.1, 0.1, 0.1]),
                  neighbour=_neighbour(cands), add_above=0.6, read_on=1)
    assert [c.ordinal for c in read] == [0, 1, 2, 3]  # read on with the list it announces


# -- the refit's refusal cut (bench/train_selector.py) ------------------------------------------------------


def _item(best: float, answerable: bool, absent: tuple[str, ...] = (), near: float = 0.5):  # noqa: ANN202
    from types import SimpleNamespace

    pool = SimpleNamespace(candidates=[0, 1], cosines=np.array([0.2, 0.6]))
    return SimpleNamespace(q={"answerable": answerable}, absent=list(absent), near=near, pool=pool), np.array(
        [best / 2, best])


def test_a_cut_settles_where_few_questions_are_not_in_a_hairline_gap() -> None:
    """Counted hard, the fewest mistakes sit between 0.295 (unanswerable) and 0.30 (answerable); smeared,
    that cut pays for the three answerable questions just above it, and the cut goes below 0.295."""
    values = [(0.30, True), (0.31, True), (0.32, True), (0.5, True), (0.8, True), (0.1, False), (0.295, False)]
    cut = bench_script("train_selector").best_cut(values)
    assert 0.1 < cut < 0.295


def test_the_refusal_cut_refuses_the_weak_question_no_check_caught_before() -> None:
    """An unanswerable question the name check and the off-topic cut let through (0.1) is refused, no
    answerable one (0.3 and up) is; one refused by name (0.9) or as off-topic (0.95, nearness 0) does not
    move the cut."""
    items, scores = zip(*[_item(0.3, True), _item(0.5, True), _item(0.8, True), _item(0.1, False),
                          _item(0.9, False, ("torchtitan",)), _item(0.95, False, near=0.0)], strict=True)
    cut = bench_script("train_selector").refuse_cut(list(items), list(scores), 0.2)
    assert 0.1 < cut < 0.3


def test_with_every_unanswerable_question_refused_before_the_cut_refuses_no_answerable_one() -> None:
    """A cut fitted to refuse a share of the answerable questions would refuse the weakest (0.04): with no
    unanswerable question left for it, the cut goes under every answerable one."""
    items, scores = zip(*[_item(0.04, True), _item(0.5, True), _item(0.7, False, ("Hivemind",))], strict=True)
    assert bench_script("train_selector").refuse_cut(list(items), list(scores), 0.2) < 0.04


def test_the_off_topic_cut_passes_every_answerable_question_it_can() -> None:
    """Off-topic questions near the background (-0.05, 0.02) are refused, answerable ones (0.25 and up)
    are not; a question refused by name does not count."""
    items = [_item(0.5, True, near=n)[0] for n in (0.25, 0.4, 0.5, 0.6)]
    items += [_item(0.5, False, near=n)[0] for n in (-0.05, 0.02)] + [_item(0.5, False, ("pjit",), near=0.7)[0]]
    cut = bench_script("train_selector").off_topic_cut(items)
    assert 0.02 < cut < 0.25


def test_the_trials_script_refuses_trial_names_for_a_step_that_fits_none(tmp_path) -> None:  # noqa: ANN001
    """``selector_trials.py curve lr`` (or ``prepare lr``) would fit no trial named: it says so and exits 2 before it
    reads a home, where it took the names and ignored them."""
    import subprocess
    import sys

    for step in ("curve", "prepare"):
        proc = subprocess.run([sys.executable, str(BENCH / "selector_trials.py"), "--home", str(tmp_path / "none"),
                               "--cache", str(tmp_path / "pools.pkl"), step, "lr", "gbt"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 2, proc.stderr
        assert f"{step} takes no trial names" in proc.stderr and "lr gbt" in proc.stderr
    assert not (tmp_path / "none").exists()


def test_the_curve_ranks_the_best_scored_positive_and_draws_whole_works() -> None:
    """``selector_trials.py curve``'s counts: the best-scored positive of a pool ranks second when a negative
    scores above it (-1 with none); a learning curve's share draws whole works, so that no work is half seen, and
    at least one."""
    trials = bench_script("selector_trials")
    scores = np.array([0.1, 0.9, 0.5, 0.3])
    assert trials.first_positive(scores, np.array([True, False, True, False])) == 1
    assert trials.first_positive(scores, np.array([False, True, False, False])) == 0
    assert trials.first_positive(scores, np.zeros(4, bool)) == -1
    groups = ["a", "a", "b", "c", "c", "c"]
    for seed in range(5):
        drawn = trials.works_share(list(range(6)), groups, 0.34, np.random.default_rng(seed))
        assert len({groups[i] for i in drawn}) == 1  # one work of three, with every question of it
        assert drawn == [i for i, g in enumerate(groups) if g == groups[drawn[0]]]
    assert trials.works_share(list(range(6)), groups, 0.01, np.random.default_rng(0))  # at least one work
    assert trials.works_share(list(range(6)), groups, 1.0, np.random.default_rng(0)) == list(range(6))


def test_the_question_adapter_learns_to_turn_questions_towards_the_answering_sentences() -> None:
    """Made-up pools where the answering sentence holds the question's terms and what they map to elsewhere
    (the question's first half of the space, shifted into the second), while a distractor sits nearer the
    question: fitted on 40 such questions, the turned question finds the answer first in every question it
    did not see; the plain one seldom does."""
    adapter = bench_script("question_adapter")

    rng = np.random.default_rng(0)
    half = 4
    shift = np.eye(2 * half, k=-half, dtype=np.float32)  # dims 0-3 to dims 4-7

    def pool() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q = np.concatenate([rng.normal(size=half), np.zeros(half)]).astype(np.float32)
        q /= np.linalg.norm(q)
        answer = 0.5 * q + 0.9 * shift @ q
        near = 0.8 * q + 0.2 * rng.normal(size=2 * half).astype(np.float32)  # sounds like the question
        others = rng.normal(size=(6, 2 * half)).astype(np.float32)
        x = np.vstack([answer, near, others])
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return q, x, np.array([True] + [False] * 7)

    train, test = [pool() for _ in range(40)], [pool() for _ in range(20)]
    u, v = adapter.fit_adapter(*zip(*train, strict=True), rank=half, penalty=0.01, steps=200)
    plain = sum(int(np.argmax(x @ q)) == 0 for q, x, _ in test)
    turned = sum(int(np.argmax(adapter.adapted_cosines(u, v, q, x))) == 0 for q, x, _ in test)
    assert plain <= len(test) // 4 and turned == len(test)
    again = adapter.fit_adapter(*zip(*train, strict=True), rank=half, penalty=0.01, steps=200)
    assert np.array_equal(again[0], u) and np.array_equal(again[1], v)  # a refit is reproducible
