import math

from dmlqa.query.evaluate import first_relevant_rank, ndcg_at_k, normalize_url, percentile, retrieval_scores


def test_normalize_url_forms() -> None:
    assert normalize_url("http://www.arxiv.org/pdf/1910.02054v3.pdf") == "arxiv.org/abs/1910.02054"
    assert normalize_url("https://arxiv.org/abs/1910.02054/") == "arxiv.org/abs/1910.02054"
    assert normalize_url("HTTPS://www.DeepSpeed.ai/training/") == "deepspeed.ai/training"


def test_first_relevant_rank_dedups_documents() -> None:
    ranked = ["https://a.org/x", "https://a.org/x/", "https://arxiv.org/pdf/2306.10209", "https://b.org"]
    assert first_relevant_rank(ranked, ["https://arxiv.org/abs/2306.10209"]) == 2
    assert first_relevant_rank(ranked, ["https://c.org"]) is None


def test_recall_and_mrr() -> None:
    s = retrieval_scores([1, 3, None, 7], ks=(1, 5, 10))
    assert s.recall == {1: 0.25, 5: 0.5, 10: 0.75}
    assert math.isclose(s.mrr, (1 + 1 / 3 + 1 / 7) / 4)


def test_ndcg() -> None:
    assert ndcg_at_k(["a", "b"], {"a": 1}) == 1.0
    assert math.isclose(ndcg_at_k(["b", "a"], {"a": 1}), 1 / math.log2(3))
    assert ndcg_at_k(["x"], {}) == 0.0


def test_percentile() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([], 95) == 0.0 and percentile([5], 95) == 5


def test_answer_checks_for_llm_and_extractive_scores() -> None:
    from dmlqa.models import Answer, Citation
    from dmlqa.query.evaluate import EvalQuestion, answer_words, dangling_markers, score_answers

    cite = Citation(n=1, url="https://a.org/x", title="X", page=None, quote="q")
    good = Answer(question="q", answer="ZeRO shards optimizer states [1].", citations=(cite,), backend="llm:m",
                  refused=False, flags=("removed citation [9]: no such source",))
    bad = Answer(question="q", answer="It cites [2] which is not listed.", citations=(cite,), backend="extractive",
                 refused=False, flags=("unsupported: It cites which is not listed.",),
                 notice="LLM unavailable (timed out); showing the extractive answer")
    assert dangling_markers(good) == [] and dangling_markers(bad) == [2]
    code = Answer(question="q", answer="Load it [1]:\n```\nx = datasets[0]\n```\nthen `batch[3]`.", citations=(cite,),
                  backend="extractive", refused=False)
    assert dangling_markers(code) == []  # code's indexing points at no source
    assert answer_words("ZeRO shards optimizer states [1].") == 4
    questions = [EvalQuestion(str(i), "q", ("https://a.org/x",), True, ()) for i in range(2)]
    s = score_answers(questions, [good, bad], backend="llm:m")
    assert s["answers_with_dangling_markers"] == 1 and s["fallbacks"] == 1
    assert s["removed_citations"] == 1 and s["unsupported_sentences"] == 1 and s["median_words"] == 5.0
    assert "fallbacks" not in score_answers(questions, [good, bad])
    # refused before either answerer (by name, as off-topic): the LLM was not asked, so nothing fell back
    early = Answer(question="q", answer="The knowledge base has nothing on this.", citations=(), backend="extractive",
                   refused=True, notice="no passage is about this question")
    assert score_answers(questions, [good, early], backend="llm:m")["fallbacks"] == 0


def test_gold_urls_map_onto_the_identity_of_the_document_they_name() -> None:
    """A gold URL may spell a document by its identity, a list's alias or the address its text was fetched
    from; an empty one (or one no document answers to) names nothing, though a record read from a file has
    no fetched address either."""
    from dmlqa.index.versions import DocRecord
    from dmlqa.query.evaluate import gold_identities

    def record(doc_id: str, url: str, source_url: str, aliases: tuple[str, ...] = ()) -> DocRecord:
        return DocRecord(doc_id, url, source_url, "t", "paper", "pdf", (), None, None, (), False, 1, 0, aliases)

    identify = gold_identities({
        "doi:10.1145/1": record("doi:10.1145/1", "https://dl.acm.org/doi/10.1145/1", "https://dl.acm.org/doi/pdf/10.1145/1",
                                ("https://dl.acm.org/doi/abs/10.1145/1",)),
        "jsonl:x": record("jsonl:x", "https://example.org/x", "notes.jsonl#3"),
        "jsonl:y": record("jsonl:y", "https://example.org/y", ""),
    })
    assert identify(["http://dl.acm.org/doi/pdf/10.1145/1/", "https://dl.acm.org/doi/abs/10.1145/1",
                     "https://www.dl.acm.org/doi/10.1145/1"]) == ("https://dl.acm.org/doi/10.1145/1",) * 3
    assert identify(["", "https://example.org/other", "https://example.org/y"]) == (
        "", "https://example.org/other", "https://example.org/y")


def test_a_follow_up_may_name_an_id_written_with_a_lone_surrogate() -> None:
    """Ids are mended as text (a lone surrogate replaced); "previous" is mended the same way, so it still names
    the question before it."""
    from dmlqa.query.evaluate import read_questions

    lines = ['{"id": "a\\ud800", "question": "What is ZeRO?"}',
             '{"id": "b", "question": "And stage 3?", "previous": "a\\ud800"}']
    first, second = read_questions(lines)
    assert second.previous == first.id == "a\ufffd"


def test_a_question_set_is_asked_in_turn_keeping_only_the_answers_followed() -> None:
    """Each follow-up gets the answer to the question it names; the others are asked with none, and no answer
    is kept that no later question follows (``ask --questions`` streams a file of any length)."""
    from dmlqa.models import Answer
    from dmlqa.query.batch import ask_in_turn
    from dmlqa.query.evaluate import read_questions

    lines = ['{"id": "a", "question": "What is ZeRO?"}', '{"id": "b", "question": "And stage 3?", "previous": "a"}',
             '{"id": "c", "question": "What is GPipe?"}', '{"id": "d", "question": "Why?", "previous": "c"}',
             '{"id": "e", "question": "What is Horovod?"}']
    heard: list[tuple[str, str | None]] = []

    def ask(text: str, previous: Answer | None) -> Answer:
        heard.append((text, previous.question if previous else None))
        return Answer(question=text, answer=f"about {text}", citations=(), backend="extractive", refused=False)

    turns = ask_in_turn(read_questions(lines), ask)
    ids, kept = [], []
    for q, a in turns:
        assert a.question == q.question
        ids.append(q.id)
        kept.append(set(turns.gi_frame.f_locals["said"]))  # the answers held while the set is asked
    assert ids == ["a", "b", "c", "d", "e"] and kept[-1] == {"a", "c"}
    assert heard == [("What is ZeRO?", None), ("And stage 3?", "What is ZeRO?"), ("What is GPipe?", None),
                     ("Why?", "What is GPipe?"), ("What is Horovod?", None)]
