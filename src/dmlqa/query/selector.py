"""The learned sentence selector: a logistic regression over :data:`dmlqa.query.features.FEATURES`.

Its weights are fitted by ``bench/train_selector.py`` on the training questions of ``bench/train/``
(never on the validation set) and ship as ``selector.json`` beside this module: plain numbers, no
pickle, so a reader can see what the model weighs and a refit shows as a diff. Besides the weights
it carries what was chosen by cross-validation with it: the probability under which the best
sentence is too weak to answer (the answer is refused), the one a further sentence must reach to be
added after the best, the answer's word budget, how many sentences after the best come with it, how much
a further sentence's likeness to those already chosen counts against it, and the margin of nearness
under which the knowledge base is not about the question at all (:mod:`dmlqa.query.topic`).

It may also carry a *question adapter* for the embedder it was fitted with: a low-rank map the question's
vector takes before its cosine with each candidate is measured again (the ``adapted_*`` features). The
embedder was trained to find passages that *sound like* a question; fitted on the training questions'
evidence sentences, the map turns the question towards the sentences that *answer* one. On bench/train's
706 questions (cross-validated, the LR's adapted features cross-fitted), the best sentence answered for
0.49 of them without it and 0.53 with it. Another embedder gets no adapter: its vectors live in another space.

And it may carry a *tuned question encoder* (:mod:`dmlqa.query.tuning`): the embedder itself, its biases and
layer norms taught on the same pools, reading the question a second time (the ``tuned_*`` features).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dmlqa.errors import DmlqaError
from dmlqa.query.features import FEATURES
from dmlqa.query.tuning import QuestionTuning

if TYPE_CHECKING:
    from dmlqa.query.extractive import Pool
    from dmlqa.settings import Settings

MODEL_FILE = "selector.json"

log = logging.getLogger(__name__)


class SelectorModelError(DmlqaError, ValueError):
    """The selector's weights file is missing, unreadable or made for other features."""


