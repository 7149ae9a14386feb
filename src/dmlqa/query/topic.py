"""Is the knowledge base about a question at all?

An off-topic question ("who won the world cup?") names nothing the name check
(:mod:`dmlqa.query.names`) could miss, and the selector still rates the sentences it meets: one that
shares a word ("AlexNet won the champion of the ImageNet competition") can score like an answer. What
tells it apart is how near the question its nearest sentences are: :func:`topic_cosine`.

How near is near depends on the corpus, not only on the question. In the snapshot's 15,500 sentences an
off-topic question always finds some at a cosine of 0.3-0.4; in a corpus of a few dozen it finds
none above 0.1, while an on-topic question there may meet only one or two sentences about it. So the
question's nearness is measured against the version's own :func:`background`: the median nearness of a
fixed set of everyday questions no corpus of this field is about (:data:`PROBES`). The margin over it
under which a question is refused is fitted on the training questions (``bench/train_selector.py``) and
ships with the selector's weights.

A question that names a work the index holds and shares words with a passage of it is about that work, however
far its vector: :func:`about_a_named_work` ("What does JetLag's generic app run after unpacking the input
archive?" against a README of terse items). Over the snapshot this answers the 3 answerable training questions
the cut refused, and refuses nothing less (bench/README.md, twenty-fifth round).

Nearness tells how much the corpus holds on a question, not what the question is about. A question of a
neighbouring field ("how do I resolve a merge conflict in git?", "how do I interpret a p-value?") shares words
and even phrases with the corpus ("code integration/resolve conflicts in code merging"), and sits as near as a
hard answerable one. What it is about is in its own vector: :class:`FieldCheck`, a logistic regression over the
question's vector fitted on the training questions (``bench/train_topic.py``), tells such questions from the
field's. It is made for the embedder it was fitted with, and it only speaks where nearness leaves room: a
question at least as near its sentences as the typical training question is never refused by it, so that a
corpus of another field still answers the questions it holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from dmlqa.catalog.urls import github_repo
from dmlqa.errors import DmlqaError
from dmlqa.index.lexical import tokenize
from dmlqa.index.versions import IndexVersion
from dmlqa.models import Hit
from dmlqa.query.pinned import per_version

#: How many of the best candidate cosines :func:`topic_cosine` averages (see there).
TOPIC_SENTENCES = 2

#: Everyday questions no corpus of distributed machine learning is about: the background a question's
#: nearness is measured against. None is a training question (bench/train/questions-5.jsonl holds others).
PROBES = (
    "Who scored the winning goal in the last football final?",
    "How long should I boil an egg for a soft yolk?",
    "What is the best time of year to visit Lisbon?",
    "How do I get red wine out of a carpet?",
    "Which actor played the lead in the most recent spy movie?",
    "Why do cats purr?",
    "How much should I tip at a restaurant in the United States?",
    "What are the symptoms of the common cold?",
    "How do I knit a scarf for beginners?",
    "When was the first moon landing?",
    "What is a good recipe for banana bread?",
    "How do I ask my landlord to fix the heating?",
    "What is the tallest waterfall in the world?",
    "How do I stop my bike chain from slipping?",
    "Which houseplants are easy to keep alive?",
    "How do I write a cover letter for a teaching job?",
)


def topic_cosine(cosines: np.ndarray | Sequence[float]) -> float:
    """How near a question its nearest sentences are: the mean cosine of its TOPIC_SENTENCES best
    candidates. One sentence may share a phrase with an off-topic question; a question the corpus is about
    meets more than one. Why two: on the training questions, refused at one false refusal, the best alone
    lets 0.21 of the off-topic questions the name check passes through, the best two 0.15, the best five
    0.10; but in a corpus of a few dozen sentences an on-topic question may meet only two, and the mean
    of five then sinks to the background (the test corpus's "which papers reduce pipeline bubbles?").
    """
    best = np.sort(np.asarray(cosines, np.float64))[-TOPIC_SENTENCES:]
    return float(best.mean()) if len(best) else 0.0


@per_version
def background(version: IndexVersion, cosines_of: Callable[[str], np.ndarray]) -> float:
    """The median :func:`topic_cosine` of :data:`PROBES` in ``version``; ``cosines_of(question)`` gives a
    question's candidate cosines as an answer gathers them (so that both are measured alike:
    :func:`dmlqa.query.answer.candidate_cosines`). Worked out on the version's first question, or by
    :func:`dmlqa.query.prewarm.prewarm`: 16 questions embedded and searched, ~0.4 s on the snapshot."""
    return float(np.median([topic_cosine(cosines_of(probe)) for probe in PROBES]))


def nearness(version: IndexVersion, cosines: np.ndarray, cosines_of: Callable[[str], np.ndarray]) -> float:
    """The question's :func:`topic_cosine` over the version's :func:`background`: the margin a learned cut
    reads (:meth:`dmlqa.query.selector.Selector.off_topic`)."""
    return topic_cosine(cosines) - background(version, cosines_of)


# -- the field a question is about ------------------------------------------------------------------------

#: The field check's weights, fitted by bench/train_topic.py and shipped beside this module.
FIELD_FILE = "topic.json"


class FieldCheckError(DmlqaError, ValueError):
    """The field check's weights file is missing, unreadable or malformed."""


