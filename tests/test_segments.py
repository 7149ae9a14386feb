"""The segmented index: shared segments, deleted rows, merges, BM25 on one scale, readers of pruned versions.

Versions are written with the real :class:`~dmlqa.index.writer.VersionWriter` (real FAISS, real SQLite,
real files) from small documents made here, with random unit vectors: what is checked is where rows go
and what a reader sees, not the embedding model.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from dmlqa.extract.sentences import Sentence
from dmlqa.index.lexical import tokenize
from dmlqa.index.postings import Postings, score
from dmlqa.index.versions import VERSIONS, IndexVersion, dense_text, prune, publish
from dmlqa.index.writer import FORMAT, MERGE_FACTOR, VersionWriter
from dmlqa.models import Block, Chunk, Document

DIM = 16
WORDS = ("pipeline parallel tensor shard optimizer state gradient allreduce bucket ring zero offload activation "
         "checkpoint micro batch bubble schedule expert router token sequence attention memory bandwidth").split()


def _text(rng: random.Random, n: int = 30) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + "."


def make_doc(i: int, rng: random.Random, *, chunks: int = 3, title: str | None = None) -> tuple:
    """A document with ``chunks`` passages, their vectors, and one quotable sentence per passage."""
    doc_id = f"web:doc{i}"
    texts = [_text(rng) for _ in range(chunks)]
    doc = Document(doc_id, f"https://example.org/{i}", title or f"Paper {i}", tuple(Block(t) for t in texts),
                   sha256=f"{i:064x}", kind="paper" if i % 2 else "docs", year=2010 + i % 10)
    cs, pos = [], 0
    for o, t in enumerate(texts):
        cs.append(Chunk(f"{doc_id}#{o}", doc_id, doc.url, doc.title, t, start=pos, end=pos + len(t)))
        pos += len(t) + 2
    sents = [(o, Sentence(doc_id, c.start, c.end, c.text, "body")) for o, c in enumerate(cs)]
    vecs = np.random.default_rng(i).normal(size=(chunks, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return doc, cs, vecs, sents


def write(index_dir: Path, docs: list[tuple], keys: dict[str, str], *, previous: str | None = None,
          segment_rows: int = 1000, ann_threshold: int = 1000) -> tuple[str, VersionWriter]:
    """A version of ``docs`` (tuples from :func:`make_doc`) reusing ``previous``'s rows of unchanged keys."""
    with VersionWriter(index_dir, previous, ann_threshold=ann_threshold, segment_rows=segment_rows,
                       dim=DIM) as writer:
        for doc, cs, vecs, sents in docs:
            key = keys[doc.doc_id]
            if writer.reusable(doc.doc_id, key):
                writer.reuse(doc.doc_id)
            else:
                writer.add(doc.doc_id, key, cs, [dense_text(doc.title, c.section, c.text) for c in cs], vecs,
                           sents, vecs)
        name = writer.finish([d[0] for d in docs], {"encoder_key": "test"})
    publish(index_dir, name)
    return name, writer


def open_version(index_dir: Path, name: str) -> IndexVersion:
    return IndexVersion(index_dir / VERSIONS / name)


def all_texts(version: IndexVersion) -> dict[str, list[str]]:
    return {d: [version.chunks([r])[r].text for r in version.doc_rows(d)] for d in version.docs}


