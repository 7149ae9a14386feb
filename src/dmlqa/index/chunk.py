"""Chunk stage: :class:`~dmlqa.models.Document` → passages sized for the embedding model.

Sizes are counted in the embedding model's own tokens (its ``tokenizer.json`` read with the
``tokenizers`` package; torch and sentence-transformers stay unimported here, they cost seconds).
A chunk never spans two blocks, so its page and section are exact, and every chunk records its
character offsets into ``Document.text`` so that a citation can point at the very passage.

How a block is cut:

1. langchain-text-splitters' :class:`RecursiveCharacterTextSplitter` cuts the block into
   non-overlapping *cores* of at most ``chunk_tokens - overlap`` tokens, preferring paragraph, line,
   sentence and word boundaries in that order.
2. Each core after the first is extended backwards by about ``overlap`` tokens (snapped to a word
   start) taken from the block's single tokenisation, so consecutive chunks of a block always share
   context, however coarse the pieces the splitter worked with were (langchain's own overlap only
   re-uses whole pieces and gives none when paragraphs are longer than the overlap).
3. A trailing core shorter than ``min_tokens`` is folded into the chunk before it.
4. Every chunk is checked against the model window, a hard limit: re-counted with the real
   tokenizer unless the block's tokenisation already shows it well inside, and cut on token
   boundaries if it is over (the splitter adds up piece lengths, which can differ slightly from the
   length of the joined text).

How tokens are counted: a BERT tokenizer (BertNormalizer, BertPreTokenizer, WordPiece) never lets a
token or any normalisation cross a space, tab or line break, so a text's tokens are the tokens of its
whitespace-free *runs*, each tokenised alone. :class:`TokenCounter` memoises every run's token starts
and answers counts and block tokenisations from them, giving exactly the tokenizer's own answer while
calling it only for runs it has not met (most words of a corpus repeat): tokenising whole texts was
three quarters of chunking's CPU. Any other tokenizer is asked about whole texts.
"""

from __future__ import annotations

import bisect
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, filterfalse
from pathlib import Path

from tokenizers import Encoding, Tokenizer, models, normalizers, pre_tokenizers

from dmlqa.extract.reference_entries import reference_zone
from dmlqa.models import BLOCK_SEPARATOR, Chunk, Document

log = logging.getLogger(__name__)

#: Window assumed when a model folder says nothing about its maximum sequence length.
DEFAULT_WINDOW = 512

#: Separators tried in order: paragraphs, lines, sentence ends, words, characters (regexes).
SEPARATORS = [r"\n\n", r"\n", r"(?<=[.!?])[ \t]+", r"[ \t]+", ""]

#: Strings longer than this are not memoised by :meth:`TokenCounter.count` (they rarely repeat).
_CACHE_MAX_CHARS = 4_000
_CACHE_MAX_ENTRIES = 200_000
#: A chunk is also kept under ``chunk_tokens * MAX_CHARS_PER_TOKEN`` characters: WordPiece turns
#: any "word" over 100 characters (base64, minified code) into a single [UNK], which would otherwise
#: let one chunk swallow kilobytes of text.
MAX_CHARS_PER_TOKEN = 12
#: Tokens of head-room under which a whitespace-bounded span is trusted without a re-count.
_COUNT_MARGIN = 8
#: Whitespace that a BERT tokenizer always treats as a word break and never normalises together with
#: its neighbours. Deliberately not ``\s``: the normaliser deletes vertical tab, form feed and other
#: control characters that Python calls whitespace, joining the words around them into one.
_BREAKS = re.compile(r"([ \t\n\r]+)")
_RUN = re.compile(r"[^ \t\n\r]+")
#: Runs whose token starts :class:`TokenCounter` keeps (cleared when full; a corpus's common words come
#: back at once). About 170 bytes each, the run itself included.
_RUNS_MAX_ENTRIES = 200_000


