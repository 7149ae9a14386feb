"""Fine-tune the question side of the bundled MiniLM on training pools (``encoder_features.py --tune``).

The question adapter (``question_adapter.py``) turns the question's finished vector by a low-rank map. This goes
further: the encoder itself reads the question differently, every weight (``full``) or only its biases and layer
norms (``bitfit``, ~0.15 % of them), while the candidates keep the vectors the index stores. The loss is the
adapter's: a softmax over each question's pool, the answering sentences' share maximised. A question costs one
short forward and backward pass, so a fit over ~900 questions takes minutes on 2 cores.

Why measure it: a five-times larger encoder moved the key term by +0.00-0.02 (``--model``); an encoder taught on
these very pools is the other way a better dense judge could be had offline.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
from question_adapter import TEMPERATURE  # beside this script (bench/ is on the path of the scripts using it)

EPOCHS = 3
LEARNING_RATE = {"full": 3e-5, "bitfit": 1e-3}
BATCH = 16


def load_bert(model_path: str):  # noqa: ANN201 - a transformers BertModel and its tokenizer
    """The transformer inside a sentence-transformers folder (MiniLM: mean pooling, then normalised)."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(model_path, device="cpu")
    return st[0].auto_model.eval(), st.tokenizer


def encode(bert, tokenizer, texts: Sequence[str]):  # noqa: ANN001, ANN201 - a torch tensor, with gradients if on
    """Normalised mean-pooled vectors, as sentence-transformers computes them for MiniLM."""
    import torch

    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=128, return_tensors="pt")
    out = bert(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((out * mask).sum(1) / mask.sum(1), dim=-1)


def tune(bert, tokenizer, texts: Sequence[str], vectors: Sequence[np.ndarray], labels: Sequence[np.ndarray], *,
         mode: str = "full", epochs: int = EPOCHS, seed: int = 0):  # noqa: ANN001, ANN201 - a BertModel
    """A copy of ``bert`` whose question vectors pick each pool's positives (questions without one are left out)."""
    import torch

    torch.manual_seed(seed)
    model = copy.deepcopy(bert)
    for name, p in model.named_parameters():
        p.requires_grad = mode == "full" or name.endswith("bias") or "LayerNorm" in name
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE[mode],
                            weight_decay=0.0)
    data = [(t, torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.bool))
            for t, x, y in zip(texts, vectors, labels, strict=True) if len(x) and y.any()]
    rng = np.random.default_rng(seed)
    model.train()
    with torch.enable_grad():
        for _ in range(epochs):
            order = rng.permutation(len(data))
            for start in range(0, len(order), BATCH):
                batch = [data[j] for j in order[start : start + BATCH]]
                q = encode(model, tokenizer, [b[0] for b in batch])
                loss = sum(torch.logsumexp(TEMPERATURE * (x @ q[k]), 0)
                           - torch.logsumexp(TEMPERATURE * (x[y] @ q[k]), 0) for k, (_, x, y) in enumerate(batch))
                opt.zero_grad()
                (loss / len(batch)).backward()
                opt.step()
    return model.eval()


def vectors_of(bert, tokenizer, texts: Sequence[str]) -> np.ndarray:  # noqa: ANN001
    import torch

    with torch.no_grad():
        return np.concatenate([encode(bert, tokenizer, texts[s : s + 64]).numpy()
                               for s in range(0, len(texts), 64)]).astype(np.float32)


def deltas(tuned, bert) -> dict[str, np.ndarray]:  # noqa: ANN001 - two BertModels
    """What tuning changed, per parameter (tuned minus ``bert``'s), for the parameters it moved: the numbers a
    selector ships (:class:`dmlqa.query.tuning.QuestionTuning`) and the product adds to the installed model's."""
    base = dict(bert.named_parameters())
    out = {}
    for name, p in tuned.named_parameters():
        d = (p.detach() - base[name].detach()).numpy().astype(np.float32)
        if np.any(d):
            out[name] = d.reshape(-1)
    return out
