"""Error types, one per stage, each carrying the URL and a specific reason.

The build catches these per resource and turns them into :class:`dmlqa.models.Failure`
rows of the report, so one bad resource never stops a build.
"""

from __future__ import annotations


class DmlqaError(Exception):
    """Base class of every error dmlqa raises on purpose."""


class StageError(DmlqaError):
    """A resource failed in one stage; ``reason`` is short and specific (shown to users)."""

    stage = "unknown"

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class CatalogError(StageError):
    stage = "catalog"


class FetchError(StageError):
    """Download failed: refused URL, network error, HTTP error status, too large, ..."""

    stage = "fetch"

    def __init__(self, url: str, reason: str, *, status: int | None = None) -> None:
        super().__init__(url, reason)
        self.status = status


class ExtractError(StageError):
    """The bytes were fetched but no usable text came out of them."""

    stage = "extract"


class IndexMissingError(DmlqaError):
    """No published index version in the home: the user should run ``dmlqa build``."""


class BuildLockedError(DmlqaError):
    """Another build holds the home's writer lock."""


class HomeError(DmlqaError):
    """``--home`` names no usable knowledge-base home (missing, or a file)."""


class SettingsError(DmlqaError, ValueError):
    """A setting in ``dmlqa.toml``, a ``DMLQA_*`` variable or a flag is out of range or of the wrong type."""


class IndexDamagedError(IndexMissingError):
    """A published index version exists but one of its files cannot be read."""

    def __init__(self, name: str, what: str) -> None:
        super().__init__(f"index version {name} is damaged: {what}; run `dmlqa build`")
        self.name = name
        self.what = what


class NothingToBuildError(DmlqaError):
    """The catalog is empty and corpus/local has no documents (or none gave any text)."""


class DiskFullError(DmlqaError):
    """The disk filled up while writing; nothing half-written was published."""


class InputFileError(DmlqaError):
    """A file named on the command line (``--queries``, ``--questions``) is missing or unreadable."""


def is_disk_full(exc: BaseException, where: object = None) -> bool:
    """Whether ``exc`` (from Python, SQLite or FAISS) means the disk or the quota is full.

    SQLite reports some writes on a full disk only as "disk I/O error": with ``where`` (a path on
    the disk written to) such an error counts as a full disk when less than 1 MiB is free there.
    """
    import errno
    import shutil
    import sqlite3

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if isinstance(exc, sqlite3.Error) and "disk is full" in str(exc):
        return True
    if isinstance(exc, sqlite3.Error) and "disk I/O error" in str(exc) and where is not None:
        try:
            return shutil.disk_usage(str(where)).free < 1 << 20
        except OSError:
            return False
    return isinstance(exc, RuntimeError) and "No space left on device" in str(exc)
