"""Files of queries and questions (JSON Lines), and the evaluation run over a question set.

``dmlqa search --queries``, ``dmlqa ask --questions`` and ``dmlqa eval`` read their files here
(through :class:`dmlqa.KnowledgeBase`), so a missing, unreadable or malformed file is one
:class:`~dmlqa.errors.InputFileError` naming the file and the line, whichever front end passed it.
``what`` is how the caller names the file in those messages (the CLI passes its flag).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dmlqa.errors import InputFileError, SettingsError
from dmlqa.index.versions import IndexVersion
from dmlqa.models import Answer
from dmlqa.query.answer import LLM_UNAVAILABLE, Asker, AskOptions
from dmlqa.query.evaluate import EvalQuestion, by_identity, gold_identities, read_questions, score_answers
from dmlqa.query.limits import length_problem
from dmlqa.query.llm import LLMError
from dmlqa.textsafe import replace_lone_surrogates


def read_jsonl_lines(path: str | os.PathLike[str], what: str = "JSONL") -> list[str]:
    """The lines of a JSON Lines file (a leading BOM dropped), or one clear error naming it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{what} file {path} does not exist") from None
    except IsADirectoryError:
        raise InputFileError(f"{what} file {path} is a folder, not a JSONL file") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputFileError(
            f"{what} file {path} is not UTF-8 text (byte {data[exc.start]:#04x} on line {line})"
        ) from None
    return text.removeprefix("\ufeff").splitlines()


def read_queries(path: str | os.PathLike[str], what: str = "queries") -> list[tuple[str, str]]:
    """``(id, text)`` of every query of a file of ``{"id", "text"}`` objects (BEIR's ``"_id"`` too)."""
    items: list[tuple[str, str]] = []
    for n, line in enumerate(read_jsonl_lines(path, what), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            qid = str(rec.get("id", rec.get("_id")))
            text = rec.get("text", rec.get("question"))
        except (ValueError, AttributeError):
            raise InputFileError(f"{path}:{n}: not a JSON object") from None
        if rec.get("id", rec.get("_id")) is None or not isinstance(text, str):
            raise InputFileError(f'{path}:{n}: a query needs "id" (or "_id") and "text"')
        if not text.strip():
            raise InputFileError(f"{path}:{n}: the query text is empty")
        if (too_long := length_problem(text, "query")) is not None:  # refused with the file, not at its line
            raise InputFileError(f"{path}:{n}: {too_long}")
        # "\ud800" is valid JSON: mended here too, so the ids a front end prints are text as well
        items.append((replace_lone_surrogates(qid), replace_lone_surrogates(text)))
    return items


def read_question_file(path: str | os.PathLike[str], what: str = "questions") -> list[EvalQuestion]:
    """The questions of a question set (``{"id", "question", "gold_urls", ...}`` a line)."""
    lines = read_jsonl_lines(path, what)
    return read_questions(lines, str(path))  # a bad line is an InputFileError naming file and line


def evaluate(asker: Asker, questions: Sequence[EvalQuestion], *, llm: bool | None = None,
             mode: str = "hybrid", version: IndexVersion | None = None) -> dict[str, Any]:
    """Ask every question and score the answers (retrieval, citations, refusals, latency).

    ``llm``: True scores the configured LLM (an error when none is set), False the extractive
    answerer, None the LLM when one is set. One warm-up question (the first answerable one, asked again
    untimed) loads the encoder, the index, its off-topic background and the LLM's weights (on servers
    that load on demand) before anything is timed; an LLM that fails on it fails the run at once rather
    than falling back on every question. Every question is asked of one index version (``version``,
    else the one published at the start), so the scores describe one index even when a build publishes
    meanwhile.
    """
    options = AskOptions(use_llm=llm is not False, mode=mode)
    if llm and asker.llm is None:
        raise SettingsError("--llm needs an LLM endpoint: set DMLQA_LLM_BASE_URL and DMLQA_LLM_MODEL "
                            "(or llm_base_url and llm_model in dmlqa.toml)")
    backend = asker.llm.name if asker.llm is not None and options.use_llm else "extractive"
    if version is None:
        version = asker.searcher.pin()
    # the set's first answerable question, asked once more untimed: a question the knowledge base is not about
    # ("warm up" was one) is refused before the LLM, which would then be neither loaded nor checked
    first = next((q.question for q in questions if q.answerable), questions[0].question if questions else "warm up")
    warm = asker.ask(first, options, version=version)
    if backend != "extractive" and LLM_UNAVAILABLE in (warm.notice or ""):
        raise LLMError(f"the LLM backend failed on a first question: {warm.notice}")
    answers = [a for _, a in ask_in_turn(questions, lambda text, previous: asker.ask(
        text, options, previous=previous, version=version))]
    # gold URLs name works, by any of their addresses: score on the identities
    scored = [replace(a, retrieved=tuple(by_identity(a.retrieved, version.docs)),
                      citations=tuple(by_identity(a.citations, version.docs))) for a in answers]
    identify = gold_identities(version.docs)
    scores = score_answers([replace(q, gold_urls=identify(q.gold_urls)) for q in questions], scored, backend=backend)
    scores["follow_ups"] = sum(q.previous is not None for q in questions)
    scores["backend"] = backend
    scores["retrieval"] = mode
    return scores


def ask_in_turn(questions: Sequence[EvalQuestion],
                ask: Callable[[str, Answer | None], Answer]) -> Iterator[tuple[EvalQuestion, Answer]]:
    """Each question with its answer by ``ask(text, previous answer)``, in order. A follow-up (its ``previous``
    set) is asked after the answer to the question it follows, as the chat asks it: alone, "And how do I install
    it?" has no subject. Only the answers a later question follows are kept: ``dmlqa ask --questions`` streams
    a file of any length."""
    followed = {q.previous for q in questions if q.previous is not None}
    said: dict[str, Answer] = {}
    for q in questions:
        answer = ask(q.question, said.get(q.previous or ""))
        if q.id in followed:
            said[q.id] = answer
        yield q, answer
