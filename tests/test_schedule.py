"""``dmlqa schedule``: parsing schedules, running builds at their slots, surviving failed runs, one
scheduler per home, the next run in ``dmlqa status``, and ``--refresh-lists``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from httpserver import LocalServer, Reply
from rebuild_fixtures import build_json, cli, make_home, page_markdown, url_of, write_archive

from dmlqa.catalog.store import import_lists, read_catalog
from dmlqa.catalog.urls import resource_id
from dmlqa.index.versions import current_version
from dmlqa.models import Resource
from dmlqa.pipeline.build import run_build
from dmlqa.pipeline.lock import WriterLock
from dmlqa.pipeline.refresh import replace_list_entries, upstream_urls
from dmlqa.pipeline.report import BuildOptions
from dmlqa.pipeline.runs import read_runs, read_schedule
from dmlqa.pipeline.schedule import RunOutcome, Schedule, ScheduleError, SchedulerLock, parse_duration, run_scheduler

KEYS = ["zero", "gpipe", "horovod"]


# -- schedules ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("24h", 86400), ("90m", 5400), ("1h30m", 5400), ("1d", 86400), ("45s", 45), ("2", 2), ("1w", 604800),
    ("0.5s", 0.5), ("1H 30M", 5400),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "0s", "tomorrow", "24x", "h24", "-1h", "1h30"])
def test_bad_durations_say_what_is_expected(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse_duration(text)


def test_schedule_needs_exactly_one_valid_spec() -> None:
    with pytest.raises(ScheduleError, match="exactly one"):
        Schedule.parse()
    with pytest.raises(ScheduleError, match="exactly one"):
        Schedule.parse(every="1h", cron="0 3 * * *")
    for bad in ("61 3 * * *", "0 3 * *", "every night", "0 3 * * * *"):
        with pytest.raises(ScheduleError, match="cron"):
            Schedule.parse(cron=bad)
    assert Schedule.parse(every="24h").spec == "every 1d"
    assert Schedule.parse(cron="0  3 * * *").spec == "cron 0 3 * * *"
    assert Schedule.parse(cron="@daily").next_after(datetime.now().astimezone()).astimezone().hour == 0


def test_interval_slots_are_anchored_and_cron_slots_are_local_wall_clock() -> None:
    every = Schedule.parse(every="10m")
    anchor = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    assert every.next_after(anchor, anchor=anchor) == anchor + timedelta(minutes=10)
    # A run that overran two slots resumes at the next slot in the future, not three runs in a row.
    late = anchor + timedelta(minutes=25)
    assert every.next_after(late, anchor=anchor) == anchor + timedelta(minutes=30)

    nightly = Schedule.parse(cron="0 3 * * *")
    now = datetime.now().astimezone()
    slot = nightly.next_after(now)
    local = slot.astimezone()
    assert slot > now and (local.hour, local.minute, local.second) == (3, 0, 0)
    assert slot - now <= timedelta(days=1, hours=1)
    assert nightly.next_after(slot) - slot >= timedelta(hours=23)  # strictly after a slot: the next day's


# -- running ---------------------------------------------------------------------------------------------


def test_scheduler_with_a_short_interval_runs_twice_and_records_both(tmp_path: Path) -> None:
    settings = make_home(tmp_path / "kb", KEYS)
    archive = write_archive(tmp_path / "a", {k: page_markdown(k) for k in KEYS})
    result = cli("--home", str(settings.home), "schedule", "--every", "1s", "--now", "--max-runs", "2",
                 "--offline", "--archive", str(archive), "--json")
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in result.stdout.splitlines()]
    assert len(lines) == 2 and all(x["ok"] for x in lines)
    assert lines[0]["report"]["changes"]["added"] == ["web:gpipe", "web:horovod", "web:zero"]
    assert lines[1]["report"]["changes"] == {"added": [], "updated": [], "removed": []}
    assert lines[1]["report"]["embedded"] == 0  # the second run reused every vector
    assert datetime.fromisoformat(lines[1]["started_at"]) > datetime.fromisoformat(lines[0]["started_at"])

    runs = read_runs(settings.index_dir)
    assert [(r.ok, r.trigger) for r in runs] == [(True, "schedule"), (True, "schedule")]
    assert runs[1].previous_version == runs[0].index_version
    assert current_version(settings.index_dir) == runs[1].index_version
    sched = read_schedule(settings.index_dir)
    assert sched is not None and sched["spec"] == "every 1s" and sched["runs"] == 2
    assert sched["running"] is False and sched["next_run"] is None


def test_a_failed_run_keeps_the_version_and_the_next_slot_tries_again(tmp_path: Path) -> None:
    settings = make_home(tmp_path / "kb", KEYS)
    archive = write_archive(tmp_path / "a", {k: page_markdown(k) for k in KEYS})
    v1 = build_json(settings.home, archive)["index_version"]
    good = settings.catalog_path.read_text()
    settings.catalog_path.write_text(good + "{not json\n")  # e.g. a half-edited catalog
    seen: list[tuple[bool, str | None]] = []

    def after(outcome: RunOutcome) -> None:
        seen.append((outcome.ok, current_version(settings.index_dir)))
        settings.catalog_path.write_text(good)  # fixed before the next slot

    outcomes = run_scheduler(settings, Schedule.parse(every="1s"), BuildOptions(archives=(archive,), offline=True),
                             run_now=True, max_runs=2, on_run=after)
    assert [o.ok for o in outcomes] == [False, True]
    assert "bad catalog line" in (outcomes[0].error or "") and outcomes[0].next_run is not None
    assert seen[0] == (False, v1)  # the failed run left the published version alone
    assert seen[1][1] == outcomes[1].report.index_version != v1
    runs = read_runs(settings.index_dir)
    assert [(r.ok, r.trigger) for r in runs] == [(True, "build"), (False, "schedule"), (True, "schedule")]
    assert "bad catalog line" in runs[1].error and runs[1].index_version is None


def test_status_shows_the_next_run_and_a_second_scheduler_is_refused(tmp_path: Path) -> None:
    settings = make_home(tmp_path / "kb", KEYS)
    archive = write_archive(tmp_path / "a", {k: page_markdown(k) for k in KEYS})
    stop, first_done = threading.Event(), threading.Event()
    outcomes: list[RunOutcome] = []
    thread = threading.Thread(target=lambda: outcomes.extend(run_scheduler(
        settings, Schedule.parse(every="1h"), BuildOptions(archives=(archive,), offline=True),
        run_now=True, stop=stop, on_run=lambda o: first_done.set())))
    thread.start()
    try:
        assert first_done.wait(120)
        st = json.loads(cli("--home", str(settings.home), "status", "--json").stdout)
        assert st["index_version"] == current_version(settings.index_dir) and len(st["runs"]) == 1
        assert st["runs"][0]["trigger"] == "schedule" and st["runs"][0]["counts"]["added"] == 3
        nxt = datetime.fromisoformat(st["next_run"].replace("Z", "+00:00"))
        assert timedelta(minutes=58) < nxt - datetime.now(UTC) <= timedelta(hours=1)
        assert st["schedule"]["running"] and st["schedule"]["pid"] == os.getpid()
        table = cli("--home", str(settings.home), "status").stdout
        assert "Next scheduled run:" in table and "every 1h" in table and "Last runs" in table

        second = cli("--home", str(settings.home), "schedule", "--every", "1h")
        assert second.exit_code == 1
        assert "another dmlqa schedule is running" in second.output and f"PID {os.getpid()}" in second.output
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive() and len(outcomes) == 1
    assert json.loads(cli("--home", str(settings.home), "status", "--json").stdout)["next_run"] is None
    with SchedulerLock(settings.home):  # released on the way out
        pass


def test_a_slot_that_finds_a_build_running_is_skipped(tmp_path: Path) -> None:
    settings = make_home(tmp_path / "kb", KEYS)
    with WriterLock(settings.home, "build"):
        outcomes = run_scheduler(settings, Schedule.parse(every="1h"), BuildOptions(offline=True),
                                 run_now=True, max_runs=1)
    assert outcomes[0].skipped and not outcomes[0].ok and "another dmlqa build is running" in outcomes[0].error
    assert read_runs(settings.index_dir) == []  # the running build records its own run


def test_bad_schedules_fail_before_anything_runs(tmp_path: Path) -> None:
    result = cli("--home", str(tmp_path), "schedule", "--cron", "0 25 * * *")
    assert result.exit_code == 1 and "cron" in result.output
    result = cli("--home", str(tmp_path), "schedule")
    assert result.exit_code == 1 and "--every" in result.output
    assert not (tmp_path / "index" / "schedule.json").exists()


# -- --refresh-lists ------------------------------------------------------------------------------------


def list_text(title: str, keys: list[str], upstream: str | None) -> str:
    head = f"---\nupstream: {upstream}\n---\n" if upstream else ""
    items = "\n".join(f"- [Notes on {k}]({url_of(k)})" for k in keys)
    return f"{head}# {title}\n\n## Papers\n\n{items}\n"


def ids(*keys: str) -> list[str]:
    return sorted(resource_id(url_of(k)) for k in keys)


def test_refresh_lists_merges_upstream_changes_and_keeps_lists_that_fail(tmp_path: Path) -> None:
    server = LocalServer()
    try:
        server.route("/robots.txt", Reply(404))
        dml_url, gone_url = server.url("/lists/dml.md"), server.url("/lists/gone.md")
        settings = make_home(tmp_path / "kb", [])
        settings = settings.with_overrides(allow_private_hosts=True)
        files = {
            "dml.md": list_text("DML reading", ["zero", "gpipe", "horovod"], dml_url),
            "gone.md": list_text("Gone list", ["ring"], gone_url),
            "mine.md": list_text("My list", ["fsdp"], None),
        }
        for name, text in files.items():
            (tmp_path / name).write_text(text)
        import_lists([tmp_path / n for n in files], settings.corpus_dir)
        assert sorted(r.id for r in read_catalog(settings.catalog_path)) == ids("zero", "gpipe", "horovod", "ring",
                                                                                 "fsdp")
        keys = ["zero", "gpipe", "horovod", "megatron", "ring", "fsdp"]
        archive = write_archive(tmp_path / "a", {k: page_markdown(k) for k in keys})
        first = run_build(settings, BuildOptions(archives=(archive,)))
        assert first.documents == 5 and first.refresh is None

        # Upstream, horovod left the list and megatron joined it; the other list's repository is gone.
        server.route("/lists/dml.md", Reply(200, body=list_text("DML reading", ["zero", "gpipe", "megatron"],
                                                                dml_url).encode(),
                                            content_type="text/plain; charset=utf-8"))
        server.route("/lists/gone.md", Reply(404, body=b"Not Found"))
        second = run_build(settings, BuildOptions(archives=(archive,), refresh_lists=True))
        lists = {x["name"]: x for x in second.refresh["lists"]}
        assert lists["dml-reading"]["status"] == "updated" and lists["dml-reading"]["source_url"] == dml_url
        assert lists["dml-reading"]["added"] == ids("megatron") and lists["dml-reading"]["removed"] == ids("horovod")
        assert lists["gone-list"]["status"] == "failed" and "404" in lists["gone-list"]["error"]
        assert lists["my-list"]["status"] == "no-upstream"
        assert second.refresh["added"] == ids("megatron") and second.refresh["removed"] == ids("horovod")
        assert any(f.stage == "refresh" and f.url == gone_url for f in second.failed)
        # The catalog and the next version follow: horovod out, megatron in, the failed list's entry kept.
        assert sorted(r.id for r in read_catalog(settings.catalog_path)) == ids("zero", "gpipe", "megatron", "ring",
                                                                                 "fsdp")
        assert (second.changes.added, second.changes.removed) == (tuple(ids("megatron")), tuple(ids("horovod")))
        assert "megatron" in (settings.corpus_dir / "lists" / "dml-reading.md").read_text()
        run = read_runs(settings.index_dir)[-1]
        assert run.ok and run.refresh is not None and run.refresh["removed"] == ids("horovod")
        assert any("refresh" in f for f in run.failed)

        # Nothing new upstream: the list is unchanged and so is the catalog.
        third = run_build(settings, BuildOptions(archives=(archive,), refresh_lists=True))
        assert {x["name"]: x["status"] for x in third.refresh["lists"]}["dml-reading"] == "unchanged"
        assert third.refresh["added"] == [] and third.refresh["removed"] == []

        # An HTML page where the markdown should be (a moved repository's landing page) is not a list.
        server.route("/lists/dml.md", Reply(200, body=b"<html><body><p>Moved!</p></body></html>"))
        fourth = run_build(settings, BuildOptions(archives=(archive,), refresh_lists=True))
        dml = {x["name"]: x for x in fourth.refresh["lists"]}["dml-reading"]
        assert dml["status"] == "failed" and "not the list's markdown" in dml["error"]
        assert len(read_catalog(settings.catalog_path)) == 5
    finally:
        server.close()


def test_github_upstreams_are_read_from_their_raw_readme() -> None:
    assert upstream_urls("https://github.com/Shenggan/awesome-distributed-ml") == [
        "https://raw.githubusercontent.com/Shenggan/awesome-distributed-ml/HEAD/README.md",
        "https://github.com/Shenggan/awesome-distributed-ml",
    ]


def test_replacing_a_lists_entries_spares_other_lists_and_hand_added_entries() -> None:
    def res(key: str, *lists: str) -> Resource:
        return Resource(id=key, url=f"https://example.org/{key}", title=key, lists=lists)

    catalog = [res("a", "l1"), res("b", "l1", "l2"), res("c", "l2"), res("d")]
    after = {r.id: r for r in replace_list_entries(catalog, "l1", [res("e", "l1")])}
    assert set(after) == {"b", "c", "d", "e"}  # a only l1 named: gone; b kept for l2; d added by hand
    assert after["b"].lists == ("l2",) and after["e"].lists == ("l1",)


def test_sigterm_stops_the_scheduler_and_marks_it_stopped(tmp_path: Path) -> None:
    settings = make_home(tmp_path / "kb", [])
    proc = subprocess.Popen([sys.executable, "-m", "dmlqa.app.cli", "--home", str(settings.home), "schedule",
                             "--every", "1h"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while (plan := read_schedule(settings.index_dir)) is None or plan.get("pid") != proc.pid:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        assert plan["running"] and plan["next_run"]
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "stopped by SIGTERM" in err
    plan = read_schedule(settings.index_dir)
    assert plan is not None and plan["running"] is False and plan["next_run"] is None and plan["runs"] == 0


def test_schedule_command_honours_the_executor_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`executor = "ray"` in dmlqa.toml reaches scheduled builds too (it was read by build only)."""
    from typer.testing import CliRunner

    import dmlqa.pipeline.schedule as schedule_mod
    from dmlqa.app.cli import app as cli_app

    seen = {}

    def fake_run_scheduler(settings, plan, options, **kw):  # noqa: ANN001, ANN003, ANN202
        seen["executor"] = settings.build.executor  # the one place a build reads it from

    monkeypatch.setattr(schedule_mod, "run_scheduler", fake_run_scheduler)
    home = tmp_path / "kb"
    assert CliRunner().invoke(cli_app, ["--home", str(home), "init"]).exit_code == 0
    (home / "dmlqa.toml").write_text('executor = "ray"\n', encoding="utf-8")
    result = CliRunner().invoke(cli_app, ["--home", str(home), "schedule", "--every", "24h", "--max-runs", "1"])
    assert result.exit_code == 0, result.output
    assert seen == {"executor": "ray"}


