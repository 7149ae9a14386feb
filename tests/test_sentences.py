"""Sentence splitting and selection for extractive answers (issue 10), on passages written here."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from dmlqa.extract.leaning import leans_back
from dmlqa.extract.quoting import for_answer
from dmlqa.extract.sentences import (
    CAPTION,
    CODE,
    FURNITURE,
    HEADING,
    ITEM,
    LISTING,
    PROSE,
    REFERENCE,
    ROW,
    SNIPPET,
    classify,
    split_document,
)
from dmlqa.extract.tables import MARKDOWN_ROW_CHARS
from dmlqa.models import Block, Citation, Document, Hit
from dmlqa.query.compose import compose
from dmlqa.query.extractive import Candidate, passage_candidates, question_terms
from dmlqa.query.quotes import choose


def doc(*blocks: str, content_type: str = "html", page: int | None = None) -> Document:
    return Document(doc_id="d", url="https://x.org/d", title="Tensor Fusion",
                    blocks=tuple(Block(b, page=page) for b in blocks), content_type=content_type)


def roles(d: Document) -> list[tuple[str, str]]:
    return [(s.role, s.text) for s in split_document(d)]


def test_whole_sentences_with_offsets_into_the_document_text() -> None:
    d = doc("Tensor Fusion batches small tensors. It uses a 128 MB buffer by default, e.g. for allreduce.",
            "Second block has one sentence of reasonable length here.")
    ss = split_document(d)
    assert [s.text for s in ss] == ["Tensor Fusion batches small tensors.",
                                    "It uses a 128 MB buffer by default, e.g. for allreduce.",
                                    "Second block has one sentence of reasonable length here."]
    for s in ss:
        assert " ".join(d.text[s.start:s.end].split()) == s.text


def test_pdf_lines_are_wraps_but_html_lines_are_paragraphs_and_list_items() -> None:
    pdf = doc("The bubble overhead is amortised when the number of\nmicro-batches is at least four times the "
              "number of stages.", content_type="pdf")
    assert [s.text for s in split_document(pdf)] == [
        "The bubble overhead is amortised when the number of micro-batches is at least four times the number "
        "of stages."]
    html = doc("ZeRO has three stages that partition more and more state:\n- Stage 1 partitions optimizer states."
               "\n- Stage 2 also partitions the gradients.")
    assert [r for r, _ in roles(html)] == [PROSE, ITEM, ITEM]


def test_a_short_list_item_naming_a_call_is_an_item_not_code() -> None:
    # its bullet is layout: counted as a character that is no letter, it had made "Run hvd.init()." read as code
    steps = doc("To use Horovod with PyTorch, make the following modifications to your training script:\n"
                "- Run hvd.init().\n- Pin each GPU to a single process.")
    assert [r for r, _ in roles(steps)] == [PROSE, ITEM, ITEM]
    assert roles(doc("Run it like this:\n- x = f(a, b[0])"))[1] == (CODE, "- x = f(a, b[0])")  # code stays code


def test_list_items_flattened_into_a_line_are_split_and_quotable() -> None:
    # a PDF's bullets after "as follows:" (one paragraph: PDF lines are wraps)
    pdf = doc("The main contributions of this paper are as follows:\n• Blocked quantized weights (qwZ) reduce the "
              "all-gather volume by 50%. • Hierarchical partitioning (hpZ) removes the inter-node all-gather.\n"
              "• Quantized gradients (qgZ) cut the gradient traffic by 75%.", content_type="pdf")
    assert roles(pdf) == [
        (PROSE, "The main contributions of this paper are as follows:"),
        (ITEM, "• Blocked quantized weights (qwZ) reduce the all-gather volume by 50%."),
        (ITEM, "• Hierarchical partitioning (hpZ) removes the inter-node all-gather."),
        (ITEM, "• Quantized gradients (qgZ) cut the gradient traffic by 75%.")]
    # an HTML list flattened after a colon; a dash inside a sentence is no item
    html = doc("ZeRO++ has three designs, namely qwZ, hpZ and qgZ: - qwZ applies block-based quantization to the "
               "weights. - hpZ eliminates the inter-node all-gather of the backward pass. The big model - the one "
               "with 175B parameters - trains faster.")
    assert [r for r, _ in roles(html)] == [PROSE, ITEM, ITEM, PROSE]
    assert roles(html)[2][1] == "- hpZ eliminates the inter-node all-gather of the backward pass."


def test_a_list_item_too_long_to_quote_is_quoted_by_its_sentences() -> None:
    rest = " ".join(f"Step {n} of the recovery restores the state of worker number {n} from memory." for n in range(7))
    long_item = doc(f"- Periodically call state.commit() to back up your state in memory. {rest} If you commit "
                    "once every 10 batches, you reduce the amount of copying by a factor of 10.")
    ss = split_document(long_item)
    assert len(ss) == 9 and all(s.role == ITEM for s in ss)
    assert ss[-1].text == "If you commit once every 10 batches, you reduce the amount of copying by a factor of 10."
    short = doc("- Periodically call state.commit() to back up your state. This guards against a failed worker.")
    assert roles(short) == [(ITEM, short.blocks[0].text)]  # a short item stays whole


def test_a_sentence_of_plain_words_naming_api_calls_is_prose_but_code_stays_code() -> None:
    api = ("Each worker should load micro-batches of size engine.train_micro_batch_size_per_gpu() and will be "
           "queried a total of engine.gradient_accumulation_steps() times per train_batch().")
    assert classify(api) == PROSE
    for code in ("model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank]); loss.backward()",
                 "config = dict(parallel=dict(tensor=dict(size=4, mode='1d')), fp16=dict(mode=None)).",
                 "A B = sigmoid(A) C = sigmoid(B) E = Pooling(C) F = Pooling(B) G = E * F."):
        assert classify(code) == CODE, code
    # plain words but no sentence end: a comment or a line of code, not a sentence to quote
    assert classify("we call engine.step() then engine.backward(loss) and engine.train_batch() in the loop") == CODE


def test_math_in_prose_and_a_list_of_version_bounds_are_no_code_but_shell_and_comparisons_stay_code() -> None:
    """A docs page writes its formulas in TeX ("$Y_i = XA_i$"), and a README its requirements as bounds ("- NCCL >=
    2.0"): taken for code, neither could be quoted (Colossal-AI's "Which GPUs can run it?" had its answer, "NVIDIA GPU
    Compute Capability >= 7.0", in a list read as code)."""
    for prose in ("Given 2 processors, we split the columns of $A$ into $[A_1 ~ A_2]$, and calculate $Y_i = XA_i$ on "
                  "each processor, which then forms $[Y_1 ~ Y_2] = [XA_1 ~ XA_2]$.",
                  "To calculate $$ Z = [Y_1 ~ Y_2] B $$ we first calculate $Y_iB_i$ on each processor, then use an "
                  "all-reduce to aggregate the results as $Z=Y_1B_1+Y_2B_2$."):
        assert classify(prose) == PROSE, prose
    for item in ("- NCCL >= 2.0", "- Tensorflow >= 1.11.0, < 2.0",
                 "- PyTorch >= 2.2 - Python >= 3.7 - CUDA >= 11.0 - NVIDIA GPU Compute Capability >= 7.0 - Linux OS"):
        assert classify(item, ITEM) == ITEM, item
    for code in ("export NNODES=2; export WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES)); echo $WORLD_SIZE",
                 "done = self.cur_pos >= self.end_pos",
                 "export PATH=$HOME/bin:$PATH; echo $PATH >= $OLD", "if (i >= n) { return x; }"):
        assert classify(code) == CODE, code


def test_a_range_of_releases_in_a_news_item_is_no_code_but_an_arrow_in_code_stays_code() -> None:
    """FlexFlow's README news "- [09/02/2023] Adding AMD GPU support, released Docker images for ROCM 5.3->5.6" was
    read as a line of code (the arrow is a code token, and the date and numbers leave few letters), so the only
    sentence saying which ROCm releases its images cover could not be quoted. An arrow between two releases reads
    as "to"; a return annotation and a pointer are still code."""
    for item in ("- [09/02/2023] Adding AMD GPU support, released Docker images for ROCM 5.3->5.6",
                 "- Upgraded the default image from v1.12 -> v2.0 for all users"):
        assert classify(item, ITEM) == ITEM, item
    for code in ("def f(x: int) -> int: return x", "p->next = q->next; // 1.2->3.4", "auto g() -> int { return 1; }"):
        assert classify(code) == CODE, code


def test_a_footnote_number_glued_to_a_stop_ends_the_sentence_and_is_dropped() -> None:
    pdf = doc("We study whether the model learns the societal biases in its training data.8 Following previous "
              "work, we use templates. Release 2.8 Followers were counted in the second study of the year.",
              content_type="pdf")
    assert [t for _, t in roles(pdf)] == [
        "We study whether the model learns the societal biases in its training data.",
        "Following previous work, we use templates.",
        "Release 2.8 Followers were counted in the second study of the year."]


def test_a_footnote_mark_opens_a_sentence_and_an_authors_note_is_furniture() -> None:
    """A paper's first page runs its authors' footnotes into the abstract: "... using 256 GPUs. ∗This work was
    conducted when ..." was quoted as one sentence. A footnote about a result stays quotable; "2 ∗ (N − 1)" is
    arithmetic, no mark."""
    pdf = doc("The module attains near-linear scalability using 256 GPUs. ∗This work was conducted when the author "
              "was an employee at Facebook. Each of N nodes communicates with two of its peers 2 ∗ (N − 1) times. "
              "All models needed 100k steps to reach the threshold. † T5-Base did not reach this perplexity in 100k "
              "steps. ∗ Corresponding author.", content_type="pdf")
    assert roles(pdf) == [
        (PROSE, "The module attains near-linear scalability using 256 GPUs."),
        (FURNITURE, "∗This work was conducted when the author was an employee at Facebook."),
        (PROSE, "Each of N nodes communicates with two of its peers 2 ∗ (N − 1) times."),
        (PROSE, "All models needed 100k steps to reach the threshold."),
        (PROSE, "† T5-Base did not reach this perplexity in 100k steps."),
        (FURNITURE, "∗ Corresponding author.")]


def test_a_pages_own_number_under_its_last_line_is_no_word_of_its_sentence() -> None:
    """A sentence running on to the next page had the page's number as its last word ("... increases the memory
    3"); only the page's own number is set apart (a journal's page numbers, "43" on page 3, are not known so)."""
    d = Document(doc_id="d", url="https://x.org/d.pdf", title="T", content_type="pdf", blocks=(
        Block("Sharing memory between layers shortens the lifespan of each output.\nIt cuts the memory of the "
              "whole network by half, and of its\n3", page=3),
        Block("gradients too.", page=4)))
    assert roles(d)[:3] == [
        (PROSE, "Sharing memory between layers shortens the lifespan of each output."),
        (PROSE, "It cuts the memory of the whole network by half, and of its"),
        (FURNITURE, "3")]


def test_a_pdf_line_ending_a_sentence_before_one_opening_lower_case_ends_it() -> None:
    """A figure's caption breaks into the running text, whose sentence goes on in lower case under it: read as one,
    the caption's last sentence carried the other's tail into every quote of it. A wrapped address is no end."""
    pdf = doc("Figure 4: Communication operations in a transformer layer. There\nare 4 total communication "
              "operations in a single transformer layer.\ncontains a portion of the embedding table, an all-reduce "
              "is required.\nSee https://developer.nvidia.\ncom/nccl for the library. It ships with CUDA, e.g.\n"
              "the toolkit has it.", content_type="pdf")
    assert [t for _, t in roles(pdf)] == [
        "Figure 4: Communication operations in a transformer layer.",
        "There are 4 total communication operations in a single transformer layer.",
        "contains a portion of the embedding table, an all-reduce is required.",
        "See https://developer.nvidia. com/nccl for the library.",
        "It ships with CUDA, e.g. the toolkit has it."]
    assert leans_back("contains a portion of the embedding table, an all-reduce is required.")


def test_numbered_headings_with_plus_signs_parentheses_or_numbers_stand_apart() -> None:
    """"1.2 ZeRO++", "3.2 Hierarchical Partitioning for ZeRO (hpZ)" and "A PROOF OF THEOREM 3.1" were glued to their
    section's first sentence (or read as prose); a line the heading rule finds is a heading, whole ("1. Introduction"
    was "1." and "Introduction")."""
    pdf = doc("1.2 ZeRO++\nIn this paper, we present a system of communication optimizations.\n3.2 Hierarchical "
              "Partitioning for ZeRO (hpZ)\nZeRO-3 partitions all its model states across all its ranks.\nA PROOF OF "
              "THEOREM 3.1\nIn this section, we provide a proof of the runtime.\n1. Introduction\nLarge models "
              "need many devices to train.", content_type="pdf")
    assert roles(pdf) == [
        (HEADING, "1.2 ZeRO++"),
        (PROSE, "In this paper, we present a system of communication optimizations."),
        (HEADING, "3.2 Hierarchical Partitioning for ZeRO (hpZ)"),
        (PROSE, "ZeRO-3 partitions all its model states across all its ranks."),
        (HEADING, "A PROOF OF THEOREM 3.1"),
        (PROSE, "In this section, we provide a proof of the runtime."),
        (HEADING, "1. Introduction"),
        (PROSE, "Large models need many devices to train.")]


def test_a_captions_label_does_not_end_a_sentence() -> None:
    """"Figure 4. Communication operations in a transformer layer." was "Figure 4." (a caption) and a sentence of
    prose, quoted in answers; it is one caption. "... as shown in Figure 4. The model ..." still ends at the label."""
    pdf = doc("Figure 4. Communication operations in a transformer layer. Table 2. Model configurations used for "
              "GPT-2.\nThe layer is split as shown in Figure 4. The model has four all-reduces in all.",
              content_type="pdf")
    assert roles(pdf) == [
        (CAPTION, "Figure 4. Communication operations in a transformer layer."),
        (CAPTION, "Table 2. Model configurations used for GPT-2."),
        (PROSE, "The layer is split as shown in Figure 4."),
        (PROSE, "The model has four all-reduces in all.")]


def test_a_pdf_table_of_contents_is_page_furniture() -> None:
    """A contents page's lines (section number, title, dot leaders or none, page number) ran into one "sentence"
    of titles that named every topic of the paper; now each is furniture. Five such lines in a row, their page
    numbers never going back, make a contents page: a numbered list of four, or lines whose numbers fall, do not."""
    contents = ("Contents\n1 Introduction 3\n2 Switch Transformer 4\n2.1 Simplifying Sparse Routing . . . . . . . 5\n"
                "2.2 Efficient Sparse Routing . . . . . . . 6\n3 Scaling Properties 11\n6 Related Work 24\n"
                "A Switch for Attention 27\nThe router sends each token to one expert.")
    got = roles(doc(contents, content_type="pdf"))
    assert [r for r, _ in got[1:-1]] == [FURNITURE] * 7
    assert got[1] == (FURNITURE, "1 Introduction 3") and got[3][1].startswith("2.1 Simplifying Sparse Routing .")
    assert got[-1] == (PROSE, "The router sends each token to one expert.")
    short = "We ran four models.\n1 ResNet on eight GPUs 3\n2 BERT on eight GPUs 4\n3 GPT on many GPUs 5\n4 T5 Large 6"
    falling = "Results by size.\n1 Small model 30\n2 Base model 20\n3 Large model 10\n4 XL model 5\n5 XXL model 2"
    for text in (short, falling):
        assert FURNITURE not in [r for r, _ in roles(doc(text, content_type="pdf"))]


def test_a_numbered_pdf_heading_on_its_own_line_is_split_from_the_sections_first_sentence() -> None:
    pdf = doc("3.2.2 Gradient Fusing\nThe idea of fusing is that collectives are faster\non large tensors. Fusing "
              "needs a buffer of 64 MB on every worker.\n4 EVALUATION\nWe run the benchmark on 8 GPUs of one "
              "server.\nA.5 Proofs of Lemmas\nHere we prove the two lemmas of the paper.", content_type="pdf")
    assert roles(pdf) == [
        (HEADING, "3.2.2 Gradient Fusing"),
        (PROSE, "The idea of fusing is that collectives are faster on large tensors."),
        (PROSE, "Fusing needs a buffer of 64 MB on every worker."),
        (HEADING, "4 EVALUATION"),
        (PROSE, "We run the benchmark on 8 GPUs of one server."),
        (HEADING, "A.5 Proofs of Lemmas"),
        (PROSE, "Here we prove the two lemmas of the paper.")]
    # a number opening a wrapped line mid-sentence, or a reference's year, is no heading
    wrapped = doc("The model is split across\n4 Nodes\nThe rest is data parallel.\n2019. Improving Quantization\n"
                  "Channel Splitting. In Proceedings.", content_type="pdf")
    first = split_document(wrapped)[0].text
    assert first == "The model is split across 4 Nodes The rest is data parallel."
    assert not any(s.text.startswith("2019. Improving") and s.role == HEADING for s in split_document(wrapped))
    # offsets still point into the document's text
    for s in split_document(pdf):
        assert " ".join(pdf.text[s.start:s.end].split()) == s.text


def test_an_appendix_heading_by_its_letter_and_one_right_under_it_are_split_from_the_first_sentence() -> None:
    pdf = doc("We end the section with the bound on the overhead.\nE PROTOTYPE IMPLEMENTATION\nE.1 INTEGRATION INTO "
              "PYTORCH\nTo avoid "
              "modifying the core, the prototype wraps\nthe tensors.\nA Survey of Parallelism\nis what we give "
              "next.", content_type="pdf")
    assert roles(pdf) == [
        (PROSE, "We end the section with the bound on the overhead."),
        (HEADING, "E PROTOTYPE IMPLEMENTATION"),
        (HEADING, "E.1 INTEGRATION INTO PYTORCH"),
        (PROSE, "To avoid modifying the core, the prototype wraps the tensors."),
        (PROSE, "A Survey of Parallelism is what we give next.")]  # a letter before words not in capitals: prose
    wrapped = doc("We end the section with the bound on the overhead.\nB STRUCTURE OF A TYPICAL ML\nPROGRAM\nThis "
                  "subsection describes a typical program.", content_type="pdf")
    assert roles(wrapped)[1:] == [(HEADING, "B STRUCTURE OF A TYPICAL ML PROGRAM"),
                                  (PROSE, "This subsection describes a typical program.")]


def test_furniture_headings_captions_code_and_references_are_not_quotable() -> None:
    assert classify("11/23/26, 3:16 AM Tensor Fusion — Horovod documentation 1/2") == FURNITURE
    assert classify("Figure 3: Throughput of the pipeline as the number of micro-batches grows.") == CAPTION
    assert classify("4 partition(worldSize); 5 all_gather(params, group=g); 6 return out;") == CODE
    assert classify("│   ├── checkpointing/   # Saving and loading sharded training state (DCP, FSDP)") == CODE
    assert classify("```python # Optional activation checkpointing # if args.checkpointing: enable_checkpointing(args)"
                    ) == CODE
    assert classify("[21] J. Dean, G. Corrado, et al. Large scale distributed deep networks. In Proceedings of "
                    "NIPS, pp. 1223-1231, 2012.") == REFERENCE
    assert classify("Performance Benchmarking") == HEADING
    assert classify("Tensor Fusion batches small allreduce operations into one large buffer.") == PROSE


def test_reference_section_of_a_paper_is_not_quotable() -> None:
    body = "We propose a system that trains big models with little memory and explains why it works well. " * 30
    refs = ("\nReferences\n[1] A. Author. Efficient training of giant models with pipelines. In OSDI, 2019.\n"
            "[2] B. Author. Another clever title that reads like a sentence. arXiv, 2020.")
    d = doc(body + refs, content_type="pdf")
    got = roles(d)
    assert all(r == REFERENCE for r, t in got if "clever title" in t or "giant models" in t)


def test_source_reference_markers_and_glued_headings_are_removed_for_the_answer() -> None:
    assert for_answer("It costs O( √ n) memory, delay (τ ) bounded, as in ( a ) and (b).") == (
        "It costs O(√n) memory, delay (τ) bounded, as in (a) and (b).")
    assert for_answer("Horovod is at https://github.com/uber/ horovod. See https://images.nvidia. com/content/volta/"
                      " paper.pdf for the details, and https://x.org/ for more.") == (
        "Horovod is at https://github.com/uber/horovod. See https://images.nvidia.com/content/volta/paper.pdf for the "
        "details, and https://x.org/ for more.")
    assert for_answer("MiCS[40] keeps sub-groups small [12, 14] and uses hierarchy [3–5].") == (
        "MiCS keeps sub-groups small and uses hierarchy.")
    assert for_answer("3 DESIGN In this section we elaborate on the design.") == (
        "In this section we elaborate on the design.")
    assert for_answer("Tensor Fusion batches 11/23/26, 3:16 AM 1/2 small tensors into one buffer.") == (
        "Tensor Fusion batches small tensors into one buffer.")
    assert for_answer("[2026/03] **Scalable MoE Training** - a report on __init__ and __all__ hooks.") == (
        "[2026/03] Scalable MoE Training - a report on __init__ and __all__ hooks.")
    # a README news entry's links to its translations; a bracketed word inside a sentence stays
    assert for_answer("- [2024/08] DeepNVMe: Improving DL Applications through I/O Optimizations [English] [中文] "
                      "[日本語]") == "- [2024/08] DeepNVMe: Improving DL Applications through I/O Optimizations"
    assert for_answer("Read the [English] guide first.") == "Read the [English] guide first."
    # a footnote's number glued to its first word; a quantity or a name with a digit stays
    assert for_answer("6Gopher uses a different prompt format.") == "Gopher uses a different prompt format."
    assert for_answer("3D parallelism combines three kinds.") == "3D parallelism combines three kinds."
    assert for_answer("8 GPUs share one switch.") == "8 GPUs share one switch."


def test_bracketed_numbers_that_are_data_are_not_taken_for_reference_markers() -> None:
    # a tensor's shape: after "shape", or a phrase going on after it
    assert for_answer("Each processor contains a Tensor slice with shape [25, 28, 28, 3].") == (
        "Each processor contains a Tensor slice with shape [25, 28, 28, 3].")
    tile = "Each holds a tile [100, 14, 7, 3] of the image."
    assert for_answer(tile) == tile
    # out of order, a list is references all the same unless a number repeats, the sentence states it as a value or
    # the phrase goes on after it
    assert for_answer("Theano [5, 4] is a pioneering framework.") == "Theano is a pioneering framework."
    assert for_answer("It is used for NLP [33, 15, 34, 35, 36].") == "It is used for NLP."
    assert for_answer("As shown in other work (for example [9, 71, 53]), bias is learned.") == (
        "As shown in other work (for example refs. 9, 71, 53), bias is learned.")
    values = "CNT2 is [8, 1] and CLS2 becomes [1, 2, 2, 2]. Each tile [8, 2] × 4 fits."
    assert for_answer(values) == values
    # in order, a list after "list", "shape" or "=" is a value too; after a verb or a noun, references
    assert for_answer("Pass num_experts as a list e.g. [4, 8] to build a pyramid.") == (
        "Pass num_experts as a list e.g. [4, 8] to build a pyramid.")
    assert for_answer("Set sizes = [2, 4] first.") == "Set sizes = [2, 4] first."
    assert for_answer("We compare to ZeRO-3 [36, 37] in Table 2.") == "We compare to ZeRO-3 in Table 2."
    assert for_answer("as shown in [5, 9].") == "as shown in refs. 5, 9."
    # a marker a preposition governs is written out: dropped, it would leave "Similar to, we"
    assert for_answer("Similar to [21], we fine-tune BERT.") == "Similar to ref. 21, we fine-tune BERT."
    assert for_answer("We follow the settings as in [5].") == "We follow the settings as in ref. 5."
    assert for_answer("In [3, 7], the authors shard it.") == "In refs. 3, 7, the authors shard it."
    assert leans_back("This reduces memory by 8x.") and leans_back("it also partitions gradients.")
    # a linking opener leans back even before a named subject; quoting sets that case aside
    # (dmlqa.query.features.leans, tests/test_selector.py)
    assert leans_back("In contrast, ZeRO-Offload is designed to fit a larger model on one GPU.")
    assert leans_back("However, it fails.") and leans_back("In contrast, the model above fails.")
    assert not leans_back("ZeRO-3 partitions the parameters.")


def _cands(texts: list[tuple[str, str]]) -> list[Candidate]:
    return [Candidate(0, "d", i, t, role, 1) for i, (role, t) in enumerate(texts)]


def _pick(question: str, qvec: np.ndarray, cands: list[Candidate], vectors: np.ndarray, **kw) -> list[Candidate]:
    """The chosen sentences when each candidate scores its similarity to ``qvec`` (a stand-in for the
    selector's probability: these tests are about the reading rules, not the ranking)."""
    by_ordinal = {c.ordinal: c for c in cands}
    kw.setdefault("neighbour", lambda c, step: by_ordinal.get(c.ordinal + step))
    return choose(question, cands, vectors @ qvec, add_above=0.0, **kw)


def test_the_best_sentence_leaning_back_pulls_in_its_antecedent() -> None:
    cands = _cands([
        (PROSE, "Horovod batches small tensors before the allreduce operation."),
        (PROSE, "It uses a fusion buffer of 64 MB by default."),
        (PROSE, "Fusion buffers are a general idea in distributed training systems."),
    ])
    texts = [c.text for c in _pick("What is the default size of the fusion buffer?", np.array([0.2, 0.9, 0.5]),
                                   cands, np.eye(3), max_sentences=2)]
    assert texts[:2] == ["Horovod batches small tensors before the allreduce operation.",
                         "It uses a fusion buffer of 64 MB by default."]


def test_one_citation_per_document_page_and_lists_stay_lists() -> None:
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="ZeRO", page=1, section=None, text="")
    cands = _cands([(PROSE, "ZeRO has three stages:"), (ITEM, "- Stage 1 partitions optimizer states [4]."),
                    (ITEM, "- Stage 2 partitions gradients.")])
    body, cites = compose(cands, [hit])
    assert body == ("ZeRO has three stages: [1]\n- Stage 1 partitions optimizer states. [1]\n"
                    "- Stage 2 partitions gradients. [1]")
    assert len(cites) == 1 and cites[0].quote == "ZeRO has three stages:"