class TokenCounter:
    """Counts the embedding model's tokens; memoised because the splitter asks about the same
    pieces (and separators) several times, and by whitespace-free run for BERT tokenizers (see the
    module notes), whose runs repeat across a whole corpus."""

    def __init__(self, tokenizer: Tokenizer, *, window: int) -> None:
        """``window`` is the model's maximum sequence length, special tokens included."""
        # Model repositories often ship tokenizer.json with truncation and fixed padding enabled
        # (all-MiniLM-L6-v2: truncate and pad to 128), which would make every count 128.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tok = tokenizer
        self.window = window
        self.special_tokens = len(tokenizer.encode("", add_special_tokens=True).ids)
        #: The most content tokens one passage may have: the window minus [CLS]/[SEP] and the like.
        self.max_tokens = window - self.special_tokens
        if self.max_tokens <= 0:
            raise ValueError(f"model window {window} leaves no room for text")
        self._cache: dict[str, int] = {}
        self._by_run = _tokenizes_runs_alone(tokenizer)
        #: Per whitespace-free run (only while ``_by_run``): where its tokens start, and which of its
        #: tokens begin a word (indexes), both relative to the run. Equal tuples are shared through
        #: ``_shapes``: most runs are one token, ``(0,)`` and ``(0,)``.
        self._starts: dict[str, tuple[int, ...]] = {"": ()}
        self._words: dict[str, tuple[int, ...]] = {"": ()}
        self._shapes: dict[tuple[int, ...], tuple[int, ...]] = {}

    @classmethod
    def from_model_dir(cls, path: Path | str, *, window: int | None = None) -> TokenCounter:
        """Load ``<path>/tokenizer.json``; the window comes from ``window``, else the folder's
        ``sentence_bert_config.json`` (``max_seq_length``), else ``tokenizer_config.json``
        (``model_max_length``), else :data:`DEFAULT_WINDOW`."""
        path = Path(path)
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        return cls(tokenizer, window=window or _model_window(path))

    def count(self, text: str) -> int:
        """Tokens in ``text`` without special tokens."""
        n = self._cache.get(text)
        if n is None:
            if self._by_run:
                runs = _RUN.findall(text)
                self._learn(runs)
                n = sum(map(len, map(self._starts.__getitem__, runs)))
            else:
                n = len(self._tok.encode(text, add_special_tokens=False).ids)
            if len(text) <= _CACHE_MAX_CHARS:
                if len(self._cache) >= _CACHE_MAX_ENTRIES:
                    self._cache.clear()
                self._cache[text] = n
        return n

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of every token of ``text`` (no special tokens), in order."""
        return self._tok.encode(text, add_special_tokens=False).offsets

    def encode(self, text: str) -> Encoding:
        """The tokenizer's full encoding of ``text`` (no special tokens): offsets, word ids, ..."""
        return self._tok.encode(text, add_special_tokens=False)

    def tokens(self, text: str) -> TokenStarts:
        """Where each token of ``text`` (no special tokens) starts, and which tokens begin a word: what
        :meth:`encode` tells through offsets and word ids, cheaper."""
        if not self._by_run:
            encoding = self.encode(text)
            ids = encoding.word_ids
            words = tuple(j for j in range(len(ids)) if j == 0 or ids[j] != ids[j - 1])
            return TokenStarts([0], [tuple(s for s, _ in encoding.offsets)], [words])
        parts = _BREAKS.split(text)  # run, break, run, ..., run (runs may be empty)
        runs = parts[0::2]
        at = list(accumulate(map(len, parts), initial=0))[0::2]
        self._learn(runs)
        return TokenStarts(at, list(map(self._starts.__getitem__, runs)), list(map(self._words.__getitem__, runs)))

    def _learn(self, runs: Sequence[str]) -> None:
        """Tokenise those of ``runs`` (whitespace-free) not met before, all in one call."""
        if all(map(self._starts.__contains__, runs)):
            return
        if len(self._starts) > _RUNS_MAX_ENTRIES:
            for memo in (self._starts, self._words, self._shapes):
                memo.clear()
            self._starts[""] = self._words[""] = ()
        new = list(filterfalse(self._starts.__contains__, set(runs)))
        # Runs joined by single spaces tokenise as they do alone; one call instead of one per run
        # saves the tokenizer's per-call cost, which dominates for single words.
        bounds = list(accumulate((len(r) + 1 for r in new), initial=0))
        starts: list[list[int]] = [[] for _ in new]
        words: list[list[int]] = [[] for _ in new]
        encoding = self.encode(" ".join(new))
        k = 0
        previous = None
        for (start, _), word in zip(encoding.offsets, encoding.word_ids, strict=True):
            while start >= bounds[k + 1]:
                k += 1
            if not starts[k] or word != previous:
                words[k].append(len(starts[k]))
            starts[k].append(start - bounds[k])
            previous = word
        shapes = self._shapes
        for run, run_starts, run_words in zip(new, starts, words, strict=True):
            self._starts[run] = shapes.setdefault(tuple(run_starts), tuple(run_starts))
            self._words[run] = shapes.setdefault(tuple(run_words), tuple(run_words))


