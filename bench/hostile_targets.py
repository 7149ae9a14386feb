"""Benchmark: CPU seconds that long free-text targets and questions cost (issue 19, item 5).

    .venv/bin/python bench/hostile_targets.py [--home HOME] [--docs 300]

Without ``--home`` a home of ``--docs`` markdown notes (one title and a paragraph each) is built
offline in a temporary folder first (not counted). Then, through :class:`dmlqa.KnowledgeBase`, each
case is timed in CPU seconds of this process (user + system):

- ``cites`` / ``cited_by`` on 18 KB, 100 KB and 1 MB of text (target: ≤ 3 s at 100 KB; past
  ``MAX_TARGET_CHARS`` it is the one-line refusal);
- ``related`` on the same texts (past ``MAX_TEXT_CHARS`` refused) and on a text exactly at the limit;
- title matching alone (``resolve_title``) on a text at the limit, against every title of the index:
  the part that was quadratic.

Prints one line per case; timings vary with the machine's load.
"""

from __future__ import annotations

import argparse
import random
import resource
import tempfile
from collections.abc import Callable
from pathlib import Path

import dmlqa
from dmlqa.errors import DmlqaError
from dmlqa.query.limits import MAX_TARGET_CHARS, MAX_TEXT_CHARS
from dmlqa.query.related import resolve_title

WORDS = ("pipeline", "parallelism", "tensor", "gradient", "allreduce", "optimizer", "memory", "stage", "shard",
         "collective", "bandwidth", "activation", "checkpoint", "micro-batch", "zero", "offload", "ring")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def text_of(chars: int, rng: random.Random) -> str:
    words: list[str] = []
    size = 0
    while size <= chars:
        words.append(rng.choice(WORDS))
        size += len(words[-1]) + 1
    return " ".join(words)[:chars]


def make_home(root: Path, docs: int) -> Path:
    rng = random.Random(1)
    notes = root / "notes"
    notes.mkdir()
    for i in range(docs):
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))).title()
        (notes / f"n{i}.md").write_text(f"# {title} {i}\n\n{text_of(400, rng)}.\n", encoding="utf-8")
    kb = dmlqa.KnowledgeBase(root / "kb", create=True)
    kb.add([notes])
    kb.build(offline=True)
    return kb.home


def timed(what: str, call: Callable[[], object]) -> None:
    t0 = cpu_seconds()
    try:
        call()
        outcome = "answered"
    except DmlqaError as exc:
        outcome = f"error: {exc}"
    print(f"{what}: {cpu_seconds() - t0:.2f} CPU s; {outcome}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--docs", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or make_home(Path(tmp), args.docs)
        kb = dmlqa.KnowledgeBase(home)
        version = kb.pinned()._version_()  # loads the index and the encoder before anything is timed
        kb.related("warm up", 1)
        print(f"home {home}: {len(version.docs):,} documents")
        rng = random.Random(0)
        for chars in (18_000, 100_000, 1_000_000):
            text = text_of(chars, rng)
            timed(f"cites on {chars:,} characters", lambda text=text: kb.cites(text))
            timed(f"cited_by on {chars:,} characters", lambda text=text: kb.cited_by(text))
            timed(f"related on {chars:,} characters", lambda text=text: kb.related(text))
        at_limit = text_of(MAX_TEXT_CHARS, rng)
        timed(f"related on {MAX_TEXT_CHARS:,} characters (the limit)", lambda: kb.related(at_limit))
        timed(f"cites on {MAX_TARGET_CHARS:,} characters (the limit)",
              lambda: kb.cites(text_of(MAX_TARGET_CHARS, rng)))
        timed(f"title matching alone, {MAX_TEXT_CHARS:,} characters x {len(version.docs):,} titles",
              lambda: resolve_title(version, at_limit))


if __name__ == "__main__":
    main()
