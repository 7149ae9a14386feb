"""Reading stored sentences without their texts: places by row, texts only for the passages asked for,
cosines on the stored codes. An answer ranks thousands of sentences by vector and reads a few hundred
texts, so these reads must agree with the full reader on the sentences they return."""

from __future__ import annotations

import numpy as np
import pytest

from dmlqa.extract.sentences import PROSE, SNIPPET, Sentence
from dmlqa.index.segments import Segment
from dmlqa.index.versions import IndexVersion
from dmlqa.index.writer import VersionWriter, dense_text
from dmlqa.models import Block, Chunk, Document

DIM = 8
# Two documents, two passages each; each passage holds sentences at known offsets (one a code line).
TEXTS = {
    "doc:a": [["ZeRO partitions optimizer states.", "It removes redundancy across ranks."],
              ["Stage 3 also partitions the parameters.", "deepspeed --num_gpus 8 train.py"]],
    "doc:b": [["GPipe splits a batch into micro-batches.", "The bubble shrinks as micro-batches grow."],
              ["PipeDream uses a 1F1B schedule.", "Weight stashing keeps versions consistent."]],
}


def _corpus() -> tuple[list[Document], list[Chunk], list[tuple[int, Sentence]], dict[str, list[Sentence]]]:
    docs, chunks, sentences, by_doc = [], [], [], {}
    for doc_id, passages in TEXTS.items():
        url = f"https://example.org/{doc_id[4:]}"
        text = "\n\n".join(" ".join(p) for p in passages)
        blocks = tuple(Block(text=" ".join(p), section=f"part {i}") for i, p in enumerate(passages))
        docs.append(Document(doc_id=doc_id, url=url, title=doc_id, kind="docs", content_type="html", blocks=blocks))
        offset, ordinal = 0, 0
        for i, p in enumerate(passages):
            body = " ".join(p)
            chunks.append(Chunk(chunk_id=f"{doc_id}#{i}", doc_id=doc_id, url=url, title=doc_id, text=body,
                                section=f"part {i}", start=offset, end=offset + len(body)))
            at = offset
            for s in p:
                assert text[at : at + len(s)] == s
                role = SNIPPET if s.startswith("deepspeed") else PROSE
                sent = Sentence(doc_id, at, at + len(s), s, role, page=i + 1, section=f"part {i}")
                sentences.append((ordinal, sent))
                by_doc.setdefault(doc_id, []).append(sent)
                ordinal += 2  # ordinals count unquotable sentences too: they need not be consecutive
                at += len(s) + 1
            offset += len(body) + 2
    return docs, chunks, sentences, by_doc


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> tuple[IndexVersion, np.ndarray, dict]:
    docs, chunks, sentences, by_doc = _corpus()
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(len(chunks), DIM)).astype(np.float32)
    svectors = rng.normal(size=(len(sentences), DIM)).astype(np.float32)
    index_dir = tmp_path_factory.mktemp("home") / "index"
    # two passages a segment: each document lands in a segment of its own, so rows are offset per segment
    with VersionWriter(index_dir, None, ann_threshold=1000, segment_rows=2, dim=DIM) as writer:
        for d in docs:
            rows = [i for i, c in enumerate(chunks) if c.doc_id == d.doc_id]
            srows = [i for i, (_, s) in enumerate(sentences) if s.doc_id == d.doc_id]
            writer.add(d.doc_id, "", [chunks[i] for i in rows],
                       [dense_text(d.title, chunks[i].section, chunks[i].text) for i in rows], vectors[rows],
                       [sentences[i] for i in srows], svectors[srows])
        name = writer.finish(docs, {"model": "bundled:all-MiniLM-L6-v2", "failed": []})
    v = IndexVersion(index_dir / "versions" / name)
    yield v, svectors, by_doc
    v.close()


def test_each_document_has_its_own_contiguous_sentence_rows_in_document_order(version) -> None:
    v, _, by_doc = version
    assert len(v.segments) == 2
    a, b = v.sentence_rows("doc:a"), v.sentence_rows("doc:b")
    assert len(a) == len(by_doc["doc:a"]) and len(b) == len(by_doc["doc:b"])
    assert not set(a) & set(b)
    assert [v.sentence_places([r])[r].start for r in b] == [s.start for s in by_doc["doc:b"]]
    assert v.sentence_rows("doc:missing") == range(0)


