"""Every error dmlqa raises on purpose, in one tree.

A front end catches :class:`DmlqaError` in one place and shows its message as one line: each
message says what failed and why (and, where there is one, what to do about it), so no error a
user can cause ends in a traceback. Errors of one resource in one stage (:class:`StageError`) are
caught per resource by the build instead and become :class:`dmlqa.models.Failure` rows of its
report, so one bad resource never stops a build::

    DmlqaError                      anything dmlqa refuses or cannot do, said in one line
    ├── StageError                  one resource failed in one stage (url, reason); a report row
    │   ├── CatalogError            the catalog or the lists file cannot be read
    │   ├── FetchError              a download failed: refused URL, network, HTTP status, too large
    │   └── ExtractError            bytes were fetched but gave no usable text
    ├── SettingsError               a setting (dmlqa.toml, DMLQA_*, a flag) is out of range or mistyped
    ├── HomeError                   --home names no usable knowledge-base home
    ├── InputFileError              a file named on the command line is missing or unreadable
    │   └── LibraryError            a .bib or .json library cannot be read as BibTeX or CSL-JSON
    ├── ArchiveError                a WARC file given for replay is missing, unreadable or not a WARC
    ├── BuildLockedError            another build (or scheduler) holds the home's lock
    ├── NothingToBuildError         empty catalog and no local documents: nothing to index
    ├── NoNetworkError              no fetch of a build reached any server (DNS or connect failures only)
    ├── DiskFullError               the disk filled while writing; nothing half-written was published
    ├── EncoderError                the configured embedding model, encoder or reranker cannot be loaded
    │   └── EncoderMismatchError    vectors of two different encoders would be mixed
    ├── ExecutorError               the configured build executor cannot run the build
    │   └── RayUnavailableError     the Ray executor was asked for but Ray Data is not installed
    ├── ScheduleError               a schedule (--every, --cron) cannot be understood
    ├── IndexMissingError           no published index version: run ``dmlqa build``
    │   └── IndexDamagedError       a published version exists but one of its files cannot be read
    ├── NotInIndexError             a paper named by URL, id or title is not in the published index
    ├── EmptyQueryError             a question or search query is empty (or only white space)
    ├── TextTooLongError            a question, query or target is longer than its limit (dmlqa.query.limits)
    ├── UnknownTargetError          ``remove`` names no local document or catalog entry
    ├── SelectorModelError          the answer selector's weights file is unreadable or for other features
    └── LLMError                    the LLM endpoint could not produce an answer

Outside the tree, like ``KeyboardInterrupt`` (a stop asked for, not a failure): :class:`Interrupted`,
a build stopped by Ctrl-C or SIGTERM; it says how much of the embedding work is kept.

:func:`is_disk_full` tells a full disk apart from other ``OSError``/SQLite/FAISS errors, which
are bugs or environment problems and keep their traceback. :func:`quoted` is how a message quotes
what a user gave: in full when short, else its start and its length.
"""

from __future__ import annotations

__all__ = [
    "ArchiveError", "BuildLockedError", "CatalogError", "DiskFullError", "DmlqaError", "EmptyQueryError",
    "EncoderError", "EncoderMismatchError", "ExecutorError", "ExtractError", "FetchError", "HomeError",
    "IndexDamagedError", "IndexMissingError", "InputFileError", "Interrupted", "LLMError", "LibraryError",
    "NoNetworkError", "NotInIndexError", "NothingToBuildError", "RayUnavailableError", "ScheduleError", "SettingsError",
    "StageError", "TextTooLongError", "UnknownTargetError", "as_disk_full", "is_disk_full", "quoted",
]


class DmlqaError(Exception):
    """Base class of every error dmlqa raises on purpose; the message says what failed and why."""

    #: The command's exit status for this error: 1 unless a script must tell it apart (see subclasses).
    exit_code = 1


class StageError(DmlqaError):
    """A resource failed in one stage; ``reason`` is short and specific (shown to users)."""

    stage = "unknown"

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class CatalogError(StageError):
    """The catalog (``corpus/catalog.jsonl``), the lists file or a list cannot be read."""

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


class SettingsError(DmlqaError, ValueError):
    """A setting in ``dmlqa.toml``, a ``DMLQA_*`` variable or a flag is out of range or of the wrong type."""


class HomeError(DmlqaError):
    """``--home`` names no usable knowledge-base home (missing, or a file)."""


class InputFileError(DmlqaError):
    """A file named on the command line (``--queries``, ``--questions``) is missing or unreadable."""


class LibraryError(InputFileError):
    """A reference library given to ``dmlqa add`` (``.bib``, ``.json``) cannot be read as BibTeX or
    CSL-JSON at all; the message names the file and what was found instead. A bad entry in a good
    library is never this error: it is skipped and reported."""


class ArchiveError(DmlqaError):
    """A WARC file given for replay is missing, unreadable or not a WARC file."""


class BuildLockedError(DmlqaError):
    """Another build holds the home's writer lock (or another scheduler its scheduler lock)."""


class NothingToBuildError(DmlqaError):
    """The catalog is empty and corpus/local has no documents (or none gave any text)."""


class NoNetworkError(DmlqaError):
    """A build in which nothing was fetched and every fetch failed to resolve or connect: no network.

    Nothing is published (a version of catalog cards would hide the outage), and the command exits
    with status 3, so a scheduler or cron job sees the failure and can tell it from other ones.
    """

    exit_code = 3


class DiskFullError(DmlqaError):
    """The disk filled up while writing; nothing half-written was published."""


class EncoderError(DmlqaError):
    """The configured embedding model, encoder or reranker cannot be loaded (the message says what to change)."""


