"""How long a question, a query or a target may be, and the one check every entry point makes.

Each front end (CLI, chat app, MCP server, library API) passes what a user typed through
:func:`check_text` (or, for a paper named to ``cites``/``cited-by``, :func:`check_length`) before
anything is loaded or searched. Past the limit the answer is one line saying both lengths, never
minutes of work: matching a long text against every title, tokenising it for BM25 and embedding it
all grow with its length, and a server answers one caller at a time per worker.

The limits are generous for what each input is for: a question or a free text for ``related`` (an
abstract, a paragraph pasted from a paper) fits in :data:`MAX_TEXT_CHARS` (the chat app's text box
takes as much); a target names one paper (URL, arXiv id, DOI, doc id or title), which no title
comes near :data:`MAX_TARGET_CHARS`. The answerer itself reads a question's first
:data:`dmlqa.query.prompt.MAX_QUESTION_CHARS` characters and says when it cut one.
"""

from __future__ import annotations

from dmlqa.errors import EmptyQueryError, TextTooLongError

__all__ = ["MAX_TARGET_CHARS", "MAX_TEXT_CHARS", "check_length", "check_text", "length_problem", "limit_of"]

#: The longest question, search query or free text for ``related`` (characters).
MAX_TEXT_CHARS = 20_000
#: The longest target of ``cites`` / ``cited-by`` (characters): it names one paper.
MAX_TARGET_CHARS = 2_000

_LIMITS = {"target": MAX_TARGET_CHARS}


def limit_of(what: str) -> int:
    """The limit for an input a front end calls ``what`` ("question", "query", "target")."""
    return _LIMITS.get(what, MAX_TEXT_CHARS)


def length_problem(text: str, what: str = "question") -> str | None:
    """Why ``text`` is too long to take (one line, both lengths), or None when it is not.

    The file readers (``--queries``, ``--questions``) prefix it with the file and line.
    """
    limit = limit_of(what)
    if len(text) <= limit:
        return None
    return f"the {what} is {len(text):,} characters; the limit is {limit:,}"


def check_length(text: str, what: str = "target") -> str:
    """``text`` unless it is longer than its limit (:class:`~dmlqa.errors.TextTooLongError`, a ``ValueError``)."""
    problem = length_problem(text, what) if isinstance(text, str) else None
    if problem is not None:
        raise TextTooLongError(problem)
    return text


def check_text(text: str, what: str = "question") -> str:
    """``text`` unless it is empty or white space (:class:`~dmlqa.errors.EmptyQueryError`) or longer than
    its limit (:class:`~dmlqa.errors.TextTooLongError`); both are ``ValueError`` and a mistake to tell,
    not an empty result."""
    if not isinstance(text, str) or not text.strip():
        raise EmptyQueryError(f"the {what} is empty: give some words to look for")
    return check_length(text, what)
