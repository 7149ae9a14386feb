"""Refusal by name (dmlqa.query.names): a question naming something no document mentions is refused,
naming it, with the nearest spelling the index holds; names the index does hold never cause a refusal.

The index is built here from passages written in the test (the name check reads only the BM25
vocabulary, postings and passage texts, so the vectors are random); the front-end tests use the
shared fixture corpus with the real encoder and an LLM that must not be asked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fake_openai import FakeOpenAI, Reply
from test_index_search import build_index

from dmlqa.index.versions import IndexVersion, publish, write_version
from dmlqa.models import Block, Chunk, Document
from dmlqa.query.answer import NOT_ENGLISH, Asker
from dmlqa.query.llm import LLMBackend, LLMConfig
from dmlqa.query.mentions import headings, phrase
from dmlqa.query.names import candidate_names, name_refusal, not_english, unknown_names
from dmlqa.query.search import Searcher
from dmlqa.settings import load_settings

PASSAGES = {
    "https://arxiv.org/abs/1909.08053": (
        "Megatron-LM: Training Multi-Billion Parameter Language Models Using Model Parallelism", [
            "Megatron-LM splits each transformer layer across GPUs with tensor parallelism.",
            "We trained Megatron-Turing NLG 530B on 420 servers; the 175-billion-parameter GPT-3 is smaller.",
            "We train the model with PyTorch Lightning on a cluster whose fabric is InfiniBand.",
        ]),
    "https://arxiv.org/abs/2309.14509": (
        "DeepSpeed Ulysses: System Optimizations for Extreme Long Sequence Transformer Models", [
            "DeepSpeed-Ulysses partitions the sequence dimension across GPUs and uses all-to-all communication.",
            "ZeRO-3 shards the parameters; ZeRO-1 shards only the optimizer states.",
        ]),
    "https://colossalai.org/docs/features/plugins": ("Booster Plugins | Colossal-AI", [
        "Colossal-AI offers a Torch FSDP plugin and a Gemini plugin for large models.",
        "The HybridParallelPlugin combines tensor, pipeline and data parallelism.",
    ]),
    "https://docs.vllm.ai/en/latest": ("vLLM documentation", [
        "vLLM serves models with PagedAttention and continuous batching.",
        "You can fine-tune the model first, then serve it.",
    ]),
    "https://github.com/flexflow/FlexFlow": ("FlexFlow", [
        "FlexFlow searches parallelization strategies for deep neural networks.",
    ]),
    "https://docs.ray.io/en/latest/cluster": ("Ray Clusters Overview", [
        "Ray runs on a cluster of machines; a head node schedules tasks onto worker nodes.",
    ]),
    "https://github.com/exo-explore/exo": ("exo", [
        "To enable RDMA on macOS, hold the power button, select Options to enter Recovery mode and open the "
        "Terminal.",
    ]),
    # an organisation named only in the address, closed up: "Grid Labs" is github.com/gridlabs
    "https://github.com/gridlabs/k8s-train": ("k8s-train", [
        "Helm charts and Kubernetes templates for multi-node training jobs.",
    ]),
    "https://example.org/shared-clusters": ("Shared clusters", [
        "Many labs share one grid of GPU machines.",
    ]),
    "https://pytorch.org/docs/ddp": ("Distributed Data Parallel", [
        "As of v1.5, PyTorch buckets gradients in DDP; the PyTorch v1.5 design notes explain why.",
        "Ray integrates with Dask and Modin for data processing.",
        "Run horovodrun with Intel(R) MPI and pass MCA parameters.",
    ]),
    # two names by their shape that one document holds in different passages
    "https://d2l.ai/multiple-gpus": ("Training on Multiple GPUs", [
        "We train LeNet on two GPUs with the batch size unchanged.",
        "The test accuracy on Fashion-MNIST stays roughly the same.",
    ]),
    "https://papers.nips.cc/paper/4687": ("Large Scale Distributed Deep Networks", [
        "Jeffrey Dean, Greg Corrado and Rajat Monga describe Downpour SGD and Sandblaster L-BFGS.",
    ]),
}


def _index(home: Path) -> IndexVersion:
    docs, chunks = [], []
    for n, (url, (title, passages)) in enumerate(PASSAGES.items()):
        doc_id = f"web:{n}"
        blocks = tuple(Block(text=p) for p in passages)
        docs.append(Document(doc_id=doc_id, url=url, title=title, blocks=blocks, kind="docs", content_type="html"))
        offset = 0
        for i, b in enumerate(blocks):
            chunks.append(Chunk(chunk_id=f"{doc_id}#{i}", doc_id=doc_id, url=url, title=title, text=b.text, page=None,
                                section=None, start=offset, end=offset + len(b.text)))
            offset += len(b.text) + 2
    vectors = np.random.default_rng(0).normal(size=(len(chunks), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    name = write_version(home / "index", docs, chunks, vectors, {"model": "bundled:all-MiniLM-L6-v2", "failed": []},
                         ann_threshold=1000)
    publish(home / "index", name)
    return IndexVersion(home / "index" / "versions" / name)


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> IndexVersion:
    v = _index(tmp_path_factory.mktemp("names"))
    yield v
    v.close()


def names(version: IndexVersion, question: str) -> list[str]:
    return [u.name for u in unknown_names(version, question)]


#: Words a real index holds in many passages (what :func:`dmlqa.query.names.concepts` tells): the
#: field's vocabulary, rare in general English.
FIELD = frozenset({"parallelism", "strategies", "shards", "shard", "checkpointing"})


# -- which words are names ------------------------------------------------------------------------------


@pytest.mark.parametrize(("question", "expected"), [
    ("How do I launch a job with Lightning Fabric on Vertex AI?", ["Lightning Fabric", "Vertex AI"]),
    ("which parallelism strategies does nanotron support?", ["nanotron"]),
    ("Can fairseq2 or zero++ or colossal-ai shard a model?", ["fairseq2", "zero++", "colossal-ai"]),
    ("How much does 2-bit Adam save?", ["2-bit Adam"]),
    ('What is "mooncake store" for?', ["mooncake store"]),
    # ordinary words are no names, even those general English ranks rare: short acronyms, quantities, the
    # capitalised first word, a compound with a particle, regular forms of common words
    ("Is there a walkthrough of how FSDP shards 175B models over x16 links, and can I rerun it?", ["FSDP"]),
    ("Does BF16 or FP8 on a GPU need loss scaling?", []),
    # four capitals name a thing (checked against the index); acronyms side by side are each their own
    ("How does TACCL build algorithms for a GPU topology?", ["TACCL"]),
    ("With Horovod built for NCCL GPU operations, what does AdaSum reduce?", ["Horovod", "NCCL", "GPU", "AdaSum"]),
    ("Which algorithms came with NCCL 3.0?", ["NCCL 3.0"]),
    # capitals and digits in turn are a code name, one run of digits an abbreviation
    ("Does a 2F2B schedule beat 1F1B on H100 GPUs in FP16?", ["2F2B", "1F1B"]),
    # a module path is a name, an abbreviation with dots is not
    ("How do I call torch.distributed.pipelining, e.g. on two stages?", ["torch.distributed.pipelining"]),
    ("Does it work on 8 GPUs?", []),
    # plain English the model's vocabulary keeps only in pieces (the dictionary knows them): no names
    ("How lopsided does the workload get after quadrupling the experts?", []),
    ("Which flavour of sequence parallelism do swarms of small devices carve memory into?", []),
    # British spellings fold to the American ones the dictionary holds
    ("Which operators need that kind of neighbour exchange, and is it labelled or optimised?", []),
    # a hyperparameter's symbol spelt out is no name, a versioned project is
    ("Which Adam beta2 and epsilon does fairseq2 use?", ["Adam", "fairseq2"]),
    # a release after a name is part of it; a count of things is not
    ("What's new for elastic training in Horovod 1.0?", ["Horovod 1.0"]),
    ("What did Megatron-LM v5 add, and how does DeepSpeed-Ulysses 2 change the all-to-all?",
     ["Megatron-LM v5", "DeepSpeed-Ulysses 2"]),
    ("Can Ray 2 nodes train it, and does Horovod 3 workers scale?", ["Ray", "Horovod"]),
    # a lower-case project's release is a name, as a capitalised one's is; a dictionary word before a number is a
    # part of a document or a count, and a lone digit no release
    ("What came with exo 2.0 and horovod v0.28?", ["exo 2.0", "horovod v0.28"]),
    ("What does lemma 3.2 say about stage 2 of Horovod?", ["Horovod"]),
    # a quantity written as one compound word describes what follows, it is no part of its name
    ("Which 17-billion-parameter Microsoft model used 2-bit Adam?", ["Microsoft", "2-bit Adam"]),
    # a model's size after its name is part of it, as a release is; alone it is a quantity
    ("How was Megatron-Turing NLG 1T split, and what fits in 175B?", ["Megatron-Turing NLG 1T"]),
    # a rare English word written capitalised mid-sentence may still name something ("Spotty Docker")
    ("How do I run my scripts inside the Spotty Docker container?", ["Spotty Docker"]),
    # so does a rare lower-case one in a tool's place, but not a word made from another, nor one mid-phrase
    ("How do I split a model into stages with pippy?", ["pippy"]),
    ("Can I launch it with enroot and pyxis on Slurm?", ["enroot", "pyxis", "Slurm"]),
    ("How does it deal with stragglers, and does it work with axolotl tanks?", []),
])
def test_candidate_names(question: str, expected: list[str]) -> None:
    assert candidate_names(question, FIELD.__contains__) == expected


def test_a_word_common_in_the_index_is_a_concept_not_a_name() -> None:
    """"allreduce" is in no dictionary but the field's vocabulary: only the index can tell."""
    question = "How does Megatron-LM allreduce work?"
    assert candidate_names(question) == ["Megatron-LM", "allreduce"]
    assert candidate_names(question, lambda w: w == "allreduce") == ["Megatron-LM"]


