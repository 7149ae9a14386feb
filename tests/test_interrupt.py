"""Interrupting a build loses nothing: real child processes, the real bundled encoder, real signals.

A fresh home gets a few hundred passages of local documents, and ``dmlqa build`` (or ``dmlqa
schedule``) runs as a child process. Once the embedding cache shows vectors written, the child is
sent SIGINT, SIGTERM or SIGKILL: the moment is taken from the cache itself, never from a sleep.
Then the cache must hold what was embedded (a count read from SQLite, not from the product's
output), the run must be recorded as interrupted, and the next build must embed exactly the
passages the cache still lacks.

The documents are written in run-on sentences over the quotable length, so a build embeds
passages only (no sentence stage to wait for), and ``DMLQA_EMBED_FLUSH_SECONDS`` makes the child
write its vectors every 50 ms, so the first rows appear long before its last passage is embedded,
however fast or slow the machine is.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures_docs import prose
from rebuild_fixtures import cli

from dmlqa.errors import Interrupted
from dmlqa.index.embed import EmbeddingCache, embed_texts
from dmlqa.pipeline.home import init_home
from dmlqa.pipeline.runs import read_runs
from dmlqa.settings import Settings, load_settings

DOCS, SECTIONS = 16, 12
#: Generous: a busy 2-core machine runs a child's imports, model load and first batches slowly.
WAIT_S = 600.0
LINE = re.compile(
    r"^interrupted: stopped by (SIG\w+) while embedding: ([\d,]+) of ([\d,]+) passages embedded are kept; "
    r"run `dmlqa build` again to continue$"
)


def long_sentences(seed: int) -> str:
    """One paragraph as a single sentence of 500+ characters: a passage, never a quotable sentence."""
    return prose(8, seed=seed).rstrip(".").replace(". ", ", and then ") + "."


@pytest.fixture()
def home(tmp_path: Path) -> Settings:
    """A fresh home with ``DOCS`` local markdown documents of ``SECTIONS`` sections each, added by ``dmlqa add``."""
    settings = load_settings(tmp_path / "kb")
    init_home(settings)
    docs = tmp_path / "docs"
    docs.mkdir()
    for d in range(DOCS):
        parts = [f"# Field notes {d}", ""]
        for s in range(SECTIONS):
            parts += [f"## Section {s}", "", f"Note {d}.{s}: " + long_sentences(d * 100 + s), ""]
        (docs / f"notes-{d:03d}.md").write_text("\n".join(parts), encoding="utf-8")
    added = cli("--home", str(settings.home), "add", str(docs))
    assert added.exit_code == 0, added.output
    return settings


def cached_rows(path: Path) -> int:
    """Vectors in the embedding cache, read straight from its SQLite file (0 before it exists)."""
    if not path.is_file():
        return 0
    try:
        db = sqlite3.connect(str(path), timeout=30.0)
        try:
            return int(db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
        finally:
            db.close()
    except sqlite3.OperationalError:  # the child has not created the table yet
        return 0


def spawn(settings: Settings, *args: str) -> subprocess.Popen:
    env = {**os.environ, "DMLQA_EMBED_FLUSH_SECONDS": "0.05"}
    return subprocess.Popen([sys.executable, "-m", "dmlqa.app.cli", "--home", str(settings.home), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def signal_once_embedding(settings: Settings, proc: subprocess.Popen, sig: int) -> tuple[str, str]:
    """Send ``sig`` as soon as the cache has vectors, and wait for the child to end; its output."""
    cache = settings.paths.embeddings_cache
    deadline = time.monotonic() + WAIT_S
    try:
        while cached_rows(cache) == 0:
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"the child ended (rc {proc.returncode}) before embedding anything:\n{out}\n{err}")
            if time.monotonic() > deadline:
                pytest.fail("timed out waiting for the first vectors in the cache")
            time.sleep(0.01)
        proc.send_signal(sig)
        return proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def interrupted_line(err: str) -> tuple[str, int, int]:
    """The one ``interrupted:`` line of the child's stderr: (signal, kept, total)."""
    lines = [line for line in err.splitlines() if line.startswith("interrupted:")]
    assert len(lines) == 1, err
    m = LINE.match(lines[0])
    assert m, lines[0]
    return m.group(1), int(m.group(2).replace(",", "")), int(m.group(3).replace(",", ""))


