"""The run history (``index/runs.jsonl``), the interrupted-run marker and the scheduler's plan file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rebuild_fixtures import cli, make_home

import dmlqa.pipeline.runs as runs_mod
from dmlqa.errors import CatalogError
from dmlqa.pipeline.report import BuildReport
from dmlqa.pipeline.runs import (
    IN_PROGRESS_FILE,
    RUNS_FILE,
    Changes,
    DocState,
    RunRecord,
    append_run,
    diff_documents,
    read_runs,
    read_schedule,
    recording,
    recover_interrupted,
    write_schedule,
)


def test_history_survives_a_torn_last_line_and_stays_bounded(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    for i in range(3):
        append_run(tmp_path, RunRecord(started_at=f"2026-11-0{i + 1}T03:00:00Z", ok=True, index_version=f"v{i}"))
    with open(tmp_path / RUNS_FILE, "a") as fh:
        fh.write('{"started_at": "2026-11-04T03:00:00Z", "ok": tr')  # a writer killed mid-line
    assert [r.index_version for r in read_runs(tmp_path)] == ["v0", "v1", "v2"]
    assert [r.index_version for r in read_runs(tmp_path, limit=2)] == ["v1", "v2"]
    assert read_runs(tmp_path / "nowhere") == []

    monkeypatch.setattr(runs_mod, "TRIM_BYTES", 1000)
    monkeypatch.setattr(runs_mod, "KEEP_RUNS", 4)
    for i in range(10):
        append_run(tmp_path, RunRecord(started_at="2026-11-05T03:00:00Z", index_version=f"w{i}"))
    kept = read_runs(tmp_path)
    assert 1 <= len(kept) <= 4 and kept[-1].index_version == "w9"


def test_recording_a_failed_build_keeps_the_error_and_reraises(tmp_path: Path) -> None:
    report = BuildReport()
    with pytest.raises(CatalogError), recording(tmp_path, report, trigger="schedule"):
        assert (tmp_path / IN_PROGRESS_FILE).is_file()
        raise CatalogError("catalog.jsonl:3", "bad catalog line 3: Expecting value")
    [run] = read_runs(tmp_path)
    assert not run.ok and run.trigger == "schedule" and run.error.endswith("bad catalog line 3: Expecting value")
    assert run.index_version is None and run.finished_at and run.seconds is not None
    assert not (tmp_path / IN_PROGRESS_FILE).exists()

    with pytest.raises(RuntimeError), recording(tmp_path, BuildReport()):
        raise RuntimeError("a bug")
    assert read_runs(tmp_path)[-1].error == "RuntimeError: a bug"  # not our own error: named by its type


def test_a_leftover_marker_becomes_an_interrupted_run(tmp_path: Path) -> None:
    assert recover_interrupted(tmp_path) is None
    (tmp_path / IN_PROGRESS_FILE).write_text(json.dumps(
        {"started_at": "2026-11-20T03:00:00Z", "pid": 4242, "trigger": "schedule", "previous_version": "v1"}))
    report = BuildReport(index_version="v2", changes=Changes(added=("web:a",)))
    with recording(tmp_path, report):
        pass
    first, second = read_runs(tmp_path)
    assert (first.ok, first.pid, first.trigger, first.started_at) == (False, 4242, "schedule", "2026-11-20T03:00:00Z")
    assert first.error.startswith("interrupted: process 4242") and first.finished_at is None
    assert second.ok and second.added == ["web:a"] and second.counts["added"] == 1


def test_changes_between_versions() -> None:
    before = {"a": DocState("u/a", False, "sha-a"), "b": DocState("u/b", False, "sha-b"),
              "c": DocState("u/c", True, "text:1"), "d": DocState("u/d", True, "text:2")}
    after = {"a": DocState("u/a", False, "sha-a"), "b": DocState("u/b", False, "sha-b2"),
             "c": DocState("u/c", False, "sha-c"), "e": DocState("u/e", False, "sha-e")}
    assert diff_documents(before, after) == Changes(added=("e",), updated=("b", "c"), removed=("d",))
    assert diff_documents(after, after) == Changes()


def test_change_lists_are_capped_but_counts_are_exact(tmp_path: Path) -> None:
    many = tuple(f"web:{i:05d}" for i in range(runs_mod.MAX_IDS + 50))
    with recording(tmp_path, BuildReport(index_version="v1", changes=Changes(added=many))):
        pass
    [run] = read_runs(tmp_path)
    assert len(run.added) == runs_mod.MAX_IDS and run.counts["added"] == len(many)


def test_a_dead_schedulers_plan_is_not_shown_as_the_next_run(tmp_path: Path) -> None:
    assert read_schedule(tmp_path) is None
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write_schedule(tmp_path, {"pid": int(gone.stdout), "spec": "every 1d", "running": True,
                              "next_run": "2026-11-22T03:00:00Z"})
    plan = read_schedule(tmp_path)
    assert plan is not None and plan["running"] is False and plan["next_run"] is None


def test_status_shows_failed_runs_even_before_any_version(tmp_path: Path) -> None:
    settings = make_home(tmp_path / "kb", [])
    settings.catalog_path.write_text("{broken\n")
    result = cli("--home", str(settings.home), "build", "--offline")
    assert result.exit_code == 1 and "bad catalog line" in result.output
    [run] = read_runs(settings.index_dir)
    assert not run.ok and "bad catalog line" in run.error and run.trigger == "build"

    status = cli("--home", str(settings.home), "status")
    text = " ".join(status.output.split())
    assert status.exit_code == 1 and "run `dmlqa build` first" in text
    assert "Last runs" in text and "failed" in text and "catalog" in text
    assert "Next scheduled run: none" in text
