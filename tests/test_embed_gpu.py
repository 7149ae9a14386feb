"""The GPU fast path of the torch encoder (issue 13), tested where CI runs it: on CPU.

The pipelined path (length-sorted batches tokenised ahead in threads, the model's own forward)
is the same code on CPU and CUDA but for pinned memory and fp16, so its vectors are checked here
against the reference, ``SentenceTransformer.encode(normalize_embeddings=True)``.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dmlqa.errors import EncoderError, SettingsError
from dmlqa.settings import BUNDLED_MODEL, load_settings

ROOT = Path(__file__).resolve().parents[1]

#: Very different lengths, out of length order: empty, one word, whitespace, accents and CJK, and one
#: far past the model's 256-token maximum (truncated, as the reference truncates it).
TEXTS = [
    "ZeRO partitions optimizer states, gradients and parameters across data-parallel ranks.",
    "",
    "Pipeline parallelism " * 400,
    "GPU",
    "  Ring all-reduce sends each gradient chunk around the ring twice.  ",
    "Ünïcödé straße, 東京 and émigré.",
    "Tensor parallelism splits each weight matrix across devices; " * 12,
    "The capital of France is Paris.",
    "Horovod wraps the optimizer and averages gradients with NCCL all-reduce after every step.",
    "a b c",
    "Megatron-LM interleaves pipeline stages to shrink the bubble. " * 5,
]


@pytest.fixture(scope="module")
def fast():  # noqa: ANN201
    from dmlqa.index.embed import TorchEncoder

    return TorchEncoder(BUNDLED_MODEL, device="cpu", pipelined=True)


def _reference(enc, texts: list[str]) -> np.ndarray:  # noqa: ANN001
    return np.asarray(enc._model.encode(texts, batch_size=32, normalize_embeddings=True), dtype=np.float32)


def test_bench_without_cuda_says_so_and_exits_0() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the benchmark would run")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "embed_gpu.py")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "no CUDA device: skipping the GPU benchmark" in done.stdout


def test_pipelined_length_sorted_vectors_equal_sentence_transformers(fast) -> None:  # noqa: ANN001
    assert fast._fast.tokenizer_kind == "rust"  # the GIL-free tokenizer copy reproduces preprocess()
    ref = _reference(fast, TEXTS)
    # batch_size 3: four batches through the thread pipeline, each padded to its own texts' length.
    got = fast.encode(TEXTS, batch_size=3)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * ref).sum(axis=1)
    assert cos.min() >= 0.9999, cos
    # Same order: every row is its own text's vector, not a neighbour's in the sorted order.
    assert (got @ ref.T).argmax(axis=1).tolist() == list(range(len(TEXTS)))
    assert fast.encode([], batch_size=3).shape == (0, 384)
    assert np.allclose(fast.encode([TEXTS[2]])[0], ref[2], atol=1e-4)  # one text: no thread hand-off


def test_preprocess_fallback_gives_the_same_vectors(fast) -> None:  # noqa: ANN001
    """A model whose tokenisation the Rust copy cannot reproduce is tokenised by preprocess() itself."""
    from dmlqa.index.embed_fast import PipelinedEncoder

    pipe = PipelinedEncoder(fast._model, "cpu", workers=2, prefetch=1)
    pipe._featurize = fast._model.preprocess
    cos = (pipe.encode(TEXTS, batch_size=2) * _reference(fast, TEXTS)).sum(axis=1)
    assert cos.min() >= 0.9999, cos
    pipe.close()


def test_concurrent_calls_do_not_mix(fast) -> None:  # noqa: ANN001
    ref = fast.encode(TEXTS, batch_size=4)
    with ThreadPoolExecutor(3) as pool:
        outs = list(pool.map(lambda k: fast.encode(TEXTS[k:] + TEXTS[:k], batch_size=4), range(3)))
    for k, out in enumerate(outs):
        assert np.allclose(out, np.roll(ref, -k, axis=0), atol=1e-5)


def test_bf16_on_cpu_stays_close_to_fp32(fast) -> None:  # noqa: ANN001
    # Measured here: cosine min 0.99989 / mean 0.99994 on these texts, min 0.99990 on 256 websnap
    # passages (bench/results/embed_gpu_cpu.json); fp16 (slow on CPU) 0.999998. The bar for
    # CUDA fp16 is 0.999; 0.99 leaves room for other CPUs' bf16 kernels.
    from dmlqa.index.embed import TorchEncoder

    bf16 = TorchEncoder(BUNDLED_MODEL, precision="bf16", device="cpu")
    assert bf16._fast is not None and bf16.precision == "bfloat16"  # reduced precision: the pipelined path
    got = bf16.encode(TEXTS, batch_size=4)
    assert got.dtype == np.float32 and np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * _reference(fast, TEXTS)).sum(axis=1)
    assert cos.min() >= 0.99, cos
    assert bf16.key == fast.key  # one vector family: a GPU-built index is queried on CPU


def test_cpu_default_is_unchanged() -> None:
    from dmlqa.index.embed import TorchEncoder, load_encoder

    enc = load_encoder(BUNDLED_MODEL, "torch", Path("unused"))
    assert isinstance(enc, TorchEncoder)
    if enc.device == "cpu":
        assert enc._fast is None and enc.precision == "float32" and enc.texts_per_call == 0
    with pytest.raises(EncoderError, match="unknown precision 'fp8'"):
        load_encoder(BUNDLED_MODEL, "torch", Path("unused"), precision="fp8")


def test_precision_setting(tmp_path: Path) -> None:
    assert load_settings(tmp_path, env={}).embed.precision == "auto"
    assert load_settings(tmp_path, env={"DMLQA_EMBED_PRECISION": "fp16"}).embed.precision == "fp16"
    assert load_settings(tmp_path, env={"DMLQA_PRECISION": "bf16"}).embed.precision == "bf16"
    (tmp_path / "dmlqa.toml").write_text('[embed]\nencoder = "torch"\nprecision = "fp32"\n')
    assert load_settings(tmp_path, env={}).embed.precision == "fp32"
    with pytest.raises(SettingsError, match="DMLQA_EMBED_PRECISION: expected one of auto, fp32, fp16, bf16"):
        load_settings(tmp_path, env={"DMLQA_EMBED_PRECISION": "half"})
    assert load_settings(tmp_path, env={}).with_overrides(precision="bf16").embed.precision == "bf16"


class _Fake:
    """An encoder that records its calls; vectors encode the text's number."""

    key, dim, max_tokens = "fake", 2, 8

    def __init__(self, texts_per_call: int) -> None:
        self.texts_per_call = texts_per_call
        self.calls: list[int] = []

    def encode(self, texts, *, batch_size: int = 32) -> np.ndarray:  # noqa: ANN001
        self.calls.append(len(texts))
        return np.array([[float(t), 1.0] for t in texts], dtype=np.float32)


