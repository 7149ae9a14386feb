"""Pipeline stage: the build's stage functions in order, the report made from their results, the
local and Ray executors, incremental refresh of the lists, run history and the scheduler.

Modules, lowest first: :mod:`~dmlqa.pipeline.works` (one document per work),
:mod:`~dmlqa.pipeline.coverage` (what the build holds, and why), :mod:`~dmlqa.pipeline.runs` (run
history), :mod:`~dmlqa.pipeline.report` (options, stage results, :class:`BuildReport`),
:mod:`~dmlqa.pipeline.refresh` (re-reading the lists), :mod:`~dmlqa.pipeline.stages` (the stage
functions), :mod:`~dmlqa.pipeline.local_executor` and :mod:`~dmlqa.pipeline.ray_executor` (where
fetch, extract, chunk and embed run), :mod:`~dmlqa.pipeline.build` (one build, in order),
:mod:`~dmlqa.pipeline.lock`, :mod:`~dmlqa.pipeline.signals` (SIGTERM stops a build as Ctrl-C does),
:mod:`~dmlqa.pipeline.schedule` and :mod:`~dmlqa.pipeline.home` (a home's status). It imports the
stages before it (index, extract, acquire, catalog) and the base modules, never the query side or
the front ends.

The Ray executor is not imported here: the build imports it when ``build.executor = "ray"``.
"""

from dmlqa.pipeline import stages
from dmlqa.pipeline.build import make_executor, run_build
from dmlqa.pipeline.coverage import coverage, no_network
from dmlqa.pipeline.graph import GraphResult, Resolver
from dmlqa.pipeline.home import index_status, init_home, run_history
from dmlqa.pipeline.local_executor import LocalExecutor
from dmlqa.pipeline.lock import WriterLock
from dmlqa.pipeline.refresh import ListRefresh, RefreshReport, refresh_lists
from dmlqa.pipeline.report import (
    BuildOptions,
    BuildReport,
    ChunkResult,
    Executor,
    ExtractResult,
    FetchBatch,
    Fetched,
    NoProgress,
    Progress,
    SentenceResult,
    Stopwatch,
    WorksResult,
)
from dmlqa.pipeline.runs import Changes, RunRecord, read_runs, read_schedule
from dmlqa.pipeline.schedule import RunOutcome, Schedule, SchedulerLock, SchedulerStopped, run_scheduler
from dmlqa.pipeline.signals import stop_on_signals
from dmlqa.pipeline.works import Duplicate, merge_works

__all__ = [
    "GraphResult", "Resolver",
    "BuildOptions",
    "BuildReport",
    "Changes",
    "ChunkResult",
    "Duplicate",
    "Executor",
    "ExtractResult",
    "FetchBatch",
    "Fetched",
    "ListRefresh",
    "LocalExecutor",
    "NoProgress",
    "Progress",
    "RefreshReport",
    "RunOutcome",
    "RunRecord",
    "Schedule",
    "SchedulerLock",
    "SchedulerStopped",
    "SentenceResult",
    "Stopwatch",
    "WorksResult",
    "WriterLock",
    "coverage",
    "index_status",
    "init_home",
    "make_executor",
    "merge_works",
    "no_network",
    "read_runs",
    "read_schedule",
    "refresh_lists",
    "run_build",
    "run_history",
    "run_scheduler",
    "stages",
    "stop_on_signals",
]
