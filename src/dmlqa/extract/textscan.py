"""Cheap scans of a text that sentence splitting runs on every sentence (:mod:`dmlqa.extract.sentences`).

Every sentence of a build is classified, and most of the patterns it is tested against can only match a text
holding some literal; a substring test (a C scan) rules a pattern out tens of times cheaper than the search.
These are those tests, and the letter count every sentence asks for.
"""

from __future__ import annotations

import re

_ASCII_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#: Small words a wrapped line of prose may stop on (articles, prepositions, conjunctions, copulas): a regex
#: alternation, shared by the sentence splitter and the reader of tables in PDF text.
LINKING = "a|an|the|of|to|in|on|for|with|by|from|and|or|that|which|is|are|be|as|at|than|into|via|per"
#: The marker opening a line comment (shell/Python ``#``, C-like ``//``); :data:`COMMENT_MARK` also finds it where a
#: comment wrapped over lines was joined into one.
COMMENT = re.compile(r"^\s*(?:#|//)\s+")
COMMENT_MARK = re.compile(r"(?:^|\s)(?:#|//)\s+")


#: The calls (``x.y(``, ``a_b(``) are tried only where a word starts (the ``\b`` they share with the
#: keywords): from inside a word they match only if they match from its start, which a scan tries first
#: (no match ends inside a word), so the matches are the same; trying them at every letter backtracked
#: over the rest of its word each time.
CODE_TOKENS = re.compile(r"[{};=]|\(\)|\b(?:(?:def|return|import|self|lambda|elif|torch|np|npx|print)\b|"
                          r"\w+\.\w+\(|\w+_\w+\()|^\s*\d+\s+\w+\(|==|->|\+=|//")
#: Math in a docs page's prose: display math ("$$ Z = ... $$"), or inline math opening and closing on a character that
#: is no space (a shell's "$HOME" or "$((a*b))" is no span, or reads as no prose); one line, 300 characters at most.
MATH = re.compile(r"\$\$[^$\n]{1,300}?\$\$|\$(?=[^\s$])[^$\n]{1,300}?(?<=[^\s$])\$")
#: A version bound in a list of requirements ("PyTorch >= 2.2", "Open MPI >= 2.X"): group 1 is what it bounds.
VERSION_BOUND = re.compile(r"([A-Za-z][\w.+-]*)\s?[<>]=\s?v?\d[\w.]*")
#: A range of releases written with an arrow ("ROCm 5.3->5.6", "v1.2 -> v2.0"): a news item's "from ... to", no
#: return type or pointer.
VERSION_RANGE = re.compile(r"(?<![\w.])(v?\d+(?:\.\d+)+)\s?->\s?(v?\d+(?:\.\d+)+)(?![\w(])")


def code_comment(text: str) -> bool:
    """Is the line a code comment (``# ...``, ``// ...``)?"""
    return COMMENT.match(text) is not None


def letter_count(text: str) -> int:
    """How many characters of ``text`` are letters (``str.isalpha``). Every sentence asks this; for
    ASCII text (most of it) deleting the letters in C is some ten times quicker than a loop over them."""
    if text.isascii():
        return len(text) - len(text.encode("ascii").translate(None, _ASCII_LETTERS))
    return sum(map(str.isalpha, text))


#: The characters outside ASCII that IGNORECASE lets match an ASCII letter ("ſ" matches "s"), which a
#: lower-cased text does not turn into that letter (tests/test_sentence_gates.py checks all of Unicode).
FOLDS_TO_ASCII = ("\u0130", "\u0131", "\u017f", "\u212a")


def lowered(text: str) -> str | None:
    """``text`` lower-cased, to test a case-insensitive pattern's literals in; None where a character
    from :data:`FOLDS_TO_ASCII` is in it: there only the pattern itself can tell."""
    if not text.isascii() and any(ch in text for ch in FOLDS_TO_ASCII):
        return None
    return text.lower()


def holds(text: str, needles: tuple[str, ...]) -> bool:
    """Is one of ``needles`` in ``text``? (A loop: ``any()`` over a generator costs a third more.)"""
    for needle in needles:
        if needle in text:
            return True
    return False


def may_hold(low: str | None, needles: tuple[str, ...]) -> bool:
    """Can a text whose :func:`lowered` form is ``low`` hold one of the (lower-case) ``needles``?"""
    return low is None or holds(low, needles)


def count_upto(pattern: re.Pattern[str], text: str, cap: int) -> int:
    """How many (non-overlapping) matches ``text`` has, counted up to ``cap``: a rule needs only to
    know whether a threshold is reached, and a long code listing has hundreds."""
    hits = 0
    for _ in pattern.finditer(text):
        hits += 1
        if hits == cap:
            break
    return hits


#: Four bare numbers in a row ("1 0.5 0 1", "16 192 82% 24"): the ticks of a plot's axis or a table's figures
#: that PDF text flattened into a line of prose. Prose lists its numbers with commas and words between.
_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:%|x|×|[kKMBGT]B?)?"
_NUMBER_RUN = re.compile(rf"(?<!\S){_NUMBER}(?:\s+{_NUMBER}){{3}}(?!\S)")


def number_run(text: str) -> bool:
    """Does ``text`` hold a run of four bare numbers (:data:`_NUMBER_RUN`)? Such a "sentence" is a figure's or a
    table's text, not one to quote."""
    if text.isascii():  # four digits at least, counted in C first: most sentences have fewer
        if len(text) - len(text.encode("ascii").translate(None, b"0123456789")) < 4:
            return False
    return _NUMBER_RUN.search(text) is not None
