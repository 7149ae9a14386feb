"""Storage side of the fetch stage: WARC archive, fetch manifest, and archive replay.

Every network response a build receives is kept in a WARC file (the web-archiving standard,
readable by any WARC tool) so that a build can be audited and replayed later without the
network; the SQLite manifest says per URL what happened last time and supplies the validators
that make the next build's requests conditional. :class:`ArchiveReplay` serves responses from
WARC files (ours or anybody's, e.g. the shared offline snapshot) instead of the network.

Bodies are stored *decoded* (httpx undoes Content-Encoding), with headers fixed to match, so a
replayed response is consistent: no Content-Encoding, no Transfer-Encoding, true Content-Length.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import sqlite3
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO
from urllib.parse import urljoin, urlsplit

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from dmlqa.acquire.fetch import header_dict, sniff_content_type, storable_headers, utc_now_iso
from dmlqa.catalog.urls import spelling_key
from dmlqa.errors import DmlqaError
from dmlqa.models import FetchResult
from dmlqa.version import __version__

logger = logging.getLogger(__name__)

#: In-archive redirect chains longer than this are cut (a loop guard, not a politeness limit).
MAX_REPLAY_REDIRECTS = 10


class ArchiveError(DmlqaError):
    """A WARC file given for replay is missing, unreadable or not a WARC file."""


def _warc_date(fetched_at: str) -> str:
    """A WARC-Date (``YYYY-MM-DDThh:mm:ssZ``) from any ISO-8601 time; now if it cannot be read."""
    try:
        when = datetime.fromisoformat(fetched_at.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return utc_now_iso()
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- writing --------------------------------------------------------------------------------------


class ArchiveWriter:
    """Appends HTTP responses to ``archive_dir/dmlqa-<UTC yyyymmddThhmmssZ>.warc.gz``.

    The file is created on the first write, so a build that fetches nothing leaves no empty
    archive behind. Writes are serialised by a lock, so they may come from worker threads
    (the fetcher writes via ``asyncio.to_thread`` to keep gzip work off the event loop).
    Each record is flushed at once: an interrupted build still leaves a readable archive.
    """

    def __init__(self, archive_dir: Path) -> None:
        self.archive_dir = Path(archive_dir)
        self.path: Path | None = None
        self.records = 0
        self._fh: BinaryIO | None = None
        self._writer: WARCWriter | None = None
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _open(self) -> WARCWriter:
        self.archive_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        n = 1
        while True:  # two builds in the same second must not share (or clobber) a file
            name = f"dmlqa-{stamp}.warc.gz" if n == 1 else f"dmlqa-{stamp}-{n}.warc.gz"
            try:
                fh = open(self.archive_dir / name, "xb")  # noqa: SIM115 - closed in close()
            except FileExistsError:
                n += 1
                continue
            break
        self.path = self.archive_dir / name
        self._fh = fh
        writer = WARCWriter(fh, gzip=True)
        info = writer.create_warcinfo_record(
            name, {"software": f"dmlqa/{__version__}", "format": "WARC File Format 1.0"}
        )
        writer.write_record(info)
        self._writer = writer
        logger.info("archiving responses to %s", self.path)
        return writer

    def write(
        self,
        *,
        url: str,
        status: int,
        reason: str,
        headers: list[tuple[str, str]],
        body: bytes,
        fetched_at: str,
        truncated: bool = False,
    ) -> int:
        """Append one ``response`` record; returns its byte offset in :attr:`path`.

        ``headers`` are stored fixed for the (decoded) ``body``. ``truncated`` marks a body that
        was cut short (size cap); such records are not served as successes by replay.
        """
        http_headers = StatusAndHeaders(
            f"{status} {reason}".strip(), storable_headers(headers, len(body)), protocol="HTTP/1.1"
        )
        warc_headers = {"WARC-Date": _warc_date(fetched_at)}
        if truncated:
            warc_headers["WARC-Truncated"] = "length"
        with self._lock:
            if self._closed:
                raise ValueError("ArchiveWriter is closed")
            writer = self._writer or self._open()
            assert self._fh is not None
            offset = self._fh.tell()
            record = writer.create_warc_record(
                url,
                "response",
                payload=BytesIO(body),
                length=len(body),
                http_headers=http_headers,
                warc_headers_dict=warc_headers,
            )
            writer.write_record(record)
            self._fh.flush()
            self.records += 1
            return offset

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._fh is not None:
                self._fh.close()
                self._fh = None
                self._writer = None


# -- reading one record ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchivedResponse:
    """One ``response`` record read back: what the fetcher needs to treat it like a live answer."""

    url: str  # WARC-Target-URI
    status: int
    reason: str
    headers: list[tuple[str, str]]  # fixed for the decoded body
    body: bytes
    fetched_at: str  # WARC-Date
    path: Path
    offset: int


def read_response(path: Path, offset: int) -> ArchivedResponse:
    """Read the response record at ``offset`` of a WARC file (its body decoded, headers fixed)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        record = next(iter(ArchiveIterator(fh)), None)
        if record is None or record.rec_type != "response" or record.http_headers is None:
            raise ArchiveError(f"{path}: no response record at offset {offset}")
        url = record.rec_headers.get_header("WARC-Target-URI") or ""
        fetched_at = record.rec_headers.get_header("WARC-Date") or ""
        status_line = record.http_headers.statusline or ""
        headers = list(record.http_headers.headers)
        try:
            # content_stream() undoes chunking and any Content-Encoding the record kept.
            body = record.content_stream().read()
        except (OSError, zlib.error, EOFError, ValueError):
            body = b""
            fh.seek(offset)
            raw = next(iter(ArchiveIterator(fh)))
            body = raw.raw_stream.read()  # mislabelled encoding: serve the bytes as stored
    code, _, reason = status_line.partition(" ")
    try:
        status = int(code)
    except ValueError:
        raise ArchiveError(f"{path}: bad HTTP status line {status_line!r} at offset {offset}") from None
    return ArchivedResponse(
        url=url,
        status=status,
        reason=reason.strip(),
        headers=storable_headers(headers, len(body)),
        body=body,
        fetched_at=fetched_at,
        path=Path(path),
        offset=offset,
    )


