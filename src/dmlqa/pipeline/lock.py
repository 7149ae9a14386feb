"""One writer per home: an advisory lock file that names its holder.

``fcntl.flock`` is released by the kernel when the holding process dies, even by ``kill -9``,
so a lock left behind by a crash is never mistaken for a live build: the next writer simply gets
it. The file's content (PID, start time, command) only serves the message shown to the loser.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

from dmlqa.errors import BuildLockedError
from dmlqa.paths import LOCK_FILE


class WriterLock:
    def __init__(self, home: Path, what: str = "build") -> None:
        self.path = home / LOCK_FILE
        self.what = what
        self._fh = None

    def acquire(self) -> WriterLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            try:
                holder = json.loads(fh.read() or "{}")
            except ValueError:
                holder = {}
            fh.close()
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("started", 0)))
            raise BuildLockedError(
                f"another dmlqa {holder.get('what', 'build')} is running on {self.path.parent} "
                f"(PID {holder.get('pid', '?')}, started {since}: {holder.get('cmd', '?')}); "
                "wait for it to finish"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "started": time.time(), "what": self.what,
                             "cmd": " ".join(sys.argv)[:300]}))
        fh.flush()
        self._fh = fh
        return self

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