@pytest.mark.parametrize("toml", ['executor = "ray"\n', '[build]\nexecutor = "ray"\n'], ids=["flat", "section"])
def test_scheduled_builds_run_on_the_executor_of_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str
) -> None:
    """A scheduled run builds with the executor dmlqa.toml names, whichever way it is spelled.

    The Ray executor is replaced by one that only says it was chosen, so no cluster is needed.
    """
    import dmlqa.pipeline.ray_executor as ray_executor
    from dmlqa.errors import ExecutorError
    from dmlqa.settings import load_settings

    class ChosenRay(ray_executor.RayExecutor):
        def __enter__(self) -> ChosenRay:
            raise ExecutorError(f"the ray executor was chosen ({self.settings.build.executor})")

    monkeypatch.setattr(ray_executor, "RayExecutor", ChosenRay)
    home = make_home(tmp_path / "kb", KEYS).home
    (home / "dmlqa.toml").write_text(toml, encoding="utf-8")
    settings = load_settings(home, env={})
    outcomes = run_scheduler(settings, Schedule.parse(every="1h"), BuildOptions(offline=True), run_now=True,
                             max_runs=1)
    assert [o.error for o in outcomes] == ["the ray executor was chosen (ray)"]
    assert [(r.ok, r.trigger, r.error) for r in read_runs(settings.index_dir)] == [
        (False, "schedule", "the ray executor was chosen (ray)")
    ]