def to_fetch_result(asked: str, response: ArchivedResponse) -> FetchResult:
    """A :class:`FetchResult` for an archived response (``from_archive=True``)."""
    headers = header_dict(response.headers)
    return FetchResult(
        url=asked,
        final_url=response.url,
        status=response.status,
        content_type=sniff_content_type(response.body, headers.get("content-type"), response.url),
        body=response.body,
        headers=headers,
        etag=headers.get("etag"),
        last_modified=headers.get("last-modified"),
        sha256=hashlib.sha256(response.body).hexdigest(),
        fetched_at=response.fetched_at,
        from_archive=True,
    )


# -- the manifest ---------------------------------------------------------------------------------


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


# -- replay ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _IndexEntry:
    url: str
    path: Path
    offset: int
    status: int
    location: str | None


class ArchiveReplay:
    """Serves responses from WARC files instead of the network.

    Only an index (URL → file, offset, status, Location) is held in memory; bodies are read
    from disk when asked for. When a URL occurs more than once, the later record wins (later in
    a file, or in a later file of ``paths``), except that a 304 never hides the response it
    confirmed (a rebuild archives its 304s). Records marked ``WARC-Truncated`` are only used
    for non-2xx answers. Lookups prefer the exact URL and otherwise tolerate a different scheme,
    ``www.``, default port or trailing slash (preferring the same scheme, then https).
    """

    def __init__(self, paths: Sequence[Path]) -> None:
        if isinstance(paths, (str, Path)):
            paths = [paths]
        self.paths = [Path(p) for p in paths]
        self._exact: dict[str, _IndexEntry] = {}
        self._fuzzy: dict[str, list[str]] = {}
        for path in self.paths:
            self._index(path)
        for url in self._exact:
            self._fuzzy.setdefault(spelling_key(url), []).append(url)
        logger.info("replay archive: %d URLs from %d file(s)", len(self._exact), len(self.paths))

    def _index(self, path: Path) -> None:
        if not path.exists():
            raise ArchiveError(f"archive file not found: {path}")
        if not path.is_file():
            raise ArchiveError(f"archive path is not a file: {path}")
        try:
            with open(path, "rb") as fh:
                magic = fh.read(6)
                if magic[:2] == b"\x1f\x8b":
                    fh.seek(0)
                    with gzip.GzipFile(fileobj=fh) as gz:
                        magic = gz.read(6)
                if not magic.startswith(b"WARC/"):
                    raise ArchiveError(f"not a WARC file: {path}")
                fh.seek(0)
                count = 0
                iterator = ArchiveIterator(fh)
                try:
                    for record in iterator:
                        if record.rec_type != "response" or record.http_headers is None:
                            continue
                        url = record.rec_headers.get_header("WARC-Target-URI")
                        try:
                            status = int(record.http_headers.get_statuscode())
                        except (TypeError, ValueError):
                            continue
                        if not url:
                            continue
                        truncated = record.rec_headers.get_header("WARC-Truncated")
                        if truncated and 200 <= status < 300:
                            logger.debug("replay: skipping truncated record of %s", url)
                            continue
                        if status == 304 and url in self._exact:
                            # "Not modified" restates the earlier response: replay that one.
                            continue
                        location = record.http_headers.get_header("Location")
                        self._exact[url] = _IndexEntry(
                            url, path, iterator.get_record_offset(), status, location
                        )
                        count += 1
                except (ArchiveLoadFailed, zlib.error, EOFError, OSError, ValueError) as exc:
                    if count == 0:
                        raise ArchiveError(f"not a readable WARC file: {path} ({exc})") from None
                    # A build interrupted mid-write leaves a cut-off last record: keep the rest.
                    logger.warning("%s: stopped reading after %d records: %s", path, count, exc)
        except PermissionError:
            raise ArchiveError(f"cannot read archive file: {path} (permission denied)") from None
        except (OSError, EOFError, zlib.error) as exc:
            raise ArchiveError(f"cannot read archive file: {path} ({exc})") from None

    def __len__(self) -> int:
        return len(self._exact)

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self._find(url) is not None

    def urls(self) -> list[str]:
        return sorted(self._exact)

    def _find(self, url: str, exclude: Iterable[str] = ()) -> _IndexEntry | None:
        url = url.strip().split("#", 1)[0]
        skip = set(exclude)
        hit = self._exact.get(url)
        if hit is not None and hit.url not in skip:
            return hit
        key = spelling_key(url)
        scheme = urlsplit(url).scheme.lower()
        best: _IndexEntry | None = None
        best_rank = 99
        for candidate in self._fuzzy.get(key, ()):
            entry = self._exact[candidate]
            if entry.url in skip:
                continue
            # An http→https (or slash, or www) redirect record is no answer for its own target.
            if (
                entry.location
                and 300 <= entry.status < 400
                and spelling_key(urljoin(entry.url, entry.location)) == key
            ):
                continue
            cand_scheme = urlsplit(candidate).scheme.lower()
            rank = 0 if cand_scheme == scheme else 1 if cand_scheme == "https" else 2
            if rank < best_rank:
                best, best_rank = entry, rank
        return best

    def lookup(self, url: str) -> ArchivedResponse | None:
        """The single record stored for ``url`` (redirects not followed), or None."""
        entry = self._find(url)
        if entry is None:
            return None
        return read_response(entry.path, entry.offset)

    def get(self, url: str) -> FetchResult | None:
        """The archived answer for ``url``, following redirects whose targets are archived too.

        None when the archive has nothing for ``url``; a 3xx result when it holds a redirect
        whose target it lacks (the caller may take it to the network from there).
        """
        entry = self._find(url)
        if entry is None:
            return None
        seen = [entry.url]
        for _ in range(MAX_REPLAY_REDIRECTS):
            if not (300 <= entry.status < 400 and entry.location):
                break
            target = urljoin(entry.url, entry.location)
            following = self._find(target, exclude=seen)
            if following is None:
                break
            entry = following
            seen.append(entry.url)
        return to_fetch_result(url, read_response(entry.path, entry.offset))
