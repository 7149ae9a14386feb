"""How a sentence leans on its neighbours: on the one before it ("This reduces memory by 8x."), on what follows
("The major components are:"), or on a cited work named only by its number ("[57] is an ..."). Read by the
splitter's roles and by the answerer, which must quote such a sentence with what it leans on, or not at all."""

from __future__ import annotations

import re

#: Openings that lean on the sentence before: the answer must carry that sentence too.
_ANAPHOR = re.compile(r"^(?:This|These|That|Those|It|Its|They|Their|Such|Here|Thus|Hence|Therefore|"
                      r"However|Moreover|Furthermore|In addition|Additionally|Also|Then|As a result|"
                      r"In this case|To do so|For this|With this|Instead|Similarly|Likewise|Otherwise|"
                      r"In contrast|On the other hand|As such|Both|Each of these|Though|Still|Yet|"
                      r"Nevertheless|Nonetheless|Even so|In other words|Namely|For example|For instance|"
                      r"Because of this|That is)\b")


_ABOVE = re.compile(r"\b(?:above|aforementioned)\b")


def refers_above(text: str) -> bool:
    """Does the sentence point at text before it ("the model above", "the aforementioned schedule")?"""
    return _ABOVE.search(text) is not None


def leans_back(text: str) -> bool:
    """Does this sentence depend on the one before it (anaphor, lower-case start, 'above')?"""
    t = text.lstrip("\"'“(- ")
    return bool(_ANAPHOR.match(t)) or t[:1].islower() or refers_above(t)


def leans_forward(text: str) -> bool:
    """Does this sentence announce what follows (ends with ':' or says 'the following')?"""
    return text.rstrip().endswith(":") or re.search(r"\bthe following\b|\bas follows\b", text) is not None


#: A sentence whose subject is a reference marker: "[57] is an on-demand swapping mechanism ...".
_MARKER_SUBJECT = re.compile(r"^\s*\[\s*\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\s*\]\s+[a-z]")


def marker_subject(text: str) -> bool:
    """Is the sentence's subject a reference marker? Quoted, the marker must go (an answer's only
    bracketed numbers are its own citations), and "is an on-demand swapping mechanism" is left: a
    fragment naming nothing. Such sentences are not quoted."""
    return _MARKER_SUBJECT.match(text) is not None