@dataclass(frozen=True)
class FieldCheck:
    """How likely a question is about another field than the training questions': a logistic regression over
    the question's unit vector by the embedder named ``model``."""

    model: str  # the embedder the weights read vectors of (an index's ``meta["model"]``)
    coef: np.ndarray
    intercept: float
    above: float  # the probability above which a question is about another field
    guard: float  # a question at least this near (:func:`nearness`) is never refused by this check

    @classmethod
    def from_json(cls, data: dict) -> FieldCheck:
        try:
            check = cls(str(data["model"]), np.asarray(data["coef"], np.float64), float(data["intercept"]),
                        float(data["above"]), float(data["guard"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise FieldCheckError(f"field check weights are malformed ({exc})") from None
        if check.coef.ndim != 1 or not len(check.coef) or not 0.0 < check.above < 1.0:
            raise FieldCheckError("field check weights are malformed (a vector of weights and a probability cut)")
        return check

    def to_json(self) -> dict:
        return {"model": self.model, "above": round(self.above, 4), "guard": round(self.guard, 4),
                "intercept": round(self.intercept, 6), "coef": [round(float(v), 6) for v in self.coef]}

    def probability(self, qvec: np.ndarray) -> float:
        """The chance that the question whose vector is ``qvec`` is about another field."""
        z = float(np.asarray(qvec, np.float64) @ self.coef) + self.intercept
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def off_field(self, qvec: np.ndarray | None, model: str, near: float) -> bool:
        """Is the question about another field? Never for another embedder's vectors (they live in another
        space), nor for a question at least ``guard`` near its sentences."""
        if qvec is None or model != self.model or len(qvec) != len(self.coef) or near >= self.guard:
            return False
        return self.probability(qvec) > self.above


@per_version
def _works(version: IndexVersion) -> dict[str, frozenset[str]]:
    """Each name of :func:`work_names` → the ids of the documents going by it."""
    out: dict[str, set[str]] = {}
    for d in version.docs.values():
        first = (d.title or "").split(maxsplit=1)
        names = {first[0].strip(":,;.")} if first else set()
        names.update(repo.split("/")[1] for u in (d.url, d.source_url, *d.aliases) if (repo := github_repo(u or "")))
        for name in names:
            out.setdefault(name, set()).add(d.doc_id)
    return {name: frozenset(docs) for name, docs in out.items()}


def work_names(version: IndexVersion) -> frozenset[str]:
    """The names the index's works and projects go by: a title's first word as written ("ZeRO: Memory ..." is
    "ZeRO", "Ray Train: ..." is "Ray"), and a repository's name in its address, lower-cased ("megatron-lm"). Not
    every word of a title: "Phylanx provides a ... Python-based interface" names Phylanx, not Python. A title's
    plain first word ("Efficient ...") counts too: a question names it as a name only when it names the work."""
    return frozenset(_works(version))


def names_a_work(version: IndexVersion, question: str) -> bool:
    """Does the question name a work or project the index holds ("How do I cite the ZeRO paper?")? Then it is about
    the corpus's field whatever else it asks, and the field check does not refuse it."""
    from dmlqa.query.mentions import concepts
    from dmlqa.query.names import candidate_names

    names = work_names(version)
    # a name or its first word ("Ray Train", "DeepSpeed Ulysses"), as written or as a repository's
    return any(w in names or w.lower() in names
               for n in candidate_names(question, concepts(version)) for w in {n, n.split()[0]})


#: How many words besides its name a question must share with a retrieved passage of the work it names to be
#: taken as about that work (see :func:`about_a_named_work`).
NAMED_WORK_WORDS = 2
#: Words of asking and linking, which any question shares with any passage (stems as the lexical index has them).
_ASKING = frozenset(
    "what doe which who whom whose how why when where after befor can could should would will has have did are was "
    "were the and for with from into that this there their about onc".split())


def about_a_named_work(version: IndexVersion, question: str, hits: Sequence[Hit]) -> bool:
    """Does the question name a work the index holds, as the work goes by ("JetLag": a title's first word or a
    repository's name, :func:`work_names`; not a first word alone: "Ray Charles" does not name Ray), and share
    NAMED_WORK_WORDS more words with one of the ``hits`` from that work?

    Then no off-topic cut may refuse it: a project's terse README ("3. Has a generic app which ... 2. unpacks and
    executes run_dir/runapp.sh") sits as far from "What does JetLag's generic app run after unpacking the input
    archive?" as an everyday question sits from the corpus, while its name and words say what it is about. "Which
    recipe does GPipe's cookbook recommend for banana bread?" names a work too, but shares no word with it.
    """
    from dmlqa.query.mentions import concepts
    from dmlqa.query.names import candidate_names

    works = _works(version)
    named = [n for n in candidate_names(question, concepts(version)) if n in works or n.lower() in works]
    docs = {d for n in named for d in works.get(n, frozenset()) | works.get(n.lower(), frozenset())}
    if not docs:
        return False
    name_words = {t for n in named for t in tokenize(n)}
    words = {t for t in tokenize(question) if len(t) > 2 and t not in _ASKING} - name_words
    return any(h.doc_id in docs and len(words & set(tokenize(h.text))) >= NAMED_WORK_WORDS for h in hits)


def other_field(version: IndexVersion, question: str, qvec: np.ndarray | None, near: float) -> bool:
    """Is the question about another field than the corpus's? The shipped :class:`FieldCheck` says so of its
    vector, and it names no work the index holds (:func:`names_a_work`)."""
    return field_check().off_field(qvec, version.meta["model"], near) and not names_a_work(version, question)


@lru_cache(maxsize=1)
def field_check() -> FieldCheck:
    """The field check shipped with the package (read once)."""
    from dmlqa.query.shipped import shipped_json

    return FieldCheck.from_json(shipped_json(FIELD_FILE, FieldCheckError, "field check weights"))
