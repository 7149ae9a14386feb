"""Features of a candidate sentence for the learned selector (:mod:`dmlqa.query.selector`).

Each feature is a small pure function of the question, the sentence and where the sentence was
found, so that each can be tested on a sentence written in the test. :func:`feature_matrix` puts
them together in the order of :data:`FEATURES`, the order the fitted weights are stored in.

Why these: retrieval similarity alone picks sentences that *sound* like the question; the one that
*answers* it holds the kind of thing asked for (a number for "how much", a name for "which"), names
what a comparison is against, stands on its own, and is prose rather than a heading or a legend
glued to a sentence by the PDF text layer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dmlqa.extract.leaning import leans_back, refers_above
from dmlqa.extract.sentences import ITEM, QUOTED_CODE, ROW
from dmlqa.index.lexical import tokenize
from dmlqa.query.glued import SMALL_WORDS, glued_heading, heading_end, labelled_figure_text

#: The order of the features in a matrix and in the fitted weights (selector.json names them).
FEATURES = (
    "cosine",  # dense cosine of the sentence and the question (stored sentence vectors)
    "cosine_gap",  # cosine minus the best cosine among the candidates (0 for the best)
    "overlap",  # share of the question's idf weight the sentence holds
    "bm25",  # BM25 of the sentence over the candidate pool, divided by the pool's best
    "cosine_rank",  # 1 / (1 + its rank by cosine among the candidates)
    "bm25_rank",  # 1 / (1 + its rank by BM25 among the candidates)
    "rarest_term",  # holds the question's rarest term (highest idf): what the question is most about
    "kind_match",  # holds a kind of answer the question asks for
    "kind_miss",  # the question asks for a kind of answer and the sentence holds none
    "compare_match",  # a comparison question: the sentence compares and names what is compared against
    "standalone",  # opens with no dangling reference to what came before
    "furniture",  # a heading, caption or figure legend, or words run together by the PDF text layer
    "is_item",  # a list item
    "is_row",  # a table row
    "section_first",  # the first sentence of its section
    "position",  # how far into its document (0 at the start, 1 at the end)
    "passage_rank",  # 1 / (1 + rank) of the retrieved passage it is in; 0 when found by the sentence index
    "doc_rank",  # 1 / (1 + rank) of its document among the retrieved documents
    "length",  # log of its word count
    "local_overlap",  # share of the question terms it holds, each weighed by its rarity among the candidates
    "overlap_gap",  # overlap minus the best overlap among the candidates
    "prev_overlap",  # the overlap of the sentence right before it (which often sets up what it states)
    "next_overlap",  # the overlap of the sentence right after it
    "prev_cosine",  # the cosine of the sentence right before it
    "doc_best_cosine",  # the best cosine among its document's candidates (the document is about the question)
    "doc_best_overlap",  # the best overlap among its document's candidates
    "doc_share",  # share of the candidates that come from its document
    "asks_back",  # the sentence is itself a question: it asks, it does not answer
    "numbers",  # log of how many numbers it holds (figures answer "how much")
    "title_like",  # every word capitalised and no sentence end: a heading, a menu entry or a paper's title
    "is_code",  # a code line a sentence announces, quoted with it
    "code_asked",  # the question asks how to do something or for a command, flag or setting, and it holds code
    "points_away",  # says where something is, not what it is ("An example can be found here.", "Below, we ...")
    "tuned_cosine",  # cosine with the question read by the selector's tuned question encoder (the cosine without)
    "tuned_gap",  # tuned cosine minus the best tuned cosine among the candidates
    "adapted_cosine",  # cosine with the question turned by the selector's adapter (the cosine without one)
    "adapted_gap",  # adapted cosine minus the best adapted cosine among the candidates
    "adapted_rank",  # 1 / (1 + its rank by adapted cosine among the candidates)
)


# -- what the question asks for -------------------------------------------------------------------

_ASKS_NUMBER = re.compile(r"\bhow (?:many|much|large|big|long|fast|often|small|far|high|low)\b|\bby how\b|"
                          r"\bwhat (?:[\w-]+ ){0,2}(?:percentage|fraction|ratio|rate|size|number|speed ?up|"
                          r"throughput|utili[sz]ation|bit.?width|value|limit|threshold|bandwidth|latency|"
                          r"count|factor|accuracy|score)\b|\bwhat (?:is|was) the default\b", re.I)
_ASKS_NAME = re.compile(r"^\W*(?:which|who)\b|\b(?:which|what) (?:[\w-]+ ){0,3}(?:projects?|papers?|librar(?:y|"
                        r"ies)|frameworks?|systems?|tools?|packages?|compan(?:y|ies)|class(?:es)?|models?|"
                        r"algorithms?|methods?|functions?|flags?|options?|arguments?|backends?)\b|"
                        r"\bwhat is (?:it |this )?called\b|\bname of\b", re.I)
#: How to do something, or which command, flag or setting: the answer is often a line of code.
_ASKS_CODE = re.compile(r"\bhow (?:do|can|should|would) (?:i|we|you)\b|\bhow to\b|\b(?:what|which) (?:[\w-]+ ){0,2}"
                        r"(?:command|flag|option|argument|setting|key|variable|parameter|call|function|method)s?\b",
                        re.I)
_ASKS_YEAR = re.compile(r"^\W*when (?:did|was|were|is|has|have)\b|\b(?:what|which|in which) year\b|\bsince when\b",
                        re.I)
_ASKS_COMPARE = re.compile(r"\b(?:faster|slower|better|worse|more|less|fewer|higher|lower|larger|smaller)\b[^?]*?"
                           r"\bthan\b|\bcompared? (?:to|with)\b|\bversus\b|\bvs\.?\s|\bover\s+(?=[A-Z])|"
                           r"\brelative to\b|\bdiffer(?:s|ence|ences)? (?:between|from)\b|\b(?:between|from) "
                           r"[^?]*?\bdiffer\b", re.I)
#: What a comparison is against: the words after "than", "compared to/with", "versus", "vs", "over".
_COMPARED = re.compile(r"\b(?:than|compared (?:to|with)|versus|vs\.?|relative to|over|differs? from)\s+((?:the\s+)?"
                       r"[\w.+/-]+(?:\s+[\w.+/-]+){0,2})|\bbetween\s+((?:the\s+)?[\w.+/-]+(?:\s+[\w.+/-]+){0,2}?)\s+"
                       r"and\s+((?:the\s+)?[\w.+/-]+(?:\s+[\w.+/-]+){0,2})", re.I)

_HAS_NUMBER = re.compile(r"\d")
_HAS_NAME = re.compile(r"\b[A-Z][a-z]*[A-Z]\w*\b|\b[A-Z][a-z]+(?:-[A-Z0-9]\w*)+\b|\b[A-Z]{2,}[a-z]*\b|"
                       r"\b[a-z]+_[a-z_]+\b|`[^`]+`|(?<=[a-z] )[A-Z][a-z]{2,}\b")
_HAS_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
#: Code in a sentence: a flag, an identifier with an underscore, a call, a setting, code in backticks.
_HAS_CODE = re.compile(r"(?<![\w-])--?[a-z][\w-]+|\b[a-z]\w*_\w+|\b\w+\.\w+\(|\w=\S|`[^`]+`")
_COMPARES = re.compile(r"\b(?:than|compared|versus|vs\.?|over|faster|slower|speed-?ups?|outperforms?|better|"
                       r"improves?|higher|lower|relative|x\b|×)", re.I)

#: Kinds of answer, each with the pattern a sentence holding one matches.
KINDS: dict[str, re.Pattern[str]] = {"number": _HAS_NUMBER, "name": _HAS_NAME, "year": _HAS_YEAR}


def asked_kinds(question: str) -> frozenset[str]:
    """The kinds of answer a question asks for: "number" (how much/many/fast, what ratio), "name"
    (which/who), "year" (when did), "compare" (faster than X), "code" (how do I, which flag)."""
    kinds = set()
    if _ASKS_NUMBER.search(question):
        kinds.add("number")
    if _ASKS_NAME.search(question):
        kinds.add("name")
    if _ASKS_YEAR.search(question):
        kinds.add("year")
    if _ASKS_COMPARE.search(question):
        kinds.add("compare")
    if _ASKS_CODE.search(question):
        kinds.add("code")
    return frozenset(kinds)


def compared_terms(question: str) -> frozenset[str]:
    """Tokens of what a comparison question compares against ("how much faster than Megatron-LM?" →
    megatron, lm): the answer is the sentence that names it, not one comparing to other baselines."""
    out: set[str] = set()
    for m in _COMPARED.finditer(question):
        for part in m.groups():  # "than X"; "between X and Y": both
            out |= set(tokenize(part or ""))
    return frozenset(out - {"the", "a", "an", "that", "it", "baselin"})


def kind_match(text: str, kinds: frozenset[str]) -> float:
    """1 when the sentence holds one of the asked-for kinds of answer (a number, a name, a year)."""
    return 1.0 if any(KINDS[k].search(text) for k in kinds if k in KINDS) else 0.0


def kind_miss(text: str, kinds: frozenset[str]) -> float:
    """1 when the question asks for a number, name or year and the sentence holds none of them."""
    asked = [k for k in kinds if k in KINDS]
    return 1.0 if asked and not kind_match(text, kinds) else 0.0


def compare_match(tokens: set[str], text: str, compared: frozenset[str]) -> float:
    """For a comparison question: the share of the compared-against name's tokens the sentence holds,
    counted only when it also uses a word of comparing. 0 for other questions."""
    if not compared or not _COMPARES.search(text):
        return 0.0
    return len(compared & tokens) / len(compared)


# -- lexical match ----------------------------------------------------------------------------------


def idf_weights(terms: Sequence[str], idf: Callable[[Sequence[str]], np.ndarray]) -> dict[str, float]:
    """idf of each question term (from the version's lexicon); a term no passage holds gets the
    highest weight seen, as it is the most specific the question has."""
    terms = list(dict.fromkeys(terms))
    if not terms:
        return {}
    values = [float(v) for v in idf(terms)]
    top = max(values) if values and max(values) > 0 else 1.0
    return {t: (v if v > 0 else top) for t, v in zip(terms, values, strict=True)}


def overlap(tokens: set[str], weights: dict[str, float]) -> float:
    """Share of the question terms' idf weight the sentence's tokens hold."""
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if t in tokens) / total if total else 0.0


#: BM25's usual constants (as the passage index uses).
K1, B = 1.2, 0.75


def bm25(token_lists: Sequence[Sequence[str]], weights: dict[str, float]) -> np.ndarray:
    """BM25 of each sentence of a pool against the question terms (idf from the version, length
    normalised by the pool's mean sentence length)."""
    if not token_lists:
        return np.zeros(0, np.float32)
    lengths = np.array([len(t) for t in token_lists], np.float32)
    mean = float(lengths.mean()) or 1.0
    out = np.zeros(len(token_lists), np.float32)
    for i, toks in enumerate(token_lists):
        tf: dict[str, int] = {}
        for t in toks:
            if t in weights:
                tf[t] = tf.get(t, 0) + 1
        norm = K1 * ((1 - B) + B * lengths[i] / mean)
        out[i] = sum(weights[t] * f / (norm + f) for t, f in tf.items())
    return out


# -- reading --------------------------------------------------------------------------------------

#: "Such a scheme ...", "the above", "as mentioned": needs the text that came before, which the sentence before
#: may carry.
_REFERS_BACK = re.compile(r"^(?:\w+\s+){0,4}(?:such (?:a|an)\b|such\s+\w+s\b)|\b(?:the above|aforementioned|"
                          r"as mentioned|as discussed|as shown above|"
                          r"as (?:noted|described|explained|seen|stated) (?:earlier|above|before|previously))\b", re.I)
#: "The latter ..." needs the pair named before it, unless the sentence names the pair itself first ("DDP and RPC
#: are built on c10d, where the former uses collective communications"): the first "former"/"latter" decides.
_FORMER = re.compile(r"\bthe (?:former|latter)\b", re.I)
_PAIR = re.compile(r"\b(?:and|or|nor|versus|vs)\b", re.I)
#: "the figure below", "Algorithm 3 uses ...": needs what no quote shows. A sentence opening with "Table 4 shows
#: that ..." states its finding and stays; one about an algorithm, equation or listing it does not show does not.
_UNSHOWN = re.compile(r"\b(?:(?:following|next) (?:figure|diagram|image|picture|screenshot)|"
                      r"(?:figure|diagram|image|picture|screenshot) (?:below|above))\b|"
                      r"^(?:Algorithm|Equation|Eq\.|Listing)\s*\d+\b", re.I)


#: Openings that look like leaning back but do not: the document speaking of itself ("This repository
#: contains ...", "For this tutorial, we will configure ..."), a lower-case name opening the sentence ("veScale
#: is ...", "go-mxnet-predictor is ..."), a version range ("v0.7.4 and above").
_SELF_REFERENCE = re.compile(r"^(?:(?:For|Throughout|Within) (?:this|these)|This|These)\s+(?:repository|repo|project|"
                             r"library|package|guide|tutorial|page|document(?:ation)?|paper|work|article|post|blog|"
                             r"book|site|section|example|notebook|release|tool|framework|module|report|study)s?\b")
_NAME_START = re.compile(r"^[a-z][\w.]*[-_A-Z0-9.][\w.-]*\s")
_BULLET = re.compile(r"^\s*(?:[-*•▪●◦‣]|\d{1,2}[.)])\s")
_AND_ABOVE = re.compile(r"\b(?:and|or) above\b")
#: A paper's run-in enumeration, "iv) CPU overhead reduction with ...", "b) DP is memory inefficient as ...": the
#: marker opens in lower case, but what follows it is read as the sentence (it may still lean: "c) Both ..."). Not
#: "(a) Instances with 8 1080Tis ...": a figure's panels are labelled so.
_ENUMERATOR = re.compile(r"^(?:i{1,3}|iv|vi{0,3}|ix|x|[a-h])\)\s+(?=[A-Z])")
#: Connectives that tie a sentence to the one before but leave it readable alone ("However, ...",
#: "For example, ..."): quoted with the sentence before when that one is prose, else alone.
_SOFT_LEAN = re.compile(r"^(?:However|Moreover|Furthermore|In addition|Additionally|Also|Then|As a result|Instead|"
                        r"Similarly|Likewise|Otherwise|In contrast|On the other hand|Still|Yet|Nevertheless|"
                        r"Nonetheless|Even so|In other words|Namely|For example|For instance|Thus|Hence|Therefore|"
                        r"Though|As such)\b")
#: One of those connectives (the ones tried) before a subject that names itself: "In contrast, ZeRO-Offload is
#: designed to ...", "However, Megatron-LM splits ...". The link is to the text before, but the sentence says
#: who does what: it does not lean, and is quoted alone.
_LINKED_NAMED = re.compile(r"^(?:However|In contrast|Moreover|Furthermore|In addition|Additionally|Similarly|"
                           r"Likewise|Instead|As a result|Therefore|Thus|Hence|For example|For instance|"
                           r"Nevertheless|Nonetheless|In practice|In particular),\s+(?!(?:This|These|That|Those|It|"
                           r"Its|They|Their|Such|The|Both|Each|Here|We|Our)\b)"
                           r"[A-Z][\w.+-]*(?:[A-Z0-9+-][\w.+-]*)?\b")


def leans(text: str) -> bool:
    """Does the sentence lean on the one before (:func:`dmlqa.extract.leaning.leans_back`), the
    openings that only look like it (:data:`_SELF_REFERENCE`, :data:`_NAME_START`, :data:`_LINKED_NAMED`)
    left aside? A heading glued before it is not read (:func:`heading_end`), nor a run-in enumerator
    (:data:`_ENUMERATOR`)."""
    text = text[heading_end(text):]
    text = text[m.end():] if (m := _ENUMERATOR.match(text)) else text
    t = text.lstrip("\"'“(- ")
    if _SELF_REFERENCE.match(t) or _NAME_START.match(t) or _BULLET.match(text):
        return False  # a list item opening in lower case ("- it saves up to 70% ...") is the list's way
    t = _AND_ABOVE.sub("", t)
    if _LINKED_NAMED.match(t) and not refers_above(t):
        return False  # unless it points back all the same: "In contrast, ZeRO-3 as above ..."
    return leans_back(t)


def leans_hard(text: str) -> bool:
    """Does it lean back so that it cannot be read alone ("It uses ...", "This reduces ...", a fragment
    opening in lower case), unlike a connective ("However, ...") that still reads alone?"""
    return leans(text) and _SOFT_LEAN.match(text[heading_end(text):].lstrip("\"'“(- ")) is None


def refers_back(text: str) -> bool:
    """Does the sentence need the one before it, and could that one be all it needs: it leans on it
    (:func:`leans`), or speaks of "such a scheme" or "the latter" without pointing at a figure or an algorithm
    no quote shows ("To create such an MoE model, ..." after the sentence proposing that model)?"""
    if leans(text):
        return True
    rest = text[heading_end(text):]
    return _needs_before(rest) and _UNSHOWN.search(rest) is None


def standalone(text: str) -> bool:
    """Does the sentence stand alone: no opening "This/It/They ...", no "such a ..." or "the above",
    not about "Algorithm 3" or "Figure 2" it does not show?"""
    if leans_hard(text):
        return False
    rest = text[heading_end(text):]
    return not _needs_before(rest) and _UNSHOWN.search(rest) is None


def _needs_before(text: str) -> bool:
    """Does the text speak of something named only before it: "such a scheme", "the above", a "the latter"
    whose pair it does not name itself?"""
    if _REFERS_BACK.search(text):
        return True
    former = _FORMER.search(text)
    return former is not None and _PAIR.search(text, 0, former.start()) is None


#: A figure legend or caption anywhere in the sentence ("... HybridParallelism.Figure14bshows", "... evict) Figure 1:
#: (Top) Pseudocode ..."), or a figure's labels run into the sentence before its number ("... Sample Selector
#: SwapAdvisor Dataflow MXNet Figure 2."). A figure's number written without a space ("Fig.11 demonstrates up to
#: 33.33% ...", one paper's style) is no legend unless words run on from it ("Figure14bshows").
_LEGEND = re.compile(r"^(?:Figure|Fig\.?|Table)\s*\d+[a-z]?\s*[:.|]|\b(?:Figure|Fig\.?|Table)\s*\d+[a-z]?\s*[:|]\s+"
                     r"(?:[A-Z]|\((?:[a-z]\)|[A-Z]))|[a-z.](?:Figure|Fig\.|Table)\s*\d|(?:Figure|Fig\.|Table)\d+[a-z]{2,}|"
                     r"(?:[A-Z][\w\-/]*\s+){3,12}(?:Figure|Fig\.)\s*\d+[a-z]?\.?$")  # bounded: no rescans


#: A sentence cut off mid-clause (at a page or column break): no closing mark, and its last word one no
#: sentence ends on ("... such as PipeMare, PipeDream, and PipeDream-2BW do").
_CUT_OFF = re.compile(r"(?<![\w-])(?:a|an|the|of|to|and|or|in|on|for|with|by|from|at|as|is|are|was|were|be|do|does|"
                      r"did|that|which|than|such|its|their|our|whose|can|will|would)\s*$|(?<=[a-z])-\s*$")
#: A paper's front matter: "Correspondence to: ... <name@example.org>", "Equal contribution", an e-mail address.
_FRONT_MATTER = re.compile(r"\bCorrespondence to\b|\bEqual contribution\b|\bWork (?:was )?done (?:while|during)\b|"
                           r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
#: A paper's outline: "we will discuss X (Section 2), Y (Section 3) ...", "Section 6 discusses ..., and Section 7
#: surveys ...": two section references and a verb of presenting. It says where things are, not what they are.
_SECTION_REF = re.compile(r"\b(?:Sections?|Sec\.|§)\s*\d")
_OUTLINE = re.compile(r"\b(?:discuss|present|describ|survey|conclud|organi[sz]|introduc)\w*")
#: A page's table of contents flattened into one line ("Table of content: * Introduction * Getting started * ...").
_CONTENTS = re.compile(r"^\W*(?i:table of contents?)\b|(?:\s\*\s+[A-Z][^*]*){3,}")
#: Words run together by the PDF text layer: a lower-case run longer than English words get
#: ("weobservethatthetrainingthroughput"). CamelCase names (HybridParallelPlugin,
#: hvd.DistributedOptimizer) are code, not glued words; a legend glued after a word is :data:`_LEGEND`'s.
_RUN_TOGETHER = re.compile(r"(?<![/\w])\w*[a-z]{18,}")


#: A figure or table by its number ("Figure 5b", "Fig. 10", "Table 2(a)", "Figures 5 and 6").
_FIGURE = r"(?:Figures?|Figs?\.|Tables?|Tab\.) ?\d+[a-z]?(?: ?\([a-z]\))?(?: ?(?:and|&) ?\d+[a-z]?)?,?"
#: A sentence pointing at something else: a link ("... can be found here."), what comes below, what a
#: tutorial or section is about to do ("In this tutorial, we will ...", "Next, we compare ..."), or what a figure
#: or table holds ("Figure 7 shows ...", "The top figure shows ..."), which the text does not: 5 of the 826 such
#: sentences among the training questions' candidates state a key term or the evidence, against 2.7 % of all
#: candidates (and 4 of the 753 of the other kinds).
_POINTER = re.compile(r"\b(?:can be found|(?:is|are) (?:available|provided|shown|listed|described)|see|refer to|read|"
                      r"check(?: out)?|visit|click)\b[^.;]{0,60}?\b(?:here|below|above|this (?:page|link|guide|"
                      r"tutorial|section)|the (?:docs|documentation|link|page|guide|tutorial))\W*$|"
                      r"^(?:Below|Next|In the following|In this (?:section|tutorial|guide|page|post)),?\s+(?:we|you)\b|"
                      r"\bwe will (?:introduce|show|describe|discuss|explain|cover|walk)\b|"
                      # what a figure or table shows, not that something is so ("Figure 7 shows the results.",
                      # "The results are shown in Table 3."; "Figure 8 shows that ... by 14%" states it)
                      rf"^(?:{_FIGURE}|(?:the )?(?:(?:top|bottom|left|right|upper|lower|middle) )?(?:figure|plot|"
                      r"panel|graph|chart|diagram)(?: (?:above|below))?) (?:show|illustrate|present|depict|compare|"
                      r"list|summari[sz]e|give|plot|report|describe|outline|detail|contain|visualize)s?\b"
                      r"(?! (?:that|how|why)\b)|"
                      rf"\b(?:is|are) (?:shown|presented|plotted|illustrated|depicted|summari[sz]ed|listed|given|"
                      rf"reported|visualized) in {_FIGURE}\W*$", re.I)


def points_away(text: str) -> bool:
    """Does the sentence say where something is rather than what it is? It may announce what follows
    (a config "shown below:" comes with it), so this is a weight the model learns, not a rule."""
    return _POINTER.search(text) is not None


def title_like(text: str) -> bool:
    """Is it written as a title: two to twelve words, each capitalised but the small ones, no sentence end?
    In a docs page that is a heading or a menu entry ("Optimizer State and Gradient Partitioning"),
    in a reading list a paper's title: a weight, not a rule, so the model learns which answers it. Table
    rows ("a | b", "Table 2: Model · GPUs — GPT-3 · 64") are :data:`FEATURES`' ``is_row``."""
    words = re.findall(r"[^\W\d_][\w'’-]*", text)
    if not 2 <= len(words) <= 12 or "|" in text or " · " in text or text.rstrip().endswith((".", "?", "!", ":")):
        return False
    return all(w[0].isupper() for w in words if w.lower() not in SMALL_WORDS)


def furniture(text: str) -> bool:
    """Is the sentence a heading, caption or legend, or does it carry one glued to it, or words run
    together, or is it cut off mid-clause, or a paper's front matter (an author's e-mail), a table of
    contents or a paper's outline? Such text does not read as an answer, whatever it matches."""
    # each pattern only where a plain substring test says it can match: unanchored, they were tried at
    # every character, 55 µs a sentence and 6 ms of every answer
    return bool((("Fig" in text or "Table" in text) and (_LEGEND.search(text) or labelled_figure_text(text)))
                or glued_heading(text)
                or (any(len(w) >= 18 for w in text.split()) and _RUN_TOGETHER.search(text))
                or _CUT_OFF.search(text[-24:]) and _CUT_OFF.search(text)
                or (("@" in text or "Correspondence" in text or "contribution" in text or "done" in text)
                    and _FRONT_MATTER.search(text))
                or (text.count(" * ") >= 3 or "ontent" in text[:24].lower()) and _CONTENTS.search(text)
                or (("Sec" in text or "§" in text) and len(_SECTION_REF.findall(text)) >= 2
                    and _OUTLINE.search(text) is not None))


# -- the matrix ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """Where a candidate sentence was found: what the features need besides its text."""

    role: str
    passage_rank: int | None  # 0-based rank of the retrieved passage it is in; None: found by the sentence index
    doc_rank: int  # 0-based rank of its document among the retrieved documents
    position: float  # ordinal / number of sentences in its document
    section_first: bool  # the first stored sentence of its section
    doc_id: str = ""  # its document and position there: which candidates are its neighbours and its kin
    ordinal: int = -1


@dataclass(frozen=True)
class QuestionFacts:
    """What the features read from a question, worked out once per question."""

    weights: dict[str, float]  # idf of the terms that name what it is about
    kinds: frozenset[str]
    compared: frozenset[str]


def question_facts(question: str, terms: Sequence[str], idf: Callable[[Sequence[str]], np.ndarray]) -> QuestionFacts:
    return QuestionFacts(idf_weights(terms, idf), asked_kinds(question), compared_terms(question))


def _ranks(values: np.ndarray) -> np.ndarray:
    """0 for the highest value, 1 for the next, ... (ties in input order)."""
    out = np.empty(len(values), np.int64)
    out[np.argsort(-np.asarray(values), kind="stable")] = np.arange(len(values))
    return out


def local_weights(terms: Sequence[str], token_sets: Sequence[set[str]]) -> dict[str, float]:
    """Rarity of each question term among the candidates, log(1 + N / (1 + df)): a term every candidate
    holds says nothing about which one answers; the corpus-wide idf cannot see that."""
    n = max(1, len(token_sets))
    return {t: math.log(1 + n / (1 + sum(t in x for x in token_sets))) for t in terms}


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def feature_matrix(q: QuestionFacts, texts: Sequence[str], places: Sequence[Place], cosines: np.ndarray,
                   tokens: Sequence[Sequence[str]] | None = None, adapted: np.ndarray | None = None,
                   tuned: np.ndarray | None = None) -> np.ndarray:
    """One row of :data:`FEATURES` per candidate sentence (features relative to the other candidates
    included: a linear model cannot compare a sentence with its rivals on its own); ``tokens``: their
    :func:`~dmlqa.index.lexical.tokenize` tokens when the caller has them already; ``adapted``: their
    cosines with the adapted question (:meth:`dmlqa.query.selector.Selector.adapt`; default ``cosines``);
    ``tuned``: with the question read by the tuned question encoder (:mod:`dmlqa.query.tuning`; default ``cosines``)."""
    n = len(texts)
    out = np.zeros((n, len(FEATURES)), np.float32)
    if not n:
        return out
    tokens = [tokenize(t) for t in texts] if tokens is None else tokens
    token_sets = [set(t) for t in tokens]
    lexical = bm25(tokens, q.weights)
    lexical = lexical / (float(lexical.max()) or 1.0)
    best = float(cosines.max())
    cos_rank = _ranks(cosines)
    lex_rank = _ranks(lexical)
    rarest = max(q.weights, key=lambda t: q.weights[t]) if q.weights else None
    over = np.array([overlap(ts, q.weights) for ts in token_sets], np.float32)
    local = local_weights(list(q.weights), token_sets)
    local_over = np.array([overlap(ts, local) for ts in token_sets], np.float32)
    at = {(p.doc_id, p.ordinal): i for i, p in enumerate(places)}

    docs: dict[str, list[int]] = {}
    for i, p in enumerate(places):
        docs.setdefault(p.doc_id, []).append(i)
    for i, (text, place) in enumerate(zip(texts, places, strict=True)):
        kin = docs[place.doc_id]
        before, after = at.get((place.doc_id, place.ordinal - 1)), at.get((place.doc_id, place.ordinal + 1))
        out[i] = (
            float(cosines[i]),
            float(cosines[i]) - best,
            over[i],
            float(lexical[i]),
            1.0 / (1 + cos_rank[i]),
            1.0 / (1 + lex_rank[i]),
            float(rarest in token_sets[i]),
            kind_match(text, q.kinds),
            kind_miss(text, q.kinds),
            compare_match(token_sets[i], text, q.compared),
            float(standalone(text)),
            float(furniture(text)),
            float(place.role == ITEM),
            float(place.role == ROW),
            float(place.section_first),
            place.position,
            0.0 if place.passage_rank is None else 1.0 / (1 + place.passage_rank),
            1.0 / (1 + place.doc_rank),
            math.log1p(len(text.split())),
            local_over[i],
            over[i] - float(over.max()),
            0.0 if before is None else float(over[before]),
            0.0 if after is None else float(over[after]),
            0.0 if before is None else float(cosines[before]),
            float(cosines[kin].max()),
            float(over[kin].max()),
            len(kin) / n,
            float(text.rstrip().endswith("?")),
            math.log1p(len(_NUMBER.findall(text))),
            float(title_like(text)),
            float(place.role in QUOTED_CODE),
            float("code" in q.kinds and (place.role in QUOTED_CODE or _HAS_CODE.search(text) is not None)),
            float(points_away(text)),
            *[0.0] * len(ASKED),
        )
    out[:, -len(ASKED):] = asked_columns(cosines if tuned is None else tuned, cosines if adapted is None else adapted)
    return out


#: The features measured with the question as the tuned encoder reads it, then as the adapter turns it: last in
#: :data:`FEATURES`, in this order.
TUNED = ("tuned_cosine", "tuned_gap")
ADAPTED = ("adapted_cosine", "adapted_gap", "adapted_rank")
ASKED = TUNED + ADAPTED


def asked_columns(tuned: np.ndarray, adapted: np.ndarray) -> np.ndarray:
    """The :data:`ASKED` columns of a feature matrix from the candidates' tuned and adapted cosines: apart, so
    that a refit that fits the tuning and the adapter (bench/train_selector.py) recomputes only these."""
    tuned, adapted = np.asarray(tuned, np.float32), np.asarray(adapted, np.float32)
    if not len(adapted):
        return np.zeros((0, len(ASKED)), np.float32)
    return np.stack([tuned, tuned - tuned.max(), adapted, adapted - adapted.max(), 1.0 / (1 + _ranks(adapted))],
                    axis=1).astype(np.float32)