def test_bm25_matches_bm25s_on_one_segment() -> None:
    """The scoring is bm25s's (Lucene variant, k1 1.2, b 0.75), which scored the index before segments."""
    import bm25s

    rng = random.Random(1)
    texts = [_text(rng, rng.randint(3, 60)) for _ in range(200)] + [""]
    expected = bm25s.BM25(k1=1.2, b=0.75)
    expected.index([tokenize(t) or ["\u2205"] for t in texts], show_progress=False)
    postings = Postings.build(texts)
    from dmlqa.index.postings import Lexicon

    # the common words are kept as dense tf rows, the rest as postings: both are scored here
    assert 0 < len(postings.dense_ids) < len(postings.terms)
    tokens = [tokenize(t) or ["\u2205"] for t in texts]
    for term in postings.terms.tolist():
        rows, tf = postings.term_rows(term)
        held = {r: toks.count(term.decode()) for r, toks in enumerate(tokens) if term.decode() in toks}
        assert dict(zip(np.asarray(rows).tolist(), np.asarray(tf).tolist(), strict=True)) == held

    lexicon = Lexicon.combine([(postings, np.ones(len(texts), dtype=bool))])
    for query in ("pipeline bubble schedule", "optimizer optimizer state", "ring allreduce bandwidth", "nothing"):
        want = np.asarray(expected.get_scores(tokenize(query)), dtype=np.float32) if tokenize(query) and any(
            t in expected.vocab_dict for t in tokenize(query)) else np.zeros(len(texts), dtype=np.float32)
        got = score(query, lexicon, [(postings, 0)], len(texts))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_bm25_scores_do_not_depend_on_how_rows_are_split(tmp_path: Path) -> None:
    """Collection statistics are the version's: 1 segment or 6, every live row scores the same."""
    rng = random.Random(2)
    docs = [make_doc(i, rng, chunks=rng.randint(1, 5)) for i in range(24)]
    keys = {d[0].doc_id: "k" for d in docs}
    one, _ = write(tmp_path / "one", docs, keys)
    many, _ = write(tmp_path / "many", docs, keys, segment_rows=12)
    a, b = open_version(tmp_path / "one", one), open_version(tmp_path / "many", many)
    try:
        assert len(a.segments) == 1 and len(b.segments) >= 5
        for query in ("expert router token", "zero offload checkpoint memory", "bubble"):
            sa, sb = a.lexical.scores(query), b.lexical.scores(query)
            by_chunk_a = {a.chunks([r])[r].chunk_id: sa[r] for r in range(a.size)}
            by_chunk_b = {b.chunks([r])[r].chunk_id: sb[r] for r in range(b.size)}
            assert by_chunk_a.keys() == by_chunk_b.keys()
            for cid, value in by_chunk_a.items():
                assert by_chunk_b[cid] == pytest.approx(value, rel=1e-5, abs=1e-6)
    finally:
        a.close()
        b.close()


def test_a_rebuild_shares_unchanged_segments_and_deletes_changed_rows(tmp_path: Path) -> None:
    rng = random.Random(3)
    index_dir = tmp_path / "index"
    docs = [make_doc(i, rng) for i in range(20)]
    keys = {d[0].doc_id: "v1" for d in docs}
    v1, _ = write(index_dir, docs, keys, segment_rows=15)
    first = open_version(index_dir, v1)
    old_rows = first.doc_rows("web:doc3")
    old_text = first.chunks(old_rows)[old_rows[0]].text
    first.close()

    changed = make_doc(3, random.Random(99))  # same id, new text
    docs2 = [changed if d[0].doc_id == "web:doc3" else d for d in docs if d[0].doc_id != "web:doc7"]
    keys2 = {**keys, "web:doc3": "v2"}
    v2, writer = write(index_dir, docs2, keys2, previous=v1, segment_rows=15)
    assert len(writer.new_segments) == 1  # only the changed document was written

    second = open_version(index_dir, v2)
    try:
        assert "web:doc7" not in second.docs and len(second.docs) == 19
        # untouched segments are the same files (hard links), not copies
        shared = [s for s in second.segments if (index_dir / VERSIONS / v1 / "segments" / s.folder.name).is_dir()]
        assert shared
        for seg in shared:
            old = index_dir / VERSIONS / v1 / "segments" / seg.folder.name / "rows.sqlite"
            assert os.stat(old).st_ino == os.stat(seg.folder / "rows.sqlite").st_ino
        # the old rows of the changed and the removed document are deleted: never returned
        dead = np.flatnonzero(~second.live)
        assert len(dead) == 6 and second.meta["chunks"] == 19 * 3
        assert sum(len(r) for s in second.meta["segments"] for r in [range(a, b) for a, b in s["deleted"]]) == 6
        texts = all_texts(second)
        assert old_text not in texts["web:doc3"] and texts["web:doc3"][0] == changed[1][0].text
        for q in (changed[2][0], docs[7][2][0]):  # the new vector of doc3, the old one of the removed doc7
            found = [second.doc_of(r) for r, _ in second.dense_search(q, 5)]
            assert None not in found and "web:doc7" not in found
        assert second.dense_search(changed[2][0], 1)[0][0] == second.doc_rows("web:doc3")[0]
        lexical = second.lexical.scores(" ".join(docs[7][1][0].text.split()[:6]))
        assert not lexical[dead].any()
    finally:
        second.close()