@dataclass(frozen=True)
class Selector:
    """Standardise the features, weigh them, squash to a probability that the sentence answers."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    refuse_below: float  # best sentence's probability under which the answer is refused
    add_above: float  # a further sentence's probability must reach this to be added
    max_words: int = 90  # the answer's word budget (the best sentence's block is always kept)
    read_on: int = 0  # readable sentences after the best one that come with it
    #: the nearness (:func:`dmlqa.query.topic.nearness`) under which the question is refused as off-topic; made
    #: for the embedder the weights were fitted with (a cosine's scale is the model's own)
    off_topic_margin: float = -1.0
    #: the question adapter: ``q + u @ (v @ q)``, for vectors of the embedder named ``adapter_model`` (none: ``q``)
    adapter_u: np.ndarray | None = None
    adapter_v: np.ndarray | None = None
    adapter_model: str = ""
    #: how much a further sentence's likeness to those already chosen counts against it
    #: (:func:`dmlqa.query.quotes.choose`); 0: the answer takes the best-scored sentences as they come
    diversity: float = 0.0
    #: a further sentence is taken only from a document whose best sentence scores at least this share of the
    #: best sentence's (:func:`dmlqa.query.quotes.choose`); 0: from any document
    focus: float = 0.0
    #: the tuned question encoder's weights, for the embedder it names (none: the ``tuned_*`` features are the
    #: plain cosines)
    tuning: QuestionTuning | None = None

    @classmethod
    def from_json(cls, data: dict) -> Selector:
        try:
            names = tuple(data["features"])
            adapter = data.get("adapter")
            u, v = ((np.asarray(adapter["u"], np.float32), np.asarray(adapter["v"], np.float32)) if adapter
                    else (None, None))
            sel = cls(names, np.asarray(data["mean"], np.float64), np.asarray(data["scale"], np.float64),
                      np.asarray(data["coef"], np.float64), float(data["intercept"]),
                      refuse_below=float(data["refuse_below"]), add_above=float(data["add_above"]),
                      max_words=int(data["max_words"]), read_on=int(data["read_on"]),
                      off_topic_margin=float(data["off_topic_margin"]), adapter_u=u, adapter_v=v,
                      adapter_model=str(adapter["model"]) if adapter else "", diversity=float(data["diversity"]),
                      focus=float(data["focus"]),
                      tuning=QuestionTuning.from_json(data["tuning"]) if data.get("tuning") else None)
            if u is not None and (u.ndim != 2 or v.ndim != 2 or u.shape[::-1] != v.shape):
                raise ValueError(f"adapter shapes {u.shape} and {v.shape} do not make a map")
        except (KeyError, TypeError, ValueError) as exc:
            raise SelectorModelError(f"selector weights are malformed ({exc})") from None
        if names != FEATURES:
            raise SelectorModelError("selector weights were fitted on other features; rerun bench/train_selector.py")
        if not (len(sel.mean) == len(sel.scale) == len(sel.coef) == len(names)):
            raise SelectorModelError("selector weights do not match the number of features")
        return sel

    def to_json(self) -> dict:
        return {"features": list(self.features), "mean": _rounded(self.mean), "scale": _rounded(self.scale),
                "coef": _rounded(self.coef), "intercept": round(self.intercept, 6),
                "refuse_below": round(self.refuse_below, 4), "add_above": round(self.add_above, 4),
                "max_words": self.max_words, "read_on": self.read_on,
                "off_topic_margin": round(self.off_topic_margin, 4), "diversity": round(self.diversity, 4),
                "focus": round(self.focus, 4),
                **({"adapter": {"model": self.adapter_model, "u": [_rounded(r) for r in self.adapter_u],
                                "v": [_rounded(r) for r in self.adapter_v]}} if self.adapter_u is not None else {}),
                **({"tuning": self.tuning.to_json()} if self.tuning is not None else {})}

    def adapt(self, qvec: np.ndarray, model: str) -> np.ndarray:
        """The question's vector turned by the adapter (unit length), or as it is when the adapter was
        fitted for another embedder than ``model`` (an index's ``meta["model"]``) or there is none."""
        u, v = self.adapter_u, self.adapter_v
        if u is None or v is None or model != self.adapter_model or len(qvec) != u.shape[0]:
            return qvec
        return turn(qvec, u, v)

    def tuned_for(self, model: str) -> QuestionTuning | None:
        """The tuned question encoder's weights when they were tuned from ``model`` (an index's ``meta["model"]``)."""
        return self.tuning if self.tuning is not None and self.tuning.model == model else None

    def score_pool(self, pool: Pool, model: str, tuned: np.ndarray | None = None) -> np.ndarray:
        """The probability per candidate of ``pool`` that it states the answer, its adapted cosines measured
        first (with the question as it is when the adapter does not apply), and its cosines with ``tuned``, the
        question's vector by the tuned question encoder (None: the cosines as they are)."""
        turned = None if pool.qvec is None else self.adapt(pool.qvec, model)
        # no adapter for this embedder: the cosines as they are
        pool.adapt(None if turned is pool.qvec else turned, tuned if self.tuned_for(model) else None)
        return self.scores(pool.features)

    def scores(self, x: np.ndarray) -> np.ndarray:
        """The probability, per row of a feature matrix, that the sentence states the answer."""
        if not len(x):
            return np.zeros(0, np.float64)
        z = ((np.asarray(x, np.float64) - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def off_topic(self, nearness: float) -> bool:
        """Is the question off-topic: its nearness over the version's background
        (:func:`dmlqa.query.topic.nearness`) under the learned margin?"""
        return nearness < self.off_topic_margin


def turn(qvec: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``q + u @ (v @ q)`` at unit length (``q`` itself should that vanish)."""
    q = np.asarray(qvec, np.float32)
    turned = q + u @ (v @ q)
    norm = float(np.linalg.norm(turned))
    return turned / norm if norm > 0 else q


def _rounded(a: np.ndarray) -> list[float]:
    return [round(float(v), 6) for v in a]


@lru_cache(maxsize=1)
def default_selector() -> Selector:
    """The selector shipped with the package (read once)."""
    from dmlqa.query.shipped import shipped_json

    return Selector.from_json(shipped_json(MODEL_FILE, SelectorModelError, "selector weights"))


def prepare_question_encoder(settings: Settings) -> None:
    """The shipped selector's tuned question encoder (:mod:`dmlqa.query.tuning`) for the settings' model, written and
    exported once per encoder cache (seconds on 2 cores), so that the first question does not wait for it; a
    build does this. One that cannot be had is logged, and answers do without it."""
    from dmlqa.errors import EncoderError
    from dmlqa.query.tuning import TuningError, prepare

    tuning = default_selector().tuned_for(settings.embed.model)
    if tuning is None:
        return
    try:
        prepare(tuning, settings.embed.encoder, settings.encoders_dir)
    except (TuningError, EncoderError, OSError) as exc:
        log.warning("the tuned question encoder could not be prepared; answers do without it (%s)", exc)


def load_selector(path: Path) -> Selector:
    """A selector from a weights file (a refit under evaluation)."""
    try:
        return Selector.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError) as exc:
        raise SelectorModelError(f"cannot read the selector weights {path} ({exc})") from None
