"""Index stage: cut documents into passages, embed them (with a vector cache), and write immutable
index versions (FAISS + BM25 + document and sentence stores) that readers open by name.

Modules, lowest first: :mod:`~dmlqa.index.docstore` (extracted texts kept between builds),
:mod:`~dmlqa.index.chunk` (passages sized in the model's tokens), :mod:`~dmlqa.index.embed`
(encoders and the one embed-and-cache loop), :mod:`~dmlqa.index.embed_cache` (the crash-safe
vector cache it flushes to as it goes), :mod:`~dmlqa.index.lexical`
(BM25), :mod:`~dmlqa.index.ann` (approximate FAISS indexes for large collections) and
:mod:`~dmlqa.index.versions` (writing, publishing and opening versions). It imports only the stages
before it (extract, acquire, catalog) and the base modules; loading a model (torch, onnxruntime)
or a splitter (langchain) waits until one is asked for.
"""

from dmlqa.index import ann
from dmlqa.index.chunk import Chunker, TokenCounter
from dmlqa.index.docstore import DocStore
from dmlqa.index.embed import (
    ENCODERS,
    CachedEncoder,
    EmbeddingCache,
    EmbedResult,
    Encoder,
    VectorSource,
    embed_groups,
    embed_texts,
    load_encoder,
    model_dir,
    text_sha256,
)
from dmlqa.index.versions import (
    IndexVersion,
    check_version,
    current_version,
    dense_text,
    list_versions,
    open_current,
    prune,
    publish,
    read_meta,
    write_version,
)

__all__ = [
    "ENCODERS",
    "CachedEncoder",
    "Chunker",
    "DocStore",
    "EmbedResult",
    "EmbeddingCache",
    "Encoder",
    "IndexVersion",
    "TokenCounter",
    "VectorSource",
    "ann",
    "check_version",
    "current_version",
    "dense_text",
    "embed_groups",
    "embed_texts",
    "list_versions",
    "load_encoder",
    "model_dir",
    "open_current",
    "prune",
    "publish",
    "read_meta",
    "text_sha256",
    "write_version",
]