def test_small_segments_merge_by_tier_and_results_stay_the_same(tmp_path: Path) -> None:
    rng = random.Random(4)
    index_dir = tmp_path / "index"
    docs = [make_doc(i, rng, chunks=2) for i in range(40)]
    keys = {d[0].doc_id: "k" for d in docs}
    name, _ = write(index_dir, docs[:4], keys, segment_rows=100)
    # one small build after another: each adds a document, so a new small segment
    last = 4 + MERGE_FACTOR + 2
    for n in range(5, last + 1):
        name, writer = write(index_dir, docs[:n], keys, previous=name, segment_rows=100)
    version = open_version(index_dir, name)
    try:
        # ten single-document segments of one tier were merged into one
        assert len(version.segments) < MERGE_FACTOR
        assert version.meta["chunks"] == 2 * last
        reference, _ = write(tmp_path / "ref", docs[:last], keys)
        ref = open_version(tmp_path / "ref", reference)
        try:
            assert all_texts(version) == all_texts(ref)
            q = docs[8][2][1]
            assert [version.doc_of(r) for r, _ in version.dense_search(q, 5)] == [
                ref.doc_of(r) for r, _ in ref.dense_search(q, 5)]
            np.testing.assert_allclose(version.sentence_vectors(
                [version.sentence_by_ordinal("web:doc8", 1).row]), [docs[8][2][1]], atol=0.02)
        finally:
            ref.close()
    finally:
        version.close()


def test_flat_segments_merge_into_an_approximate_one_past_the_threshold(tmp_path: Path) -> None:
    rng = random.Random(5)
    index_dir = tmp_path / "index"
    docs = [make_doc(i, rng, chunks=4) for i in range(6)]
    keys = {d[0].doc_id: "k" for d in docs}
    name, _ = write(index_dir, docs[:2], keys, ann_threshold=10)
    name, _ = write(index_dir, docs[:4], keys, previous=name, ann_threshold=10)
    version = open_version(index_dir, name)
    try:
        assert [s.index_type for s in version.segments] == ["hnsw"]  # 8 + 8 rows > 10: merged, then HNSW
        q = docs[2][2][0]
        assert version.dense_search(q, 1)[0][0] == version.doc_rows("web:doc2")[0]
    finally:
        version.close()


def test_filters_are_row_masks_from_document_arrays(tmp_path: Path) -> None:
    rng = random.Random(6)
    docs = [make_doc(i, rng) for i in range(12)]
    name, _ = write(tmp_path / "index", docs, {d[0].doc_id: "k" for d in docs}, ann_threshold=5)
    version = open_version(tmp_path / "index", name)
    try:
        mask = version.doc_mask(kinds=["paper"], since=2013, undated=False)
        rows = version.row_mask(mask)
        want = {d.doc_id for d, *_ in docs if d.kind == "paper" and d.year >= 2013}
        assert {version.doc_of(r) for r in np.flatnonzero(rows)} == want
        found = version.dense_search(docs[0][2][0], 10, rows)  # doc0 is "docs": filtered out
        assert found and all(version.doc_of(r) in want for r, _ in found)
    finally:
        version.close()


