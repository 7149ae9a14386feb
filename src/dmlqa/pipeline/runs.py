"""Run history of a home: one JSON line per build in ``index/runs.jsonl``, and the scheduler's plan.

A knowledge base rebuilt by a timer is only trustworthy if someone can see what the last runs did:
when they ran, how long they took, whether they published, and which resources they added,
updated, removed or failed on. The build records itself here (under the writer lock, so lines never
interleave); ``dmlqa status`` reads the file back.

A build killed with ``kill -9`` cannot write its own line. So a run first leaves a marker
(``index/run-in-progress.json``) and removes it when it ends; the next build, holding the writer
lock and so knowing the marker's writer is gone, turns a leftover marker into an ``interrupted``
line. Nothing is lost silently.

``index/schedule.json`` holds what a running ``dmlqa schedule`` plans next (its PID, its spec and
the next slot), so ``dmlqa status`` can say when the next run is.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from dmlqa.errors import DiskFullError, as_disk_full, is_disk_full
from dmlqa.fsutil import atomic_write_text
from dmlqa.index.versions import VERSIONS, current_version
from dmlqa.index.writer import content_key
from dmlqa.models import Document, Failure
from dmlqa.paths import FAILURES_FILE, IN_PROGRESS_FILE, RUNS_FILE, SCHEDULE_FILE

log = logging.getLogger(__name__)

#: Ids listed per change kind in one record; the counts are always complete. A first build adds
#: every resource, and a line of tens of thousands of ids helps nobody reading a status table.
MAX_IDS = 200
#: URLs named per failure reason in a record's summary (the counts are complete; `status --failures` lists all).
SUMMARY_URLS = 3
#: The history is trimmed to this many runs once the file grows past ``TRIM_BYTES``.
KEEP_RUNS = 500
TRIM_BYTES = 4 * 1024 * 1024


def utc_now() -> str:
    """Now as ISO-8601 UTC with a ``Z``, to the second (what every record stores)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> datetime | None:
    """An ISO-8601 time as written by :func:`utc_now` (or any offset), aware; None for None/garbage."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# -- what changed between two versions ----------------------------------------------------------


@dataclass(frozen=True)
class DocState:
    """What identifies a document's content in a version: card or not, and a content hash.

    Full texts are identified by the sha256 of their source bytes (what the build compares to
    decide whether to extract again); catalog cards have no source bytes, so their chunk texts are
    hashed instead (a card changes when its catalog facts do).
    """

    url: str
    is_card: bool
    content: str


@dataclass(frozen=True)
class Changes:
    """Doc ids that differ between the previous published version and the new one."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {"added": list(self.added), "updated": list(self.updated), "removed": list(self.removed)}


def published_documents(index_dir: Path) -> dict[str, DocState]:
    """The documents of the published version (empty when there is none or it cannot be read).

    Read before a build changes anything, so the build can say what it changed.
    """
    name = current_version(index_dir)
    if name is None:
        return {}
    store = index_dir / VERSIONS / name / "store.sqlite"
    if not store.is_file():
        return {}
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    except sqlite3.Error:
        return {}
    try:
        rows = db.execute("SELECT doc_id, url, is_card, content FROM documents").fetchall()
    except sqlite3.Error as exc:
        log.warning("cannot read the documents of version %s: %s", name, exc)
        return {}
    finally:
        db.close()
    return {doc_id: DocState(url or "", bool(is_card), content or "") for doc_id, url, is_card, content in rows}


def new_documents(docs: Sequence[Document]) -> dict[str, DocState]:
    """The same description as :func:`published_documents`, for the version being built."""
    return {d.doc_id: DocState(d.url, d.is_card, content_key(d)) for d in docs}


def diff_documents(before: Mapping[str, DocState], after: Mapping[str, DocState]) -> Changes:
    """Added, updated (content changed, or card ↔ full text) and removed doc ids, each sorted."""
    return Changes(
        added=tuple(sorted(set(after) - set(before))),
        updated=tuple(sorted(k for k in set(after) & set(before) if after[k] != before[k])),
        removed=tuple(sorted(set(before) - set(after))),
    )


# -- run records ----------------------------------------------------------------------------------


@dataclass
class RunRecord:
    """One build run as ``runs.jsonl`` stores it (one JSON object a line)."""

    started_at: str
    finished_at: str | None = None
    seconds: float | None = None
    ok: bool = False
    #: stopped from outside (Ctrl-C, SIGTERM, a kill) rather than failed: ``ok`` is false, and the
    #: next build carries on (the vectors embedded so far are in the cache)
    interrupted: bool = False
    trigger: str = "build"  # build | schedule
    pid: int = 0
    index_version: str | None = None
    previous_version: str | None = None
    error: str | None = None
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # URLs (or local paths) with their stage
    #: every failure of the run grouped by reason, most frequent first: {"reason", "count", "urls"}
    failure_summary: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    refresh: dict[str, Any] | None = None  # what --refresh-lists changed in the catalog

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def append_run(index_dir: Path, record: RunRecord) -> None:
    """Append one line (one ``write`` of a complete line, then fsync); trim a long history.

    Callers hold the writer lock, so no two processes append or trim at once.
    """
    path = index_dir / RUNS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record.to_json(), ensure_ascii=False) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        end = fh.tell()
        try:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        except OSError:  # a full disk takes part of a line: cut it, or the next line would be glued to it
            fh.truncate(end)
            raise
    if path.stat().st_size > TRIM_BYTES:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        atomic_write_text(path, "".join(lines[-KEEP_RUNS:]))


