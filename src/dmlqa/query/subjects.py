"""Refusal by subject: a question about a technique named in plain lower-case words that no document writes.

The name check (:mod:`dmlqa.query.names`) knows a name by its shape: capitals, digits, joined parts, a word
no dictionary holds. A technique named in plain English has none of these: "What is tree attention?",
"What is async tensor parallelism in PyTorch?", "How does soft MoE avoid dropping tokens?". Each word occurs in
the corpus, so the name check passes them, and the nearest sentences are about attention, tensor parallelism or
MoE in general: an answer would quote them as if they answered.

A phrase of plain words is no name wherever it stands ("gradients shouldn't be averaged"), so only the
question's *subject* is read, where a question asks what a thing is or how it works, and only in the forms that
name a thing rather than a property of one:

* ``What is/are [a|an] X (and|in|for|,|?)``: "What is tree attention and how ..."; with "the" it asks for a
  property ("What is the default gradient bucket size?", which the corpus words differently), and is left;
* ``How does/do/is/are [a|an] X <verb>``, the verb one of :data:`_SUBJECT_VERBS`, so that X ends where the
  sentence's verb begins: with any word taken for the verb, "How do workers communicate in ...?" would name
  "workers communicate";
* ``Does/Do [a|an] X <verb>``, asking whether it does something: "Does liquid cooling let GPU nodes sustain
  higher clocks ...?";
* ``How is/are the X <verb>``: "How is the gradient noise scale used to pick ...?" names the thing it asks how
  to use ("the" is read here, where a verb of the list closes the subject);
* ``How does/do [a|an] X on|in|for|with ... <verb>``, a verb of the list within :data:`_VERB_WITHIN` words of
  the preposition: "How does in-network aggregation on programmable switches speed up allreduce?". A
  preposition may follow a subject or a verb; the verb further on says it followed the subject.

X is three or two lower-case words, the longer tried first (the last may be a short acronym: "soft MoE"), none
of them a word of asking, a verb of the list or an adjective of judgement ("typical", "best": "a typical hourly
price" is a question's wording, not a thing's name). It is unknown when no passage, title or address writes it
as a phrase (:func:`dmlqa.query.mentions.phrase`: any separator between its words, a plural).

Measured with `kb.ask` on every question set (bench/README.md, twenty-fourth round): 4 more of the 70
unanswerable questions of bench/train/unanswerable-21.jsonl refused, and no answerable question of any set; the
"the" and preposition forms (twenty-fifth round) 2 more, and no answerable question; the "Does X <verb>" form
(twenty-sixth round) 1 more, and reads no subject in any answerable question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dmlqa.index.versions import IndexVersion
from dmlqa.models import Hit
from dmlqa.query.mentions import Evidence
from dmlqa.query.names import Unknown

#: Verbs after the subject of "How does X ...?": where the subject ends.
_SUBJECT_VERBS = frozenset(
    "work works avoid avoids speed speeds help helps differ differs compare compares reduce reduces improve improves "
    "handle handles scale scales parallelize parallelizes relate relates affect affects used use cut cuts hide hides "
    "keep keeps save saves split splits decide decides choose chooses let lets allow allows".split())
#: Tokens that end the subject of "What is X ...?".
_WHAT_ENDS = frozenset({"and", "in", "for", ",", "?", ""})
#: Adjectives of judgement or ordinariness: a phrase they open is the question's wording, not a thing's name.
_JUDGEMENT = frozenset(
    "typical good best better worst common main key recommended default usual standard right correct ideal optimal "
    "general overall basic simple other different new old current latest first last major minor".split())
#: Words of a question, not of a subject.
_NOT_SUBJECT = frozenset(
    "a an the of to in on for with and or by from at as is are be it its this that these those how what why when "
    "which who whom whose do does did can could should would will my our your their i we you me us "
    "about into onto over under through across between per via without within like than up out off".split())

_WORD = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_SHORT_ACRONYM = re.compile(r"(?=(?:[a-z]*[A-Z]){2})[A-Za-z]{2,4}")  # MoE, GPU, KV
_OPENING = (
    (re.compile(r"(?i:what(?:'s|’s|\s+is|\s+are))\s+(?:an?\s+)?"), "what"),
    (re.compile(r"(?i:how\s+(?:is|are))\s+the\s+"), "how"),
    (re.compile(r"(?i:how\s+(?:does|do|is|are))\s+(?:an?\s+)?"), "how"),
    (re.compile(r"(?i:does|do)\s+(?:an?\s+)?"), "how"),
)
#: Prepositions a subject of "How does X ...?" may be followed by, when a verb of the list comes after them.
_SUBJECT_PREPOSITIONS = frozenset({"on", "in", "for", "with"})
#: How many words after such a preposition the verb may come.
_VERB_WITHIN = 6
_TOKEN = re.compile(r"[\w'’-]+|[^\w\s]")
_DOES = re.compile(r"(?i)how\s+(?:does|do)\s")  # the opening the preposition form is read after


def _subject_word(word: str, last: bool) -> bool:
    if word in _NOT_SUBJECT or word in _SUBJECT_VERBS:
        return False
    return bool(_WORD.fullmatch(word)) or (last and bool(_SHORT_ACRONYM.fullmatch(word)))


def asked_subject(question: str) -> str | None:
    """The lower-case phrase ``question`` asks what it is or how it works ("tree attention"), or None."""
    text = question.strip()
    for opening, form in _OPENING:
        m = opening.match(text)
        if m is None:
            continue
        tokens = _TOKEN.findall(text[m.end():])
        for n in (3, 2):
            words, after = tokens[:n], (tokens[n] if len(tokens) > n else "")
            ends = after in _WHAT_ENDS if form == "what" else after in _SUBJECT_VERBS or (
                after in _SUBJECT_PREPOSITIONS and _DOES.match(m.group()) is not None
                and any(t in _SUBJECT_VERBS for t in tokens[n + 1 : n + 1 + _VERB_WITHIN]))
            if (len(words) == n and ends and all(_subject_word(w, i == n - 1) for i, w in enumerate(words))
                    and words[0] not in _JUDGEMENT
                    and not any(w.endswith("ed") for w in words[1:])):  # "gradients accumulated": a verb
                return " ".join(words)
        return None
    return None


def unknown_subject(version: IndexVersion, question: str, hits: Sequence[Hit] = ()) -> list[Unknown]:
    """The question's lower-case subject (:func:`asked_subject`) when no document writes it; else nothing."""
    subject = asked_subject(question)
    if subject is None or Evidence(version, hits).phrase_found(subject):
        return []
    return [Unknown(subject)]
