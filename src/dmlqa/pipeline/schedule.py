"""``dmlqa schedule``: a long-running process that rebuilds the index on a schedule.

Each slot runs one ordinary incremental build (:func:`dmlqa.pipeline.build.run_build`): conditional GETs,
reused documents and cached embeddings keep a nightly rebuild cheap, the build's own writer lock
keeps it from colliding with a manual ``dmlqa build``, and the run history (:mod:`dmlqa.pipeline.runs`)
records what each run changed. A failed run (network down, a list gone, a bug) is logged and
recorded; the published version stays as it was and the scheduler simply waits for the next slot.
Failed runs in a row are counted (from the history, so a restarted scheduler goes on counting) and
shown by ``dmlqa status`` and the app: one failed night is noise, three are an outage.

Schedules are either an interval (``--every 24h``) or a cron expression (``--cron "0 3 * * *"``,
in local time, parsed by croniter). Interval slots are anchored to the scheduler's start, so a run
that takes longer than expected delays only the slots it overlaps (they are skipped, not queued).

Only one scheduler may run per home: it holds its own lock file (``.dmlqa-schedule.lock``, with its
PID) for its whole life, separate from the build lock it takes per run.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dmlqa.errors import BuildLockedError, DmlqaError, Interrupted, ScheduleError
from dmlqa.paths import SCHEDULE_LOCK_FILE, HomePaths
from dmlqa.pipeline.build import run_build
from dmlqa.pipeline.lock import WriterLock
from dmlqa.pipeline.report import BuildOptions, BuildReport
from dmlqa.pipeline.runs import consecutive_failures, describe_error, parse_time, read_runs, write_schedule
from dmlqa.settings import Settings

__all__ = [
    "SCHEDULE_LOCK_FILE", "RunOutcome", "Schedule", "ScheduleError", "SchedulerLock", "SchedulerStopped",
    "parse_duration", "run_once", "run_scheduler",
]

log = logging.getLogger(__name__)

#: Longest single sleep: the wall clock is re-read after it, so a suspended machine or a clock
#: change delays a run by at most this much beyond its slot.
MAX_NAP_S = 30.0

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(w|d|h|m|s)", re.IGNORECASE)
_UNIT_S = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}


class SchedulerStopped(Interrupted):
    """Raised from a signal handler to stop the scheduler at once, mid-build included.

    An :class:`~dmlqa.errors.Interrupted` (so a ``KeyboardInterrupt``, no ``Exception``), so that no
    ``except Exception`` on the way (a run's own safety net) swallows it; a build it stops keeps its
    vectors and is recorded as interrupted, as a build stopped by Ctrl-C is.
    """


def parse_duration(text: str) -> timedelta:
    """``"24h"``, ``"90m"``, ``"1h30m"``, ``"1d"``, ``"45s"`` or plain seconds → a positive timedelta."""
    raw = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        seconds = float(raw)
    else:
        compact = raw.replace(" ", "")
        parts = _DURATION_PART.findall(compact)
        if not parts or "".join(f"{n}{u}" for n, u in parts) != compact:
            raise ScheduleError(f"cannot read the interval {text!r}: use e.g. 24h, 90m, 1h30m, 1d or 45s")
        seconds = sum(float(n) * _UNIT_S[u.lower()] for n, u in parts)
    if seconds <= 0:
        raise ScheduleError(f"the interval {text!r} must be longer than zero")
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class Schedule:
    """When to run: every ``interval`` from the start, or at the slots of a cron ``expression``."""

    interval: timedelta | None = None
    expression: str | None = None

    @classmethod
    def parse(cls, every: str | None = None, cron: str | None = None) -> Schedule:
        """Exactly one of ``every`` (a duration) and ``cron`` (five-field cron or @daily & co, local time)."""
        if (every is None) == (cron is None):
            raise ScheduleError("give exactly one of --every DURATION or --cron EXPRESSION")
        if every is not None:
            return cls(interval=parse_duration(every))
        from croniter import croniter

        expr = " ".join((cron or "").split())
        shape_ok = len(expr.split()) == 5 or expr in ("@hourly", "@daily", "@weekly", "@monthly", "@yearly")
        if not shape_ok or not croniter.is_valid(expr):
            raise ScheduleError(f"not a five-field cron expression: {cron!r} (e.g. \"0 3 * * *\" or @daily)")
        return cls(expression=expr)

    @property
    def spec(self) -> str:
        """How the schedule was given, for logs and ``dmlqa status``."""
        if self.expression is not None:
            return f"cron {self.expression}"
        assert self.interval is not None
        return f"every {_format_duration(self.interval)}"

    def next_after(self, moment: datetime, *, anchor: datetime | None = None) -> datetime:
        """The first slot strictly after ``moment`` (aware datetimes).

        Interval slots are ``anchor + k * interval``; cron slots are computed on the local wall
        clock (so "0 3 * * *" stays at 03:00 across daylight-saving changes) and returned aware.
        """
        if self.interval is not None:
            start = anchor or moment
            if moment < start:
                return start
            steps = int((moment - start) / self.interval) + 1
            return start + steps * self.interval
        from croniter import croniter

        local_naive = moment.astimezone().replace(tzinfo=None)
        nxt: datetime = croniter(self.expression, local_naive).get_next(datetime)
        return nxt.astimezone()  # a naive time is read as local time, DST rules included


def _format_duration(d: timedelta) -> str:
    s = d.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{int(s // size)}{unit}"
    return f"{s:g}s"


class SchedulerLock(WriterLock):
    """The scheduler's own lock file: one ``dmlqa schedule`` per home, the loser told who runs.

    Separate from the build lock, which the scheduler takes (and releases) for each run, so manual
    builds between slots keep working.
    """

    def __init__(self, home: Path) -> None:
        super().__init__(home, "schedule")
        self.path = HomePaths(home).schedule_lock

    def acquire(self) -> SchedulerLock:
        try:
            super().acquire()
        except BuildLockedError as exc:  # a scheduler never "finishes": say how to get rid of it
            raise BuildLockedError(str(exc).replace("wait for it to finish", "stop it first")) from None
        return self


@dataclass(frozen=True)
class RunOutcome:
    """One scheduled slot: the report when a version was published, else the error."""

    slot: datetime
    started_at: datetime
    finished_at: datetime
    report: BuildReport | None
    error: str | None
    skipped: bool = False  # another build held the lock: nothing ran
    next_run: datetime | None = None
    #: failed runs in a row up to this one, from the run history (0 after a run that published)
    consecutive_failures: int = 0

    @property
    def ok(self) -> bool:
        return self.report is not None and self.error is None

    @property
    def seconds(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


def _wait_until(moment: datetime, stop: threading.Event) -> bool:
    """Sleep until ``moment`` on the wall clock; False when ``stop`` was set first."""
    while True:
        left = (moment - _now()).total_seconds()
        if left <= 0:
            return not stop.is_set()
        if stop.wait(min(left, MAX_NAP_S)):
            return False


def _failures_in_a_row(settings: Settings) -> int:
    return consecutive_failures(read_runs(settings.index_dir))


def _recorded_since(settings: Settings, started: datetime) -> bool:
    """Whether the history's newest run started at or after ``started`` (to the second it stores)."""
    runs = read_runs(settings.index_dir, 1)
    when = parse_time(runs[-1].started_at) if runs else None
    return when is not None and when >= started.replace(microsecond=0)


def run_once(settings: Settings, options: BuildOptions, slot: datetime) -> RunOutcome:
    """One scheduled build; never raises for a failed build (the history has it, the log too)."""
    started = _now()
    try:
        report = run_build(settings, replace(options, trigger="schedule"))
    except BuildLockedError as exc:
        log.warning("scheduled run skipped: %s", exc)
        return RunOutcome(slot, started, _now(), None, str(exc), skipped=True,
                          consecutive_failures=_failures_in_a_row(settings))
    except Exception as exc:  # noqa: BLE001 - the scheduler must outlive any one run
        # The history has the run (recorded by the build); a run that failed before it could be
        # recorded still counts, as one more than the history says.
        in_a_row = _failures_in_a_row(settings)
        if not _recorded_since(settings, started):
            in_a_row += 1
        if isinstance(exc, DmlqaError):
            log.error("scheduled run failed (%d in a row), keeping the published version: %s", in_a_row, exc)
        else:
            log.exception("scheduled run failed with an unexpected error (%d in a row); keeping the published "
                          "version", in_a_row)
        return RunOutcome(slot, started, _now(), None, describe_error(exc), consecutive_failures=in_a_row)
    changes = report.changes
    log.debug("scheduled run report: %s", json.dumps(report.to_json(), ensure_ascii=False))
    log.info(
        "scheduled run published %s in %.1f s: +%d added, ~%d updated, -%d removed, %d failed, %d embedded",
        report.index_version, (_now() - started).total_seconds(), len(changes.added), len(changes.updated),
        len(changes.removed), len(report.failed), report.embedded,
    )
    return RunOutcome(slot, started, _now(), report, None)


def run_scheduler(
    settings: Settings,
    schedule: Schedule,
    options: BuildOptions | None = None,
    *,
    run_now: bool = False,
    max_runs: int | None = None,
    stop: threading.Event | None = None,
    on_run: Callable[[RunOutcome], None] | None = None,
) -> list[RunOutcome]:
    """Run builds at the schedule's slots until ``stop`` is set or ``max_runs`` slots have run.

    Raises :class:`BuildLockedError` at once when another scheduler holds this home. Writes the
    next slot to ``index/schedule.json`` before each wait (``dmlqa status`` shows it) and marks the
    file stopped on the way out. ``run_now`` runs a first build immediately.
    """
    options = options or BuildOptions()
    stop = stop or threading.Event()
    outcomes: list[RunOutcome] = []
    with SchedulerLock(settings.home):
        started = _now()
        info = {"pid": os.getpid(), "spec": schedule.spec, "started_at": _iso(started), "running": True,
                "runs": 0, "last_run": None, "last_ok": None, "next_run": None, "consecutive_failures": 0}
        anchor = started
        slot = started if run_now else schedule.next_after(started, anchor=anchor)
        log.info("scheduler started (%s); first run at %s", schedule.spec, slot.astimezone().isoformat())
        try:
            while not stop.is_set():
                info["next_run"] = _iso(slot)
                write_schedule(settings.index_dir, info)
                if not _wait_until(slot, stop):
                    break
                outcome = run_once(settings, options, slot)
                nxt = schedule.next_after(max(_now(), slot), anchor=anchor)
                outcome = replace(outcome, next_run=nxt)
                outcomes.append(outcome)
                info.update(runs=len(outcomes), last_run=_iso(outcome.started_at), last_ok=outcome.ok,
                            next_run=_iso(nxt), consecutive_failures=outcome.consecutive_failures)
                # Published before anyone hears of the run, so a status read then never shows a past slot.
                write_schedule(settings.index_dir, info)
                if on_run is not None:
                    on_run(outcome)
                if max_runs is not None and len(outcomes) >= max_runs:
                    break
                slot = nxt
                log.info("next run at %s", slot.astimezone().isoformat())
        finally:
            info.update(running=False, next_run=None, stopped_at=_iso(_now()))
            try:
                write_schedule(settings.index_dir, info)
            except OSError:
                log.warning("could not mark the schedule stopped", exc_info=True)
            log.info("scheduler stopped after %d run(s)", len(outcomes))
    return outcomes
