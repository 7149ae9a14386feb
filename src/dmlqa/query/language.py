"""Which language a question is written in, for what the English vocabulary cannot tell.

:func:`dmlqa.query.names.not_english` reads a question's words against the English vocabulary first. German and
Italian share too many short words with it ("die", "in", "come", "il" are all in the bundled vocabulary) for that
to tell "Wie funktioniert die Pipeline-Parallelität in GPipe?" from English, so a language identifier
(py3langid: character n-grams over 97 languages, its model in the package, nothing downloaded) decides those.
It loads in ~0.8 s, so it is asked only about questions the vocabulary finds a foreign word in.
"""

from __future__ import annotations

import functools

#: The identifier's probability above which a question is taken for another language. On the 2,295 English
#: questions of bench/ and dev.jsonl none reaches 0.5 in another language; keyword queries and lists of names
#: ("pipeline bubble fraction gpipe", "Horovod Timeline") stay far below it.
CONFIDENCE = 0.5
#: Not a language: "no linguistic content" (a run of identifiers such as "ZeRO++ qwZ hpZ qgZ").
_NO_LANGUAGE = "zxx"


@functools.cache
def _identifier():  # noqa: ANN202 - py3langid's LanguageIdentifier
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def other_language(text: str) -> bool:
    """Is the text confidently (its most likely language's probability) in a language other than English?"""
    lang, prob = _identifier().classify(text)
    return lang not in ("en", _NO_LANGUAGE) and prob >= CONFIDENCE
