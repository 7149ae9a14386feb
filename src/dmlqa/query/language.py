"""Which language a question is written in, for what the English vocabulary cannot tell.

:func:`dmlqa.query.names.not_english` reads a question's words against the English vocabulary first. German and
Italian share too many short words with it ("die", "in", "come", "il" are all in the bundled vocabulary) for that
to tell "Wie funktioniert die Pipeline-Parallelität in GPipe?" from English, so a language identifier
(py3langid: character n-grams over 97 languages, its model in the package, nothing downloaded) decides those.
It loads in ~0.8 s, so it is asked only about questions the vocabulary finds a foreign word in.

Neither is needed for a question written mostly in another script ("ZeRO-3 如何划分优化器状态？"): its words are
not Latin letters, so the vocabulary finds no lower-case English word to count, and the name check would refuse the
foreign words as names no document mentions.
"""

from __future__ import annotations

import functools

#: The identifier's probability above which a question is taken for another language. On the 2,295 English
#: questions of bench/ and dev.jsonl none reaches 0.5 in another language; keyword queries and lists of names
#: ("pipeline bubble fraction gpipe", "Horovod Timeline") stay far below it.
CONFIDENCE = 0.5
#: Not a language: "no linguistic content" (a run of identifiers such as "ZeRO++ qwZ hpZ qgZ").
_NO_LANGUAGE = "zxx"
#: Unicode's Latin letters end here (Basic Latin through Latin Extended-B; IPA and the rest are other scripts).
_LATIN_END = 0x250


@functools.cache
def _identifier():  # noqa: ANN202 - py3langid's LanguageIdentifier
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def other_script(text: str) -> bool:
    """Are most of the text's letters outside the Latin script (Chinese, Japanese, Cyrillic, Greek, Arabic ...)?
    A name or formula in such letters inside an English question ("What is 悟道 (WuDao)?") leaves Latin the most."""
    letters = [ch for ch in text if ch.isalpha()]
    return bool(letters) and sum(1 for ch in letters if ord(ch) < _LATIN_END) < len(letters) / 2


def other_language(text: str, confidence: float = CONFIDENCE) -> bool:
    """Is the text's most likely language other than English, with at least ``confidence`` probability?"""
    lang, prob = _identifier().classify(text)
    return lang not in ("en", _NO_LANGUAGE) and prob >= confidence