# -- a freshly built version answers without embedding any sentence -----------------------------------


def test_fresh_build_answers_embedding_only_the_question(tmp_path) -> None:  # noqa: ANN001
    """Sentence vectors are part of the index version: answering embeds the question and nothing else (once
    the version is warmed: its off-topic background is worked out once, by prewarm or the first question)."""
    import json

    from typer.testing import CliRunner

    from dmlqa.app.cli import app
    from dmlqa.query.answer import Asker, AskOptions
    from dmlqa.query.prewarm import prewarm
    from dmlqa.query.search import Searcher
    from dmlqa.settings import load_settings

    runner = CliRunner()
    home = tmp_path / "kb"
    notes = tmp_path / "fusion.md"
    notes.write_text(
        "# Tensor Fusion\n\nHorovod batches small allreduce operations into one larger buffer. "
        "The fusion buffer is 128 MB by default and can be changed with HOROVOD_FUSION_THRESHOLD.\n\n"
        "## Cycle time\n\nThe cycle time sets how often the background thread checks for new tensors. "
        "It defaults to a few milliseconds and is set with HOROVOD_CYCLE_TIME.\n", encoding="utf-8")
    assert runner.invoke(app, ["--home", str(home), "init"]).exit_code == 0
    assert runner.invoke(app, ["--home", str(home), "add", str(notes)]).exit_code == 0
    built = runner.invoke(app, ["--home", str(home), "build", "--json"])
    assert built.exit_code == 0, built.output
    report = json.loads(built.stdout)
    assert report["sentences"] >= 3 and report["embedded_sentences"] == report["sentences"]

    asker = Asker(Searcher(load_settings(home)))
    prewarm(asker.searcher, asker.searcher.pin())  # once a version: the off-topic check's 16 everyday questions
    encoder = asker.searcher.encoder_for(asker.searcher.pin())
    seen: list[list[str]] = []
    inner_encode = encoder.inner.encode

    def recording(texts, **kw):  # noqa: ANN001, ANN202
        seen.append(list(texts))
        return inner_encode(texts, **kw)

    encoder.inner.encode = recording  # the model itself: every text it is asked to embed passes here
    question = "What is the default size of the Horovod fusion buffer?"
    answer = asker.ask(question, AskOptions(use_llm=False))
    assert not answer.refused and "128 MB" in answer.answer
    assert seen == [[question]]  # the question, once; no sentence