class EncoderMismatchError(EncoderError):
    """Vectors from two different encoders would be mixed: an index and the installed model disagree,
    or two nodes of a cluster loaded different models.

    Vectors of different encoders are close but not interchangeable, so this is refused rather
    than answered badly. ``expected`` is the encoder key the vectors must come from, ``found`` the
    key that was loaded.
    """

    def __init__(self, message: str, *, expected: str, found: str) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found


class ExecutorError(DmlqaError):
    """The build executor (``build.executor``) is unknown, or lost work on the way (a cluster problem)."""


class RayUnavailableError(ExecutorError):
    """Ray is not installed (the Ray executor needs the optional extra ``dmlqa[ray]``)."""


class ScheduleError(DmlqaError):
    """A schedule that cannot be understood (bad duration or cron expression)."""


class IndexMissingError(DmlqaError):
    """No published index version in the home: the user should run ``dmlqa build``."""


class NotInIndexError(DmlqaError):
    """A document named by URL, arXiv id, DOI, doc id or title (``dmlqa cites``) is not in the published index."""


class IndexDamagedError(IndexMissingError):
    """A published index version exists but one of its files cannot be read."""

    def __init__(self, name: str, what: str) -> None:
        super().__init__(f"index version {name} is damaged: {what}; run `dmlqa build`")
        self.name = name
        self.what = what


class EmptyQueryError(DmlqaError, ValueError):
    """A question or search query is empty or only white space: there is nothing to look for.

    A ``ValueError`` too, as a script calling ``kb.ask("")`` would expect of a bad argument.
    """


class TextTooLongError(DmlqaError, ValueError):
    """A question, query or target is longer than :mod:`dmlqa.query.limits` allows; the message gives both
    lengths. Refused at once: a text of a megabyte would cost minutes of matching, not a better answer."""


class UnknownTargetError(DmlqaError, ValueError):
    """``remove`` names nothing it can take out; the message lists the closest names there are."""


class LLMError(DmlqaError):
    """The LLM endpoint could not produce an answer; ``reason`` says why in words a user can act on."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status  # the HTTP status, when the endpoint answered with an error


class Interrupted(KeyboardInterrupt):  # noqa: N818 - a stop asked for, named like KeyboardInterrupt
    """Ctrl-C (SIGINT) or SIGTERM stopped a build; ``signal_name`` says which.

    A ``KeyboardInterrupt``, so code that stops on Ctrl-C stops on it too, and no ``except
    Exception`` on the way (a per-resource safety net) swallows it. The embed step fills in
    ``stage``, ``kept`` and ``total`` on its way out: vectors are flushed to the embedding cache as
    they are made, so the next build embeds only the ``total - kept`` texts still missing.
    """

    def __init__(self, signal_name: str = "SIGINT") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.stage: str | None = None  # "embed" (passages) or "sentences", when it struck while embedding
        self.kept: int | None = None  # texts of that stage whose vectors are in the cache
        self.total: int | None = None  # texts of that stage

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process that signal ended (130 for Ctrl-C)."""
        import signal

        try:
            return 128 + signal.Signals[self.signal_name].value
        except KeyError:
            return 128 + signal.SIGINT.value

    def __str__(self) -> str:
        said = f"stopped by {self.signal_name}"
        if self.stage is None or self.kept is None or self.total is None:
            return said
        what = "sentences" if self.stage == "sentences" else "passages"
        return f"{said} while embedding: {self.kept:,} of {self.total:,} {what} embedded are kept"


def is_disk_full(exc: BaseException, where: object = None) -> bool:
    """Whether ``exc`` (from Python, SQLite or FAISS) means the disk or the quota is full.

    SQLite reports some writes on a full disk only as "disk I/O error": with ``where`` (a path on
    the disk written to) such an error counts as a full disk when less than 1 MiB is free there.
    NumPy's ``save`` (``sentences.npy``, the BM25 arrays) reports a short write as an ``OSError``
    without errno ("115200 requested and 106464 written"): a regular file is written short only
    when the disk or the quota is full.
    """
    import errno
    import re
    import shutil
    import sqlite3

    if isinstance(exc, DiskFullError) or isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if isinstance(exc, OSError) and exc.errno is None and re.fullmatch(r"\d+ requested and \d+ written", str(exc)):
        return True
    if isinstance(exc, sqlite3.Error) and "disk is full" in str(exc):
        return True
    if isinstance(exc, sqlite3.Error) and "disk I/O error" in str(exc) and where is not None:
        try:
            return shutil.disk_usage(str(where)).free < 1 << 20
        except OSError:
            return False
    return isinstance(exc, RuntimeError) and "No space left on device" in str(exc)


#: How many characters of a user's input an error message quotes (:func:`quoted`).
QUOTED_CHARS = 80


def as_disk_full(exc: BaseException, where: object) -> BaseException:
    """``exc`` as the one-line :class:`DiskFullError` when it means a full disk (``where``: a path on the
    disk written to, named when the error names no file), else ``exc`` itself.

    For the writes that do not say what they were writing themselves: the build (and so the run
    history and the scheduler) and the CLI turn them into the same line.
    """
    if isinstance(exc, DiskFullError) or not is_disk_full(exc, where):
        return exc
    what = getattr(exc, "filename", None) or f"to {where}"
    return DiskFullError(f"disk full while writing {what}: free space and run again")


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """``value`` as an error message quotes it: its ``repr`` when short, else the ``repr`` of its first
    ``limit`` characters and its length (``'GPipe GPipe …'… (100,000 characters)``).

    A message goes to a terminal, a log or an assistant's context: echoing a megabyte back fills them
    and says nothing more. ``repr`` also shows control characters and lone surrogates as escapes.
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"
