"""CPU seconds of the citation graph stage by collection size: before (every title a fuzzy candidate), with the
blocking index, and incrementally (no change; 1 % of the papers changed).

Papers and references are generated: titles of 4-12 words drawn from a Zipf-distributed vocabulary (a few words
in nearly every title, as "learning" and "distributed" are in this field), 40 references per paper, a quarter of
them naming a knowledge-base paper (half of those mangled as PDFs mangle titles), the rest outside works shared
among papers. Parsing is not measured (a stand-in returns the generated lists; parsed lists are cached anyway).
Links are checked equal across the methods at every size.

    .venv/bin/python bench/graph_scale.py --papers 250 1000 5000 20000 --before-up-to 1000
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from pathlib import Path

from dmlqa.index.citation_table import CitationRecord
from dmlqa.models import Block, Document, Reference
from dmlqa.pipeline.graph import PreviousGraph, citation_graph
from dmlqa.pipeline.graph_index import TITLE_RATIO, TitleIndex, passes

REFS_PER_PAPER = 40


@dataclass(frozen=True)
class Parsed:
    references: tuple[Reference, ...] = ()
    contexts: dict[int, str] = field(default_factory=dict)
    skipped: int = 0


def legacy_best(self: TitleIndex, key: str) -> str | None:
    """The fuzzy match as it was before issue 20: every title sharing any word of ``key`` is a candidate."""
    words = frozenset(key.split())
    postings = self._postings  # noqa: SLF001 - the bench replays the old candidate generation on the same data
    cands = {i for w in words for i in postings.get(w, ())}
    best, best_ratio = None, TITLE_RATIO
    for i in sorted(cands):
        if not passes(words, self._words[i]):  # noqa: SLF001
            continue
        sm = SequenceMatcher(None, key, self.keys[i], autojunk=False)
        if sm.real_quick_ratio() < best_ratio or sm.quick_ratio() < best_ratio:
            continue
        ratio = sm.ratio()
        if ratio >= best_ratio and (best is None or ratio > best_ratio or self.keys[i] < best):
            best, best_ratio = self.keys[i], ratio
    return best


class Corpus:
    def __init__(self, papers: int, seed: int = 20) -> None:
        self.rng = rng = random.Random(seed)
        vocab = [f"w{i}" if i > 60 else w for i, w in enumerate(_COMMON * 2)] + [f"term{i}" for i in range(6000)]
        weights = [1 / (r + 1) ** 1.05 for r in range(len(vocab))]
        self.vocab, self.weights = vocab, weights
        self.titles = [self.title() for _ in range(papers)]
        self.outside = [self.title() for _ in range(papers * 12)]
        self.docs = [Document(doc_id=f"web:p{i}", url=f"https://example.org/p{i}", title=t, blocks=(Block(text=t),),
                              content_type="pdf", kind="paper", year=rng.choice([2018, 2020, 2022]), sha256=f"{i}")
                     for i, t in enumerate(self.titles)]
        self.refs = {d.sha256: self.references() for d in self.docs}

    def title(self) -> str:
        return " ".join(self.rng.choices(self.vocab, self.weights, k=self.rng.randint(4, 12)))

    def references(self) -> tuple[Reference, ...]:
        rng, out = self.rng, []
        for n in range(1, REFS_PER_PAPER + 1):
            if rng.random() < 0.25:
                t = rng.choice(self.titles)
                if rng.random() < 0.5:
                    i = rng.randrange(len(t))
                    t = t[:i] + t[i + 1:]
            else:
                t = self.outside[min(int(rng.paretovariate(1.2)) - 1, len(self.outside) - 1) if rng.random() < 0.3
                                 else rng.randrange(len(self.outside))]
            out.append(Reference(raw=f"[{n}] {t}", ordinal=n, title=t, year=rng.choice([None, 2019, 2021])))
        return tuple(out)

    def parse(self, d: Document) -> Parsed:
        return Parsed(self.refs[d.sha256])

    def change(self, share: float) -> list[Document]:
        docs = list(self.docs)
        for i in self.rng.sample(range(len(docs)), max(1, int(len(docs) * share))):
            sha = f"{i}-changed"
            self.refs[sha] = self.references()
            docs[i] = replace(docs[i], sha256=sha, title=self.title())
        return docs


_COMMON = ("learning distributed training deep for of the with parallel models large scale a and neural networks "
           "in on efficient systems data model via gpu memory communication optimization").split()


def cpu(fn):  # noqa: ANN001, ANN201
    start = time.process_time()
    out = fn()
    return out, round(time.process_time() - start, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--papers", type=int, nargs="+", default=[250, 1000, 5000, 20000])
    ap.add_argument("--before-up-to", type=int, default=1000, help="measure the old fuzzy matching up to this size")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "graph_scale.json")
    args = ap.parse_args()
    rows = []
    for n in args.papers:
        corpus = Corpus(n)
        full, full_s = cpu(lambda: citation_graph(corpus.docs, parse=corpus.parse))  # noqa: B023
        row = {"papers": n, "references": full.references, "resolved": full.resolved,
               "fuzzy": full.by_how.get("fuzzy", 0), "blocked_cpu_s": full_s}
        if n <= args.before_up_to:
            blocked = TitleIndex.best
            TitleIndex.best = legacy_best
            try:
                before, row["before_cpu_s"] = cpu(lambda: citation_graph(corpus.docs, parse=corpus.parse))  # noqa: B023
            finally:
                TitleIndex.best = blocked
            assert before == full, "the blocking index changed a link"
        records = [CitationRecord(link, work) for link, work in full.rows()]
        previous = PreviousGraph(corpus.docs, records)
        same, row["no_change_cpu_s"] = cpu(lambda: citation_graph(corpus.docs, parse=corpus.parse,  # noqa: B023
                                                                  previous=previous))  # noqa: B023
        assert same == full
        changed = corpus.change(0.01)
        inc, row["one_percent_cpu_s"] = cpu(lambda: citation_graph(changed, parse=corpus.parse,  # noqa: B023
                                                                    previous=previous))  # noqa: B023
        assert inc == citation_graph(changed, parse=corpus.parse), "the incremental graph differs from a full one"
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({"rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