def test_quoted_code_keeps_its_indentation_from_page_to_answer(tmp_path) -> None:  # noqa: ANN001
    """A code block's nesting is its meaning: a loop's body is quoted indented under the loop, the page's
    indentation kept from extraction through the stored sentences to the answer's code block."""
    from typer.testing import CliRunner

    import dmlqa
    from dmlqa.app.cli import app

    runner = CliRunner()
    home = tmp_path / "kb"
    notes = tmp_path / "loop.md"
    notes.write_text(
        "# Training loop\n\nThe training loop with Horovod zeroes the gradients, runs the backward pass and "
        "steps the wrapped optimizer for every batch of the sampler:\n\n```python\n"
        "  for epoch in range(100):\n      for batch in loader:\n          optimizer.zero_grad()\n"
        "          loss = model(batch).sum()\n          loss.backward()\n          optimizer.step()\n```\n\n"
        "## Launch\n\nStart four processes with horovodrun -np 4 python train.py on one machine.\n",
        encoding="utf-8")
    assert runner.invoke(app, ["--home", str(home), "init"]).exit_code == 0
    assert runner.invoke(app, ["--home", str(home), "add", str(notes)]).exit_code == 0
    assert runner.invoke(app, ["--home", str(home), "build"]).exit_code == 0
    kb = dmlqa.KnowledgeBase(home)
    shown = kb.show(next(iter(kb.documents())), quote="optimizer.step()")
    # the block's own two columns gone, the nesting kept; a quote of a code line is found in it
    assert "\nfor epoch in range(100):\n    for batch in loader:\n        optimizer.zero_grad()\n" in shown.text
    assert shown.quote_found
    answer = kb.ask("How does the training loop with Horovod step the optimizer for every batch?", use_llm=False)
    code = answer.answer.split("```")[1].split("\n")
    assert "        optimizer.step()" in code or "        optimizer.zero_grad()" in code, answer.answer
    assert all(line == line.lstrip() or line.startswith("    ") for line in code)
    assert all(c.quote == c.quote.strip() for c in answer.citations)  # a quote is a sentence, not a column