def test_a_reader_keeps_serving_a_version_pruned_under_it(tmp_path: Path) -> None:
    rng = random.Random(7)
    index_dir = tmp_path / "index"
    docs = [make_doc(i, rng) for i in range(6)]
    keys = {d[0].doc_id: "a" for d in docs}
    v1, _ = write(index_dir, docs, keys)
    reader = open_version(index_dir, v1)
    try:
        v2, _ = write(index_dir, docs[:3], {k: "b" for k in keys}, previous=v1)
        assert v1 in prune(index_dir, 1, min_age_s=0) and not (index_dir / VERSIONS / v1).exists()
        rows = reader.doc_rows("web:doc5")
        assert reader.chunks(rows)[rows[0]].text == docs[5][1][0].text
        assert reader.dense_search(docs[5][2][0], 1)[0][0] == rows[0]
        assert reader.lexical.scores(docs[5][1][0].text)[rows[0]] > 0
        sent = reader.sentences_in("web:doc5", 0, 10**6)
        assert len(sent) == 3 and reader.sentence_vectors([s.row for s in sent]).shape == (3, DIM)
    finally:
        reader.close()


def test_full_segments_that_lost_a_few_rows_are_not_merged() -> None:
    """A 1 % change deletes a few rows from many full segments: rewriting them all would cost the whole
    collection. Only segments written small merge by tier; a full one only when more than half deleted."""
    from dmlqa.index.writer import Placement, merge_groups

    infos = {f"s{i}": {"rows": 100, "index_type": "hnsw"} for i in range(MERGE_FACTOR + 2)}
    placements = {f"d{i}": Placement("k", f"s{i}", 0, 97) for i in range(MERGE_FACTOR + 2)}  # 3 rows deleted each
    assert merge_groups(dict(infos), placements, segment_rows=100, ann_threshold=10) == []
    half = {**placements, "d0": Placement("k", "s0", 0, 40)}  # more than half of s0 deleted: rewritten alone
    assert merge_groups(dict(infos), half, segment_rows=100, ann_threshold=10) == [["s0"]]
    small = {f"t{i}": {"rows": 5, "index_type": "hnsw"} for i in range(MERGE_FACTOR)}
    tiny = {f"e{i}": Placement("k", f"t{i}", 0, 5) for i in range(MERGE_FACTOR)}
    assert merge_groups({**infos, **small}, {**placements, **tiny}, segment_rows=100, ann_threshold=1) == [
        sorted(small)]


def test_a_version_of_another_format_or_with_a_lost_segment_is_named_damaged(tmp_path: Path) -> None:
    """Nothing is released, so an older format is not read: the reader says to rebuild, in one line."""
    import json
    import shutil

    from dmlqa.errors import IndexDamagedError

    rng = random.Random(8)
    docs = [make_doc(i, rng) for i in range(3)]
    name, _ = write(tmp_path / "index", docs, {d[0].doc_id: "k" for d in docs})
    folder = tmp_path / "index" / VERSIONS / name
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "format": 1}))
    with pytest.raises(IndexDamagedError, match=rf"index format 1, this dmlqa reads {FORMAT}; run `dmlqa build`$"):
        IndexVersion(folder)
    (folder / "meta.json").write_text(json.dumps(meta))
    [segment] = meta["segments"]
    shutil.rmtree(folder / "segments" / segment["id"])
    with pytest.raises(IndexDamagedError, match=rf"segment {segment['id']}: segment.json cannot be read"):
        IndexVersion(folder)


def test_top_k_on_tied_scores_matches_a_full_sort() -> None:
    # BM25 score arrays are mostly zeros and take few distinct values: the shape top_k is partitioned for
    from dmlqa.index.segments import _top, top_k

    rng = np.random.default_rng(7)
    # past SAMPLE_ABOVE rows the cut is guessed from a sample: rows mostly scored (a common query word), a few
    # scored (the sample sees none: the positive rows are taken instead), and the best rows all between samples
    cases = [(1, 5, 0.3), (50, 10, 0.3), (5000, 100, 0.3), (20000, 100, 0.3), (300_000, 100, 0.97),
             (300_000, 100, 0.0004), (300_000, 1, 0.5), (300_000, 1000, 0.3)]
    for n, k, share in cases:
        scores = np.where(rng.random(n) < share, rng.integers(1, 40, n) / np.float32(8), 0).astype(np.float32)
        if share == 0.5:  # the best rows where the stride never looks
            scores[1::32] = 9.0
        got = top_k(scores, k)
        want = np.sort(scores[scores > 0])[::-1][:k]
        assert np.array_equal(scores[got], want)
        assert len(set(got.tolist())) == len(got)
        allowed = rng.random(n) < 0.5
        rows, values = _top(scores, k, allowed)
        assert allowed[rows].all() and np.array_equal(values, scores[rows])
        assert np.array_equal(values, np.sort(scores[allowed])[::-1][:k])


