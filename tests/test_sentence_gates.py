"""Sentence roles and spans made cheaper without changing what they produce (issue 20).

``classify`` tests a few literals before each pattern that a sentence almost never matches, and the
sentence boundary and code-token patterns were rewritten to scan faster. Each is held to the plain
version it replaces, on awkward text built here. No timings asserted.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Iterator

from fixtures_docs import prose

from dmlqa.extract import boundaries, textscan
from dmlqa.extract import sentences as s

# The patterns as they were before, stated again as the reference.
_OLD_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])|(?<=[a-z0-9)\]][.!?])\n(?=[a-z])")
#: The stop a line ends on before a lower-case line is no end after an address ("https://developer.nvidia." / "com").
_OLD_ADDRESS = re.compile(r"(?:/|www\.|@)\S*\.$")
#: Nor is the stop after a caption's label ("Figure 4. Communication operations ...").
_OLD_LABEL = re.compile(r"\s*(?:Figure|Fig\.|Table|Tab\.|Algorithm|Alg\.|Listing)\s*(?:\d+|[IVX]+)[a-z]?\.")
_OLD_NO_END = re.compile(r"(?:\b(?:e\.g|i\.e|et al|etc|vs|cf|Fig|Figs|Eq|Eqs|Sec|Secs|No|Ref|Refs|approx|resp|"
                         r"Dr|Mr|Ms|Prof|Inc|Ltd|Jr|St|al)|\b[A-Z])\.$")
_OLD_CODE_TOKENS = re.compile(r"[{};=]|\(\)|\b(?:def|return|import|self|lambda|elif|torch|np|npx|print)\b|"
                              r"\w+\.\w+\(|\w+_\w+\(|^\s*\d+\s+\w+\(|==|->|\+=|//")

#: Pieces that each pattern's alternatives match (in other cases, with the characters that
#: IGNORECASE folds onto ASCII letters), and pieces that come close.
_PIECES = (
    "x.y(", "a_b(", "foo.bar_baz(", "__init__(", "f ()", "def", "npx", "np.", "self.x", "print(", "{", "}", ";",
    "==", "->", "+=", "//", "12 run(", "  3 f(", "Proceedings of the", "PROCEEDINGS OF", "Proceedingſ of the",
    "ARXİV:", "arxıv:", "arXiv:2101.12345v2 [cs.LG]", "© 2021", "Copyright ©", "All Rights Reserved", "ACM ISBN",
    "https://doi.org/10.1/x", "licensed under a Creative Commons", "[12] Smith", "[3] a", "2020. URL", "2019a. url",
    "pp. 12", "vol. 3", "doi: 10.", "arXiv preprint arXiv", "11/23/26, 3:16 AM", "3 / 9", "page 3 of 9", " 12 ",
    "Figure 3: X", "Fig. 2. A", "Table IV.", "Algorithm 1:", "Listing 2|", "e.g.", "et al.", "Fig.", "Mr.", "J.",
    "al.", "\"", "’", ")", "]", "(", "“", ". ", "! ", "? ", ".) ", ".\" ", "K", "ſ", "ı", "İ", "_", "٣", "é",
    "ﬁ", "\u00a0", "\u2028", "\n", "\t", " ", "Z9", "permission to make digital or hard copies",
)


def _awkward(rng: random.Random) -> str:
    """Prose with pieces put in, or pieces alone."""
    if rng.random() < 0.5:
        return rng.choice(["", " ", "a "]).join(rng.choice(_PIECES) for _ in range(rng.randint(1, 6)))
    text = prose(rng.randint(1, 3), seed=rng.randint(0, 99))
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(_PIECES) + text[i:]
    return text


def test_folds_to_ascii_names_every_character_ignorecase_matches_to_an_ascii_letter() -> None:
    letter = re.compile("[a-z]", re.IGNORECASE).fullmatch
    found = {ch for ch in map(chr, range(128, sys.maxunicode + 1)) if letter(ch)}
    assert found == set(textscan.FOLDS_TO_ASCII)


def test_the_literal_checks_never_rule_out_a_match() -> None:
    rng = random.Random(11)
    matched = {"caption": 0, "furniture": 0, "reference": 0, "stamp": 0, "code": 0, "folded": 0}
    for _ in range(20_000):
        text = _awkward(rng)
        low = textscan.lowered(text)
        if s._CAPTION.search(text):
            matched["caption"] += 1
            assert textscan.holds(text, s._CAPTION_NEEDLES), repr(text)
        if s._FURNITURE.search(text):
            matched["furniture"] += 1
            matched["folded"] += low is None
            assert textscan.may_hold(low, s._FURNITURE_NEEDLES), repr(text)
        if s._REFERENCE.search(text):
            matched["reference"] += 1
            assert text.startswith("[") or textscan.may_hold(low, s._REFERENCE_NEEDLES), repr(text)
        stamp = s._PRINT_STAMP.search(text) is not None
        matched["stamp"] += stamp
        assert s._print_stamp(text) == stamp, repr(text)
        old = _OLD_CODE_TOKENS.findall(text)
        matched["code"] += bool(old)
        assert textscan.CODE_TOKENS.findall(text) == old, repr(text)
        assert s._code_tokens(text, 3) == min(len(old), 3), repr(text)
    assert all(matched.values()), matched  # every pattern was put to the test


def test_a_character_that_folds_onto_a_letter_still_counts() -> None:
    # "ſ" is an "s" to the pattern but not to str.lower(): only the pattern may decide
    for text in ("Shown in Proceedings of OSDI and again in Proceedings of SOSP for the second time.",
                 "Shown in Proceedingſ of OSDI and again in Proceedingſ of SOSP for the second time."):
        assert s.classify(text) == s.REFERENCE, text
    assert s.classify("Published in the PROCEEDINGS OF THE VLDB ENDOWMENT, volume 12, issue 3.") == s.FURNITURE
    assert s.classify("Published in the Proceedingſ of the VLDB Endowment, volume 12, issue 3.") == s.FURNITURE


def _old_spans(text: str) -> Iterator[tuple[int, int]]:
    start = 0
    for m in _OLD_BOUNDARY.finditer(text):
        if _OLD_NO_END.search(text[max(start, m.start() - 16) : m.start()]):
            continue
        if m.start() - start <= 16 and _OLD_LABEL.fullmatch(text, start, m.start()):
            continue
        if m.group() == "\n" and text[m.end()].islower() and _OLD_ADDRESS.search(text, max(start, m.start() - 80),
                                                                                 m.start()):
            continue
        yield start, m.start() + len(m.group().rstrip())
        start = m.end()
    if text[start:].strip():
        yield start, len(text)


def test_sentence_spans_are_those_of_the_lookbehind_boundary() -> None:
    rng = random.Random(12)
    stops = (". ", ".) ", ".\" ", "! ", "?’ ", ".. ", "e.g. ", "et al. ", "Fig. ", "A. ", " al. ", "Inc. ", ".]  ",
             ". (", ". “", ".\n", "etc.  ", "?!  ", ".’” ", ". 3", "X.Y. Z")
    spans = 0
    for _ in range(3_000):
        text = "".join(_awkward(rng) + rng.choice(stops) for _ in range(rng.randint(1, 5)))
        assert list(boundaries.spans(text, 0)) == list(_old_spans(text)), repr(text)
        spans += len(list(_old_spans(text)))
    assert spans > 6_000  # most texts were split into several sentences