def test_a_paragraph_of_abbreviations_splits_in_linear_time() -> None:
    """200,000 characters of "et al." (no sentence ends there) once took minutes: each rejected
    boundary re-read the whole run before it. Now only the tail is read, so this is instant."""
    from dmlqa.extract.boundaries import spans as _spans

    text = "Smith et al. Jones et al. " * 8000
    assert list(_spans(text, 0)) == [(0, len(text))]
    assert list(_spans("See Fig. 3 for details. It works.", 0)) == [(0, 23), (24, 33)]


def test_abbreviations_papers_write_do_not_end_a_sentence() -> None:
    """"Alg. 1", "(Eg. FP32/16 vs. INT8)", "w.r.t. Optimizer States": cut at each stop, the halves were fragments
    ("... directly applying Alg." / "1: 1) users have to ..."). A sentence that ends in a word does end."""
    from dmlqa.extract.boundaries import spans as _spans

    def cut(text: str) -> list[str]:
        return [text[a:b] for a, b in _spans(text, 0)]

    assert cut("There are two drawbacks on directly applying Alg. 1: users divide the model. It works.") == [
        "There are two drawbacks on directly applying Alg. 1: users divide the model.", "It works."]
    assert cut("The ranges differ between high and low precision data (Eg. FP32/16 vs. INT8). Scales help.") == [
        "The ranges differ between high and low precision data (Eg. FP32/16 vs. INT8).", "Scales help."]
    assert cut("We compute the AIT w.r.t. Optimizer States in Tab. 2 and Sect. 4. Then we stop.") == [
        "We compute the AIT w.r.t. Optimizer States in Tab. 2 and Sect. 4.", "Then we stop."]
    assert cut("Training ran on eight GPUs. Each GPU held one stage.") == [
        "Training ran on eight GPUs.", "Each GPU held one stage."]



def test_an_equations_number_at_its_lines_end_stays_with_the_equation() -> None:
    """". (5)" ending an equation's line opened the next sentence ("(5) For other pipeline schedules, ..."); an
    enumeration inside a line ("We note two things. (1) The gate ...") still opens its item's sentence."""
    from dmlqa.extract.boundaries import spans as _spans

    text = ("The total memory is:\nM = sbh 34 + 5as/h . (5)\nFor other schedules, the memory differs. We note two "
            "things. (1) The gate is fast. (2) It scales.")
    assert [text[a:b] for a, b in _spans(text, 0)] == [
        "The total memory is:\nM = sbh 34 + 5as/h . (5)", "For other schedules, the memory differs.",
        "We note two things.", "(1) The gate is fast.", "(2) It scales."]


# -- generic fixes of answers that held the fact but did not state it -----------------------------------


def test_hard_wrapped_html_prose_is_one_sentence_but_headings_and_code_stay_apart() -> None:
    d = doc("Tied layers\nDeepSpeed provides a TiedLayerSpec that is an extension of\nLayerSpec. Each reuse of a "
            "layer is specified with a TiedLayerSpec, and the key field\nis used to identify where a layer is "
            "reused.\nElastic TensorFlow\nTensorFlow v1 Example:\nimport tensorflow as tf\nhvd.init()")
    got = roles(d)
    assert (PROSE, "DeepSpeed provides a TiedLayerSpec that is an extension of LayerSpec.") in got
    assert (PROSE, "Each reuse of a layer is specified with a TiedLayerSpec, and the key field is used to identify "
                   "where a layer is reused.") in got
    assert (HEADING, "Elastic TensorFlow") in got  # a heading before a capitalised line is no wrap
    assert not any("import tensorflow" in t and "hvd" in t for _, t in got)  # code lines are not joined


@pytest.mark.parametrize(("text", "joined", "apart"), [
    # deepspeed.ai's pages wrap at ~90 columns: "with", "for", "from" open the rest of a sentence as often as code,
    # and a number the rest of one stopping on "between"; code opening with those words, as code is written, stays apart
    ("Here is an example of the abbreviated AlexNet model, but expressed only\nwith LayerSpecs. The parameters\n"
     "for loss scaling can be specified in the deepspeed_config JSON file.\nUsing AVX-512, we observe 5.1x to 6.5x "
     "speedups considering the model-size between\n1 to 10 billion parameters with respect to torch-adam.\n"
     "The pipeline is built in three steps\nwith open(path) as f:\nThen load the weights as follows\n"
     "from deepspeed.pipe import PipelineModule",
     ["Here is an example of the abbreviated AlexNet model, but expressed only with LayerSpecs.",
      "The parameters for loss scaling can be specified in the deepspeed_config JSON file.",
      "Using AVX-512, we observe 5.1x to 6.5x speedups considering the model-size between 1 to 10 billion parameters "
      "with respect to torch-adam."],
     ["steps with open", "follows from"]),
    # a line that ends a sentence and stops in the next goes on whatever the next line opens with; a numbered part or
    # step is a heading, not a sentence stopping mid-way
    ("We support both AVX-512 and AVX-2 instruction sets. DeepSpeed uses\nAVX-2 by default which can be switched to "
     "AVX-512 by a build flag.\nPart 1. Steps to build your own linux dev environment\nDockerfile offered for "
     "building mxnet and go env.\n1. Preview instance placements\nThe previews endpoint will preview all valid "
     "placements for your model.",
     ["DeepSpeed uses AVX-2 by default which can be switched to AVX-512 by a build flag.",
      "Dockerfile offered for building mxnet and go env.",
      "The previews endpoint will preview all valid placements for your model."],
     []),
    # a link or a code span set on a line of its own leaves a line too short to tell by its end: one ending on a
    # small word or a comma, or one whose next line goes on with a verb, is no heading; a line of one word ending a
    # sentence, or an "(e.g. ...)" aside, is the rest of the line before; a heading before a name stays apart
    ("Here\nis an example on how to trigger Shardformer.\nThe\nobjective is to battle-test selected features.\n"
     "Instead,\nfully_shard receives a Placements configuration.\ntorch.nn.Sequential\nis a convenient container.\n"
     "Installing mesh-tensorflow does not automatically install or update\nTensorFlow. We recommend pip.\n"
     'Any Tensor with a "batch" dimension\n(e.g. images and logits) is split across processors.\n'
     "Dashboard\nexo includes a built-in dashboard.\nRequirements\n(optional) CUDA 12 for the GPU build.\n"
     "Getting Started with Horovod\nNote. This requires MPI.",
     ["Here is an example on how to trigger Shardformer.", "The objective is to battle-test selected features.",
      "Instead, fully_shard receives a Placements configuration.", "torch.nn.Sequential is a convenient container.",
      "Installing mesh-tensorflow does not automatically install or update TensorFlow.",
      'Any Tensor with a "batch" dimension (e.g. images and logits) is split across processors.',
      "exo includes a built-in dashboard."],
     ["Dashboard exo", "Requirements (optional)", "Horovod Note"]),
], ids=["python-keyword-or-number", "mid-sentence", "short-line"])
def test_a_hard_wrapped_line_goes_on_with_its_sentence(text: str, joined: list[str], apart: list[str]) -> None:
    got = roles(doc(text))
    for sentence in joined:
        assert (PROSE, sentence) in got
    assert not any(part in t for part in apart for _, t in got)


def test_questions_and_publication_list_entries_are_not_quotable() -> None:
    assert classify("- Compare accuracy for different learning rates. How does it scale with GPUs?", ITEM) == HEADING
    assert classify("Why would anyone shard the optimizer states across ranks?") == HEADING
    assert classify("- Ann Lee, Bo Chen, Carl Diaz, Dana Evans. (2022) Training giant models with little memory. "
                    "arXiv:2201.11990.", ITEM) == REFERENCE
    assert classify("PyTorch, TensorFlow, JAX, and MXNet all support data parallelism since 2019 or so.") == PROSE


def test_code_announced_by_a_colon_is_quoted_with_its_sentence_but_never_alone() -> None:
    d = doc("TensorFlow can grow its memory gradually by (if desired):\nconfig = tf.ConfigProto()\n"
            "config.gpu_options.allow_growth = True\nOr give it a fixed fraction of the memory of each GPU.\n"
            "config = tf.ConfigProto()\nconfig.a = 1\nconfig.b = 2\nconfig.c = 3")
    ss = split_document(d)
    # only announced code: four lines after a sentence ending in a full stop are a listing, not its example
    assert [s.role for s in ss][:4] == [PROSE, SNIPPET, SNIPPET, PROSE] and SNIPPET not in [s.role for s in ss[4:]]
    cands = [Candidate(0, "d", o, s.text, s.role, None) for o, s in enumerate(ss) if s.quotable]
    by_ordinal = {c.ordinal: c for c in cands}
    ranked = [c for c in cands if c.role != SNIPPET]
    chosen = _pick("How do I let TensorFlow grow its GPU memory gradually?", np.array([1.0, 0.0]), ranked,
                   np.eye(2), neighbour=lambda c, step: by_ordinal.get(c.ordinal + step))
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="TF", page=None, section=None, text="")
    body, _ = compose(chosen, [hit])
    # the code as one fenced block under the sentence announcing it, which cites it
    assert body.startswith("TensorFlow can grow its memory gradually by (if desired): [1]\n```\n"
                           "config = tf.ConfigProto()\nconfig.gpu_options.allow_growth = True\n```")


def test_code_in_a_fenced_block_under_a_colon_is_announced_and_quoted() -> None:
    d = doc("To run the simple training loop on two GPUs:\n```bash\n"
            "torchrun --nproc-per-node 2 examples/run_simple_train_loop.py\n```\n"
            "Then watch the loss go down on both GPUs of the node.")
    got = [(s.role, s.text) for s in split_document(d)]
    assert (SNIPPET, "torchrun --nproc-per-node 2 examples/run_simple_train_loop.py") in got
    assert (CODE, "```bash") in got  # the fence itself is not quoted
    body = _answer("What command runs the simple training loop on two GPUs?", d, 0)
    assert body == ("To run the simple training loop on two GPUs: [1]\n```\n"
                    "torchrun --nproc-per-node 2 examples/run_simple_train_loop.py\n```")


