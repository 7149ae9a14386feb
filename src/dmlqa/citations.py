"""Checking the citations of a generated answer against the passages it was written from.

Pure functions over text, usable on any generated answer: :func:`check_citations` removes
``[n]`` markers that name no passage, flags factual sentences that carry no marker, renumbers
the sources compactly in order of first use, and builds a :class:`~dmlqa.models.Citation` for
each with a quote taken from (and verified against) the cited passage. Nothing the model says
about its sources is trusted; everything is checked against the passages themselves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dmlqa.models import Citation, Hit

#: An answer (or its first sentence) starting with this says the sources do not answer the question.
REFUSAL_PREFIX = "The knowledge base has nothing on this"
#: Longest quote kept for a citation.
MAX_QUOTE_CHARS = 300
#: Sentences with fewer words than this ("In short:", "Yes, it does.") need no citation.
MIN_CLAIM_WORDS = 4


@dataclass(frozen=True)
class CheckedText:
    """A generated text after checking: markers rewritten to ``citations``' numbers, plus what was wrong."""

    text: str
    citations: tuple[Citation, ...]
    flags: tuple[str, ...]  # "removed citation [9]: no such source", "unsupported: <sentence>", ...
    refused: bool
    unsupported: tuple[str, ...]  # the factual sentences without a citation


# -- sentences ---------------------------------------------------------------------------------------------

# One citation group: [1], [1, 2], [1-3], [1–3], [1; 2], [Source 1], [source: 2].
_MARKER = re.compile(
    r"\[\s*(?:sources?\s*:?\s*)?(\d{1,3}(?:\s*(?:,|;|-|–|—|and)\s*(?:sources?\s*)?\d{1,3})*)\s*\]", re.IGNORECASE
)
_SPACED_MARKER = re.compile(r"[ \t]*" + _MARKER.pattern, re.IGNORECASE)
_MARKERS_RUN = re.compile(rf"(?:\s*{_MARKER.pattern})+", re.IGNORECASE)
# A sentence end: terminator, closing quotes/brackets, then citation markers that belong to it.
_END = re.compile(rf"[.!?…]+[\"'”’)\]]*(?:{_MARKERS_RUN.pattern})?(?=\s|$)", re.IGNORECASE)
# What a new sentence may start with.
_STARTER = re.compile(r"[\"'“‘(\[*_]*[A-Z0-9]")
# Lines that start a new unit whatever precedes them: list items and headings.
_BLOCK_START = re.compile(r"\n[ \t]*(?:[-*•+][ \t]+|\d{1,2}[.)][ \t]+|#{1,6}[ \t]+)")
_LEAD = re.compile(r"^(?:[-*•+]\s+|\d{1,2}[.)]\s+|#{1,6}\s+)")
_ABBREVIATIONS = frozenset(
    """e.g i.e al vs fig figs eq eqs sec secs no nos cf approx resp ref refs tab dr mr mrs ms prof inc ltd st jr sr
    ch p pp vol ca viz ed eds min max avg alg thm def appx""".split()
)


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the '.' at ``dot`` ends an abbreviation or an initial rather than a sentence."""
    start = dot
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "."):
        start -= 1
    word = text[start:dot].lower()
    if not word:
        return False
    if word in _ABBREVIATIONS:
        return True
    if len(word) == 1 and word.isalpha() and text[start].isupper():  # an initial: "J. Dean"
        return True
    return bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", word))  # "e.g", "u.s"


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the sentences of ``text``; markers after a full stop belong to its sentence.

    Blank lines, list items and headings always start a new sentence; a single line break
    inside a paragraph does not (PDF text wraps lines mid-sentence).
    """
    cuts = {0, len(text)}
    for m in re.finditer(r"\n[ \t]*\n", text):
        cuts.add(m.start())
    for m in _BLOCK_START.finditer(text):
        cuts.add(m.start())
    for m in _END.finditer(text):
        end = m.end()
        rest = text[end:].lstrip()
        if not rest or not _STARTER.match(rest):
            continue
        if text[m.start()] == "." and m.end() - m.start() == 1 and _is_abbreviation(text, m.start()):
            continue
        cuts.add(end)
    bounds = sorted(cuts)
    spans = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        seg = text[a:b]
        stripped = seg.strip()
        if not stripped:
            continue
        lead = len(seg) - len(seg.lstrip())
        bullet = _LEAD.match(stripped)
        lead += bullet.end() if bullet else 0
        start, end = a + lead, a + len(seg.rstrip())
        if start < end:
            spans.append((start, end))
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped (list bullets and heading marks removed); each is a substring."""
    return [text[a:b] for a, b in sentence_spans(text)]


# -- quotes ------------------------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z0-9]+(?:[-'][A-Za-z0-9]+)*")
_STOP = frozenset(
    """a an the and or but nor of in on at to for from by with without into onto over under than then that this
    these those it its is are was were be been being has have had do does did can could may might must shall should
    will would not no as if so such which who whom whose what when where why how all any both each few more most
    other some own same too very s t just also there their they them we our you your he she his her i me my one
    about above after again against between during before below up down out off further once here while because
    until via per using use used uses""".split()
)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_tokens(text: str) -> list[str]:
    """Lower-cased, lightly stemmed words of ``text`` without stop words (for overlap scoring)."""
    return [_stem(w) for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOP]


def _normalise_ws(text: str) -> str:
    return " ".join(text.split())


def _cut_words(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars + 1]
    head = cut.rsplit(" ", 1)[0] if " " in cut else text[:max_chars]
    return head[:max_chars].rstrip(" ,;:")


def _best_window(sentence: str, claim: set[str], max_chars: int) -> str:
    """The run of whole words of ``sentence`` (≤ ``max_chars``) holding most of the claim's words."""
    words = list(re.finditer(r"\S+", sentence))
    best, best_score = (0, 0), -1.0
    for i in range(len(words)):
        j = i
        while j < len(words) and words[j].end() - words[i].start() <= max_chars:
            j += 1
        if j == i:
            continue
        chunk = sentence[words[i].start() : words[j - 1].end()]
        score = len(claim & set(content_tokens(chunk))) - 0.001 * i
        if score > best_score:
            best, best_score = (i, j), score
        if j == len(words):
            break
    i, j = best
    if j <= i:
        return _cut_words(sentence, max_chars)
    return sentence[words[i].start() : words[j - 1].end()]


