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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dmlqa.index.versions import IndexVersion
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
