"""One record per work: copies of one paper or repository found under several catalog entries merge.

Lists name one work in many ways: ZeRO as ``arxiv.org/abs/1910.02054`` and as its ACM DOI page (whose
``citation_pdf_url`` leads to the same arXiv PDF); Horovod as ``uber/horovod`` and ``horovod/horovod``
(GitHub redirects the first to the second); a paper as its publisher PDF and as a raw GitHub copy of
the same bytes. Canonical URLs cannot see that — only what the fetch found can. :func:`merge_works`
groups documents that share any of these, strongest evidence first:

* an **identity**: a document's own id, or the id of the URL its text finally came from (the
  redirect target, the ``citation_pdf_url`` PDF, the repository a raw README belongs to);
* the **same bytes** (sha256 of the source);
* two **papers with the same normalised title** (long enough to be a title, not a name).

Each group becomes one document under one id (full text beats a card; the copy others point at
beats the one pointing; then arXiv > DOI > GitHub > web), with the lists, topics and aliases of all
copies; every merged-away copy is reported as a :class:`Duplicate` naming its survivor and why.
Pure: documents in, documents and duplicates out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from dmlqa.catalog.urls import canonicalize, resource_id, title_key
from dmlqa.models import Document

_ID_RANK = {"arxiv": 0, "doi": 1, "github": 2, "web": 3}
#: raw.githubusercontent.com/<owner>/<repo>/<ref>/README[.ext]: the repository's front page text.
_RAW_README = re.compile(r"^https?://raw\.githubusercontent\.com/([^/]+)/([^/]+)/[^/]+/readme(?:\.[a-z]+)?$",
                         re.IGNORECASE)


@dataclass(frozen=True)
class Duplicate:
    """A catalog entry whose document merged into another's: the same work under another name."""

    doc_id: str
    url: str  # the catalog entry's address as its list wrote it (see listed_address)
    of: str  # the doc id it merged into
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"doc_id": self.doc_id, "url": self.url, "of": self.of, "reason": self.reason}


def listed_address(doc: Document) -> str:
    """The address a list wrote for a document's catalog entry, to name the entry to a user.

    :func:`dmlqa.pipeline.stages.extract_one` gives a catalog document the aliases (identity, then the
    list's addresses as written); a catalog written before addresses were kept has only the identity,
    and that is then the address too. Not :attr:`Document.link`: a merged-away copy's text usually came
    from its survivor's address (the redirect target, the landing page's PDF).
    """
    return next((a for a in doc.aliases if a != doc.url), doc.url)


def work_id(url: str) -> str | None:
    """The catalog id a fetched URL stands for (a raw README stands for its repository), else None."""
    if not url or not url.startswith(("http://", "https://")):
        return None
    m = _RAW_README.match(url.split("?", 1)[0])
    if m:
        return f"github:{m.group(1).lower()}/{m.group(2).lower()}"
    try:
        return resource_id(canonicalize(url))
    except ValueError:
        return None


class _Groups:
    """Union-find over document positions, remembering the first reason two were joined."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.reason: dict[int, str] = {}

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int, why_a: str, why_b: str) -> None:
        """Join the groups of ``a`` and ``b``; ``why_a`` says why ``a`` is a copy of ``b``, and vice versa."""
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
            self.reason.setdefault(a, why_a)
            self.reason.setdefault(b, why_b)


def _rank(doc: Document, pointed_at: set[str]) -> tuple:
    kind = doc.doc_id.split(":", 1)[0]
    return (doc.is_card, doc.doc_id not in pointed_at, _ID_RANK.get(kind, 4), -len(doc.lists), doc.doc_id)


def _union(*parts: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(x for p in parts for x in p if x))


def _merge(primary: Document, others: Sequence[Document]) -> Document:
    members = [primary, *others]
    authors = max((d.authors for d in members), key=len)
    return replace(
        primary,
        authors=authors,
        venue=primary.venue or next((d.venue for d in others if d.venue), None),
        year=primary.year or next((d.year for d in others if d.year), None),
        topics=_union(*(d.topics for d in members)),
        lists=_union(*(d.lists for d in members)),
        aliases=_union(*((d.url, *d.aliases) for d in members)),
    )


def merge_works(docs: Sequence[Document]) -> tuple[list[Document], list[Duplicate]]:
    """Merge documents that are copies of one work; return the survivors (input order) and the duplicates."""
    n = len(docs)
    groups = _Groups(n)
    by_id = {d.doc_id: i for i, d in enumerate(docs)}
    pointed_at: set[str] = set()

    for i, d in enumerate(docs):
        target = work_id(d.source_url) if not d.is_card else None
        if target and target != d.doc_id and target in by_id:
            pointed_at.add(target)
            groups.join(by_id[target], i, f"{listed_address(d)} leads to it", f"its text comes from {d.link}")
    first_sha: dict[str, int] = {}
    for i, d in enumerate(docs):
        if d.is_card or not d.sha256:
            continue
        if d.sha256 in first_sha:
            j = first_sha[d.sha256]
            groups.join(j, i, f"byte-identical to {d.link}", f"byte-identical to {docs[j].link}")
        else:
            first_sha[d.sha256] = i
    first_title: dict[str, int] = {}
    for i, d in enumerate(docs):
        key = title_key(d.title) if d.kind == "paper" else None
        if key is None:
            continue
        if key in first_title:
            j = first_title[key]
            groups.join(j, i, f"same title as {d.link}", f"same title as {docs[j].link}")
        else:
            first_title[key] = i

    members: dict[int, list[int]] = {}
    for i in range(n):
        members.setdefault(groups.find(i), []).append(i)
    survivors: dict[int, Document] = {}
    duplicates: list[Duplicate] = []
    for idx in members.values():
        if len(idx) == 1:
            survivors[idx[0]] = docs[idx[0]]
            continue
        best = min(idx, key=lambda i: _rank(docs[i], pointed_at))
        others = [docs[i] for i in idx if i != best]
        survivors[best] = _merge(docs[best], others)
        for i in idx:
            if i != best:
                why = groups.reason.get(i) or f"same work as {docs[best].link}"
                duplicates.append(Duplicate(docs[i].doc_id, listed_address(docs[i]), docs[best].doc_id, why))
    return [survivors[i] for i in sorted(survivors)], sorted(duplicates, key=lambda x: x.doc_id)