@pytest.mark.parametrize("word", ["homepage", "codebase", "dataflow", "checkpointing"])
def test_two_frequent_words_written_as_one_are_english_but_a_rarer_part_makes_a_name(word: str) -> None:
    assert candidate_names(f"Where is the {word} of Megatron-LM?") == ["Megatron-LM"]
    for name in ("hivemind", "torchtitan", "skypilot"):  # "hive", "titan" are rarer; "sky" is too short a part
        assert candidate_names(f"Where is the {name} of Megatron-LM?") == [name, "Megatron-LM"]


# -- mentioned or not ---------------------------------------------------------------------------------
# (the ordinary words of these questions are common English or occur in the passages)


@pytest.mark.parametrize("question", [
    "How does Megatron-LM use tensor parallelism?",
    "Can I train Megatron-LM with PyTorch Lightning over InfiniBand?",  # every capitalised word is known
    "Does the Colossal-AI Torch FSDP plugin shard large models?",  # a name, then a phrase that occurs
    "does vllm use pagedattention?",  # lower case, as users type
    "how does deepspeed-ulysses split the sequence?",
    "What does ZeRO-3 shard compared with ZeRO-1?",
    "Is Megatron-style tensor parallelism used in FlexFlow?",  # a name with an English word hyphenated on
    "Can a non-FlexFlow model use Megatron-LM?",  # an English prefix hyphened onto a name
    # a release the index writes beside the name ("PyTorch v1.5" for "PyTorch DDP v1.5")
    "What bucketing order does PyTorch DDP v1.5 use?",
    "Does Intel MPI pass MCA parameters through horovodrun?",  # the passage writes "Intel(R) MPI"
    "How do the Ray head node and its workers split tasks?",
    # names joined by a small word into one compound ("Dask-on-Ray") are each mentioned
    "Can I run Dask-on-Ray for the data processing?",
    # a size the index gives the model, after its name or, spelt out, before it
    "How many servers trained Megatron-Turing NLG 530B?",
    "Is GPT-3 175B smaller than Megatron-Turing NLG?",
    # a common word the passage writes as a name ("enter Recovery mode"), beside a name it holds
    "What command enables RDMA from macOS Recovery mode?",
    # "Grid Labs" is the address of the repository whose text says "Kubernetes"
    "Who maintains the Grid Labs Kubernetes templates?",
    # two names side by side, each a name by its shape, that one document holds apart: no product "LeNet Fashion-MNIST"
    "Why was there no speedup in d2l's LeNet Fashion-MNIST experiment?",
])
def test_names_the_index_holds_are_not_refused(version: IndexVersion, question: str) -> None:
    assert names(version, question) == []


