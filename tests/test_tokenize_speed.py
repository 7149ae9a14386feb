"""BM25 tokenising and sentence roles made faster without changing what they produce (issue 20).

``tokenize`` stems each distinct word once (a memo) and sentence roles count letters in C for ASCII
text; both are held to the plain versions they replace, on awkward text built here. No timings asserted.
"""

from __future__ import annotations

import random
import re
import string

import pytest
from fixtures_docs import prose

from dmlqa.extract.textscan import letter_count as _letters
from dmlqa.index import lexical


def _awkward_text(rng: random.Random, n: int) -> str:
    """Text with what trips tokenizers and splitters: long "words", CJK, accents, control and
    private-use characters (no tokens at all), special-token strings, runs of blank lines."""
    pieces = [
        prose(rng.randint(1, 12), seed=rng.randint(0, 99)),
        "x" * rng.randint(90, 400),
        "分布式训练将模型切分到多个设备上。",
        "café naïve İstanbul ﬁne Straße",
        "wor\x00ld \x1cfoo \u200bbar",
        "\uf8f1\uf8f4\uf8f4\n\uf8f4\uf8f3\n",
        "e.g. [MASK] [SEP] et al. Fig. 3 shows",
        "def f(x):\n    return x_1.y(z) == 3",
        "\n\n\n",
        " \t ",
        "A\nB\nC",
    ]
    return "".join(rng.choice(pieces) + rng.choice([" ", "\n", "\n\n", ". ", ""]) for _ in range(n))


_OLD_TOKEN = re.compile(r"(?u)\b\w+\b")


def _old_tokenize(text: str) -> list[str]:
    """lexical.tokenize before its per-word memo and its ASCII path, stated again as the reference."""
    stop = lexical._stopwords()
    words: list[str] = []
    for w in _OLD_TOKEN.findall(text.lower()):
        if "_" in w:
            words.extend(p for p in w.split("_") if p and p not in stop)
        if w not in stop and len(w) < 40:
            words.append(w)
    return lexical._stemmer().stemWords(words)


def test_bm25_tokens_are_unchanged_by_the_word_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    texts = [_awkward_text(rng, 30) + " shard_map ZeRO-3 all_reduce_ the THE The" for _ in range(40)]
    assert [lexical.tokenize(t) for t in texts] == [_old_tokenize(t) for t in texts]
    # a memo that fills up is emptied and refilled: the same tokens still come out
    monkeypatch.setattr(lexical, "_WORD_TOKENS", {})
    monkeypatch.setattr(lexical, "WORD_MEMO_MAX", 5)
    assert [lexical.tokenize(t) for t in texts] == [_old_tokenize(t) for t in texts]
    assert len(lexical._WORD_TOKENS) <= 5


def test_ascii_words_are_the_regex_words() -> None:
    """The translate-and-split path for ASCII text finds exactly the regex's words, on every ASCII
    character (punctuation, control characters, digits, underscores) in any order."""
    rng = random.Random(11)
    alphabet = "".join(chr(c) for c in range(128)) + string.ascii_letters * 2 + "  "
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    texts += ["ZeRO-3 shard_map __init__ a1b2 x.y/z", "", "___", "tab\tnew\nline\x00end"]
    for text in texts:
        lowered = text.lower()
        assert lowered.isascii()
        assert lexical.words(lowered) == _OLD_TOKEN.findall(lowered), repr(text)
    ascii_texts = [prose(3, seed=s) + " shard_map ZeRO-3 x_1.y(z) == 3" for s in range(20)]
    assert [lexical.tokenize(t) for t in ascii_texts] == [_old_tokenize(t) for t in ascii_texts]


def test_letter_count_is_isalpha_on_any_text() -> None:
    rng = random.Random(5)
    alphabet = "aZ 09_.-é分ß\u0301\u00aaİ\x00\t\n²Ⅻ"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert _letters(text) == sum(ch.isalpha() for ch in text), repr(text)
    ascii_text = prose(5)
    assert _letters(ascii_text) == sum(ch.isalpha() for ch in ascii_text)


def test_postings_builder_numbers_exactly_the_bm25_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder turns words straight into term ids (its own word memo): read back through its vocabulary,
    every text's ids are ``tokenize(text)``, a text without tokens is the one EMPTY term, and a memo that fills
    up and is emptied changes nothing."""
    from dmlqa.index import postings

    rng = random.Random(7)
    texts = [_awkward_text(rng, 12) for _ in range(30)] + ["", "the of and", prose(2, seed=4), "shard_map ZeRO-3"]
    for limit in (postings.WORD_MEMO_MAX, 3):
        monkeypatch.setattr(postings, "WORD_MEMO_MAX", limit)
        builder = postings.PostingsBuilder()
        builder.add(texts[:20])
        builder.add(texts[20:])
        names = {i: t for t, i in builder.vocab.items()}
        got = [[names[int(i)] for i in ids] for ids in builder.ids]
        assert got == [lexical.tokenize(t) or [postings.EMPTY] for t in texts]
        assert builder.lengths == [len(g) for g in got]
        assert len(builder._word_ids) <= max(limit, 1) or limit == postings.WORD_MEMO_MAX