def test_the_next_sections_title_after_a_colon_is_no_code() -> None:
    d = doc("- Download the webtext data and link it under the data folder:\nRunning the Unmodified Model\n"
            "Check that every op builds on this machine with the command:\nds_report\n"
            "Then start training on every node of the cluster.")
    got = [(s.role, s.text) for s in split_document(d)]
    assert (SNIPPET, "Running the Unmodified Model") not in got
    assert (SNIPPET, "ds_report") in got  # a command opens lower-case


def test_a_chain_of_sentences_leaning_back_is_quoted_whole() -> None:
    cands = _cands([(PROSE, "Zero-2 does not support local gradient accumulation at all."),
                    (PROSE, "Though you can accumulate gradients if you insist, it cannot reduce communication."),
                    (PROSE, "That is to say, it is not a good idea to use Zero-2 with pipeline parallelism.")])
    chosen = _pick("Why is Zero-2 a poor match for pipeline parallelism?", np.array([0.0, 0.0, 1.0]), cands,
                   np.eye(3), max_sentences=1)
    assert [c.ordinal for c in chosen][:3] == [0, 1, 2]


def test_a_chain_back_ending_on_a_sentence_that_cannot_stand_alone_starts_after_it() -> None:
    cands = _cands([(PROSE, "This improvement does not come at the cost of more hardware resources."),
                    (PROSE, "For example, the library attains 64 teraflops on one V100 GPU, half of its peak."),
                    (PROSE, "It also keeps the memory low while doing so on every node.")])
    q = "How many teraflops does the library attain on one V100?"
    chosen = _pick(q, np.array([0.0, 1.0, 0.0]), cands, np.eye(3), max_sentences=1)
    assert [c.ordinal for c in chosen] == [1]  # not "This improvement ...", which leans further back
    # a sentence that itself cannot be read alone is never quoted
    assert _pick(q, np.array([0.0, 0.0, 1.0]), cands[2:], np.eye(3)[2:, :], max_sentences=1) == []


def test_words_of_asking_are_not_terms_of_the_question() -> None:
    assert question_terms("What does the fusion buffer do, and how can I change it?") == ["fusion", "buffer", "chang"]


def test_a_sentence_whose_subject_is_a_reference_marker_is_never_quoted() -> None:
    """Quoted, the marker must go (only the answer's own citations are bracketed numbers), leaving
    "is an on-demand swapping mechanism ...": a fragment that names nothing."""
    assert classify("[57] is an on-demand swapping mechanism for TensorFlow.") == REFERENCE
    assert classify("[7, 21] tries to virtualize the GPU memory by leveraging host memory.") == REFERENCE
    assert classify("vDNN [57] swaps out all activation tensors to host memory.") == PROSE  # mid-sentence: stays
    d = doc("Existing swapping systems rely on manual insights to decide what to swap. "
            "[57] is an on-demand swapping mechanism for TensorFlow. "
            "SwapAdvisor instead searches the swap plan with a genetic algorithm.")
    ss = split_document(d)
    assert [s.role for s in ss] == [PROSE, REFERENCE, PROSE]
    # An index built before the rule still holds it as prose: it is no candidate, and reading on skips it.
    cands = [Candidate(0, "d", o, s.text, PROSE, None) for o, s in enumerate(ss)]
    by_ordinal = {c.ordinal: c for c in cands}
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="Swap", page=None, section=None,
              text=d.text, start=0, end=len(d.text))
    assert all("[57]" not in c.text for c in passage_candidates([hit]))
    chosen = _pick("How do systems decide what to swap to host memory?", np.array([1.0]), cands[:1], np.eye(1),
                   neighbour=lambda c, step: by_ordinal.get(c.ordinal + step), max_sentences=1)
    assert [c.ordinal for c in chosen] == [0]
    body, _ = compose(chosen, [hit])
    assert "is an on-demand" not in body


def _answer(question: str, d: Document, qvec_row: int) -> str:
    """The composed answer for ``question`` over one document, the sentence at ``qvec_row`` (among the
    ranked candidates) being the most similar; neighbours by ordinal, as the stored index gives them."""
    ss = split_document(d)
    cands = [Candidate(0, "d", o, s.text, s.role, s.page) for o, s in enumerate(ss) if s.quotable]
    by_ordinal = {c.ordinal: c for c in cands}
    ranked = [c for c in cands if c.role != SNIPPET]
    vectors = np.eye(len(ranked))
    chosen = _pick(question, vectors[qvec_row], ranked, vectors,
                   neighbour=lambda c, step: by_ordinal.get(c.ordinal + step), max_sentences=1)
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="T", page=None, section=None, text="")
    return compose(chosen, [hit])[0]


def _quote_scored(question: str, d: Document, score: Callable[[Candidate], float]
                  ) -> tuple[list[Candidate], str, list[Citation]]:
    """What is chosen and composed for ``question`` over ``d`` when each stored sentence scores ``score`` (a
    stand-in for the selector) and a further one joins the best only when it scores over 0.5."""
    cands = [Candidate(0, "d", o, s.text, s.role, None) for o, s in enumerate(split_document(d)) if s.quotable]
    by_ordinal = {c.ordinal: c for c in cands}
    chosen = choose(question, cands, np.array([score(c) for c in cands]), add_above=0.5,
                    neighbour=lambda c, step: by_ordinal.get(c.ordinal + step))
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="T", page=None, section=None, text="")
    body, cites = compose(chosen, [hit])
    return chosen, body, cites


def test_a_long_markdown_row_is_a_row_or_furniture_never_prose() -> None:
    """A settings table whose cells hold a sentence each is quoted row by row under its headers; a matrix's padding
    of empty cells does not count against a row's length; a row longer still is never quoted as raw pipes."""
    padding = " |" * 130
    d = doc("Supported features:\n"
            f"| Model/Feature | Tensor Parallel | Pipeline Parallel |{padding}\n|---|---|---|\n"
            f"| Llama V1/V2 | yes | no |{padding}\n"
            "The optimizations below cut the memory each GPU holds.\n"
            "| Optimization | Description | Config |\n|---|---|---|\n"
            "| Precision-aware Optimizer | Stores optimizer states (exp_avg, exp_avg_sq) in BF16 instead of FP32, "
            "reducing optimizer memory by 50% | --use-precision-aware-optimizer --exp-avg-dtype bf16 "
            "--exp-avg-sq-dtype bf16 |\n"
            "| Everything at once | " + "a cell that goes on and on, " * 12 + "| --all |")
    roles = {s.text[:20]: s.role for s in split_document(d)}
    assert len(f"| Model/Feature | Tensor Parallel | Pipeline Parallel |{padding}") > MARKDOWN_ROW_CHARS
    assert roles["| Model/Feature | Te"] == ROW and roles["| Llama V1/V2 | yes "] == ROW
    assert roles["| Precision-aware Op"] == ROW
    assert roles["| Everything at once"] == FURNITURE  # over MARKDOWN_ROW_CHARS: a paragraph in a cell
    body = _answer("Which option stores the optimizer states in BF16 to cut optimizer memory?", d, 4)
    assert ("- Optimization: Precision-aware Optimizer · Description: Stores optimizer states (exp_avg, exp_avg_sq) "
            "in BF16") in body and "| Precision-aware" not in body
    rows = [Candidate(0, "d", o, s.text, s.role, s.page) for o, s in enumerate(split_document(d)) if s.role == ROW]
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="T", page=None, section=None, text="")
    matrix, _ = compose(rows[:2], [hit])  # the header over its row, as choose gives them
    assert matrix == "- Model/Feature: Llama V1/V2 · Tensor Parallel: yes · Pipeline Parallel: no [1]"  # no empty pairs


def test_a_row_far_down_a_long_table_is_read_under_its_header_or_not_at_all() -> None:
    """A leaderboard's 18th row was read under its 7th (the header was looked for 12 rows back): its figures
    stood under another model's name. Now a header is looked for across HEADER_STEPS rows, and a row further
    down than that has none: it is not quoted, rather than quoted under a row of data."""
    from dmlqa.query.quotes import HEADER_STEPS

    def table(n: int) -> Document:
        rows = "".join(f"| model-{i} | {i}.5T | {40 + i}.25 |\n" for i in range(n))
        return doc("The leaderboard compares the models on MMLU.\n| Model | Tokens | MMLU |\n|---|---|---|\n" + rows)

    ss = split_document(table(20))
    cands = [Candidate(0, "d", o, s.text, s.role, s.page) for o, s in enumerate(ss) if s.quotable]
    by = {c.ordinal: c for c in cands}
    row = next(c for c in cands if c.text.startswith("| model-17 |"))
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="T", page=None, section=None, text="")
    chosen = choose("What MMLU does model-17 reach?", [row], np.array([0.9]),
                    neighbour=lambda c, step: by.get(c.ordinal + step))
    assert compose(chosen, [hit])[0] == "- Model: model-17 · Tokens: 17.5T · MMLU: 57.25 [1]"
    ss = split_document(table(HEADER_STEPS + 5))
    cands = [Candidate(0, "d", o, s.text, s.role, s.page) for o, s in enumerate(ss) if s.quotable]
    by = {c.ordinal: c for c in cands}
    far = cands[-1]
    assert far.text.startswith(f"| model-{HEADER_STEPS + 4} |")
    assert choose("What MMLU does the last model reach?", [far], np.array([0.9]),
                  neighbour=lambda c, step: by.get(c.ordinal + step)) == []