@pytest.mark.parametrize(("question", "missing"), [
    ("How does torchtitan split layers?", "torchtitan"),  # lower case, in no text
    ("Can hivemind run a model over the internet?", "hivemind"),  # lower case, in no text, in no dictionary
    ("How do I use Lightning Fabric?", "Lightning Fabric"),  # both words occur, never together
    ("How does FlexFlow Serve batch requests?", "FlexFlow Serve"),  # "serve" occurs, apart from FlexFlow
    ("Can Ray Tune search the space of learning rates?", "Ray Tune"),  # "tune" occurs (fine-tune), "Ray Tune" never
    ("What did Jeff Dean describe?", "Jeff Dean"),
    ("What does ZeRO-5 add?", "ZeRO-5"),  # both tokens occur ("zero", "5"), the name never
    ("How fast is zero++?", "zero++"),
    # "Grid Labs" names a repository, but FlexFlow is in another document's text, never in its own
    ("Who maintains the Grid Labs FlexFlow templates?", "Grid Labs FlexFlow"),
    ('How is "Mooncake Store" deployed?', "Mooncake Store"),
    # a release no document writes beside the name, though both occur
    ("What changed in PyTorch DDP v2.3?", "PyTorch DDP v2.3"),
    ("What's new in Megatron-LM 1.0?", "Megatron-LM 1.0"),
    # a size no document gives the model, though both occur ("Megatron-Turing NLG 530B" is the one it writes)
    ("How was Megatron-Turing NLG 1T trained?", "Megatron-Turing NLG 1T"),
    # a compound of names joined by a small word holds one no document mentions
    ("Can I run Dask-on-Hivemind for the data processing?", "Dask-on-Hivemind"),
    # "dask" occurs and "ml" is an abbreviation, not English hyphenated on: "dask-ml" is a name of its own
    ("Can dask-ml process the data on Ray?", "dask-ml"),
    # "vllm" occurs and "foundry" is English, but a lower-case head makes a package's name, not "Megatron-style"
    ("Can vllm-foundry train on Ray?", "vllm-foundry"),
    # names by their shape that no one document holds together
    ("How does the LeNet FlexFlow port scale?", "LeNet FlexFlow"),
    ("How does TACCL synthesize collectives?", "TACCL"),  # four capitals: a name
    ("Can I fine-tune a model on Ray with axolotl?", "axolotl"),  # rare English where the tool is named
    ("What does the 2F2B schedule change?", "2F2B"),  # capitals and digits in turn: a name
    ("What does torch.distributed.pipelining split?", "torch.distributed.pipelining"),  # a module path
    # "multi-" before a word the index knows is English ("multi-Megatron"); capitalised, it is part of a name
    ("How do I share GPUs with Multi-Cluster GPU slices?", "Multi-Cluster GPU"),
])
def test_names_no_document_mentions_are_refused(version: IndexVersion, question: str, missing: str) -> None:
    assert names(version, question) == [missing]


