"""What the index mentions: the lookups :mod:`dmlqa.query.names` makes to tell whether a document names something.

A name counts as mentioned when the index can show it: its BM25 tokens are in the version's vocabulary (or in a
document's address), and a name of several parts occurs as that phrase in a passage, title or address
(:func:`phrase` allows other spacing, hyphens or dots between the parts). The passages read are bounded
(:data:`MAX_ROWS`, in batches of :data:`BATCH_ROWS`) so that one question stays cheap on a large index.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from dmlqa.index.lexical import tokenize
from dmlqa.index.postings import _encode, _lookup
from dmlqa.index.versions import IndexVersion
from dmlqa.models import Hit
from dmlqa.query.pinned import per_version

#: Passages read to confirm a phrase (in batches, stopping at the first that holds it) or to find a
#: near spelling; bounded so one question stays cheap on a large index.
MAX_ROWS = 5000
BATCH_ROWS = 200
#: A lower-case word in at least this many passages is the field's vocabulary ("throughput",
#: "checkpointing"), not a name: general English ranks such words rare, the index does not.
CONCEPT_ROWS = 5
#: A name's parts: letters, digits, "++".
PIECE = re.compile(r"[A-Za-z]+|\d+|\+\+")
#: An acronym: capitals and digits ("NCCL", "FP16", "1F1B"), perhaps plural ("GPUs").
ACRONYM = re.compile(r"[A-Z0-9]+s?")
MARK = r"(?:\((?:R|TM)\)|[®™])?"  # a trademark sign after a name ("Intel(R) Gaudi(R) 2")


@per_version
def address_tokens(version: IndexVersion) -> frozenset[str]:
    """Tokens of every document's addresses: a repository named only in its URL is still indexed."""
    return frozenset(t for d in version.docs.values() for u in (d.url, d.source_url, *d.aliases)
                     for t in tokenize(re.sub(r"^\w+://", "", u or "")))


@per_version
def passages_using(version: IndexVersion) -> Callable[[Sequence[str]], np.ndarray]:
    """How many passages of ``version`` hold each of some BM25 tokens (0 for a token it does not have): the
    lexicon's document frequencies, read once per version."""
    lexicon = version.lexical.lexicon
    terms, df = np.asarray(lexicon.terms), np.asarray(lexicon.df)

    def used(tokens: Sequence[str]) -> np.ndarray:
        if not tokens or not len(terms):
            return np.zeros(len(tokens), np.int64)
        pos = _lookup(terms, _encode(list(tokens)))
        return np.where(pos >= 0, df[np.maximum(pos, 0)], 0)

    return used


def concepts(version: IndexVersion) -> Callable[[str], bool]:
    """Is a lower-case word common in ``version`` (in :data:`CONCEPT_ROWS` passages or more)?"""
    used = passages_using(version)

    def concept(word: str) -> bool:
        tokens = tokenize(word)
        return bool(tokens) and bool(np.all(used(tokens) >= CONCEPT_ROWS))

    return concept


def tokens_known(version: IndexVersion, word: str) -> bool:
    known = version.lexical.vocabulary()
    urls = address_tokens(version)

    def ok(w: str) -> bool:
        tokens = tokenize(w)
        if "_" in w:  # an identifier counts as mentioned only when written whole
            tokens = [t for t in tokens if "_" in t] or tokens
        return all(t in known or t in urls for t in tokens)

    # plurals the stemmer folds differently: "H100s", "re-rendezvouses" (rendezvous → "rendezv")
    return ok(word) or any(ok(re.sub(rf"(?<=\w{{3}}){end}\b", "", word)) for end in ("s", "es"))


def phrase(name: str) -> re.Pattern[str]:
    """The name as a pattern that allows other spacing, hyphens or dots between its parts, and a plural."""
    pieces = [re.escape(p) for p in PIECE.findall(name)]
    # one separator at most, and never a sentence's end: "FlashAttention.\n3 Unified …" is no "FlashAttention-3"
    # (a bracket beside a hyphen, a plus, a trademark sign: "Mooncake-[3P+1D]", "Intel(R) MPI")
    sep = MARK + r"(?:[\-_/+]?[\[(]?\s?|\.(?=\S)|\s)?"
    return re.compile(r"(?<![A-Za-z0-9])" + sep.join(pieces) + r"(?:e?s)?(?![A-Za-z0-9])", re.IGNORECASE)


def rows_with(version: IndexVersion, terms: Sequence[str], *, every: bool) -> np.ndarray:
    """Live rows holding every one (or, ``every=False``, the most) of ``terms``; at most :data:`MAX_ROWS`."""
    counts: Counter[int] = Counter()
    for term in dict.fromkeys(terms):
        key = term.encode("utf-8")
        for seg, offset in zip(version.segments, version.offsets, strict=False):
            rows, _ = seg.postings.term_rows(key)
            counts.update((np.asarray(rows, dtype=np.int64) + int(offset)).tolist())
    need = len(set(terms))
    ranked = [r for r, c in counts.most_common() if version.live[r] and (c == need or not every)]
    return np.asarray(ranked[:MAX_ROWS], dtype=np.int64)


