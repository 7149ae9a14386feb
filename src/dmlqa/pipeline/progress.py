"""Progress bars for the build stages (rich), shown only on a terminal."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RichProgress:
    """One bar per stage; a no-op when ``enabled`` is false (pipes, CI logs, --json)."""

    def __init__(self, console: Console, *, enabled: bool = True) -> None:
        self._enabled = enabled
        self._progress = Progress(
            TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False,
        )
        self._tasks: dict[str, int] = {}

    def __enter__(self) -> RichProgress:
        if self._enabled:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._enabled:
            self._progress.stop()

    def start(self, stage: str, total: int) -> Callable[[int], None]:
        if not self._enabled:
            return lambda n: None
        task = self._progress.add_task(stage, total=total)
        self._tasks[stage] = task
        return lambda n: self._progress.advance(task, n)

    def done(self, stage: str) -> None:
        if self._enabled and stage in self._tasks:
            task = self._tasks[stage]
            self._progress.update(task, completed=self._progress.tasks[task].total)
