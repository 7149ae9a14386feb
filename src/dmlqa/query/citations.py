"""Checking the citations of a generated answer against the passages it was written from.

Pure functions over text, usable on any generated answer: :func:`check_citations` drops the
model's reasoning, reads every citation style models use (``[1, 2]``, ``[1-3]``, ``【1†source】``,
``(Source 1)``, ``^1``, ``[^1]``, ...) as ``[n]``, removes markers that name no passage, attributes
the sentences of a marker-less answer to the passages that support them, flags factual sentences
left without a marker, renumbers the sources compactly in order of first use, and builds a
:class:`~dmlqa.models.Citation` for each with a quote taken from (and verified against) the cited
passage. Nothing the model says about its sources is trusted; everything is checked against the
passages themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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

# What a model may call a source inside a marker: [Source 2], (Passage 1), [doc 3].
_SOURCE_WORD = r"(?:sources?|passages?|documents?|docs?)"
# The numbers of one marker: "1", "1, 2", "1-3", "1–3", "1; 2", "1 and 2", "Source 1, Source 2".
_GROUP = rf"\d{{1,3}}(?:\s*(?:,|;|-|–|—|and|&)\s*(?:{_SOURCE_WORD}\s*:?\s*)?\d{{1,3}})*"
# One citation group in the answer's own form: [1], [1, 2], [1-3], [1; 2], [Source 1], [source: 2].
_MARKER = re.compile(rf"\[\s*(?:{_SOURCE_WORD}\s*:?\s*)?({_GROUP})\s*\]", re.IGNORECASE)
_SPACED_RUN = re.compile(rf"[ \t]*{_MARKER.pattern}(?:[ \t]*{_MARKER.pattern})*", re.IGNORECASE)
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


# -- model replies as they come -----------------------------------------------------------------------------

# Reasoning that models inline into the answer text: <think>…</think> (DeepSeek-R1, Qwen3, QwQ served by
# Ollama or llama.cpp), also <thinking>…</thinking>.
REASONING_TAGS = ("think", "thinking")
REASONING_TAG = re.compile(rf"<(/?)({'|'.join(REASONING_TAGS)})>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """``text`` without the model's reasoning.

    A ``<think>…</think>`` block goes wherever it stands; an unclosed ``<think>`` takes the rest of the
    text with it; a ``</think>`` with no opening tag (chat templates that open the block in the prompt)
    takes everything before it.
    """
    out: list[str] = []
    pos, depth = 0, 0
    for m in REASONING_TAG.finditer(text):
        closing = bool(m.group(1))
        if depth == 0:
            if closing:  # an orphan close: all so far was reasoning
                out.clear()
            else:
                out.append(text[pos : m.start()])
                depth = 1
        elif closing:
            depth = 0
        pos = m.end()
    if depth == 0:
        out.append(text[pos:])
    return "".join(out).strip()


_MARKER_STYLES = re.compile(
    # 【1】, 【1, 2】, 【1†source】, 【4:0†source】 (OpenAI file-search style, imitated by local models)
    rf"【\s*(?:{_SOURCE_WORD}\s*:?\s*)?(?P<lent>{_GROUP})(?:\s*[†:][^】\n]{{0,80}})?\s*】"
    # (Source 1), (Sources 1 and 2), (source: 3), (Passage 2) — a bare "(1)" is too often an enumeration
    rf"|\(\s*{_SOURCE_WORD}\s*:?\s*(?P<paren>{_GROUP})\s*\)"
    # [^1] (Markdown footnote), ^[1]
    rf"|\[\^\s*(?P<foot>{_GROUP})\s*\]|\^\[\s*(?P<caret_br>{_GROUP})\s*\]"
    # ^1 after a word or punctuation: "states^1", "states.^1" (not "N^2" or "2^10": a one-letter or numeric base)
    r"|(?:(?<=[A-Za-z]{2})|(?<=[.,;:!?)\]\"'”’]))\^(?P<caret>\d{1,3})(?![\d^])",
    re.IGNORECASE,
)
# A trailing list of the sources the model used ("Sources:\n[1] Title"), and footnote definitions ("[^1]: Title").
_REFERENCE_HEADING = re.compile(
    r"^[ \t]*[#*_]*[ \t]*(?:sources?|references?|citations?|footnotes?)(?:[ \t]+used)?[ \t]*:?[ \t]*[*_]*[ \t]*$",
    re.IGNORECASE,
)
_REFERENCE_LINE = re.compile(
    rf"^[ \t]*(?:[-*•][ \t]*)?"
    rf"(?:\[\^?\s*(?:{_SOURCE_WORD}\s*:?\s*)?\d{{1,3}}\s*\]|【[^】\n]*】|\^\d{{1,3}})[ \t]*:?.*$",
    re.IGNORECASE,
)
_FOOTNOTE_DEF = re.compile(r"^[ \t]*\[\^\s*\d{1,3}\s*\]:")


_GLUED = re.compile(rf"(?<=\w\w)([.!?])((?:{_MARKER.pattern})+)(?=\s|$)", re.IGNORECASE)

# Code an answer shows, a fenced block (closed or running to the end) or an inline span, is verbatim:
# "datasets[0]" or "batch[2]" in it indexes a list, it cites nothing, and no check may rewrite it.
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", re.DOTALL)


def without_code(text: str) -> str:
    """``text`` with its code (fenced blocks and inline spans) blanked out: what citation markers are read from."""
    return _CODE.sub(" ", text)


def _outside_code(text: str, rewrite: Callable[[str], str]) -> str:
    """``text`` with ``rewrite`` applied to each stretch outside its code, the code left as it is."""
    out, pos = [], 0
    for m in _CODE.finditer(text):
        out += [rewrite(text[pos : m.start()]), m.group(0)]
        pos = m.end()
    return "".join([*out, rewrite(text[pos:])])


def _strip_reference_list(text: str) -> str:
    """Drop a closing "Sources:" block of ``[n] Title`` lines and ``[^n]: …`` footnote definitions:
    the checked answer lists its own sources."""
    lines = text.rstrip().split("\n")
    end = len(lines)
    while end and (not lines[end - 1].strip() or _FOOTNOTE_DEF.match(lines[end - 1])):
        end -= 1
    tail = end
    while tail and (not lines[tail - 1].strip() or _REFERENCE_LINE.match(lines[tail - 1])):
        tail -= 1
    if tail < end and tail and _REFERENCE_HEADING.match(lines[tail - 1]):
        end = tail - 1
    return "\n".join(lines[:end]).rstrip()


def normalise_markers(text: str) -> str:
    """Rewrite every citation style models use into the answer's own ``[n]`` form (numbers unchanged).

    ``【1】``/``【1†source】`` → ``[1]``; ``(Source 1)`` → ``[1]``; ``[^1]``, ``^[1]``, ``^1`` → ``[1]``;
    ``[Source 2]``, ``[1, 2]``, ``[1-3]`` are already that form (:func:`check_citations` splits and checks
    the numbers). A trailing "Sources:" list and footnote definitions are dropped. Code is left as it is.
    """
    text = _strip_reference_list(text)

    def one(m: re.Match[str]) -> str:
        group = next(g for g in m.groupdict().values() if g is not None)
        before = m.string[m.start() - 1] if m.start() else ""
        space = " " if before.isalnum() else ""  # "states^1" → "states [1]"
        return f"{space}[{group}]"

    def prose(part: str) -> str:
        part = _MARKER_STYLES.sub(one, part)
        # "states.[1]" → "states [1].": the marker belongs inside the sentence it supports.
        return _GLUED.sub(lambda m: " " + m.group(2).strip() + m.group(1), part)

    return _outside_code(text, prose)


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
    for part in re.split(r"\s*(?:,|;|&|\band\b)\s*", group, flags=re.IGNORECASE):
        part = re.sub(rf"(?i){_SOURCE_WORD}\s*:?\s*", "", part).strip()
        if not part:
            continue
        bounds = [int(x) for x in re.split(r"\s*[-–—]\s*", part) if x.strip().isdigit()]
        if len(bounds) == 2 and bounds[0] <= bounds[1] and bounds[1] - bounds[0] <= 20:
            out.extend(range(bounds[0], bounds[1] + 1))
        else:
            out.extend(bounds)
    return out


def _strip_markers(text: str) -> str:
    return _normalise_ws(_outside_code(text, lambda part: re.sub(r"\s+([.,;:!?])", r"\1", _MARKER.sub("", part))))


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


#: An unmarked sentence is attributed to a passage holding at least this share of its content words ...
MIN_SUPPORT = 0.5
#: ... and at least this many of them.
MIN_SUPPORT_WORDS = 2
_TERMINAL = re.compile(r"[.!?…]+[\"'”’)]*$")


def supporting_passage(sentence: str, passages: Sequence[Hit]) -> int | None:
    """The number (1-based) of the passage that best supports ``sentence`` by word overlap, or None.

    Support is the share of the sentence's content words (stemmed, stop words left out) that the passage
    contains; shared words rare among the passages count more when choosing between passages, and the
    earlier passage wins ties. Below :data:`MIN_SUPPORT` (or :data:`MIN_SUPPORT_WORDS` words) nothing does.
    """
    claim = set(content_tokens(_strip_markers(sentence)))
    if not claim or not passages:
        return None
    vocab = [set(content_tokens(h.text)) for h in passages]
    best, best_score = None, 0.0
    for i, words in enumerate(vocab):
        shared = claim & words
        if len(shared) < min(MIN_SUPPORT_WORDS, len(claim)) or len(shared) / len(claim) < MIN_SUPPORT:
            continue
        score = sum(1.0 / sum(1 for v in vocab if w in v) for w in shared)  # rare shared words weigh more
        if score > best_score + 1e-9:
            best, best_score = i + 1, score
    return best


def _attribute(text: str, passages: Sequence[Hit]) -> tuple[str, int, int]:
    """Give each factual sentence of a marker-less ``text`` a ``[n]`` for its supporting passage.

    Returns (text with markers added, sentences attributed, sentences that needed one).
    """
    parts: list[str] = []
    pos = attributed = needed = 0
    for a, b in sentence_spans(text):
        sentence = text[a:b]
        if not _needs_citation(sentence):
            continue
        needed += 1
        n = supporting_passage(sentence, passages)
        if n is None:
            continue
        attributed += 1
        end = _TERMINAL.search(sentence)
        cut = a + (end.start() if end else len(sentence))
        parts.append(text[pos:cut].rstrip() + f" [{n}]")
        pos = cut
    parts.append(text[pos:])
    return "".join(parts), attributed, needed


def check_citations(text: str, passages: Sequence[Hit]) -> CheckedText:
    """Check and renumber the citations of ``text``; ``passages[i]`` is source ``n = i + 1``.

    * Reasoning (``<think>`` blocks, see :func:`strip_reasoning`) is removed, and every citation style
      models use is read as ``[n]`` (:func:`normalise_markers`; ranges expand to each number).
    * A marker number naming no passage is removed and flagged ("removed citation [9]: no such source").
      Code (fenced blocks, inline spans) is verbatim: ``datasets[0]`` there is no marker.
    * Sources are renumbered 1..m in order of first use and markers rewritten to match (``[1][3]``).
      Repeats of one passage (same ``chunk_id``) share a number.
    * A factual sentence without a marker is flagged ("unsupported: <sentence>"); refusals, questions,
      short connectives and sentences about what the sources lack are exempt.
    * Each citation's quote is the sentence of its passage that best overlaps the sentences citing it,
      verified to occur in the passage.
    * An answer with no marker at all has each factual sentence attributed to the passage that supports
      it (:func:`supporting_passage`) and flagged so; a sentence no passage supports stays unsupported.
    * ``refused`` when the answer opens with :data:`REFUSAL_PREFIX` (uncited), or contains it and cites nothing.
    """
    text = normalise_markers(strip_reasoning(text))
    attribution: str | None = None
    if passages and not _MARKER.search(without_code(text)):
        text, attributed, needed = _attribute(text, passages)
        if attributed:
            attribution = (f"no citation markers in the answer: {attributed} of {needed} sentences attributed "
                           "to sources by word overlap")
    # Passages that are the same chunk share one source number.
    canonical: dict[int, int] = {}
    by_chunk: dict[str, int] = {}
    for i, h in enumerate(passages):
        key = h.chunk_id or f"#{i}"
        canonical[i + 1] = by_chunk.setdefault(key, i + 1)

    renumber: dict[int, int] = {}  # old source number -> new number
    invalid: list[int] = []

    def rewrite(m: re.Match[str]) -> str:  # one run of markers: "[2, 3]", "[1][9]", "[Source 2] [4-5]"
        lead = m.group(0)[: len(m.group(0)) - len(m.group(0).lstrip(" \t"))]
        keep: list[int] = []
        for n in (n for g in _MARKER.finditer(m.group(0)) for n in _numbers(g.group(1))):
            if n in canonical:
                new = renumber.setdefault(canonical[n], len(renumber) + 1)
                if new not in keep:
                    keep.append(new)
            elif n not in invalid:
                invalid.append(n)
        # A group left empty goes with the space before it: "fact [9]." → "fact.".
        return lead + "".join(f"[{k}]" for k in sorted(keep)) if keep else ""

    rewritten = _outside_code(text.strip(), lambda part: _SPACED_RUN.sub(rewrite, part)).strip()
    flags = [f"removed citation [{n}]: no such source" for n in invalid]
    if attribution:
        flags.append(attribution)

    claims: dict[int, list[str]] = {}  # new number -> the sentences citing it
    unsupported: list[str] = []
    spans = sentence_spans(rewritten)
    for a, b in spans:
        sentence = rewritten[a:b]
        cited = [int(x) for x in re.findall(r"\[(\d+)\]", without_code(sentence)) if 0 < int(x) <= len(renumber)]
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
        (_is_refusal_start(first) and not re.search(r"\[\d+\]", without_code(first)))
        or (mentions and not citations)
        or (not citations and bool(_LOOSE_REFUSAL.search(first)))
    )
    return CheckedText(
        text=rewritten, citations=tuple(citations), flags=tuple(flags), refused=refused,
        unsupported=tuple(unsupported),
    )
