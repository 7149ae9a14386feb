"""Fit the selector's question adapter (:meth:`dmlqa.query.selector.Selector.adapt`) on training questions.

The adapter is a low-rank map ``q + u @ (v @ q)`` of the question's vector, fitted so that, within each
question's candidate pool, the sentences labelled as answering it score highest by cosine with the mapped
question (a softmax over the pool, the positives' share maximised), with an L2 penalty on the map so it
stays near the identity. Used by ``bench/train_selector.py``; deterministic (a fixed seed, full batches).

Why low-rank and penalised: the full 384 x 384 map has 147,456 weights for ~560 training questions a fold;
rank 32 keeps 24,576 and a JSON file of ~0.5 MB that a refit shows as a diff.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dmlqa.query.selector import turn

RANK = 32
PENALTY = 0.1
STEPS = 100
TEMPERATURE = 20.0  # cosines are within ~0.3 of each other in a pool: the softmax needs them spread
LEARNING_RATE = 0.01


def fit_adapter(qvecs: Sequence[np.ndarray], vectors: Sequence[np.ndarray], labels: Sequence[np.ndarray], *,
                rank: int = RANK, penalty: float = PENALTY, steps: int = STEPS, seed: int = 0) -> tuple[np.ndarray,
                                                                                                 np.ndarray]:
    """``(u, v)`` of the map, fitted on the questions whose pools hold a positive."""
    import torch

    torch.manual_seed(seed)
    data = [(torch.as_tensor(q, dtype=torch.float32), torch.as_tensor(x, dtype=torch.float32),
             torch.as_tensor(y, dtype=torch.bool)) for q, x, y in zip(qvecs, vectors, labels, strict=True)
            if len(x) and y.any()]
    dim = len(qvecs[0])
    g = torch.Generator().manual_seed(seed)
    u = (0.01 * torch.randn(dim, rank, generator=g)).requires_grad_()
    v = (0.01 * torch.randn(rank, dim, generator=g)).requires_grad_()
    opt = torch.optim.Adam([u, v], lr=LEARNING_RATE)
    with torch.enable_grad():
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.zeros(())
            for q, x, y in data:
                turned = q + u @ (v @ q)
                s = TEMPERATURE * (x @ turned) / turned.norm()
                loss = loss + torch.logsumexp(s, 0) - torch.logsumexp(s[y], 0)
            loss = loss / max(len(data), 1) + penalty * ((u @ v) ** 2).sum()
            loss.backward()
            opt.step()
    return u.detach().numpy().astype(np.float32), v.detach().numpy().astype(np.float32)


def adapted_cosines(u: np.ndarray, v: np.ndarray, qvec: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The candidates' cosines with the mapped question, mapped as the answerer maps it."""
    return (np.asarray(vectors, np.float32) @ turn(qvec, u, v)).astype(np.float32)