def test_each_table_of_a_readme_is_read_under_its_own_header() -> None:
    """Two tables under two headings: the heading is not stored, so the second table's rows had been read under the
    first table's header. A header may leave its first cell empty; a row with one filled cell (a status badge
    that was an image) says nothing and is furniture."""
    d = Document(doc_id="d", url="https://x.org/d", title="DeepSpeed", content_type="html", blocks=(
        Block("Run these to learn DeepSpeed.\n| | Description |\n|---|---|\n"
              "| Getting Started | First steps with DeepSpeed |\n| JSON Configuration | Configuring DeepSpeed |",
              section="Further Reading"),
        Block("| Accelerator | Status |\n|---|---|\n| NVIDIA | passing |\n| AMD | |", section="Build Pipeline Status"),
    ))
    ss = split_document(d)
    assert [(s.role, s.text) for s in ss if s.text.startswith("|") and "---" not in s.text] == [
        (ROW, "| | Description |"), (ROW, "| Getting Started | First steps with DeepSpeed |"),
        (ROW, "| JSON Configuration | Configuring DeepSpeed |"), (ROW, "| Accelerator | Status |"),
        (ROW, "| NVIDIA | passing |"), (FURNITURE, "| AMD | |")]
    cands = [Candidate(0, "d", o, s.text, s.role, s.page, section=s.section) for o, s in enumerate(ss) if s.quotable]
    by = {c.ordinal: c for c in cands}
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="T", page=None, section=None, text="")
    nvidia = next(c for c in cands if c.text.startswith("| NVIDIA"))
    chosen = choose("Does the NVIDIA build pass?", [nvidia], np.array([0.9]),
                    neighbour=lambda c, step: by.get(c.ordinal + step))
    assert compose(chosen, [hit])[0] == "- Accelerator: NVIDIA · Status: passing [1]"
    first = next(c for c in cands if c.text.startswith("| Getting Started"))
    chosen = choose("Where do I start with DeepSpeed?", [first], np.array([0.9]),
                    neighbour=lambda c, step: by.get(c.ordinal + step))
    assert compose(chosen, [hit])[0] == "- Getting Started · Description: First steps with DeepSpeed [1]"


def test_a_row_whose_cells_hold_sentences_is_one_row() -> None:
    d = doc("Set these variables before starting exo.\n| Variable | Description | Default |\n|---|---|---|\n"
            "| EXO_MODELS_DIRS | Colon-separated additional writable directories for model downloads. Checked in order "
            "after the default; first with enough free space is used. | None |")
    assert roles(d)[-1] == (ROW, "| EXO_MODELS_DIRS | Colon-separated additional writable directories for model "
                                 "downloads. Checked in order after the default; first with enough free space is used. "
                                 "| None |")


def test_markdown_table_rows_are_quotable_one_row_with_its_header() -> None:
    d = doc("The folder holds the training flows of the example.\n| Name | Purpose | Updated |\n|---|---|---|\n"
            "| loader.py | reads the shards | 2023-07-31 |\n"
            "| sharded_train_flow.py | sharded training flow | 2023-08-18 |\n"
            "| notes.md | notes | 2023-07-21 |")
    ss = split_document(d)
    assert [s.role for s in ss] == [PROSE, ROW, CODE, ROW, ROW, ROW]  # the separator is no row
    body = _answer("Which file defines the sharded training flow?", d, 3)
    # each cell under its column's header, which says what it is
    assert "- Name: sharded_train_flow.py · Purpose: sharded training flow · Updated: 2023-08-18 [1]" in body
    assert "- Name | Purpose | Updated" not in body
    assert "notes.md" not in body and "loader.py" not in body  # a row, not the whole table


def test_pdf_table_rows_are_split_from_the_sentence_they_are_glued_into() -> None:
    d = doc("Clusters are shared and the resulting delays hurt when the\nmodel size # of runs crash rate\n"
            "1 GB 4,000 2.5%\n10 GB 300 9.1%\n100 GB 12 30.2%\nTable 2: Crashes of training runs by model size.\n"
            "We list how often training runs crash in production in Table 2. Crashes come from preemption.",
            content_type="pdf", page=3)
    rows = [s.text for s in split_document(d) if s.role == ROW]
    assert rows == ["model size # of runs crash rate", "1 GB 4,000 2.5%", "10 GB 300 9.1%", "100 GB 12 30.2%"]
    # the sentence pointing at the table brings the row holding the question's terms, with the header
    body = _answer("What crash rate do runs of 100 GB models have in production?", d, 4)
    assert "- model size # of runs crash rate [1]" in body and "- 100 GB 12 30.2% [1]" in body
    assert "4,000" not in body
    no_caption = doc("Runs of large models crash often.\n1 GB 4,000 2.5%\n10 GB 300 9.1%\nThat is all.",
                     content_type="pdf")
    assert ROW not in [s.role for s in split_document(no_caption)]  # numbers without a "Table N:" are no table


def test_a_text_layer_row_the_table_finder_read_with_its_headers_is_not_quoted_bare() -> None:
    """The page's text holds a table's rows as bare figures, and the table finder's block (extract/tables.py) the
    same rows with their headers: only the headed one is quoted; a bare row it did not read stays a row."""
    page = ("Ulysses beats ring attention on one node at every sequence length we tried.\n"
            "group_num bs seqlen ulysses_degree lb-ring\n4 1 32K 8 136.375\n4 1 32K 1 113.79\n4 1 128K 1 2.91\n"
            "Table 3: Throughput (iters/sec) of SP-Unified on one node.\nThe degree of 8 is the fastest of them all.")
    headed = ("Table 3: group_num · bs · seqlen · ulysses_degree · lb-ring — 4 · 1 · 32K · 8 · 136.375\n"
              "Table 3: group_num · bs · seqlen · ulysses_degree · lb-ring — 4 · 1 · 32K · 1 · 113.79")
    d = Document(doc_id="d", url="https://x.org/d.pdf", title="USP", content_type="pdf",
                 blocks=(Block(page, page=8), Block(headed, page=8, section="Table 3")))
    got = [(s.role, s.text) for s in split_document(d) if any(ch.isdigit() for ch in s.text[:12])]
    assert (FURNITURE, "4 1 32K 8 136.375") in got and (FURNITURE, "4 1 32K 1 113.79") in got
    assert (ROW, "4 1 128K 1 2.91") in got  # the finder did not read this one: the figures alone are all there is
    assert [t for r, t in got if r == ROW and " — " in t] == headed.split("\n")
    # on another page the same figures are a row of that page's table
    other = Document(doc_id="d", url="https://x.org/d.pdf", title="USP", content_type="pdf",
                     blocks=(Block(page, page=8), Block(headed, page=9, section="Table 3")))
    assert (ROW, "4 1 32K 1 113.79") in [(s.role, s.text) for s in split_document(other)]


def test_a_code_comment_announces_the_line_under_it() -> None:
    d = doc("trainer = Trainer(\n# [3a] If you train on many machines, this is where you\n"
            "# should configure storage that every worker node can reach.\n"
            "# run_config=RunConfig(storage_path=\"s3://bucket\"),\n)\n# Plain markdown heading")
    ss = split_document(d)
    comment = next(s for s in ss if s.text.startswith("# [3a]"))
    assert comment.role == PROSE and comment.text.endswith("worker node can reach.")  # one sentence
    assert [s.role for s in ss if "storage_path" in s.text] == [SNIPPET]
    assert for_answer(comment.text) == ("If you train on many machines, this is where you should configure "
                                        "storage that every worker node can reach.")
    body = _answer("What must I configure so every worker node can reach the storage?", d, 0)
    assert body.startswith("If you train on many machines") and "storage_path" in body
    assert "[3a]" not in body and "# should" not in body


def test_a_short_run_of_command_lines_after_a_sentence_shows_it() -> None:
    d = doc("Shard the experts over the GPUs of a node.\n--expert-parallel-size 8 # eight-way\n"
            "--fused-expert-kernels # faster expert matmuls\nThen launch as usual.\n"
            "A long launch script follows here.\n--a 1\n--b 2\n--c 3\n--d 4\nDone with the flags now.")
    roles_ = [(s.role, s.text) for s in split_document(d)]
    assert [r for r, t in roles_ if t.startswith("--") and r == SNIPPET] == [SNIPPET, SNIPPET]  # not the 4-line run
    body = _answer("How do I shard the experts over GPUs?", d, 0)
    assert "[1]\n```\n--expert-parallel-size 8 # eight-way\n--fused-expert-kernels # faster expert matmuls\n```" in body


def test_a_setting_assigned_under_a_sentence_and_a_comment_over_a_command_come_with_the_code() -> None:
    # a sentence over a short run of assignments is shown by them, like one over command lines
    d = doc("Or to cap it at 40% of the memory of each GPU.\nconfig = tf.ConfigProto()\n"
            "config.gpu_options.per_process_gpu_memory_fraction = 0.4\nThe session then takes the config.")
    assert [r for r, _ in roles(d)] == [PROSE, SNIPPET, SNIPPET, PROSE]
    # comments labelling the commands under a colon come with them and do not count against the lines announced
    d = doc("To install EasyDist, you can use pip and install from PyPI:\n# For PyTorch users\n"
            "pip install pai-easydist[torch]\n# For Jax users\npip install pai-easydist[jax]\n"
            "If you prefer to install from source, clone the repository.")
    assert [r for r, _ in roles(d)] == [PROSE, SNIPPET, SNIPPET, SNIPPET, SNIPPET, PROSE]
    body = _answer("What is the pip command to install EasyDist for Jax?", d, 0)
    assert "# For Jax users\npip install pai-easydist[jax]\n```" in body
    # a markdown heading after the code is no comment of it
    d = doc("You can install it from PyPI with pip in one step:\npip install deepspeed\n# Usage\n"
            "Call deepspeed.initialize in your script.")
    assert [r for r, _ in roles(d)][:2] == [PROSE, SNIPPET] and roles(d)[2][0] != SNIPPET


def test_a_tool_name_a_short_command_and_the_following_are_announced_code() -> None:
    d = doc("We encourage users to install from PyPI in most cases.\npip install deepspeed\nAfter installation, "
            "you can validate your install via the DeepSpeed environment report.\nds_report\nIf you would like to "
            "pre-install the extensions, please see the advanced guide.")
    assert [(r, t) for r, t in roles(d) if r == SNIPPET] == [(SNIPPET, "pip install deepspeed"), (SNIPPET, "ds_report")]
    # a command shorter than a sentence is code under a colon, not furniture
    d = doc("Either of these would work to launch on devices 0 and 1 of the current node:\n"
            "deepspeed --include localhost:0,1 ...\nCUDA_VISIBLE_DEVICES=0,1 deepspeed ...")
    assert [r for r, _ in roles(d)] == [PROSE, SNIPPET, SNIPPET]
    d = doc("Timing can be enabled by setting the following in the configuration file.\n--wall-clock-breakdown true\n"
            "Copyright 2024 The Authors")
    assert [r for r, _ in roles(d)][:2] == [PROSE, SNIPPET] and roles(d)[2][0] != SNIPPET