def read_runs(index_dir: Path, limit: int | None = None) -> list[RunRecord]:
    """The recorded runs, oldest first (the last ``limit`` of them); unreadable lines are skipped."""
    path = index_dir / RUNS_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out: list[RunRecord] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if isinstance(data, dict) and "started_at" in data:
                out.append(RunRecord.from_json(data))
        except (ValueError, TypeError):
            log.debug("skipping an unreadable line of %s", path)
    return out[-limit:] if limit else out


def consecutive_failures(records: Sequence[RunRecord]) -> int:
    """How many of the newest runs (``records`` oldest first, as :func:`read_runs` gives them) failed in a row.

    What a scheduler's watcher alerts on: one failed night is noise, three are an outage. Interrupted
    runs (Ctrl-C, SIGTERM, a kill) are stops, not failures: they neither count nor end a streak.
    """
    count = 0
    for record in reversed(records):
        if record.ok:
            break
        count += not record.interrupted
    return count


def summarize_failures(failures: Sequence[Failure]) -> list[dict[str, Any]]:
    """``failures`` grouped by the kind of reason (the coverage
    table's kinds: "DNS lookup failed", "HTTP 404", ...), most frequent first, each with its count
    and its first :data:`SUMMARY_URLS` URLs: a few lines say what hundreds of rows would bury."""
    from dmlqa.pipeline.coverage import reason_kind

    groups: dict[str, dict[str, Any]] = {}
    for f in failures:
        group = groups.setdefault(reason_kind(f.error), {"count": 0, "urls": []})
        group["count"] += 1
        if len(group["urls"]) < SUMMARY_URLS and f.url not in group["urls"]:
            group["urls"].append(f.url)
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1]["count"], kv[0]))
    return [{"reason": reason, **group} for reason, group in ordered]


def write_failures(index_dir: Path, started_at: str, failures: Sequence[Failure]) -> None:
    """Replace ``index/last-failures.json`` with every failure of the run that started at ``started_at``.

    A file of its own, not the run's line: the history keeps counts and a summary per run, and one
    run with thousands of failures would otherwise swell every later read of it.
    """
    rows = [f.to_json() for f in failures]
    atomic_write_text(index_dir / FAILURES_FILE,
                      json.dumps({"started_at": started_at, "failed": rows}, ensure_ascii=False) + "\n")


def read_failures(index_dir: Path) -> dict[str, Any] | None:
    """The last run's failures as :func:`write_failures` stored them (``started_at``, ``failed``), if any."""
    try:
        data = json.loads((index_dir / FAILURES_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("failed"), list) else None


def describe_error(error: BaseException) -> str:
    """A one-line reason: our own errors say it well; anything else is named by its type too."""
    from dmlqa.errors import DmlqaError

    text = " ".join(str(error).split())
    if isinstance(error, KeyboardInterrupt):  # dmlqa.errors.Interrupted says by what, and what is kept
        return f"interrupted: {text or 'stopped by Ctrl-C'}; the published version was kept"
    if isinstance(error, DmlqaError) and text:
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _capped(ids: Sequence[str]) -> list[str]:
    return list(ids[:MAX_IDS])


class _ReportLike(Protocol):
    """The parts of :class:`dmlqa.pipeline.report.BuildReport` a record is made from."""

    index_version: str | None
    failed: list[Any]
    documents: int
    cards: int
    chunks: int
    embedded: int
    reused_embeddings: int
    changes: Changes
    refresh: dict[str, Any] | None


def record_from_report(record: RunRecord, report: _ReportLike) -> RunRecord:
    """Fill ``record`` with what ``report`` says changed (ids capped at ``MAX_IDS``, counts exact)."""
    changes = report.changes
    failed = [f"{f.stage}: {f.url}" for f in report.failed]
    record.index_version = report.index_version
    record.added = _capped(changes.added)
    record.updated = _capped(changes.updated)
    record.removed = _capped(changes.removed)
    record.failed = _capped(failed)
    record.failure_summary = summarize_failures(report.failed)
    record.counts = {
        "added": len(changes.added),
        "updated": len(changes.updated),
        "removed": len(changes.removed),
        "failed": len(failed),
        "documents": report.documents,
        "cards": report.cards,
        "chunks": report.chunks,
        "embedded": report.embedded,
        "reused_embeddings": report.reused_embeddings,
    }
    record.refresh = report.refresh
    return record


def recover_interrupted(index_dir: Path) -> RunRecord | None:
    """Turn the marker a killed run left behind into an ``interrupted`` record (call under the lock).

    Also removes the temporary files of a history write that was killed half-way.
    """
    for name in (RUNS_FILE, IN_PROGRESS_FILE):
        for tmp in index_dir.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)
    marker = index_dir / IN_PROGRESS_FILE
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        data = {}
    started = data.get("started_at") if isinstance(data, dict) else None
    pid = data.get("pid", 0) if isinstance(data, dict) else 0
    record = RunRecord(
        started_at=started or utc_now(),
        ok=False,
        interrupted=True,
        trigger=(data.get("trigger") if isinstance(data, dict) else None) or "build",
        pid=int(pid or 0),
        previous_version=data.get("previous_version") if isinstance(data, dict) else None,
        error=f"interrupted: process {pid or '?'} ended before the build finished (killed or crashed); "
        "the published version was kept",
    )
    append_run(index_dir, record)
    marker.unlink(missing_ok=True)
    log.warning("the run started at %s by PID %s was interrupted; recorded it", record.started_at, pid)
    return record