def row_texts(version: IndexVersion, rows: np.ndarray) -> list[tuple[str, str]]:
    """(document id, title + section + text) of rows: what BM25 read for them."""
    out = []
    for c in version.chunks(rows.tolist()).values():
        doc = version.docs.get(c.doc_id)
        out.append((c.doc_id, f"{doc.title if doc else ''}\n{c.section or ''}\n{c.text}"))
    return out


def squash(text: str) -> str:
    """Lower-case letters and digits only: what a name's :func:`phrase` must find in a text, whatever the
    separators between its parts."""
    return re.sub(r"[\W_]+", "", text.lower())


class Headings:
    """Every document's title and addresses, with one squashed string of them all: a name's squashed
    form found in it (one C-level substring search) picks the few documents its pattern is tried on.
    Trying the pattern on every document cost 5 µs a document and name part, 100 ms a question at
    20,000 documents."""

    def __init__(self, version: IndexVersion) -> None:
        docs = list(version.docs.values())
        self.doc_ids = [d.doc_id for d in docs]
        self.texts = [f"{d.title} {d.url} {d.source_url}" for d in docs]
        squashed = [squash(t) for t in self.texts]
        self.starts = np.cumsum([0] + [len(x) + 1 for x in squashed[:-1]]).tolist() if squashed else []
        self.joined = "\n".join(squashed)

    def holding(self, name: str) -> list[int]:
        """Indices of the documents whose title or address holds ``name`` (its :func:`phrase`)."""
        needle = squash(name)
        if len(needle) < 3 or not name.isascii():  # too common to pick, or case folding beyond ASCII
            candidates: Sequence[int] = range(len(self.texts))
        else:
            found: set[int] = set()
            at = self.joined.find(needle)
            while at >= 0:
                found.add(bisect.bisect_right(self.starts, at) - 1)
                at = self.joined.find(needle, at + 1)
            candidates = sorted(found)
        pattern = phrase(name)
        return [i for i in candidates if pattern.search(self.texts[i])]


headings = per_version(Headings)


class Evidence:
    """What one question's check reads of the index: the retrieved passages, then stored ones (cached)."""

    def __init__(self, version: IndexVersion, hits: Sequence[Hit]) -> None:
        self.version = version
        self.hit_texts = [f"{h.title}\n{h.text}" for h in hits]
        self.headings = headings(version)
        self._rows: dict[tuple[str, ...], np.ndarray] = {}

    def addressed(self, name: str) -> set[str]:
        """The documents whose title or address holds ``name`` ("AWS Labs" in github.com/awslabs/…)."""
        return {self.headings.doc_ids[i] for i in self.headings.holding(name)}

    def phrase_found(self, name: str) -> bool:
        pattern = phrase(name)
        if any(pattern.search(t) for t in self.hit_texts) or self.headings.holding(name):
            return True
        return self.stored_match(tuple(sorted(set(tokenize(name)))), pattern)

    def stored_match(self, terms: tuple[str, ...], pattern: re.Pattern[str]) -> bool:
        """Does a stored passage holding every one of ``terms`` match ``pattern``? The passages are read in
        batches, stopping at the first that does; the rows for the same ``terms`` are looked up once."""
        if terms not in self._rows:
            self._rows[terms] = rows_with(self.version, terms, every=True)
        rows = self._rows[terms]
        return any(pattern.search(t) for b in range(0, len(rows), BATCH_ROWS)
                   for _, t in row_texts(self.version, rows[b : b + BATCH_ROWS]))


#: A word that is a name by its shape: case inside it ("LeNet"), a digit, or parts joined ("Fashion-MNIST").
_NAME_SHAPE = re.compile(r"[a-z][A-Z]|\d|\w[-_./+]\w")


def one_document_holds(version: IndexVersion, words: list[str]) -> bool:
    """Are the words names by their shape that one document holds apart? "d2l's LeNet Fashion-MNIST experiment"
    names two things the d2l chapter speaks of in different passages; "Lightning Fabric" stays to be met whole."""
    if len(words) < 2 or not all(_NAME_SHAPE.search(w) for w in words):
        return False
    return bool(set.intersection(*({version.doc_of(int(r)) for r in rows_with(version, tokenize(w), every=True)}
                                   for w in words)))


def meets_in_address(evidence: Evidence, words: list[str]) -> bool:
    """Do some of the words name a document by its title or address and the rest occur in its text?
    "AWS Labs Kubernetes templates" are those of the repository at github.com/awslabs/…, whose pages
    say "Kubernetes" but never "Labs": its words meet in no passage, yet the document is the one named."""
    version = evidence.version
    for size in range(len(words) - 1, 1, -1):  # one word of a run naming a document proves nothing: "Mooncake Store"
        for start in range(len(words) - size + 1):
            piece, rest = words[start : start + size], words[:start] + words[start + size :]
            docs = evidence.addressed(" ".join(piece))
            tokens = tokenize(" ".join(w for w in rest if not ACRONYM.fullmatch(w)))
            if docs and tokens:
                rows = rows_with(version, tokens, every=True)
                if any(version.doc_of(int(r)) in docs for r in rows):
                    return True
    return False