def test_a_quote_opening_with_a_link_to_a_sentence_not_quoted_before_it_is_quoted_without_the_link() -> None:
    """"However," or "Second," ties a sentence to the one before it in its source; quoted after another document's
    sentence it would read as contrasting or continuing that one. The citation keeps the source's words."""
    a = Candidate(0, "a", 4, "Mooncake keeps the KVCache of every request in a disaggregated pool.", PROSE, 1)
    b = Candidate(1, "b", 7, "However, waiting for KVCache stored on lower-tier storage may violate the SLO.", PROSE, 2)
    c = Candidate(1, "b", 8, "Second, fully_shard is called on each module.", PROSE, 2)
    hits = [Hit(rank=i + 1, score=1.0, doc_id=d, url=f"https://x.org/{d}", title=d.upper(), page=None, section=None,
                text="") for i, d in enumerate("ab")]
    body, cites = compose([a, b, c], hits)
    assert body == ("Mooncake keeps the KVCache of every request in a disaggregated pool. [1] Waiting for KVCache "
                    "stored on lower-tier storage may violate the SLO. [2] Second, fully_shard is called on each "
                    "module. [2]")  # the last follows its source's sentence before it: its link reads as written
    assert cites[1].quote.startswith("However, waiting")
    lone, _ = compose([c], hits)
    assert lone == "fully_shard is called on each module. [1]"  # a name's case is its own
    article = Candidate(1, "b", 9, "Finally, a two-phase rounding strategy approximates the optimal solver.", PROSE, 2)
    assert compose([article], hits)[0] == "A two-phase rounding strategy approximates the optimal solver. [1]"


def test_a_pdf_tables_row_reads_alone_with_each_value_under_its_header() -> None:
    """A PDF table's row names its table and columns ("Table 2: Scheme · GPUs — PTD-P · 384"): the answer
    quotes it alone, not after the table's first row as a header (that row is a row of figures too)."""
    cands = _cands([(PROSE, "We compare PTD-P to ZeRO-3 in Table 2 for the GPT-3 architecture."),
                    (ROW, "Table 2: Scheme · Number of GPUs · Throughput per GPU — ZeRO-3 · 384 · 144"),
                    (ROW, "Table 2: Scheme · Number of GPUs · Throughput per GPU — PTD-P · 384 · 153")])
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="PTD-P", page=1, section=None, text="")
    row = _pick("What throughput per GPU does PTD-P reach on 384 GPUs?", np.array([0.0, 0.0, 1.0]), cands,
                np.eye(3), max_sentences=1)
    assert [c.ordinal for c in row] == [2]
    body, _ = compose(row, [hit])
    assert body == "- Table 2: Scheme: PTD-P · Number of GPUs: 384 · Throughput per GPU: 153 [1]"
    # the sentence pointing at the table brings one row with it, the one naming what was asked
    chosen = _pick("How does PTD-P's throughput compare with ZeRO-3?", np.array([1.0, 0.0, 0.0]), cands,
                   np.eye(3), max_sentences=1)
    assert [c.role for c in chosen] == [PROSE, ROW]
    body, _ = compose(chosen, [hit])
    assert body.count("Table 2: Scheme:") == 1 and " — " not in body


def test_an_announcing_sentence_that_states_the_answer_is_quoted_without_what_it_announces() -> None:
    """"... has a world size of 8 and details are as follows:" states the answer before its colon; the list
    it announces is not stored (a figure), so the colon gives way to an ellipsis. "The major components
    are:" says nothing alone and is not quoted."""
    cands = _cands([(PROSE, "The default process group has a world size of 8 and details are as follows:"),
                    (PROSE, "Say we launched the script on 4 servers with 4 GPUs each.")])
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="c10d", page=1, section=None, text="")
    chosen = _pick("What is the world size of the default process group?", np.array([1.0]), cands[:1],
                   np.eye(1), neighbour=lambda c, step: None, max_sentences=1)
    body, cites = compose(chosen, [hit])
    assert body == "The default process group has a world size of 8 and details are as follows … [1]"
    assert cites[0].quote.endswith("as follows:")  # the citation quotes the source as it is
    short = _cands([(PROSE, "The major components are:")])
    assert _pick("What are the major components?", np.array([1.0]), short, np.eye(1),
                 neighbour=lambda c, step: None) == []


def test_a_heading_glued_before_the_quoted_sentence_is_left_out_of_the_answer() -> None:
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="4D", page=1, section=None, text="")
    text = "TECHNICAL REPORT Tip 7: We suggest the order TP, SP-Ulysses, SP-Ring, ZeRO-DP, PP."
    chosen = _pick("In which order should the process groups of 4D parallelism go?", np.array([1.0]),
                   _cands([(PROSE, text)]), np.eye(1))
    body, cites = compose(chosen, [hit])
    assert body == "Tip 7: We suggest the order TP, SP-Ulysses, SP-Ring, ZeRO-DP, PP. [1]"
    assert cites[0].quote == text[len("TECHNICAL REPORT "):]  # still the source's text, a reader finds it there


def test_a_code_blocks_lines_are_code_and_a_comment_in_it_announces_the_line_under_it() -> None:
    """Between fences every line is code: "model = ..." is no sentence and "# Start training" no heading. A
    comment that reads as a sentence says what the line under it does, and is quoted with it."""
    d = doc("Use your DeepSpeed training code with Ray Train's TorchTrainer.\n```\ndef train_func():\n"
            "# Define the GPU device for the current worker\ndevice = get_accelerator().device_name(model.local_rank)\n"
            "# Start training\nfor epoch in range(num_epochs):\nmodel = train_one_epoch(model, device)\n```\n"
            "Then launch the trainer with the scaling configuration of your cluster.")
    # the other lines are a listing under the sentence over the block; the short comment is neither
    assert roles(d) == [
        (PROSE, "Use your DeepSpeed training code with Ray Train's TorchTrainer."), (CODE, "```"),
        (LISTING, "def train_func():"), (PROSE, "# Define the GPU device for the current worker"),
        (SNIPPET, "device = get_accelerator().device_name(model.local_rank)"), (CODE, "# Start training"),
        (LISTING, "for epoch in range(num_epochs):"), (LISTING, "model = train_one_epoch(model, device)"),
        (CODE, "```"), (PROSE, "Then launch the trainer with the scaling configuration of your cluster.")]
    body = _answer("How do I get the GPU device of the current worker in a Ray Train function?", d, 2)
    assert body == ("Define the GPU device for the current worker [1]\n```\n"
                    "device = get_accelerator().device_name(model.local_rank)\n```")


def test_an_announced_line_opening_a_block_comes_with_the_first_line_of_its_body() -> None:
    """"for param_group in optimizer.param_groups:" quoted alone is a loop with nothing in it: the line under a
    block's opening line comes with it, and so on while each opens another (at most three more lines)."""
    d = doc("Reset the learning rate when the workers change.\n```\ndef on_state_reset():\n"
            "# adjust learning rate on reset\nfor param_group in optimizer.param_groups:\n"
            "param_group['lr'] = lr * hvd.size()\nstate = hvd.elastic.TorchState(model, optimizer)\n```")
    assert [r for r, t in roles(d) if "param_group" in t or t.startswith("state =")] == [SNIPPET, SNIPPET, LISTING]
    body = _answer("How do I adjust the learning rate on reset?", d, 2)
    assert body == ("adjust learning rate on reset [1]\n```\nfor param_group in optimizer.param_groups:\n"
                    "param_group['lr'] = lr * hvd.size()\n```")
    # three lines announced by a colon: a fourth comes only when the third opens a block
    for third, fourth in (("session = tf.Session(config=config)", False),
                          ("with tf.Session(config=config) as session:", True)):
        d = doc(f"Let the memory of each GPU grow with these lines:\nconfig = tf.ConfigProto()\n"
                f"config.gpu_options.allow_growth = True\n{third}\nsession.run(init_op)\n"
                "The session then grows its memory as the model needs it.")
        got = [r for r, _ in roles(d)]
        assert got[:4] == [PROSE, SNIPPET, SNIPPET, SNIPPET] and (got[4] == SNIPPET) is fourth and got[5] == PROSE


def test_a_code_line_under_a_fence_is_quoted_with_the_sentence_announcing_it() -> None:
    """The snippet itself may be the best candidate: it reaches back over the unstored fence to its sentence."""
    d = doc("On the first machine, start the head node with:\n```\nray start --head --port=6379\n```\n"
            "Then connect the workers of the cluster to it.")
    assert [s.role for s in split_document(d) if s.quotable] == [PROSE, SNIPPET, PROSE]
    # the last sentence leads; the snippet, second best, comes with its sentence, which alone would not be added
    scores = {"Then connect the workers of the cluster to it.": 0.9, "ray start --head --port=6379": 0.8}
    chosen, _, _ = _quote_scored("What command starts the head node?", d, lambda c: scores.get(c.text, 0.0))
    assert [c.text for c in chosen] == ["Then connect the workers of the cluster to it.",
                                        "On the first machine, start the head node with:",
                                        "ray start --head --port=6379"]


def test_a_fence_left_open_opens_no_code_block() -> None:
    d = doc("Wrap a fenced block in three backticks on a line of their own:\n```\n"
            "The sentence after it is still a sentence of the page, not code.")
    assert roles(d)[-1] == (PROSE, "The sentence after it is still a sentence of the page, not code.")