def best_quote(passage_text: str, claim: str, max_chars: int = MAX_QUOTE_CHARS) -> str:
    """The passage sentence that best overlaps ``claim``, cut to ``max_chars`` on a word boundary.

    The result is always a substring of ``passage_text`` with its whitespace collapsed
    (verified, not assumed); "" only for an empty passage.
    """
    norm = _normalise_ws(passage_text)
    if not norm:
        return ""
    claim_tokens = set(content_tokens(claim))
    best, best_score = "", float("-inf")
    for sent in split_sentences(norm):
        toks = set(content_tokens(sent))
        # Shared words count; among equals the more specific (shorter) sentence wins, then the earlier.
        score = len(claim_tokens & toks) - 0.01 * len(toks) if claim_tokens else 0.0
        if sent.strip() and score > best_score:
            best, best_score = sent, score
    quote = _best_window(best, claim_tokens, max_chars) if len(best) > max_chars else best
    quote = quote.strip()
    if not quote or quote not in norm:  # never hand out text the passage does not contain
        quote = _cut_words(norm, max_chars)
    return quote


def locate_quote(passage_text: str, quote: str) -> tuple[int, int] | None:
    """Where ``quote`` (from :func:`best_quote`) lies in the raw ``passage_text``, whitespace-insensitively.

    For highlighting: returns ``(start, end)`` offsets into ``passage_text``, or None if it is not there.
    """
    words = quote.split()
    if not words:
        return None
    m = re.search(r"\s+".join(re.escape(w) for w in words), passage_text)
    return (m.start(), m.end()) if m else None


# -- checking ----------------------------------------------------------------------------------------------


def _numbers(group: str) -> list[int]:
    """``"1, 3-5"`` → [1, 3, 4, 5] (a range longer than 20 keeps only its ends)."""
    out: list[int] = []
    for part in re.split(r"\s*(?:,|;|and)\s*", group, flags=re.IGNORECASE):
        part = re.sub(r"(?i)sources?\s*", "", part).strip()
        if not part:
            continue
        bounds = [int(x) for x in re.split(r"\s*[-–—]\s*", part) if x.strip().isdigit()]
        if len(bounds) == 2 and bounds[0] <= bounds[1] and bounds[1] - bounds[0] <= 20:
            out.extend(range(bounds[0], bounds[1] + 1))
        else:
            out.extend(bounds)
    return out


def _strip_markers(text: str) -> str:
    return _normalise_ws(re.sub(r"\s+([.,;:!?])", r"\1", _MARKER.sub("", text)))


# A sentence about what the sources lack ("The sources do not say ...", "None of the passages ...").
_SOURCES = (
    r"(?:\b(?:the|these|those|provided|given|retrieved|available|any|of)\s+"
    r"(?:sources?|passages?|documents?|excerpts?|context)\b|\bknowledge base\b|\bsources?\s+\d)"
)
_META = re.compile(
    rf"{_SOURCES}.*(?:\b(?:not|no|nothing|none|neither|nor|lacks?|silent)\b|n't\b)"
    rf"|\b(?:not|no|nothing|none|neither)\b.*{_SOURCES}",
    re.IGNORECASE,
)


_SUMMING_UP = re.compile(
    r"^(?:in short|in summary|to summari[sz]e|to sum up|in conclusion|overall|in other words|in brief)\b", re.IGNORECASE
)


