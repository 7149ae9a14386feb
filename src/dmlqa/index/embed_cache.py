"""The embedding cache: vectors keyed by (encoder key, sha256 of the text), in one SQLite file.

In the spirit of ``simonw/llm``: an unchanged text is never embedded twice, whichever document or
build it came from. The build writes new vectors as it goes (:func:`dmlqa.index.embed.embed_texts`
flushes every few seconds and when interrupted), so the cache must survive a process killed at any
moment: each :meth:`EmbeddingCache.put_many` is one transaction of a WAL-mode database, and a kill
in the middle of one loses that write only, never what earlier writes committed.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dmlqa.errors import DiskFullError, is_disk_full

__all__ = ["EmbeddingCache"]


class EmbeddingCache:
    """SQLite table of vectors keyed by (encoder key, sha256 of text)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        # Shared by a build, the app's worker threads and CLI processes: one lock per object,
        # and a busy timeout for writers in other processes.
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=10.0)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (encoder TEXT, sha256 TEXT, vector BLOB, "
            "PRIMARY KEY (encoder, sha256))"
        )

    def get_many(self, encoder: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        with self._lock:
            for s in range(0, len(unique), 500):
                part = unique[s : s + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT sha256, vector FROM embeddings WHERE encoder=? AND sha256 IN ({marks})",
                    [encoder, *part],
                ).fetchall()
                for sha, blob in rows:
                    found[sha] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, encoder: str, items: dict[str, np.ndarray]) -> None:
        """Store ``items`` (sha256 → vector) in one transaction: all of them or, killed half-way, none."""
        try:
            with self._lock, self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)",
                    [(encoder, sha, np.asarray(v, dtype=np.float32).tobytes()) for sha, v in items.items()],
                )
        except sqlite3.Error as exc:  # SQLite names no file: say which one filled the disk
            if is_disk_full(exc, self._path.parent):
                raise DiskFullError(f"disk full while writing {self._path}: free space and run again") from None
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()
