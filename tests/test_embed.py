"""The embed stage against the real bundled model (ONNX int8 and torch)."""

from pathlib import Path

import numpy as np
import pytest

from dmlqa.errors import EncoderError
from dmlqa.index.embed import EmbeddingCache, embed_texts, load_encoder, text_sha256
from dmlqa.settings import BUNDLED_MODEL

TEXTS = [
    "ZeRO partitions optimizer states, gradients and parameters across data-parallel ranks.",
    "Pipeline parallelism splits the layers into stages and fills the bubble with micro-batches.",
    "The capital of France is Paris.",
]


def test_vectors_are_normalised_and_meaningful(encoder) -> None:  # noqa: ANN001
    v = encoder.encode(TEXTS + ["How does ZeRO shard the optimizer state over GPUs?"])
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    sims = v[:3] @ v[3]
    assert int(np.argmax(sims)) == 0 and sims[0] > sims[2] + 0.2


def test_int8_onnx_matches_torch(encoder) -> None:  # noqa: ANN001
    torch_enc = load_encoder(BUNDLED_MODEL, "torch", Path("unused"))
    a, b = encoder.encode(TEXTS), torch_enc.encode(TEXTS)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.97, cos
    assert encoder.key != torch_enc.key  # vectors of the two must never be mixed in one index


def test_a_texts_vector_does_not_depend_on_its_batch_mates(encoder) -> None:  # noqa: ANN001
    # Dynamic int8 quantisation scales activations per session run: batched, a text's vector moved
    # with its batch mates (cosine ~0.995), and an index with the order texts were embedded in.
    texts = [t * (i + 1) for i, t in enumerate(TEXTS * 3)]
    together = encoder.encode(texts, batch_size=4)
    alone = np.vstack([encoder.encode([t]) for t in texts])
    shuffled = encoder.encode(texts[::-1], batch_size=7)[::-1]
    assert np.array_equal(together, alone) and np.array_equal(together, shuffled)


def test_cache_embeds_each_text_once(tmp_path: Path, encoder) -> None:  # noqa: ANN001
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    first = embed_texts(TEXTS + [TEXTS[0]], encoder, cache)
    assert (first.embedded, first.reused) == (3, 1)
    again = embed_texts(list(reversed(TEXTS)), encoder, cache)
    assert (again.embedded, again.reused) == (0, 3)
    assert np.allclose(again.vectors[::-1], first.vectors[:3])
    changed = embed_texts([TEXTS[0], "A new passage about tensor parallelism."], encoder, cache)
    assert (changed.embedded, changed.reused) == (1, 1)
    assert set(cache.get_many(encoder.key, [text_sha256(t) for t in TEXTS])) == {text_sha256(t) for t in TEXTS}
    cache.close()


def test_bad_configuration_is_explained(tmp_path: Path) -> None:
    with pytest.raises(EncoderError, match="unknown encoder"):
        load_encoder(BUNDLED_MODEL, "tensorrt", tmp_path)
    with pytest.raises(EncoderError, match="needs a local model folder"):
        load_encoder("some-org/some-model-not-here", "onnx-int8", tmp_path)
    empty = tmp_path / "model"
    empty.mkdir()
    with pytest.raises(EncoderError, match="tokenizer.json"):
        load_encoder(str(empty), "onnx-int8", tmp_path)


def test_cached_encoder_persists_vectors_across_restarts(tmp_path: Path, encoder) -> None:  # noqa: ANN001
    from dmlqa.index.embed import CachedEncoder

    class Counting:
        key, dim, max_tokens = encoder.key, encoder.dim, encoder.max_tokens

        def __init__(self) -> None:
            self.seen: list[str] = []

        def encode(self, texts, *, batch_size: int = 32):  # noqa: ANN001, ANN202
            self.seen.extend(texts)
            return encoder.encode(texts, batch_size=batch_size)

    first_inner = Counting()
    first = CachedEncoder(first_inner, store=EmbeddingCache(tmp_path / "e.sqlite"))
    v1 = first.encode(TEXTS)
    first.encode(["a user question"], persist=False)
    assert first_inner.seen == TEXTS + ["a user question"]
    # A new process: empty memory, same store. Stored sentences are not embedded again,
    # and the question that was not to be persisted is not in the store.
    second_inner = Counting()
    second = CachedEncoder(second_inner, store=EmbeddingCache(tmp_path / "e.sqlite"))
    assert np.allclose(second.encode(TEXTS), v1)
    assert second_inner.seen == []
    second.encode(["a user question"])
    assert second_inner.seen == ["a user question"]


def test_every_vector_source_gives_the_same_vectors_and_fills_the_cache(tmp_path: Path, encoder) -> None:  # noqa: ANN001
    """The one embed-and-cache loop: a source that answers its batches out of order (as a Ray actor
    pool does) gives the local vectors, in the local batches, and the cache is flushed as it goes."""
    from dmlqa.errors import DmlqaError
    from dmlqa.index.embed import embed_groups

    texts = [f"{t} ({i})" for i in range(7) for t in TEXTS]  # 21 distinct texts
    local = embed_texts(texts, encoder, None, batch_size=4, flush_every=8)
    seen_groups: list[list[int]] = []

    def backwards(pending, groups):  # noqa: ANN001, ANN202
        seen_groups.extend(groups)
        for group in reversed(groups):
            yield group, encoder.encode([pending[i] for i in group], batch_size=4)

    cache = EmbeddingCache(tmp_path / "e.sqlite")
    writes: list[int] = []
    put_many = cache.put_many
    cache.put_many = lambda key, items: (writes.append(len(items)), put_many(key, items))  # type: ignore[method-assign]
    remote = embed_texts(texts, encoder, cache, batch_size=4, flush_every=8, source=backwards)
    assert seen_groups == embed_groups(len(texts), 4, 8)  # batches never straddle a flush
    assert [len(g) for g in seen_groups] == [4, 4, 4, 4, 4, 1]
    assert np.array_equal(remote.vectors, local.vectors) and (remote.embedded, remote.reused) == (21, 0)
    assert sum(writes) == 21 and len(writes) >= 2  # written in parts, not once at the end
    assert embed_texts(texts, encoder, cache, batch_size=4).embedded == 0
    assert not issubclass(EncoderError, RuntimeError) and issubclass(EncoderError, DmlqaError)
    cache.close()
