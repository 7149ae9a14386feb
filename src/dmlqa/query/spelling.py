"""Typos in plain words: "what is pipline parallelism" is a question about pipeline parallelism.

The name check (:mod:`dmlqa.query.names`) takes a lower-case word that is no English word and that no document
uses for a product's name ("torchtitan", "hivemind"): the only way to tell a name from the plain words around it
without a list of products. A misspelt plain word ("pipline", "optimzer", "acumulation") is such a word too, and
the question was refused with "the knowledge base has nothing on pipline". BM25 missed the word as well.

So before the name check, a lower-case word that is neither English nor in the index is read as the word one edit
away (a letter dropped, added, changed, or two swapped: Damerau-Levenshtein distance 1) that the index uses most,
among those it uses in :data:`~dmlqa.query.mentions.CONCEPT_ROWS` passages or more ("pipeline" in hundreds), or
else as the one frequent English word one edit away ("recieve"). The answer's notice says how it read the
question. A word with no such neighbour stays as written for the name check ("torchtitan"), and so does a word
the index uses at all ("pipelime" in one passage is a product, not "pipeline"), a word shorter than
:data:`MIN_LENGTH` and a capitalised word inside the question. None of the 2,295 questions of bench/ and
dev.jsonl is changed by it on the snapshot: the 72 lower-case names no document uses in its unanswerable and
off-topic ones (57 distinct: "torchtitan", "dstack", "kueue", "logrotate", ...) are still refused by name.
"""

from __future__ import annotations

import re

from dmlqa.index.lexical import tokenize
from dmlqa.index.versions import IndexVersion
from dmlqa.query.english import COMMON_RANK, english_ranks, english_word
from dmlqa.query.mentions import BATCH_ROWS, CONCEPT_ROWS, passages_using, row_texts, rows_with, tokens_known

#: The shortest word corrected. Products' names are short and often one edit from a plain word ("dstack" from
#: "stack", "kueue" from "queue", "torchx" from "torch"); the words a typo costs an answer are long ("pipline",
#: "optimzer", "paralelism"). A short typo ("shrad") is left to the name check.
MIN_LENGTH = 7
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
#: A word as the question writes it: letters, with a capitalised first one at most ("Pipline parallelism?").
_PLAIN = re.compile(r"(?<![\w.+\-/@#])([A-Za-z]?[a-z]+)(?![\w+\-/@#]|\.\w)")


def edits(word: str) -> set[str]:
    """The words one edit from ``word``: a letter dropped, added or changed, or two neighbours swapped."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    out |= {a + c + b for a, b in splits for c in _LETTERS}
    out.discard(word)
    return out


def correction(version: IndexVersion, word: str) -> str | None:
    """The plain word ``word`` (lower-case) misspells, or None: it is English, the index uses it, or nothing one
    edit away is a word the index uses often or frequent English (see the module's docstring)."""
    if len(word) < MIN_LENGTH or not word.isalpha() or not word.isascii() or not word.islower():
        return None
    if english_word(word, limit=1 << 30) or tokens_known(version, word):
        return None
    near = sorted(edits(word))
    # the words the index may hold as one token ("pipeline"), by how many passages do
    single = [(w, t[0]) for w in near if len(t := tokenize(w)) == 1]
    counts = passages_using(version)([t for _, t in single])
    if len(counts) and counts.max() >= CONCEPT_ROWS:
        # words sharing a stem tie ("optimeer" and "optimizer" are both "optim"): the one its passages write
        tied = [(w, t) for (w, t), n in zip(single, counts.tolist(), strict=True) if n == counts.max()]
        return next((w for w, t in tied if _written(version, w, t)), tied[0][0])
    ranks = english_ranks()  # as spelt: a compound of two frequent words ("torch" + "titans") is no fix
    english = [w for w in near if ranks.get(w, COMMON_RANK) < COMMON_RANK]
    return english[0] if len(english) == 1 else None


def _written(version: IndexVersion, word: str, token: str) -> bool:
    """Do the first passages holding ``token`` write ``word`` as it is spelt (not only a word of its stem)?"""
    spelt = re.compile(rf"(?<![A-Za-z]){re.escape(word)}(?![A-Za-z])", re.IGNORECASE)
    rows = rows_with(version, [token], every=True)[:BATCH_ROWS]
    return any(spelt.search(text) for _, text in row_texts(version, rows))


def corrected(version: IndexVersion, question: str) -> tuple[str, list[tuple[str, str]]]:
    """``question`` with its misspelt plain words corrected, and the (as written, as read) pairs. A capitalised
    word is corrected only where it opens the question ("Pipline parallelism?"): elsewhere it may be a name."""
    fixes: list[tuple[str, str]] = []
    first = len(question) - len(question.lstrip(" \"'¿¡("))  # where the question's first word starts

    def fix(m: re.Match[str]) -> str:
        word = m.group(1)
        if word[0].isupper() and not (m.start() == first and word[1:].islower()):
            return word
        right = correction(version, word.lower())
        if right is None:
            return word
        right = right.capitalize() if word[0].isupper() else right
        fixes.append((word, right))
        return right

    return _PLAIN.sub(fix, question), fixes
