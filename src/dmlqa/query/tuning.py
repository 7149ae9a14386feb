"""The selector's tuned question encoder: the embedder with its biases and layer norms taught to read questions.

The index's embedder was trained to put a question near passages that *sound like* it. Fitted on the training
questions' pools (``bench/question_tuning.py``, BitFit: only the 31,104 biases and layer-norm weights of
MiniLM's 22.7 M are tuned, and 30,720 of them move), a copy of it reads the question so that its cosine with the
stored sentence vectors favours the sentences that *answer* it. The candidates keep the vectors the index stores:
only the question is read twice, once by each encoder (~4-5 ms more an answer with the int8 ONNX encoder on 2
cores).

The selector ships the tuning as differences from the embedder's own weights (plain numbers in
``selector.json``, as the adapter is). To run, they are added to the installed model's weights, written once
as a model folder of its own under the encoder cache (``materialise``), and loaded as the index's own encoder
kind loads any model (ONNX int8, ONNX or torch), exported once like the index's encoder is.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from dmlqa.errors import DmlqaError
from dmlqa.index.embed import Encoder, load_encoder, model_dir, onnx_model

log = logging.getLogger(__name__)

WEIGHTS = "model.safetensors"


class TuningError(DmlqaError, ValueError):
    """The tuning does not fit the installed model (other parameter names or shapes), or cannot be written."""


@dataclass(frozen=True)
class QuestionTuning:
    """What the question encoder changes: per parameter of the embedder's transformer, tuned minus shipped."""

    model: str  # the embedder it was tuned from (an index's ``meta["model"]``); it applies to no other
    deltas: dict[str, np.ndarray] = field(repr=False)  # flat, in the order of the parameter's own numbers

    @property
    def size(self) -> int:
        return sum(int(d.size) for d in self.deltas.values())

    @cached_property
    def digest(self) -> str:
        """A short hash of the deltas: names the folder and the encoder they make (a refit gets new ones)."""
        h = hashlib.sha256(self.model.encode())
        for name in sorted(self.deltas):
            h.update(name.encode())
            h.update(np.ascontiguousarray(self.deltas[name], np.float32).tobytes())
        return h.hexdigest()[:12]

    @classmethod
    def from_json(cls, data: dict) -> QuestionTuning:
        deltas = {str(k): np.asarray(v, np.float32) for k, v in data["deltas"].items()}
        if not deltas or any(d.ndim != 1 for d in deltas.values()):
            raise ValueError("tuning deltas must be lists of numbers, one per tuned parameter")
        return cls(str(data["model"]), deltas)

    def to_json(self) -> dict:
        return {"model": self.model, "deltas": {k: [round(float(x), 6) for x in v] for k, v in self.deltas.items()}}


def materialise(tuning: QuestionTuning, base: Path, cache_dir: Path) -> Path:
    """The model folder of ``base`` (a sentence-transformers folder) with ``tuning``'s deltas added, written once
    under ``cache_dir`` and reused: its name holds the digest, so another tuning or a refit writes another.

    Written under a temporary name and renamed, so a crash mid-write never leaves a folder a later run trusts.
    """
    target = cache_dir / f"tuned-{tuning.digest}"
    if (target / WEIGHTS).is_file():
        return target
    from safetensors import safe_open
    from safetensors.numpy import save_file

    source = base / WEIGHTS
    if not source.is_file():
        raise TuningError(f"{base} has no {WEIGHTS}: the tuned question encoder needs the model's weights")
    with safe_open(str(source), "np") as f:
        weights = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - a safetensors handle, not a dict
        metadata = f.metadata() or {"format": "pt"}
    for name, delta in tuning.deltas.items():
        if name not in weights or weights[name].size != delta.size:
            found = "missing" if name not in weights else f"of {weights[name].size} numbers, not {delta.size}"
            raise TuningError(f"the tuning does not fit {base.name}: its parameter {name!r} is {found}")
        weights[name] = (weights[name] + delta.reshape(weights[name].shape)).astype(weights[name].dtype)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=cache_dir))
    try:
        for item in base.iterdir():  # the tokenizer, configs and pooling as they are; the weights tuned
            if item.name == WEIGHTS or item.suffix in (".bin", ".onnx") or item.name.startswith("."):
                continue
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, tmp / item.name)
        save_file(weights, str(tmp / WEIGHTS), metadata=metadata)
        try:
            os.replace(tmp, target)
        except OSError:  # another process wrote it first: theirs is the same
            if not (target / WEIGHTS).is_file():
                raise
    except OSError as exc:
        raise TuningError(f"cannot write the tuned question encoder under {cache_dir} ({exc})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def prepare(tuning: QuestionTuning, encoder: str, cache_dir: Path) -> Path:
    """Write the tuned question encoder's model folder and, for an ONNX ``encoder``, its export (~10 s on 2 cores,
    once per encoder cache), without loading it: a build does this so that the first answer does not wait."""
    folder = materialise(tuning, _base(tuning), cache_dir)
    if encoder in ("onnx-int8", "onnx"):
        onnx_model(str(folder), folder, cache_dir, quantize=encoder == "onnx-int8")
    return folder


def _base(tuning: QuestionTuning) -> Path:
    base = model_dir(tuning.model)
    if base is None:
        raise TuningError(f"the tuned question encoder needs {tuning.model!r} as a local model folder")
    return base


def question_encoder(tuning: QuestionTuning, encoder: str, cache_dir: Path) -> Encoder:
    """The tuned question encoder, of the ``encoder`` kind the index was built with (see
    :func:`dmlqa.index.embed.load_encoder`), its files under ``cache_dir``."""
    return load_encoder(str(materialise(tuning, _base(tuning), cache_dir)), encoder, cache_dir)
