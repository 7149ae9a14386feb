"""WARC side of the acquire stage: the archive every response is written to, and replay from it.

Every network response a build receives is kept in a WARC file (the web-archiving standard,
readable by any WARC tool) so that a build can be audited and replayed later without the
network. :class:`ArchiveReplay` serves responses from WARC files (ours or anybody's, e.g. the
shared offline snapshot) instead of the network. The per-URL record of what happened last time
is :mod:`dmlqa.acquire.manifest`, which reads its copies back through :func:`read_response`.

This module knows nothing of the fetcher: the fetcher uses these objects, never the other way
round, so the storage can be read (replay, audits, tests) without the HTTP machinery.

Bodies are stored *decoded* (httpx undoes Content-Encoding), with headers fixed to match, so a
replayed response is consistent: no Content-Encoding, no Transfer-Encoding, true Content-Length.
"""

from __future__ import annotations

import gzip
import logging
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from types import TracebackType
from typing import BinaryIO
from urllib.parse import urljoin, urlsplit

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from dmlqa.acquire.http import response_result, storable_headers, utc_now_iso
from dmlqa.catalog.urls import spelling_key
from dmlqa.errors import ArchiveError
from dmlqa.models import FetchResult
from dmlqa.version import __version__

logger = logging.getLogger(__name__)

#: In-archive redirect chains longer than this are cut (a loop guard, not a politeness limit).
MAX_REPLAY_REDIRECTS = 10


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
    body: bytes = field(repr=False)
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
    return response_result(
        asked,
        final_url=response.url,
        status=response.status,
        headers=response.headers,
        body=response.body,
        fetched_at=response.fetched_at,
        from_archive=True,
    )


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