class TokenStarts:
    """Start offsets of a text's tokens, held per whitespace-free run: ``len()``, ``[j]`` (start of
    token ``j``) and :meth:`index` behave as on the flat list of starts, which is never built because
    making one Python int per token cost as much as the rest of chunking."""

    def __init__(self, run_at: list[int], run_starts: list[tuple[int, ...]], run_words: list[tuple[int, ...]]) -> None:
        """``run_at[k]`` is where run ``k`` begins, ``run_starts[k]`` its token starts relative to that,
        ``run_words[k]`` the indexes (within the run, ascending) of its tokens that begin a word."""
        self._at = run_at
        self._starts = run_starts
        self._words = run_words
        self._before = list(accumulate(map(len, run_starts), initial=0))  # tokens before each run

    def __len__(self) -> int:
        return self._before[-1]

    def __getitem__(self, j: int) -> int:
        k = self._run_of(j)
        return self._at[k] + self._starts[k][j - self._before[k]]

    def begins_word(self, j: int) -> bool:
        """Whether token ``j`` is the first of a word (the tokenizer's pre-tokenised word)."""
        k = self._run_of(j)
        words = self._words[k]
        i = bisect.bisect_left(words, j - self._before[k])
        return i < len(words) and words[i] == j - self._before[k]

    def _run_of(self, j: int) -> int:
        if not 0 <= j < len(self):
            raise IndexError(j)
        return bisect.bisect_right(self._before, j) - 1  # the run holding token j (skips runs without tokens)

    def index(self, pos: int) -> int:
        """Tokens that start before ``pos`` (``bisect_left`` on the flat list of starts)."""
        k = bisect.bisect_right(self._at, pos) - 1
        if k < 0:
            return 0
        return self._before[k] + bisect.bisect_left(self._starts[k], pos - self._at[k])

    def between(self, span: Span) -> int:
        """Tokens that start inside ``span`` (cheap estimate of its length)."""
        return self.index(span.end) - self.index(span.start)


def _tokenizes_runs_alone(tokenizer: Tokenizer) -> bool:
    """True for a BERT tokenizer, whose tokens and normalisation never cross a space, tab or line break.

    BertNormalizer works one character at a time (accent stripping's reordering stops at any base
    character), BertPreTokenizer splits at whitespace and WordPiece sees one word at a time. Added
    tokens are matched before all that; they keep the property unless they hold whitespace or strip it.
    """
    added_ok = all(
        not (t.lstrip or t.rstrip or t.single_word) and not any(map(str.isspace, t.content))
        for t in tokenizer.get_added_tokens_decoder().values()
    )
    return (
        isinstance(tokenizer.normalizer, normalizers.BertNormalizer)
        and isinstance(tokenizer.pre_tokenizer, pre_tokenizers.BertPreTokenizer)
        and isinstance(tokenizer.model, models.WordPiece)
        and added_ok
    )