def test_gpu_encoders_get_long_calls_and_the_cache_still_fills_per_batch() -> None:
    from dmlqa.index.embed import embed_groups, local_vectors

    texts = [str(i) for i in range(23)]
    groups = embed_groups(len(texts), 4, flush_every=8)
    for per_call, calls in ((0, [4, 4, 4, 4, 4, 3]), (10, [12, 11]), (100, [23])):
        enc = _Fake(per_call)
        out = list(local_vectors(enc, 4)(texts, groups))
        assert enc.calls == calls
        assert [g for g, _ in out] == groups  # still one yield per batch, in order
        assert all(v[:, 0].tolist() == [float(i) for i in g] for g, v in out)


def test_ray_gpu_actor_embeds_a_call_in_one_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import dmlqa.index.embed as embed
    from dmlqa.pipeline.ray_executor import EmbedActor

    seen: dict = {}

    def fake_load(model, encoder, cache_dir, *, precision="auto", device=None):  # noqa: ANN001, ANN202
        seen.update(precision=precision, device=device)
        return _Fake(8192)

    monkeypatch.setattr(embed, "load_encoder", fake_load)
    actor = EmbedActor("m", "torch", "unused", 4, device="cuda", precision="fp16")
    assert seen == {"precision": "fp16", "device": "cuda"}
    rows = {"g": np.array([0, 1]), "texts": np.array([json.dumps(["1", "2", "3"]), json.dumps(["4", "5"])])}
    out = actor(rows)
    assert actor.encoder.calls == [5]
    assert [np.frombuffer(b, dtype=np.float32).reshape(-1, 2)[:, 0].tolist() for b in out["vecs"]] == [
        [1.0, 2.0, 3.0], [4.0, 5.0]]
