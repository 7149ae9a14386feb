"""A knowledge-base home: creating one and describing its published index."""

from __future__ import annotations

from typing import Any

from dmlqa.errors import IndexDamagedError, IndexMissingError
from dmlqa.index.versions import VERSIONS, check_version, current_version
from dmlqa.paths import SETTINGS_FILE
from dmlqa.pipeline.runs import consecutive_failures, read_runs, read_schedule
from dmlqa.settings import Settings

_TEMPLATE = """# dmlqa settings for this home, by section. Every key can also be set in the environment as
# DMLQA_<SECTION>_<KEY> (DMLQA_EMBED_MODEL, DMLQA_LLM_BASE_URL, ...).

[embed]
# model = "bundled:all-MiniLM-L6-v2"   # or a sentence-transformers model name / local path
# encoder = "onnx-int8"                 # onnx-int8 | onnx | torch

[index]
# chunk_tokens = 200
# chunk_overlap = 32
# keep_versions = 3

[llm]
# base_url = "http://localhost:11434/v1"
# model = "llama3.1"

[ui]
# password = "..."                      # the chat app asks for it (user name: dmlqa)

[fetch]
# concurrency = 8
# per_host = 2
# timeout = 30.0
# max_bytes = 52428800
# allow_private_hosts = false
"""


def init_home(settings: Settings) -> list[str]:
    """Create the folders and a commented settings file; never overwrite anything."""
    created: list[str] = []
    for path in (settings.corpus_dir, settings.index_dir, settings.paths.local_dir):
        if not path.exists():
            path.mkdir(parents=True)
            created.append(str(path.relative_to(settings.home)) + "/")
    toml = settings.home / SETTINGS_FILE
    if not toml.exists():
        toml.write_text(_TEMPLATE, encoding="utf-8")
        created.append(SETTINGS_FILE)
    if not settings.catalog_path.exists():
        settings.catalog_path.touch()
        created.append("corpus/catalog.jsonl")
    return created


def index_status(settings: Settings) -> dict[str, Any]:
    """The published version's facts, as ``dmlqa status --json`` prints them."""
    name = current_version(settings.index_dir)
    if name is None:
        raise IndexMissingError(f"no index in {settings.home} yet: run `dmlqa build` first (see README.md)")
    path = settings.index_dir / VERSIONS / name
    if not path.is_dir():
        raise IndexDamagedError(name, f"its folder is missing from {path.parent}")
    meta = check_version(path)  # opens every part, as search does: a damaged version is named here too
    return {
        "index_version": meta["version"],
        "built_at": meta.get("built_at"),
        "model": meta.get("model"),
        "encoder": meta.get("encoder"),
        "index_type": meta.get("index_type"),
        "resources": meta.get("resources", 0),
        "documents": meta.get("documents", 0),
        "cards": meta.get("cards", 0),
        "chunks": meta.get("chunks", 0),
        "failed": meta.get("failed", []),
        "duplicates": meta.get("duplicates", []),
        "coverage": meta.get("coverage", {}),
        #: the citation graph: papers read, references parsed / resolved / skipped, how they resolved
        #: (None: the version was built before references were read)
        "graph": meta.get("graph"),
        **run_history(settings),
    }


def run_history(settings: Settings, limit: int = 10) -> dict[str, Any]:
    """The last ``limit`` build runs (newest first), and the running scheduler's next slot, if any.

    Kept apart from the index facts so ``dmlqa status`` can show the history even when no version
    was ever published (every run so far failed). ``ok`` is the last run's outcome, with
    ``consecutive_failures``, ``last_error`` and ``last_failures`` (its failures summed up by
    reason, :func:`~dmlqa.pipeline.runs.summarize_failures`).
    """
    schedule = read_schedule(settings.index_dir)
    runs = read_runs(settings.index_dir)
    last = runs[-1] if runs else None
    return {
        "runs": [r.to_json() for r in reversed(runs[-limit:] if limit else runs)],
        "next_run": schedule.get("next_run") if schedule else None,
        "schedule": schedule,
        # what a watcher checks: did the last run fail (None before any), and how many in a row
        "ok": last.ok if last else None,
        "consecutive_failures": consecutive_failures(runs),
        "last_error": last.error if last else None,
        "last_failures": {"total": (last.counts or {}).get("failed", 0), "by_reason": last.failure_summary}
        if last else None,
    }