def _model_window(path: Path) -> int:
    """The model's maximum sequence length as its folder declares it."""
    for name, key in (
        ("sentence_bert_config.json", "max_seq_length"),
        ("tokenizer_config.json", "model_max_length"),
    ):
        try:
            value = json.loads((path / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError):
            continue
        # tokenizer_config uses a huge sentinel (1e30) for "no limit"
        if isinstance(value, int) and 0 < value <= 100_000:
            return value
    return DEFAULT_WINDOW


@dataclass(frozen=True)
class Span:
    """Where a chunk lies in its block's text: ``text[start:end]``."""

    start: int
    end: int


class Chunker:
    """Cuts documents into token-bounded, block-local, overlapping chunks."""

    def __init__(
        self,
        counter: TokenCounter,
        *,
        chunk_tokens: int = 200,
        overlap: int = 32,
        min_tokens: int = 20,
        reference_chunks: bool = False,
    ) -> None:
        """``chunk_tokens`` is the target size including the overlap, ``overlap`` the tokens a
        chunk repeats from the one before it in the same block, ``min_tokens`` the size below
        which a block's last piece is folded into the chunk before it. ``chunk_tokens`` is capped
        at the model window (``counter.max_tokens``), which is also a hard limit on every chunk.
        ``reference_chunks`` False leaves a paper's reference list (:func:`reference_zone`) out of
        the passages; its entries are still parsed into the citation graph from the stored text."""
        if chunk_tokens <= 0:
            raise ValueError("chunk_tokens must be positive")
        if chunk_tokens > counter.max_tokens:
            log.warning(
                "chunk_tokens %d exceeds the model window (%d tokens of text); using %d",
                chunk_tokens,
                counter.max_tokens,
                counter.max_tokens,
            )
            chunk_tokens = counter.max_tokens
        if overlap < 0 or overlap * 2 > chunk_tokens:
            raise ValueError(f"overlap must be between 0 and half of chunk_tokens ({chunk_tokens})")
        self.counter = counter
        self.chunk_tokens = chunk_tokens
        self.overlap = overlap
        self.min_tokens = min_tokens
        self.reference_chunks = reference_chunks
        self.max_tokens = counter.max_tokens
        # Imported here: langchain costs ~0.2 s, which every importer of dmlqa.index would pay otherwise.
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        self._splitter = RecursiveCharacterTextSplitter(
            separators=SEPARATORS,
            is_separator_regex=True,
            keep_separator="end",  # a piece keeps its trailing separator: cores end at sentence ends
            chunk_size=chunk_tokens - overlap,
            chunk_overlap=0,  # overlap is added on token boundaries below
            length_function=self._length,
            strip_whitespace=True,
        )

    def _length(self, text: str) -> int:
        """Length for the splitter: tokens, but never fewer than the character cap implies."""
        return max(self.counter.count(text), len(text) // MAX_CHARS_PER_TOKEN)

    def chunk(self, doc: Document) -> list[Chunk]:
        """All chunks of ``doc`` in reading order, numbered ``f"{doc_id}#{ordinal}"`` from 0.

        A passage whose text the document already gave (a banner on every page, a section printed
        twice, a body served again and again) is kept once, where it first occurs: otherwise one
        question would get the same passage as several hits, crowding out every other source.
        Numbering stays gapless, and each kept chunk keeps its own page, section and offsets.
        """
        chunks: list[Chunk] = []
        seen: set[str] = set()
        offset = 0
        refs = None if self.reference_chunks or doc.content_type != "pdf" else reference_zone(doc.text)
        for block in doc.blocks:
            for span in self.split(block.text):
                start, end = offset + span.start, offset + span.end
                if refs is not None and min(end, refs[1]) - max(start, refs[0]) > (end - start) / 2:
                    continue  # mostly reference entries
                text = block.text[span.start : span.end]
                if text in seen:
                    continue
                seen.add(text)
                chunks.append(
                    Chunk(
                        chunk_id=f"{doc.doc_id}#{len(chunks)}",
                        doc_id=doc.doc_id,
                        url=doc.url,
                        title=doc.title,
                        text=text,
                        page=block.page,
                        section=block.section,
                        start=offset + span.start,
                        end=offset + span.end,
                    )
                )
            offset += len(block.text) + len(BLOCK_SEPARATOR)
        return chunks

    def chunk_all(self, docs: Iterable[Document]) -> list[Chunk]:
        """Chunks of several documents, in order."""
        return [c for doc in docs for c in self.chunk(doc)]

    # -- one block ---------------------------------------------------------------------------------
    def split(self, text: str) -> list[Span]:
        """Spans of ``text`` (one block) that become chunks; whitespace-only text gives none."""
        lo, hi = _strip_bounds(text, 0, len(text))
        if lo >= hi:
            return []
        tokens = self.counter.tokens(text)
        if max(len(tokens), (hi - lo) // MAX_CHARS_PER_TOKEN) <= self.chunk_tokens:
            return self._enforce_max(text, [Span(lo, hi)], tokens)

        cores = self._cores(text)
        if not cores:
            return []
        if len(cores) > 1 and tokens.between(cores[-1]) < self.min_tokens:
            tail = cores.pop()
            cores[-1] = Span(cores[-1].start, tail.end)
        spans = [cores[0]]
        for previous, core in zip(cores, cores[1:], strict=False):
            # never reach back past the previous core: chunk starts stay in reading order
            start = max(previous.start, self._overlap_start(text, core.start, tokens))
            spans.append(Span(start, core.end))
        return self._enforce_max(text, spans, tokens)

    def _cores(self, text: str) -> list[Span]:
        """Non-overlapping pieces chosen by langchain's recursive splitter, located in ``text``."""
        cores: list[Span] = []
        cursor = 0
        for piece in self._splitter.split_text(text):
            start = text.find(piece, cursor)
            if start < 0 and cores:
                # A piece of no tokens (a lone zero-width space) counts for nothing in langchain's merge, so it
                # can end one piece and start the next: look again from the previous core and keep what is new.
                found = text.find(piece, cores[-1].start)
                if found >= 0 and found + len(piece) > cursor:
                    start, end = _strip_bounds(text, cursor, found + len(piece))
                    if start < end:
                        cores.append(Span(start, end))
                    cursor = found + len(piece)
                    continue
            if start < 0:  # not a substring at all: cannot happen with langchain's splitter; stay safe anyway
                log.warning("splitter returned text not found in the block; skipping %d chars", len(piece))
                continue
            end = start + len(piece)
            cores.append(Span(start, end))
            cursor = end
        return cores

    def _overlap_start(
        self,
        text: str,
        core_start: int,
        tokens: TokenStarts,
    ) -> int:
        """Start of the ~``overlap`` tokens before ``core_start``, moved forward to a word start:
        preferably one after whitespace, else any word the tokenizer starts (CJK characters,
        punctuation), never the middle of a word."""
        if self.overlap == 0:
            return core_start
        first = tokens.index(core_start)  # first token of the core
        candidates = range(max(0, first - self.overlap), first)
        for j in candidates:
            s = tokens[j]
            if s == 0 or text[s - 1].isspace():
                return s
        for j in candidates:
            if tokens.begins_word(j):
                return tokens[j]
        return core_start

    def _enforce_max(self, text: str, spans: list[Span], tokens: TokenStarts) -> list[Span]:
        """Re-count every span with the real tokenizer; cut any over the window on token bounds."""
        out: list[Span] = []
        for span in spans:
            if self._surely_fits(text, span, tokens) or (
                self.counter.count(text[span.start : span.end]) <= self.max_tokens
            ):
                out.append(span)
                continue
            log.debug(
                "chunk of %d chars over the %d-token limit: cutting by tokens",
                span.end - span.start,
                self.max_tokens,
            )
            out.extend(self._cut_by_tokens(text, span, tokens))
        return out

    def _surely_fits(self, text: str, span: Span, tokens: TokenStarts) -> bool:
        """True when the block's own tokenisation shows ``span`` well inside the window.

        A span cut at whitespace tokenises as it does inside the block (up to a token or two for
        tokenizers that fold the leading space into a token), so the count of block tokens it
        holds, with a safety margin, saves tokenising the text once more.
        """
        at_word_bounds = (span.start == 0 or text[span.start - 1].isspace()) and (
            span.end == len(text) or text[span.end].isspace()
        )
        return at_word_bounds and tokens.between(span) <= self.max_tokens - _COUNT_MARGIN

    def _cut_by_tokens(self, text: str, span: Span, tokens: TokenStarts) -> list[Span]:
        """Windows of ``chunk_tokens`` block tokens over ``span``, shrunk until each fits."""
        first = tokens.index(span.start)
        last = tokens.index(span.end)  # one past the span's last token
        out: list[Span] = []
        i = first
        while i < last:
            n = min(self.chunk_tokens, last - i)
            while True:
                # pieces abut (each ends where the next token starts): nothing between tokens is lost
                end = tokens[i + n] if i + n < last else span.end
                piece = Span(tokens[i] if i > first else span.start, end)
                if n == 1 or self.counter.count(text[piece.start : piece.end]) <= self.max_tokens:
                    break
                n = max(1, n * 3 // 4)
            lo, hi = _strip_bounds(text, piece.start, piece.end)
            if lo < hi:
                out.append(Span(lo, hi))
            i += n
        return out


def _strip_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` narrowed to exclude leading and trailing whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