def _needs_citation(sentence: str) -> bool:
    """Whether a sentence states something that should carry a [n] marker."""
    plain = _strip_markers(sentence).strip(" *_\"'“”")
    if not plain or plain.endswith("?") or plain.endswith(":"):
        return False
    if REFUSAL_PREFIX.lower() in plain.lower():
        return False
    words = len(_WORD.findall(plain))
    if words < MIN_CLAIM_WORDS or (words <= 12 and _SUMMING_UP.match(plain)):  # connectives, recaps
        return False
    # "The sources do not say whether ...", "I don't know": about the sources, not a claim.
    return not (_META.search(plain) or _LOOSE_REFUSAL.search(plain))


# Refusals by models that did not use the fixed phrase; only trusted when the answer cites nothing.
_LOOSE_REFUSAL = re.compile(
    r"\b(?:I (?:do not|don't|cannot|can't) (?:know|answer|find)|no (?:relevant )?information"
    rf"|{_SOURCES}[^.]*\b(?:do(?:es)? not|don't|doesn't) (?:contain|mention|cover|answer|say|provide|address|discuss))",
    re.IGNORECASE,
)


def _is_refusal_start(text: str) -> bool:
    return text.lstrip(" \t\n*_>\"'“#").lower().startswith(REFUSAL_PREFIX.lower())


def check_citations(text: str, passages: Sequence[Hit]) -> CheckedText:
    """Check and renumber the citations of ``text``; ``passages[i]`` is source ``n = i + 1``.

    * A marker number naming no passage is removed and flagged ("removed citation [9]: no such source").
    * Sources are renumbered 1..m in order of first use and markers rewritten to match (``[1][3]``).
      Repeats of one passage (same ``chunk_id``) share a number.
    * A factual sentence without a marker is flagged ("unsupported: <sentence>"); refusals, questions,
      short connectives and sentences about what the sources lack are exempt.
    * Each citation's quote is the sentence of its passage that best overlaps the sentences citing it,
      verified to occur in the passage.
    * ``refused`` when the answer opens with :data:`REFUSAL_PREFIX` (uncited), or contains it and cites nothing.
    """
    # Passages that are the same chunk share one source number.
    canonical: dict[int, int] = {}
    by_chunk: dict[str, int] = {}
    for i, h in enumerate(passages):
        key = h.chunk_id or f"#{i}"
        canonical[i + 1] = by_chunk.setdefault(key, i + 1)

    renumber: dict[int, int] = {}  # old source number -> new number
    invalid: list[int] = []

    def rewrite(m: re.Match[str]) -> str:
        lead = m.group(0)[: len(m.group(0)) - len(m.group(0).lstrip(" \t"))]
        keep: list[int] = []
        for n in _numbers(m.group(1)):
            if n in canonical:
                new = renumber.setdefault(canonical[n], len(renumber) + 1)
                if new not in keep:
                    keep.append(new)
            elif n not in invalid:
                invalid.append(n)
        # A group left empty goes with the space before it: "fact [9]." → "fact.".
        return lead + "".join(f"[{k}]" for k in sorted(keep)) if keep else ""

    rewritten = _SPACED_MARKER.sub(rewrite, text.strip()).strip()
    flags = [f"removed citation [{n}]: no such source" for n in invalid]

    claims: dict[int, list[str]] = {}  # new number -> the sentences citing it
    unsupported: list[str] = []
    spans = sentence_spans(rewritten)
    for a, b in spans:
        sentence = rewritten[a:b]
        cited = [int(x) for x in re.findall(r"\[(\d+)\]", sentence) if int(x) <= len(renumber)]
        for n in cited:
            claims.setdefault(n, []).append(_strip_markers(sentence))
        if not cited and _needs_citation(sentence):
            plain = _strip_markers(sentence)
            unsupported.append(plain)
            flags.append(f"unsupported: {plain}")

    old_of = {new: old for old, new in renumber.items()}
    citations: list[Citation] = []
    for new in range(1, len(renumber) + 1):
        hit = passages[old_of[new] - 1]
        claim = " ".join(claims.get(new, []))
        quote = best_quote(hit.text, claim)
        if claim and not set(content_tokens(claim)) & set(content_tokens(hit.text)):
            flags.append(f"weak citation [{new}]: the cited passage shares no words with the sentence citing it")
        citations.append(Citation(
            n=new, url=hit.url, title=hit.title, page=hit.page, quote=quote, doc_id=hit.doc_id,
            chunk_id=hit.chunk_id, venue=hit.venue, year=hit.year,
        ))

    first = rewritten[spans[0][0] : spans[0][1]] if spans else ""
    mentions = REFUSAL_PREFIX.lower() in rewritten.lower()
    refused = (
        (_is_refusal_start(first) and not re.search(r"\[\d+\]", first))
        or (mentions and not citations)
        or (not citations and bool(_LOOSE_REFUSAL.search(first)))
    )
    return CheckedText(
        text=rewritten, citations=tuple(citations), flags=tuple(flags), refused=refused,
        unsupported=tuple(unsupported),
    )