def test_places_say_where_each_sentence_stands_and_texts_match_the_written_ones(version) -> None:
    v, _, by_doc = version
    for doc_id, written in by_doc.items():
        rows = list(v.sentence_rows(doc_id))
        places = v.sentence_places(reversed(rows))  # any order asked; keyed by row
        assert sorted(places) == rows
        got = [places[r] for r in rows]
        assert [(p.ordinal, p.start, p.end, p.page, p.section, p.role) for p in got] == [
            (2 * i, s.start, s.end, s.page, s.section, s.role)
            for i, s in enumerate(written)]
        assert v.sentence_texts(got) == {r: s.text for r, s in zip(rows, written, strict=True)}
        # the full reader returns the same sentences with the same rows
        assert [(s.row, s.text) for s in v.sentences_in(doc_id, 0, 10**9)] == [(r, s.text) for r, s in
                                                                                zip(rows, written, strict=True)]


def test_a_place_names_the_passage_storing_its_text_and_only_that_passage_is_read(version, monkeypatch) -> None:
    v, _, by_doc = version
    rows = list(v.sentence_rows("doc:b"))
    last = v.sentence_places([rows[-1]])[rows[-1]]
    chunk = v.chunks([last.chunk])[last.chunk]
    assert chunk.doc_id == "doc:b" and chunk.start <= last.start < chunk.end  # "Weight stashing ..." is passage 2's
    asked: list[list[int]] = []
    real = Segment.chunk_sentence_texts

    def spy(self, local_rows):  # noqa: ANN001, ANN202
        asked.append(list(local_rows))
        return real(self, local_rows)

    monkeypatch.setattr(Segment, "chunk_sentence_texts", spy)
    assert v.sentence_texts([last]) == {last.row: by_doc["doc:b"][-1].text}
    assert len(asked) == 1 and len(asked[0]) == 1  # one passage body read, not the document's two


def test_places_overlapping_a_span_are_those_of_the_passage(version) -> None:
    v, _, by_doc = version
    second = [s for s in by_doc["doc:a"] if s.section == "part 1"]
    got = v.sentence_places_in("doc:a", second[0].start, second[-1].end)
    assert [p.start for p in got] == [s.start for s in second]
    one = v.sentence_places_in("doc:a", by_doc["doc:a"][1].start + 3, by_doc["doc:a"][1].start + 4)
    assert [p.start for p in one] == [by_doc["doc:a"][1].start]
    assert v.sentence_places_in("doc:missing", 0, 100) == []


def test_cosines_on_the_codes_equal_the_stored_vectors_times_the_query(version) -> None:
    v, svectors, _ = version
    q = np.random.default_rng(1).normal(size=DIM).astype(np.float32)
    rows = [*v.sentence_rows("doc:b"), *v.sentence_rows("doc:a")]  # across both segments, out of order
    got = v.sentence_cosines(rows, q)
    assert got.shape == (len(rows),)
    assert np.allclose(got, v.sentence_vectors(rows) @ q, atol=1e-5)
    # the stored vectors are 8-bit codes of the written ones: the ranking survives
    written = svectors[[*range(4, 8), *range(0, 4)]] @ q
    assert np.allclose(got, written, atol=0.05 * float(np.abs(written).max()))
    assert v.sentence_cosines([], q).shape == (0,)


def test_codes_are_read_by_pread_equal_to_the_stored_array_in_any_order(version) -> None:
    """Sentence codes come from ``pread`` runs, not the memory map (so answers do not grow the reader's RSS):
    any order, repeats and gaps give exactly the stored rows, and a row past the end is an error."""
    v, _, _ = version
    for seg in v.segments:
        n = len(seg._sq)
        if not n:
            continue
        rng = np.random.default_rng(n)
        for rows in (rng.integers(0, n, 3 * n), np.arange(n)[::-1], np.array([n - 1, 0, 0, n - 1]), np.array([0])):
            assert np.array_equal(seg._codes(rows), np.asarray(seg._sq[rows]))
        with pytest.raises(IndexError):
            seg._codes(np.array([0, n]))


def test_reading_nothing_reads_nothing(version) -> None:
    v, _, _ = version
    assert v.sentence_places([]) == {}
    assert v.sentence_texts([]) == {}


def test_a_segment_numbers_rows_and_chunks_from_the_bases_it_is_given(version) -> None:
    v, _, _ = version
    seg = v.segments[1]
    local = seg.sentence_places([0, 1])
    based = seg.sentence_places([0, 1], row_base=100, chunk_base=10)
    assert [p.row + 100 for p in local] == [p.row for p in based]
    assert [p.chunk + 10 for p in local] == [p.chunk for p in based]
