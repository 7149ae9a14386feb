"""The fetch manifest: per URL, what happened last time and the last good response.

A SQLite table beside the WARC archive (``corpus/manifest.sqlite``). It supplies the validators
(ETag, Last-Modified) that make a rebuild's requests conditional, keeps them across a transient
failure, and points at the WARC record of the last 2xx so a 304 can still be read (the resolver
needs the old landing page to find its PDF link). Split from :mod:`dmlqa.acquire.archive` because
it is a database of outcomes, not an archive of responses.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from warcio.exceptions import ArchiveLoadFailed

from dmlqa.acquire.archive import read_response, to_fetch_result
from dmlqa.acquire.http import utc_now_iso
from dmlqa.errors import ArchiveError
from dmlqa.models import FetchResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ManifestEntry:
    """The manifest's row for one URL.

    ``status``, ``error`` and ``fetched_at`` describe the latest attempt; the other fields
    describe the last successful (2xx) response, kept across later 304s and failures so that
    the validators survive a transient error.
    """

    url: str
    final_url: str | None
    status: int | None
    content_type: str | None
    etag: str | None
    last_modified: str | None
    sha256: str | None
    size: int | None
    fetched_at: str | None
    error: str | None
    warc_path: str | None
    warc_offset: int | None
    from_archive: bool
    ok_at: str | None  # when the last 2xx was fetched

    @property
    def ok(self) -> bool:
        """True when a 2xx response is on record (so the validators mean something)."""
        return self.ok_at is not None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS fetches (
    url TEXT PRIMARY KEY,
    final_url TEXT,
    status INTEGER,
    content_type TEXT,
    etag TEXT,
    last_modified TEXT,
    sha256 TEXT,
    size INTEGER,
    fetched_at TEXT,
    error TEXT,
    warc_path TEXT,
    warc_offset INTEGER,
    from_archive INTEGER NOT NULL DEFAULT 0,
    ok_at TEXT
)
"""
_COLUMNS = (
    "url, final_url, status, content_type, etag, last_modified, sha256, size, fetched_at, error, "
    "warc_path, warc_offset, from_archive, ok_at"
)


def _entry(row: Sequence[Any]) -> ManifestEntry:
    """A row selected with ``_COLUMNS`` as a :class:`ManifestEntry`."""
    values = dict(zip(_COLUMNS.split(", "), row, strict=True))
    values["from_archive"] = bool(values["from_archive"])
    return ManifestEntry(**values)