def resume(settings: Settings) -> dict:
    result = cli("--home", str(settings.home), "build", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_ctrl_c_mid_embed_keeps_the_vectors_and_the_next_build_embeds_only_the_rest(home: Settings) -> None:
    proc = spawn(home, "build")
    out, err = signal_once_embedding(home, proc, signal.SIGINT)

    assert proc.returncode == 130, err
    sig, kept, total = interrupted_line(err)
    rows = cached_rows(home.paths.embeddings_cache)
    assert sig == "SIGINT" and rows == kept and 0 < kept < total, (rows, kept, total)
    assert "Traceback" not in err

    status = cli("--home", str(home.home), "status", "--json")  # no version yet: exit 1, the runs still shown
    run = json.loads(status.stdout)["runs"][0]
    assert run["interrupted"] is True and run["ok"] is False and run["pid"] == proc.pid
    assert run["error"].startswith("interrupted: stopped by SIGINT while embedding")
    assert f"{kept:,} of {total:,} passages" in run["error"]

    again = resume(home)
    assert again["chunks"] == total and again["index_version"]
    assert again["embedded"] == total - rows and again["reused_embeddings"] == rows
    assert cached_rows(home.paths.embeddings_cache) == total + again["embedded_sentences"]
    assert [(r.ok, r.interrupted) for r in read_runs(home.index_dir)] == [(False, True), (True, False)]


def test_sigterm_stops_a_build_like_ctrl_c(home: Settings) -> None:
    proc = spawn(home, "build", "--json")
    out, err = signal_once_embedding(home, proc, signal.SIGTERM)

    assert proc.returncode == 128 + signal.SIGTERM, err  # as a shell reports it (143)
    assert out == ""  # no report: nothing was published
    sig, kept, total = interrupted_line(err)
    assert sig == "SIGTERM" and cached_rows(home.paths.embeddings_cache) == kept and 0 < kept < total
    (run,) = read_runs(home.index_dir)
    assert run.interrupted and not run.ok and run.finished_at is not None


def test_sigterm_stops_the_scheduler_mid_build_and_keeps_the_vectors(home: Settings) -> None:
    proc = spawn(home, "schedule", "--every", "1h", "--now")
    _out, err = signal_once_embedding(home, proc, signal.SIGTERM)

    assert proc.returncode == 0, err  # a scheduler told to stop has stopped: not a failure
    m = re.search(r"stopped by SIGTERM while embedding: ([\d,]+) of ([\d,]+) passages embedded are kept", err)
    assert m, err
    kept, total = (int(g.replace(",", "")) for g in m.groups())
    assert cached_rows(home.paths.embeddings_cache) == kept and 0 < kept < total
    (run,) = read_runs(home.index_dir)
    assert run.interrupted and run.trigger == "schedule" and "SIGTERM" in (run.error or "")


def test_kill_9_mid_embed_leaves_a_sound_cache_that_the_next_build_uses(home: Settings) -> None:
    proc = spawn(home, "build")
    signal_once_embedding(home, proc, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL

    cache = home.paths.embeddings_cache
    db = sqlite3.connect(str(cache))
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()
    rows = cached_rows(cache)
    assert rows > 0

    again = resume(home)
    assert again["embedded"] == again["chunks"] - rows and again["reused_embeddings"] == rows
    runs = read_runs(home.index_dir)
    assert [(r.ok, r.interrupted) for r in runs] == [(False, True), (True, False)]
    assert runs[0].pid == proc.pid and runs[0].error.startswith("interrupted")


@pytest.mark.parametrize(("flush_seconds", "rows_seen"), [(0.0, [0, 2, 4, 6]), (3600.0, [0, 0, 0, 0])])
def test_embed_loop_writes_batches_as_they_come_and_keeps_them_on_ctrl_c(
    tmp_path: Path, encoder, flush_seconds: float, rows_seen: list[int]  # noqa: ANN001
) -> None:
    """The loop itself, in process: with ``flush_seconds=0`` every batch is in the cache before the
    next one is asked for; with an hour, none is, and the Ctrl-C writes them. Either way the
    KeyboardInterrupt leaves as Interrupted counting what is kept, and the next call embeds the rest."""
    path = tmp_path / "e.sqlite"
    texts = [f"Passage {i}: " + prose(2, seed=i) for i in range(10)]
    rows_before_batch: list[int] = []

    def ctrl_c_at_fourth_batch(todo, groups):  # noqa: ANN001, ANN202 - a VectorSource
        for n, group in enumerate(groups):
            rows_before_batch.append(cached_rows(path))
            if n == 3:
                raise KeyboardInterrupt
            yield group, encoder.encode([todo[i] for i in group])

    cache = EmbeddingCache(path)
    try:
        with pytest.raises(Interrupted) as caught:
            embed_texts(texts, encoder, cache, batch_size=2, flush_seconds=flush_seconds,
                        source=ctrl_c_at_fourth_batch)
        assert rows_before_batch == rows_seen
        stop = caught.value
        assert (stop.signal_name, stop.kept, stop.total) == ("SIGINT", 6, 10)
        assert isinstance(stop.__cause__, KeyboardInterrupt) and cached_rows(path) == 6

        again = embed_texts(texts, encoder, cache, batch_size=2)
        assert (again.embedded, again.reused) == (4, 6) and cached_rows(path) == 10
    finally:
        cache.close()
