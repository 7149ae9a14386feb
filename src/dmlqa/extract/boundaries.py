"""Where a paragraph's sentences end: the one rule of sentence boundaries, for a document's sentences
(:mod:`dmlqa.extract.sentences`) and a paper's reference entries (:mod:`dmlqa.extract.references`) alike.
Pure functions over a string: offsets in, offsets out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

#: A sentence ends at . ! ? (plus closing quotes/brackets) followed by space and a capital, digit or
#: opening bracket; not after common abbreviations or initials. Group ``gap`` is the gap between two sentences:
#: the stop is matched rather than looked behind for, so that the engine skips to the next ". ! ?" (a
#: pattern opening with a lookbehind is tried at every character, three times slower).
#: A footnote's number glued to the stop ("... training data.8 Following ...") is no part of either sentence (group
#: ``note``; only after a letter or a bracket: "version 2.8 Following" has no stop); an equation's number ending its
#: line (". (5)" before "For other ...") stays with the equation rather than open the next sentence.
#: A stop ending a line before one that opens in lower case ends a sentence too (group ``lower``): in PDF text that
#: is where a figure's caption or a footnote broke into the running text, whose sentence goes on under it ("...
#: a single model parallel transformer layer." / "contains a portion of the embedding table, ..."); read as one,
#: the caption's last sentence carried the other's tail into every quote of it. A footnote's mark opens a sentence
#: too: a paper's first page runs "... using 256 GPUs. ∗This work was conducted when ..." into its abstract.
_BOUNDARY = re.compile(r"[.!?](?P<note>(?<=[a-z)][.!?])[0-9]{1,2}(?=\s+[A-Z][a-z]))?"
                       r"(?P<gap>[\"'”’)\]]*(?:[ \t]+\(\d{1,3}\)(?=[ \t]*\n))?\s+)"
                       r"(?=[\"'“‘(\[]?[A-Z0-9]|[∗†‡]\s?[A-Z]|(?P<lower>(?<=[a-z0-9)\]][.!?]\n)[a-z]))")
#: Where a run of list items was flattened into one line, each item begins (the gap before it is cut): a bullet in
#: PDF text ("as follows: • Blocked quantized weights ... by 50%. • Hierarchical ..."), or a dash after a colon or a
#: stop in HTML text (": - qwZ applies ... - hpZ eliminates ..."). As one sentence, the run was too long to quote.
_BULLET_ITEM = re.compile(r"(?<=\S)\s+(?=[•▪●◦‣]\s+\S)")  # tried only where a bullet is: it opens with a lookbehind
_DASH_ITEM = re.compile(r"[.:!?](\s+)(?=-\s+[A-Za-z])")
#: Papers also write "Alg. 1", "(Eg. FP32/16 vs. INT8)", "w.r.t. Optimizer States": cut there, halves were fragments.
_ABBREVIATIONS = ("e.g", "E.g", "Eg", "i.e", "I.e", "Ie", "et al", "etc", "vs", "cf", "Fig", "Figs", "Eq", "Eqs", "Eqn",
                  "Sec", "Secs", "Sect", "No", "Ref", "Refs", "Tab", "Alg", "Algo", "Thm", "Appx", "w.r.t", "viz",
                  "approx", "resp", "Neg", "Std", "Dr", "Mr", "Ms", "Prof", "Inc", "Ltd", "Jr", "St", "al")
_NO_END = re.compile(r"(?:\b(?:" + "|".join(a.replace(".", r"\.") for a in _ABBREVIATIONS) + r")|\b[A-Z])\.$")
#: How a text that :data:`_NO_END` matches ends: one ``endswith`` rules out most stops without the regex.
_NO_END_TAILS = tuple(f"{a}." for a in _ABBREVIATIONS) + tuple(f"{c}." for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: Lower-case words that follow a line ending in a stop without a sentence ending there: a wrapped address's
#: host and path ("https://developer.nvidia." / "com/nccl"), a domain's next label ("www.chromium." / "org/...").
_ADDRESS_TAIL = re.compile(r"(?:/|www\.|@)\S*$")
#: A caption's label is no sentence of its own ("Figure 4. Communication operations in a transformer layer."): cut
#: there, the caption's words were quoted as prose.
_LABEL = re.compile(r"\s*(?:Figure|Fig\.|Table|Tab\.|Algorithm|Alg\.|Listing)\s*(?:\d+|[IVX]+)[a-z]?\.")


def ends_sentence(text: str) -> bool:
    """Does ``text`` end as a sentence does: a stop, "!" or "?", closing quotes or brackets after it, and no
    abbreviation's or initial's stop (:data:`_ABBREVIATIONS`: "e.g.", "et al.", "Fig.")? The rule :func:`spans`
    cuts by, read on a sentence already cut."""
    t = text.rstrip().rstrip("\"'”’)]")
    if not t.endswith((".", "!", "?")):
        return False
    tail = t[-16:]
    return not (tail.endswith(_NO_END_TAILS) and _NO_END.search(tail))


#: What a short sentence must hold to be read with the one before it (:func:`spans`): a figure, a flag, an
#: identifier, an assignment or a call ("Enabled by --use-flash-attn.", "Defaults to 4.", "Set NCCL_DEBUG=INFO.").
_CARRIES = re.compile(r"\d|(?<![\w-])--?[A-Za-z]|[A-Za-z]_[A-Za-z]|=|\w\(")


def spans(text: str, base: int, *, short: int = 0, longest: int = 0) -> Iterator[tuple[int, int]]:
    """Sentence spans (absolute offsets) of one paragraph's text; a list item flattened into it
    (:data:`_BULLET_ITEM`, :data:`_DASH_ITEM`) starts a sentence of its own.

    ``short`` > 0: a sentence of fewer words that holds a figure or a piece of code (:data:`_CARRIES`) is read as
    the end of the one before it (if that one has at least ``short`` words and the two at most ``longest``
    characters). "Enabled by --use-flash-attn-triton." after "FlashAttention + Triton: FlashAttention in Triton
    (tested with triton==2.0.0.dev20221202)." says which flag turns on what that sentence names; alone it is too
    short to quote, and says nothing of what it enables. "Learn more." (a link's words) carries nothing, and a line
    broken off mid-sentence ("In this case,") is no sentence's end: they stay apart. The caller asks this of a web
    page's paragraphs, not a PDF's: there a short sentence after a paragraph's last is mostly the run-in heading of
    the next ("... by 88% compared to DP. Video Captioning.")."""
    cuts = [m.span(1) for m in _DASH_ITEM.finditer(text)] if "- " in text else []
    if any(b in text for b in "•▪●◦‣"):
        cuts = sorted(cuts + [m.span() for m in _BULLET_ITEM.finditer(text)])
    at = 0
    for start, end in cuts + [(len(text), len(text))]:
        run = _sentences(text, at, start, base)
        yield from _joined(run, text, base, short, longest) if short else run
        at = end


def _joined(run: Iterator[tuple[int, int]], text: str, base: int, short: int,
            longest: int) -> Iterator[tuple[int, int]]:
    """The spans of ``run`` with each of fewer than ``short`` words joined to a longer one before it (see
    :func:`spans`)."""
    last: tuple[int, int] | None = None
    for s, e in run:
        tail = text[s - base:e - base]
        if last is not None and e - last[0] <= longest and len(tail.split()) < short <= len(
                text[last[0] - base:last[1] - base].split()) and _CARRIES.search(tail) and ends_sentence(tail):
            last = (last[0], e)
            continue
        if last is not None:
            yield last
        last = (s, e)
    if last is not None:
        yield last


def _sentences(text: str, start: int, end: int, base: int) -> Iterator[tuple[int, int]]:
    """Sentence spans of ``text[start:end]`` (absolute offsets)."""
    for m in _BOUNDARY.finditer(text, start, end):
        stop = m.start() + 1
        # Only the tail can end in an abbreviation (the longest is 7 characters): looking at the whole
        # run since ``start`` made a paragraph of many "et al." quadratic (minutes for 200,000 chars).
        tail = text[max(start, stop - 16) : stop]
        if tail.endswith(_NO_END_TAILS) and _NO_END.search(tail):
            continue
        if m.group("lower") is not None and _ADDRESS_TAIL.search(text, max(start, stop - 80), stop - 1):
            continue
        if stop - start <= 16 and _LABEL.fullmatch(text, start, stop):
            continue
        # closing quotes stay with it; a footnote's number goes with neither sentence
        yield base + start, base + stop + (0 if m.group("note") else len(m.group("gap").rstrip()))
        start = m.end()
    if text[start:end].strip():
        yield base + start, base + end