@pytest.mark.parametrize(("question", "missing", "near"), [
    ("How does Megatron-LN split layers?", "Megatron-LN", "Megatron-LM"),
    ("How does DeepSpeed-Ulyses partition sequences?", "DeepSpeed-Ulyses", "DeepSpeed-Ulysses"),
    ("What did Jeff Dean describe?", "Jeff Dean", "Jeffrey Dean"),
])
def test_a_near_miss_is_refused_and_shows_the_close_match(version: IndexVersion, question: str, missing: str,
                                                           near: str) -> None:
    (unknown,) = unknown_names(version, question)
    assert (unknown.name, unknown.near) == (missing, near)
    text, cites = name_refusal(version, [unknown], [])
    assert text.startswith(f"The knowledge base has nothing on {missing}; nearest: {near} ([1] ")
    assert cites[0].doc_id == unknown.near_doc and any(near in p for p in PASSAGES[cites[0].url][1])


def test_an_acronyms_nearest_spelling_is_an_acronym(version: IndexVersion) -> None:
    (unknown,) = unknown_names(version, "Does MPIX pass the parameters?")
    assert (unknown.name, unknown.near) == ("MPIX", "MPI")
    (unknown,) = unknown_names(version, "How does RAYX schedule its tasks?")
    assert (unknown.name, unknown.near) == ("RAYX", None)  # "Ray" is as close a spelling, but no acronym