def test_figures_of_a_plot_or_table_run_into_a_line_are_furniture() -> None:
    assert classify("Accept Stage 1 Reject Accept Decoding Load Prefill Load 1 0.5 0 1 0.5 0 1 0.5 0 (a) Early "
                    "Rejection.") == FURNITURE
    assert classify("Attention heads Hidden size per head Scaling Efficiency 16 192 82% 24 128 80% 32 96 77% "
                    "Table 8.") == FURNITURE
    # numbers that prose lists, with commas and words between, are prose; a markdown row is a row
    assert classify("Models with 5T, 10T and 20T parameters reach 44, 43 and 34 TFlops per GPU, respectively.") == PROSE
    assert classify("The corresponding percentage is (0, 0, 100, 0, 100, 0) for the six stages.") == PROSE
    table = doc("| GPUs | 1 | 2 | 4 | 8 |\n|---|---|---|---|---|\n| Speedup | 1.0 | 1.6 | 2.3 | 2.9 |")
    assert [r for r, _ in roles(table)] == [ROW, CODE, ROW]


def test_a_line_deep_in_a_listing_is_quoted_under_the_sentence_over_its_block() -> None:
    """Twenty lines under "This example runs a parallel grid search ...", the line a question asks for is quoted
    under that sentence, the lines between left out; a line under a comment comes under the comment."""
    listing = "\n".join(f"step_{n} = run_step({n}, alpha, beta)" for n in range(12))
    d = doc("This example runs a parallel grid search to optimize an example objective function.\n```\n"
            "from ray import tune\n# Feed the score of each step back to Tune.\ntune.report(mean_loss=score)\n"
            f"{listing}\n"
            'print("Best config: ", analysis.get_best_config(metric="mean_loss", mode="min"))\n```\n'
            "If TensorBoard is installed, it shows all trial results of the search.")
    assert [s.role for s in split_document(d)].count(LISTING) == 14
    # the best line, and the next best of the same listing, which is not quoted too: one line under its sentence
    scores = {"get_best_config": 1.0, "step_11 =": 0.9}
    _, body, cites = _quote_scored("How do I get the best config after a Ray Tune grid search?", d,
                                   lambda c: max((v for k, v in scores.items() if k in c.text), default=0.0))
    assert body == ("This example runs a parallel grid search to optimize an example objective function. [1]\n```\n…\n"
                    'print("Best config: ", analysis.get_best_config(metric="mean_loss", mode="min"))\n```')
    assert cites[0].quote.startswith("This example runs")  # not under the comment further up the code
    # code under no sentence, and no named section to read it under, is not quoted
    bare = doc("Quick start\n```\nfrom ray import tune\nanalysis = tune.run(training_function)\n```")
    assert LISTING not in [r for r, _ in roles(bare)]


def test_a_line_of_a_block_right_under_its_heading_is_quoted_under_that_heading() -> None:
    """A README's steps are often headings over code with no sentence between ("3.4 Do forward" over
    ``p.Forward()``): the lines are a listing, and the line a question asks for is quoted under its heading, which
    the answer names as what it is. Without a named section (no heading to name) the lines stay unquoted code."""
    blocks = [("3.3 Set input data to predictor", 'if err := p.SetInput("data", res); err != nil {'),
              ("3.4 Do forward", "if err := p.Forward(); err != nil {")]
    d = Document(doc_id="d", url="https://x.org/d", title="go-mxnet-predictor", content_type="html", blocks=tuple(
        Block(f"{head}\n```\n{line}\npanic(err)\n}}\n```", section=head) for head, line in blocks))
    assert [r for r, t in roles(d) if t.startswith("if err")] == [LISTING, LISTING]
    cands = [Candidate(0, "d", o, s.text, s.role, None, section=s.section)
             for o, s in enumerate(split_document(d)) if s.quotable]
    by_ordinal = {c.ordinal: c for c in cands}
    def chosen(question: str) -> list[Candidate]:
        return choose(question, cands, np.array([0.9 if "Forward" in c.text else 0.1 for c in cands]), add_above=0.5,
                      neighbour=lambda c, step: by_ordinal.get(c.ordinal + step))
    hit = Hit(rank=1, score=1.0, doc_id="d", url="https://x.org/d", title="T", page=None, section=None, text="")
    body, cites = compose(chosen("Which call does the forward pass once the input is set?"), [hit])
    assert body == "Under “3.4 Do forward”: [1]\n```\nif err := p.Forward(); err != nil {\n```"
    assert cites[0].quote == "if err := p.Forward(); err != nil {"  # the source's line: a reader finds it there
    # a heading naming nothing the question asks about says nothing of why a line under it answers
    assert chosen("Which call runs inference on the model?") == []


def test_a_short_line_leading_into_a_code_block_announces_it() -> None:
    """"Install the requirements:" is too short for a sentence, but over a code block it says what the code is."""
    d = doc("Install the requirements:\n```\n"
            'pip install deepspeed torch datasets transformers torchmetrics "ray[train]"\n```\n'
            "Installation\n```\npip install ray\n```")
    got = roles(d)
    assert got[:3] == [(PROSE, "Install the requirements:"), (CODE, "```"),
                       (SNIPPET, 'pip install deepspeed torch datasets transformers torchmetrics "ray[train]"')]
    assert (HEADING, "Installation") in got and (CODE, "pip install ray") in got  # a title over code leads nowhere
    # a README's bold lead-in ends in its emphasis, after the colon
    bold = roles(doc("**Or clone and install from source:**\n```\ngit clone https://github.com/NVIDIA/Megatron-LM.git\n"
                     "cd Megatron-LM\n```"))
    assert bold[:3] == [(PROSE, "**Or clone and install from source:**"), (CODE, "```"),
                        (SNIPPET, "git clone https://github.com/NVIDIA/Megatron-LM.git")]


def test_a_lead_in_over_an_unfenced_command_announces_it() -> None:
    """A README's text often loses its fences: the bold lead-in over a lone command line is a sentence announcing it,
    not two headings."""
    got = roles(doc("Getting Started\n**Install from PyPI:**\nuv pip install megatron-core\n"
                    "**Or clone and install from source:**\n```\ncd Megatron-LM\n```"))
    assert got[:3] == [(HEADING, "Getting Started"), (PROSE, "**Install from PyPI:**"),
                       (SNIPPET, "uv pip install megatron-core")]
    # a title over a line that is no command leads nowhere
    assert roles(doc("**Known issues:**\nFlash attention fails on old GPUs")) == [
        (HEADING, "**Known issues:**"), (HEADING, "Flash attention fails on old GPUs")]


def test_a_web_pages_short_sentence_holding_code_is_read_with_the_one_before_it_a_pdfs_is_not() -> None:
    """"Enabled by --use-flash-attn-triton." alone is too short to quote and says nothing of what it enables; after
    its sentence it says which flag turns that on. In a PDF a short sentence after a paragraph is mostly the run-in
    heading of the next one. A short sentence holding no figure or code stays apart."""
    line = ("FlashAttention + Triton: FlashAttention in Triton (tested with triton==2.0.0.dev20221202). "
            "Enabled by --use-flash-attn-triton.")
    assert roles(doc(line)) == [(PROSE, line)]
    # a link's words carry nothing; a line broken off mid-sentence ends none
    assert roles(doc("KubeSphere supports fine-grained permissions and quota management. Learn more.")) == [
        (PROSE, "KubeSphere supports fine-grained permissions and quota management."), (HEADING, "Learn more.")]
    assert [t for _, t in roles(doc("Alternatively, we can set layout_rules=[(\"hidden\", \"all\")]. In this case,"))] \
        == ["Alternatively, we can set layout_rules=[(\"hidden\", \"all\")].", "In this case,"]
    text = "PipeDream cuts communication by 88% compared to data parallelism. Experiment 2. We train on four servers."
    assert [t for _, t in roles(doc(text, content_type="pdf"))] == [
        "PipeDream cuts communication by 88% compared to data parallelism.", "Experiment 2.",
        "We train on four servers."]
    assert [t for _, t in roles(doc(text))][0].endswith("Experiment 2.")  # a web page's: read with the one before


def test_a_colon_over_a_listing_stays_when_a_line_of_it_is_quoted() -> None:
    listing = "\n".join(f"step_{n} = run_step({n}, alpha, beta)" for n in range(8))
    d = doc("The integration is minimal and preserves your familiar DeepSpeed workflow:\n```\n"
            f"import deepspeed\nfrom deepspeed.accelerator import get_accelerator\n{listing}\n"
            "trainer = TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=4, use_gpu=True))\n```")
    _, body, _ = _quote_scored("How many workers does the TorchTrainer use?", d,
                               lambda c: 1.0 if "TorchTrainer(" in c.text else 0.0)
    assert body.startswith("The integration is minimal and preserves your familiar DeepSpeed workflow: [1]\n```\n…\n"
                           "trainer = TorchTrainer(")


def test_a_comment_wrapped_over_lines_of_a_code_block_is_one_sentence() -> None:
    d = doc("Configure the run before you start the trainer.\n```\n"
            "# If running in a multi-node cluster, this is where you\n"
            "# should configure the run's persistent storage that is accessible across all worker nodes.\n"
            '# run_config=ray.train.RunConfig(storage_path="s3://...")\ntrainer.fit()\n'
            "// free the ndarray list operator before exit\ndefer nd.Free()\n```")
    got = roles(d)
    assert (PROSE, "# If running in a multi-node cluster, this is where you # should configure the run's persistent "
                   "storage that is accessible across all worker nodes.") in got
    assert (SNIPPET, '# run_config=ray.train.RunConfig(storage_path="s3://...")') in got
    assert (SNIPPET, "defer nd.Free()") in got  # a comment joins a comment, never the code under it
    # plain words that are also code's ("print", "=") do not make a comment code; commented-out code is code
    d = doc("Launch the cluster from your laptop.\n```\n"
            "# Create or update the cluster. When the command finishes, it will print\n"
            "# out the command that can be used to SSH into the cluster head node.\n"
            "$ ray up example-full.yaml\n# Since we have to move at least 19 times in the env to reach the goal and\n"
            "# each move gives us -0.1 reward, we can expect an optimal episode reward of -0.1*18 + 1.0 = -0.8\n"
            "# model.to(device)\n```")
    got = roles(d)
    assert got[2][0] == PROSE and got[3] == (SNIPPET, "$ ray up example-full.yaml")
    assert got[4][0] == PROSE and got[5] == (SNIPPET, "# model.to(device)")  # under it, no part of it
