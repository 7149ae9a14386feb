"""Extraction in a child process, under a per-document time limit (``build.extract_timeout_s``).

A crafted or merely odd page can cost minutes in the extractors (trafilatura's justext fallback is
quadratic in a run of short paragraphs; a PDF parser can loop), and Python cannot stop a thread.
So each document is extracted in a child process that the build kills, and replaces, when one runs
past the limit: that document becomes a failed resource with the reason, the build goes on.

One child serves a whole build (both executors: the local one, and each Ray task), so a document
costs a pipe round trip, not a process start. The child is a fresh interpreter (``python -m``), not
a fork: a build may run in a process with threads (the app, Ray workers), where forking is unsafe,
and ``multiprocessing`` would re-import the caller's ``__main__`` in the child.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from dmlqa.errors import ExtractError

__all__ = ["TimedExtractor", "timeout_reason"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Seconds a new child may take to import the extractors and warm them up.
STARTUP_S = 120.0
_READY = "ready"


def timeout_reason(limit_s: float) -> str:
    """The failure reason of a document whose extraction ran past ``limit_s``."""
    return f"extraction took longer than {limit_s:g} s"


class TimedExtractor:
    """Runs extraction functions in a child process, each call stopped after ``limit_s`` seconds.

    ``limit_s`` 0 (or less) runs them here, without a limit. Use as a context manager: leaving it
    ends the child. A call past the limit raises :class:`ExtractError` with :func:`timeout_reason`;
    an exception inside the call is raised here (as it was, or as a ``RuntimeError`` naming it when
    it cannot cross the pipe); log records the call made are handed to this process's loggers.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> TimedExtractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, fn: Callable[..., T], *args: Any, where: str, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` (a module-level function) in the child; ``where`` names the document in errors."""
        if self.limit_s <= 0:
            return fn(*args, **kwargs)
        proc = self._child()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            pickle.dump((fn, args, kwargs), proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            raise ExtractError(where, f"extraction worker stopped ({self._exit_text(proc)})") from None
        if not _readable(proc.stdout, self.limit_s):
            self.close()
            raise ExtractError(where, timeout_reason(self.limit_s))
        try:
            status, value, records = pickle.load(proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            self.close()
            raise ExtractError(where, f"extraction worker stopped ({self._exit_text(proc)})") from None
        for record in records:
            logging.getLogger(record.name).handle(record)
        if status == "ok":
            return value
        if status == "extract":
            raise ExtractError(where, value)
        raise value

    def close(self) -> None:
        """End the child (killed if it is still working); the next :meth:`run` starts a new one."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def _child(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self.close()
        # The child must import this very copy of dmlqa, installed or not.
        src = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env,
        )
        self._proc = proc
        # Starting is not the document's time: wait (generously) for the child to say it is ready.
        assert proc.stdout is not None
        try:
            if not _readable(proc.stdout, max(STARTUP_S, self.limit_s)) or pickle.load(proc.stdout) != _READY:
                raise EOFError
        except (EOFError, OSError, pickle.UnpicklingError):
            self.close()
            raise ExtractError("extraction worker", "the extraction process did not start") from None
        return proc

    @staticmethod
    def _exit_text(proc: subprocess.Popen[bytes]) -> str:
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "no answer"
        return f"exit status {code}"


def _readable(stream: IO[bytes], timeout_s: float) -> bool:
    """Wait until ``stream`` has data (or its end) for at most ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            ready, _, _ = select.select([stream], [], [], left)
        except InterruptedError:
            continue
        return bool(ready)


class _Collect(logging.Handler):
    """Keeps a call's log records (messages flattened) to send back with its result."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg, record.args, record.exc_info = record.getMessage(), None, None
        self.records.append(record)


def _serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """The child's loop: read a call, run it, write (status, value, log records)."""
    collect = _Collect()
    root = logging.getLogger()
    root.handlers[:] = [collect]
    root.setLevel(logging.INFO)
    while True:
        try:
            fn, args, kwargs = pickle.load(inp)
        except EOFError:
            return
        collect.records = []
        try:
            reply: tuple[str, Any] = ("ok", fn(*args, **kwargs))
        except ExtractError as exc:
            reply = ("extract", exc.reason)
        except Exception as exc:  # noqa: BLE001 - the caller decides; this loop must answer
            reply = ("error", exc)
        try:
            data = pickle.dumps((*reply, collect.records), protocol=pickle.HIGHEST_PROTOCOL)
            if reply[0] == "error":
                pickle.loads(data)  # some exceptions pickle but cannot be rebuilt (required arguments)
        except Exception as exc:  # noqa: BLE001 - an exception or result that cannot cross the pipe
            what = reply[1] if reply[0] == "error" else exc
            data = pickle.dumps(("error", RuntimeError(f"{type(what).__name__}: {what}"), []))
        out.write(data)
        out.flush()


def _warm_up() -> None:
    """Import the extractors and run one tiny page through them: their first call loads word lists
    and compiles patterns, which is the child's start, not the first document's time."""
    from dmlqa.extract.documents import extract_bytes

    page = b"<html><body><h1>Warm up</h1><p>Pipeline parallelism splits a model into stages.</p></body></html>"
    try:
        extract_bytes(page, "text/html")
    except Exception:  # noqa: BLE001, S110 - only warming up; real documents report their own errors
        pass


if __name__ == "__main__":
    # Results go on the original stdout; anything a library prints goes to stderr instead.
    results = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _warm_up()
    results.write(pickle.dumps(_READY))
    results.flush()
    _serve(sys.stdin.buffer, results)