@pytest.mark.parametrize(("name", "urls"), [
    ("Grid Labs", {"https://github.com/gridlabs/k8s-train"}),  # closed up in the address
    ("k8s train", {"https://github.com/gridlabs/k8s-train"}),  # a hyphen there, a space here
    ("Flex-Flow", {"https://github.com/flexflow/FlexFlow"}),
    ("Booster Plugins", {"https://colossalai.org/docs/features/plugins"}),  # a title
    ("vllm", {"https://docs.vllm.ai/en/latest"}),
    ("Labs Grid", set()),  # the parts in another order
    ("C++", set()),  # too short to pick documents by: every document is tried
    ("Zérö", set()),  # beyond ASCII: every document is tried
])
def test_a_name_in_a_title_or_address_is_found_without_reading_every_document(version: IndexVersion, name: str,
                                                                               urls: set[str]) -> None:
    found_in = headings(version)
    found = {version.docs[found_in.doc_ids[i]].url for i in found_in.holding(name)}
    assert found == urls
    pattern = phrase(name)  # the same documents as the name's pattern tried on every one
    assert found == {d.url for d in version.docs.values() if pattern.search(f"{d.title} {d.url} {d.source_url}")}


def test_a_sentence_end_is_no_hyphen(version: IndexVersion) -> None:
    """"… Ulysses.\n3 The next …" is not a mention of "Ulysses-3", nor of its release "Ulysses 3"."""
    assert names(version, "What is new in Ulysses-3?") == ["Ulysses-3"]
    assert names(version, "What is new in Ulysses 3?") == ["Ulysses 3"]  # "Ulysses" is known, its release 3 not


# -- through the front door: both answerers refuse alike ----------------------------------------------


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, encoder) -> Path:  # noqa: ANN001
    h = tmp_path_factory.mktemp("refuse-home")
    build_index(h, encoder)
    return h


def test_the_asker_refuses_by_name_and_lists_the_nearest_titles(home: Path) -> None:
    a = Asker(Searcher(load_settings(home))).ask("How do I launch Horovod jobs with Lightning Fabric?")
    assert a.refused and a.answer.startswith("The knowledge base has nothing on Lightning Fabric; nearest: [1] ")
    assert a.retrieved  # the passages it retrieved are kept with the refusal
    assert a.citations and all(c.quote == "" for c in a.citations)
    assert all(f"[{c.n}] {c.title}" in a.answer for c in a.citations)