class Manifest:
    """SQLite table with one row per URL: the latest outcome and the last good response.

    Safe to use from several threads (one connection behind a lock); every record commits.
    WARC paths inside the manifest's folder are stored relative to it, so a knowledge-base
    home can be moved.
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.db_path), check_same_thread=False)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL keeps it consistent; a row per fetch
            self._db.execute(_SCHEMA)

    def __enter__(self) -> Manifest:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _store_path(self, warc_path: str | None) -> str | None:
        if not warc_path:
            return None
        path = Path(warc_path).resolve()
        try:
            return str(path.relative_to(self.db_path.parent.resolve()))
        except ValueError:
            return str(path)

    def warc_file(self, entry: ManifestEntry) -> Path | None:
        """The absolute path of an entry's WARC file, if it has one."""
        if not entry.warc_path:
            return None
        path = Path(entry.warc_path)
        return path if path.is_absolute() else self.db_path.parent / path

    def record(
        self,
        result: FetchResult | None = None,
        *,
        url: str | None = None,
        error: str | None = None,
        warc_path: str | None = None,
        warc_offset: int | None = None,
        status: int | None = None,
    ) -> None:
        """Record one fetch outcome: a result (2xx or not_modified) or ``url`` + ``error``.

        A failure or a 304 keeps the row's last good response (final URL, validators, hash,
        WARC location); a 2xx replaces it.
        """
        now = utc_now_iso()
        if result is None:
            if not url:
                raise ValueError("Manifest.record needs a result or a url")
            sql = (
                "INSERT INTO fetches (url, status, fetched_at, error) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(url) DO UPDATE SET status=excluded.status, fetched_at=excluded.fetched_at, "
                "error=excluded.error"
            )
            params: tuple[object, ...] = (url, status, now, error or "unknown error")
        elif result.not_modified:
            sql = (
                "INSERT INTO fetches (url, final_url, status, content_type, etag, last_modified, sha256, "
                "fetched_at, from_archive) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(url) DO UPDATE SET status=excluded.status, fetched_at=excluded.fetched_at, "
                "error=NULL, etag=COALESCE(excluded.etag, etag), "
                "last_modified=COALESCE(excluded.last_modified, last_modified)"
            )
            params = (
                url or result.url,
                result.final_url,
                result.status,
                result.content_type or None,
                result.etag,
                result.last_modified,
                result.sha256 or None,
                result.fetched_at or now,
                int(result.from_archive),
            )
        else:
            fetched_at = result.fetched_at or now
            sql = (
                f"INSERT OR REPLACE INTO fetches ({_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            )
            params = (
                url or result.url,
                result.final_url,
                result.status,
                result.content_type,
                result.etag,
                result.last_modified,
                result.sha256 or None,
                len(result.body),
                fetched_at,
                error,
                self._store_path(warc_path),
                warc_offset,
                int(result.from_archive),
                fetched_at,
            )
        with self._lock, self._db:
            self._db.execute(sql, params)

    def entry(self, url: str) -> ManifestEntry | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM fetches WHERE url = ?", (url,)).fetchone()
        if row is None:
            return None
        return _entry(row)

    def entries(self) -> list[ManifestEntry]:
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM fetches ORDER BY url").fetchall()
        return [_entry(r) for r in rows]

    def validators(self, url: str) -> tuple[str | None, str | None] | None:
        """(ETag, Last-Modified) of the last 2xx for ``url``; None when there is nothing to send."""
        entry = self.entry(url)
        if entry is None or not entry.ok or not (entry.etag or entry.last_modified):
            return None
        return entry.etag, entry.last_modified

    def previous_copy(self, url: str) -> FetchResult | None:
        """The last 2xx body for ``url`` read back from its WARC record, or None if not at hand."""
        entry = self.entry(url)
        if entry is None or not entry.ok or entry.warc_offset is None:
            return None
        path = self.warc_file(entry)
        if path is None or not path.is_file():
            return None
        try:
            response = read_response(path, entry.warc_offset)
        except (ArchiveError, OSError, ArchiveLoadFailed, zlib.error, EOFError) as exc:
            logger.warning("cannot read the archived copy of %s: %s", url, exc)
            return None
        if not 200 <= response.status < 300:
            return None
        return to_fetch_result(url, response)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM fetches").fetchone()[0])


def archived_body(db_path: Path, sha256: str) -> bytes | None:
    """The archived response body whose sha256 is ``sha256`` (the bytes a document was extracted from),
    read without writing to the manifest; None when no readable WARC record holds those bytes.

    Looked up by content, not URL: a document's text may come from a redirect's target or the PDF
    behind a landing page, and only its hash says which record it was read from.
    """
    import hashlib

    if not Path(db_path).is_file() or not sha256:
        return None
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            rows = db.execute(f"SELECT {_COLUMNS} FROM fetches WHERE sha256=? AND warc_offset IS NOT NULL",
                              (sha256,)).fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    for entry in map(_entry, rows):
        path = Path(entry.warc_path or "")
        path = path if path.is_absolute() else Path(db_path).parent / path
        try:
            body = read_response(path, entry.warc_offset).body
        except (ArchiveError, OSError, ArchiveLoadFailed, zlib.error, EOFError, StopIteration) as exc:
            logger.warning("cannot read the archived copy of %s: %s", entry.url, exc)
            continue
        if hashlib.sha256(body).hexdigest() == sha256:
            return body
    return None

