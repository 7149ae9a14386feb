"""What keeps the citation graph's cost in proportion to change: a blocking index for fuzzy title matching,
and a cache of parsed reference lists.

**Fuzzy titles without all pairs.** A reference title ``key`` may fuzzily match a document title only when the
two share at least half of ``key``'s distinct words (:func:`passes`, the rule :class:`~dmlqa.pipeline.graph.Resolver`
has always used) and their :class:`~difflib.SequenceMatcher` ratio reaches :data:`TITLE_RATIO`. Word postings
alone do not make that cheap: "learning", "distributed" and "training" are in nearly every title of the field,
so nearly every document was a candidate of every reference. :class:`TitleIndex` uses the *prefix filter* of
set-similarity joins instead: a title sharing at least ``t`` of the ``n`` words of ``key`` shares at least one
of any ``n - t + 1`` of them, so only the postings of ``key``'s ``n - t + 1`` *rarest* words are read. It is
exact, not a heuristic: the candidates it skips could never pass the word rule, so it finds what comparing all
pairs finds (:meth:`TitleIndex.best_all_pairs` is that comparison, kept as the tests' and the bench's oracle).

**Parsed references kept.** Reading a PDF's reference list is a few milliseconds to a second of regular
expressions per paper; :class:`ReferenceCache` keeps each result in ``index/cache/references.sqlite`` under a
key of the document's source sha256, its title (the citing-sentence rule reads it) and
:data:`~dmlqa.extract.references.PARSER_VERSION`, so an unchanged document is never parsed again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from difflib import SequenceMatcher
from pathlib import Path
from typing import TYPE_CHECKING

from dmlqa.models import Document, Reference

if TYPE_CHECKING:
    from dmlqa.extract.references import ParsedReferences

log = logging.getLogger(__name__)

#: Fuzzy title matches at or above this SequenceMatcher ratio (on normalised titles) resolve. Measured on
#: the snapshot's 1,204 references: the fuzzy matches that are the same work scored 0.91-0.995 ("Meshtensorflow",
#: "Deepspeedinference", ICML's "Accelerating" for arXiv's "Parallelizing"), the closest different work 0.84
#: ("Communication efficient distributed machine learning with the parameter server" against "Scaling
#: distributed machine learning with the parameter server", two 2014 papers); 0.90 sits between them.
TITLE_RATIO = 0.90


def passes(words: frozenset[str], cand_words: frozenset[str]) -> bool:
    """The word rule: a candidate shares at least half of the reference title's distinct words (fewer cannot
    reach :data:`TITLE_RATIO` in practice, and comparing characters is what costs)."""
    return len(words & cand_words) * 2 >= len(words)


def ratio_at_least(key: str, cand: str, floor: float) -> float | None:
    """The SequenceMatcher ratio of the two keys when it is at least ``floor`` (cheap bounds first), else None."""
    sm = SequenceMatcher(None, key, cand, autojunk=False)
    if sm.real_quick_ratio() < floor or sm.quick_ratio() < floor:
        return None
    ratio = sm.ratio()
    return ratio if ratio >= floor else None


def _better(ratio: float, cand: str, best: str | None, best_ratio: float) -> bool:
    """Highest ratio wins; a tie goes to the smaller key, so the answer never depends on iteration order
    (the incremental graph relies on that: the same candidates give the same match, whatever else changed)."""
    return best is None or ratio > best_ratio or (ratio == best_ratio and cand < best)


def length_window(n: int) -> tuple[int, int]:
    """The lengths a key may have to reach :data:`TITLE_RATIO` against one of length ``n``: the ratio is at
    most ``2 * min / (n + m)`` (SequenceMatcher's ``real_quick_ratio``), so a title much shorter or longer never
    matches. One character of slack each way; the ratio itself is checked exactly afterwards."""
    return int(n * TITLE_RATIO / (2 - TITLE_RATIO)) - 1, int(n * (2 - TITLE_RATIO) / TITLE_RATIO) + 1


class TitleIndex:
    """Title keys (normalised titles) with an inverted index from words to keys, for fuzzy matching.

    Each word's postings are sorted by key length, so a query reads only the slice within its
    :func:`length_window`: the prefix filter bounds how many words are read, the window how much of each.
    """

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys: list[str] = sorted(dict.fromkeys(keys), key=len)  # by length: postings come out sorted too
        self._words = [frozenset(k.split()) for k in self.keys]
        self._postings: dict[str, list[int]] = {}
        for i, words in enumerate(self._words):
            for w in words:
                self._postings.setdefault(w, []).append(i)
        self._lengths = [len(k) for k in self.keys]

    def __len__(self) -> int:
        return len(self.keys)

    def candidates(self, key: str) -> list[int]:
        """Indexes of the keys that share one of ``key``'s rarest words: a superset of those passing :func:`passes`."""
        words = set(key.split())
        need = (len(words) + 1) // 2  # at least half, rounded up
        by_rarity = sorted(words, key=lambda w: (len(self._postings.get(w, ())), w))
        lo, hi = length_window(len(key))
        # keys are sorted by length, so postings (ascending key indexes) are too: the window is one slice
        first, last = bisect_left(self._lengths, lo), bisect_right(self._lengths, hi)
        found: set[int] = set()
        for w in by_rarity[: len(words) - need + 1]:
            postings = self._postings.get(w, ())
            found.update(postings[bisect_left(postings, first): bisect_left(postings, last)])
        return sorted(found)

    def matches(self, key: str) -> list[tuple[str, float]]:
        """Every key passing the word rule at :data:`TITLE_RATIO` or above, with its ratio."""
        words = frozenset(key.split())
        out = []
        for i in self.candidates(key):
            if passes(words, self._words[i]):
                ratio = ratio_at_least(key, self.keys[i], TITLE_RATIO)
                if ratio is not None:
                    out.append((self.keys[i], ratio))
        return out

    def best(self, key: str) -> str | None:
        """The closest key at :data:`TITLE_RATIO` or above (ties: the smaller key), reading only candidates."""
        return self._best(key, self.candidates(key))

    def best_all_pairs(self, key: str) -> str | None:
        """:meth:`best` by comparing ``key`` with every key: the oracle the blocking is checked against."""
        return self._best(key, range(len(self.keys)))

    def _best(self, key: str, indexes: Iterable[int]) -> str | None:
        words = frozenset(key.split())
        best, best_ratio = None, TITLE_RATIO
        for i in indexes:
            if not passes(words, self._words[i]):
                continue
            cand = self.keys[i]
            ratio = ratio_at_least(key, cand, best_ratio)
            if ratio is not None and _better(ratio, cand, best, best_ratio):
                best, best_ratio = cand, ratio
        return best


# -- parsed reference lists, kept by document --------------------------------------------------------------


def parse_key(doc: Document) -> str | None:
    """The cache key of ``doc``'s parsed reference list; None when it has no source hash to key on."""
    from dmlqa.extract.references import PARSER_VERSION

    if not doc.sha256:
        return None
    raw = json.dumps([PARSER_VERSION, doc.sha256, doc.title, doc.content_type, doc.is_card], ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


def _dump(parsed: ParsedReferences) -> str:
    return json.dumps({"references": [r.to_json() for r in parsed.references],
                       "contexts": {str(k): v for k, v in parsed.contexts.items()}, "skipped": parsed.skipped},
                      ensure_ascii=False)


def _load(text: str) -> ParsedReferences:
    from dmlqa.extract.references import ParsedReferences

    d = json.loads(text)
    return ParsedReferences(tuple(Reference.from_json(r) for r in d["references"]),
                            {int(k): v for k, v in d["contexts"].items()}, int(d["skipped"]))


class ReferenceCache:
    """``index/cache/references.sqlite``: parsed reference lists by :func:`parse_key`, shared by builds.

    A damaged or unreadable cache is only a slower build: it is logged and parsing goes on without it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._pending: dict[str, str] = {}
        self.hits = self.misses = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path))
            self._db.execute("CREATE TABLE IF NOT EXISTS refs (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            log.warning("reference cache %s cannot be used (%s): parsing every paper", path, exc)
            self._db = None

    def parse(self, doc: Document, parse: Callable[[Document], ParsedReferences]) -> ParsedReferences:
        """``parse(doc)``, or the result kept for the same key; a new result is kept at :meth:`close`."""
        key = parse_key(doc)
        if key is not None and self._db is not None:
            try:
                row = self._db.execute("SELECT value FROM refs WHERE key=?", (key,)).fetchone()
                if row is not None:
                    self.hits += 1
                    return _load(row[0])
            except (sqlite3.Error, ValueError, KeyError, TypeError) as exc:
                log.warning("reference cache entry of %s unreadable (%s): parsing again", doc.doc_id, exc)
        self.misses += 1
        parsed = parse(doc)
        if key is not None:
            self._pending[key] = _dump(parsed)
        return parsed

    def close(self) -> None:
        """Write the new entries (one transaction) and close."""
        if self._db is None:
            return
        try:
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO refs VALUES (?,?)", list(self._pending.items()))
        except sqlite3.Error as exc:
            log.warning("reference cache %s not updated (%s)", self.path, exc)
        finally:
            self._db.close()
            self._db = None
            self._pending.clear()


def parse_all(documents: Sequence[Document], parse: Callable[[Document], ParsedReferences],
              cache: Path | None) -> Iterable[tuple[Document, ParsedReferences | Exception]]:
    """Each PDF of ``documents`` with its parsed references (through the cache when given), or the exception."""
    store = ReferenceCache(cache) if cache is not None else None
    try:
        for d in documents:
            if d.is_card or d.content_type != "pdf":
                continue
            try:
                yield d, (store.parse(d, parse) if store is not None else parse(d))
            except Exception as exc:  # noqa: BLE001 - the parser promises not to raise; one paper never stops a build
                yield d, exc
    finally:
        if store is not None:
            store.close()