@pytest.mark.parametrize(("question", "foreign"), [
    ("¿Cómo funciona ZeRO-3 con la partición de parámetros?", True),
    ("Wie partitioniert ZeRO-3 die Parameter über mehrere GPUs?", True),
    ("Comment ZeRO-3 partitionne-t-il les paramètres entre les GPU ?", True),
    # "los", "estados" and "del" are in the English vocabulary; the capitalised "¿Cómo" opening it is not English
    ("¿Cómo particiona ZeRO-3 los estados del optimizador?", True),
    # "die", "in", "come", "il", "a" are English words too: the language identifier tells
    ("Wie funktioniert die Pipeline-Parallelität in GPipe?", True),
    ("Come funziona il parallelismo dei dati in Horovod?", True),
    ("Quali sono i vantaggi di FSDP rispetto a DDP?", True),
    # one word no English dictionary holds does not make a question foreign, nor does a run of identifiers
    ("How do I use torchtitan with float8 training?", False),
    ("ZeRO++ qwZ hpZ qgZ settings", False),
    # English keeps its words of asking, even misspelt; keywords are the index's own words
    ("how dose deepspeed shrad params", False),
    ("Can megablocksx partition optimizer states?", False),  # a capitalised "Can" still opens English
    ("pipeline bubble fraction gpipe", False),
    ("naïve data parallelism memory cost", False),
    ("What is the difference between FSDP and DDP?", False),
    # one or two lower-case words: a word spelt as no English word is, and the identifier leaning the same way
    ("qué es ZeRO", True),
    ("¿Cómo funciona ZeRO-3?", True),
    ("Megatron erklären", True),
    ("naïve partitioning?", False),  # an English borrowing: the identifier is not sure of another language
    ("Erdős graphs", False),  # a capitalised word is a name, spelt so in English too
    ("Pólya urn sampling", False),  # so it is opening three words, among no foreign one
    ("Über welche Wege kommuniziert Horovod?", True),  # but counts beside them
    ("hivemind averaging", False),  # a name no dictionary holds, in plain ASCII: the name check's to refuse
    # "Was" and "Come" are English too: another language's word of asking only before a foreign word
    ("Was macht Horovod?", True),
    ("Come funziona ZeRO?", True),
    ("Was Horovod used at Uber?", False),
    ("Was pipeline parallelism used?", False),
    ("Wie skaliert Horovod?", True),  # opening with another language's word of asking that English does not write
    ("Warum ZeRO?", True),
    ("Cómo instalar Horovod?", True),
    ("welche pipeline", True),
    # another script: no Latin word to count, the script tells; a name in it inside English does not
    ("ZeRO-3 如何划分优化器状态？", True),
    ("ZeRO-3はオプティマイザの状態をどう分割しますか？", True),
    ("Как ZeRO-3 разделяет состояние оптимизатора?", True),
    ("What is 悟道 (WuDao) trained with?", False),
])
def test_a_question_in_another_language_is_told_apart(question: str, foreign: bool) -> None:
    assert not_english(question, (FIELD | {"deepspeed", "gpipe", "pipeline", "parallelism"}).__contains__) is foreign


@pytest.mark.parametrize("question", ["¿Cómo funciona ZeRO-3 con la partición de parámetros?",
                                      "ZeRO-3 如何划分优化器状态？", "qué es ZeRO"])
def test_the_asker_asks_for_english_instead_of_refusing_foreign_words_as_names(home: Path, question: str) -> None:
    a = Asker(Searcher(load_settings(home))).ask(question)
    assert a.refused and a.answer == NOT_ENGLISH and not a.citations
    assert a.retrieved == ()  # told before retrieval: English passages cannot answer it


def test_the_llm_is_not_asked_about_a_name_no_document_mentions(home: Path) -> None:
    with FakeOpenAI() as server:
        server.queue(Reply(text="Hivemind averages gradients with DHT-based all-reduce [1]."))
        llm = LLMBackend(LLMConfig(base_url=server.url, model="fake-model", timeout=60.0))
        asker = Asker(Searcher(load_settings(home)), llm)
        a = asker.ask("How does the Hivemind library average gradients?")
        assert a.refused and "nothing on Hivemind" in a.answer and not server.requests
        ok = asker.ask("How does Horovod use ring-allreduce?")  # a known name still reaches the LLM
        assert ok.backend == "llm:fake-model" and len(server.requests) == 1