@contextmanager
def recording(index_dir: Path, report: _ReportLike, *, trigger: str = "build") -> Iterator[RunRecord]:
    """Record the run around a build: a marker while it runs, one line in ``runs.jsonl`` after.

    Must be entered under the writer lock. On an exception the line says ``ok: false`` with the
    error (and ``interrupted: true`` for Ctrl-C or SIGTERM), and the exception goes on; on success
    the line carries the report's changes.
    """
    index_dir.mkdir(parents=True, exist_ok=True)
    recover_interrupted(index_dir)
    started = datetime.now(UTC)
    record = RunRecord(
        started_at=started.strftime("%Y-%m-%dT%H:%M:%SZ"), trigger=trigger, pid=os.getpid(),
        previous_version=current_version(index_dir),
    )
    marker = index_dir / IN_PROGRESS_FILE
    atomic_write_text(marker, json.dumps({"started_at": record.started_at, "pid": record.pid,
                                           "trigger": trigger, "previous_version": record.previous_version}))

    def finish(error: BaseException | None) -> None:
        record_from_report(record, report)
        record.finished_at = utc_now()
        record.seconds = round((datetime.now(UTC) - started).total_seconds(), 3)
        record.ok = error is None and report.index_version is not None
        if error is not None:
            record.error = describe_error(error)
            record.interrupted = isinstance(error, KeyboardInterrupt)
            record.index_version = None
        try:
            append_run(index_dir, record)
        except OSError as exc:
            if not is_disk_full(exc, index_dir):
                raise
            # The marker's block may be all the line needs; left behind, it would read as a killed run.
            marker.unlink(missing_ok=True)
            append_run(index_dir, record)
        marker.unlink(missing_ok=True)
        try:
            write_failures(index_dir, record.started_at, report.failed)
        except OSError as exc:  # the run's line (counts, summary) is what matters; never a stale list
            (index_dir / FAILURES_FILE).unlink(missing_ok=True)
            log.info("could not write the failure list of the run: %s", exc)  # the error line says why

    try:
        yield record
    except BaseException as raised:
        # A full disk wherever it struck (the document store, the cache, a WARC) is one DiskFullError:
        # the history, the scheduler's log and the CLI all say the same one line.
        exc = as_disk_full(raised, index_dir.parent)
        try:
            finish(exc)
        except OSError as failed:  # the original error matters more than a failed history line
            if not is_disk_full(failed, index_dir):
                log.exception("could not record the failed run")
            else:  # the error itself (most often the same full disk) is the one line the user needs
                log.info("could not record the failed run: %s", failed)
        if exc is not raised:
            raise exc from None
        raise
    try:
        finish(None)
    except OSError as exc:
        if not is_disk_full(exc, index_dir):
            raise
        raise DiskFullError(
            f"disk full while writing {index_dir / RUNS_FILE}: index version {report.index_version} is published, "
            "but the run history misses this run; free space"
        ) from None


# -- the scheduler's plan -------------------------------------------------------------------------


def write_schedule(index_dir: Path, info: Mapping[str, Any]) -> None:
    """Replace ``index/schedule.json`` (what the running scheduler plans next)."""
    atomic_write_text(index_dir / SCHEDULE_FILE, json.dumps(dict(info), indent=2, ensure_ascii=False) + "\n")


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but someone else's
        return True
    return True


def read_schedule(index_dir: Path) -> dict[str, Any] | None:
    """The scheduler's plan with ``running`` (its PID is alive) added; None when none was ever written.

    A scheduler stopped by ``kill -9`` leaves its file behind: ``running`` is then false and
    ``next_run`` is cleared, so nobody waits for a run that will not come.
    """
    try:
        data = json.loads((index_dir / SCHEDULE_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        pid = int(data.get("pid") or 0)
    except (TypeError, ValueError):
        pid = 0
    running = bool(data.get("running", True)) and _pid_alive(pid)
    data["running"] = running
    if not running:
        data["next_run"] = None
    return data
