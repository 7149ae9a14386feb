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