def test_dense_search_over_many_hnsw_segments_finds_what_searching_each_fully_finds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each HNSW segment is first asked for its share only; a segment holding more of the best rows than that
    (here: every near neighbour of the query sits in one segment) is searched again for all of them."""
    from dmlqa.index import segments
    from dmlqa.index.versions import PROBE_MIN

    # graphs built thoroughly enough to be exact on 300 random rows: what is tested is which segments are asked
    # for how many rows, not how an approximate graph answers at one candidate-list length against another
    monkeypatch.setattr(segments, "HNSW_EF_CONSTRUCTION", 200)
    rng = random.Random(3)
    docs = [make_doc(i, rng, chunks=10) for i in range(120)]  # 1,200 rows: 4 segments of 300, HNSW each
    anchor = docs[45][2][0]
    for i in range(40, 50):  # 100 rows close to one direction, all in the second segment
        noise = np.random.default_rng(100 + i).normal(scale=0.05, size=(10, DIM)).astype(np.float32)
        vecs = anchor + noise
        docs[i] = (*docs[i][:2], vecs / np.linalg.norm(vecs, axis=1, keepdims=True), docs[i][3])
    name, _ = write(tmp_path, docs, {d[0].doc_id: "k" for d in docs}, segment_rows=300, ann_threshold=100)
    version = open_version(tmp_path, name)
    assert len(version.segments) == 4 and all(s.index_type == "hnsw" for s in version.segments)

    def full(q: np.ndarray, n: int) -> list[int]:
        found = [(r + int(version.offsets[s]), sc) for s, seg in enumerate(version.segments)
                 for r, sc in zip(*seg.search(q, n, None), strict=True)]
        return [r for r, _ in sorted(found, key=lambda x: -x[1])[:n]]

    clustered = version.dense_search(anchor, 60)
    assert len(clustered) == 60 and 60 > PROBE_MIN
    assert {version.doc_of(r) for r, _ in clustered} <= {f"web:doc{i}" for i in range(40, 50)}
    assert [r for r, _ in clustered] == full(anchor, 60)
    for seed in range(20):
        q = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        assert [r for r, _ in version.dense_search(q, 40)] == full(q, 40)


def test_document_frequencies_count_live_rows_of_dense_and_sparse_terms(tmp_path: Path) -> None:
    """Common words are dense tf rows, the rest postings; the version's df counts only live rows of both."""
    rng = random.Random(9)
    docs = [make_doc(i, rng, chunks=4) for i in range(60)]  # 240 rows: the WORDS are in far more than a third
    keys = {d[0].doc_id: "k" for d in docs}
    name, _ = write(tmp_path, docs, keys, segment_rows=240)
    keys.update({d[0].doc_id: "changed" for d in docs[5:15]})  # 40 old rows deleted, 40 new ones added
    name, _ = write(tmp_path, docs, keys, previous=name, segment_rows=240)
    version = open_version(tmp_path, name)
    assert any(len(s.postings.dense_ids) for s in version.segments) and not version.live.all()
    rows = np.flatnonzero(version.live).tolist()
    chunks = version.chunks(rows)
    live_tokens = [set(tokenize(dense_text(version.docs[c.doc_id].title, c.section, c.text)))
                   for c in (chunks[r] for r in rows)]
    lexicon = version.lexical.lexicon
    for term, df in zip(lexicon.terms.tolist(), lexicon.df.tolist(), strict=True):
        word = term.decode()
        if word != "\u2205":
            assert df == sum(word in t for t in live_tokens), word
