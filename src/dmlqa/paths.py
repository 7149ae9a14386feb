"""Every file and folder inside a knowledge-base home, named once.

A home looks like this (``dmlqa init`` makes the first four)::

    dmlqa.toml                      settings (see dmlqa.settings)
    corpus/catalog.jsonl            the catalog: one resource per line
    corpus/lists.toml               the lists imported, for re-import on refresh
    corpus/local/                   documents added by the user (dmlqa add)
    corpus/local.jsonl              pre-extracted local records
    corpus/lists/                   the imported lists as fetched
    corpus/archive/*.warc.gz        WARC files of every response
    corpus/manifest.sqlite          per URL: final URL, status, validators, sha256, error
    corpus/documents.sqlite         extracted text of every resource, kept between builds
    index/CURRENT                   name of the published version (swapped atomically)
    index/versions/<name>/          immutable index versions
    index/cache/embeddings.sqlite   vectors by text hash, shared by builds
    index/cache/references.sqlite   parsed reference lists by document hash (dmlqa.pipeline.graph_index)
    index/runs.jsonl, schedule.json run history and the scheduler's next slot
    index/run-in-progress.json      marks a build that has not finished (crash recovery)
    index/last-failures.json        every failure of the last run, with its reason (status --failures)
    .dmlqa-build.lock               one writer at a time
    .dmlqa-schedule.lock            one scheduler at a time
    ray/                            Ray's temporary folder when a build runs on Ray

Modules take these names from here instead of spelling them, so a layout change is one edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SETTINGS_FILE = "dmlqa.toml"
CORPUS_DIR = "corpus"
INDEX_DIR = "index"
CATALOG_FILE = "catalog.jsonl"
LISTS_FILE = "lists.toml"
LOCAL_DIR = "local"
LOCAL_RECORDS_FILE = "local.jsonl"
#: beside a reference library's copied attachments: its entries' metadata (dmlqa.catalog.library)
LIBRARY_SIDECAR = "dmlqa-library.json"
ARCHIVE_DIR = "archive"
LISTS_DIR = "lists"
MANIFEST_FILE = "manifest.sqlite"
DOCUMENTS_FILE = "documents.sqlite"
CURRENT = "CURRENT"
VERSIONS = "versions"
CACHE_DIR = "cache"
EMBEDDINGS_CACHE = "embeddings.sqlite"
REFERENCES_CACHE = "references.sqlite"
ENCODERS_DIR = "encoders"
RUNS_FILE = "runs.jsonl"
SCHEDULE_FILE = "schedule.json"
IN_PROGRESS_FILE = "run-in-progress.json"
FAILURES_FILE = "last-failures.json"
LOCK_FILE = ".dmlqa-build.lock"
SCHEDULE_LOCK_FILE = ".dmlqa-schedule.lock"
RAY_DIR = "ray"


@dataclass(frozen=True)
class HomePaths:
    """The paths of one home."""

    home: Path

    @property
    def settings_file(self) -> Path:
        return self.home / SETTINGS_FILE

    @property
    def corpus(self) -> Path:
        return self.home / CORPUS_DIR

    @property
    def index(self) -> Path:
        return self.home / INDEX_DIR

    @property
    def catalog(self) -> Path:
        return self.corpus / CATALOG_FILE

    @property
    def lists(self) -> Path:
        return self.corpus / LISTS_FILE

    @property
    def local_dir(self) -> Path:
        return self.corpus / LOCAL_DIR

    @property
    def local_records(self) -> Path:
        return self.corpus / LOCAL_RECORDS_FILE

    @property
    def archive(self) -> Path:
        return self.corpus / ARCHIVE_DIR

    @property
    def lists_dir(self) -> Path:
        return self.corpus / LISTS_DIR

    @property
    def manifest(self) -> Path:
        return self.corpus / MANIFEST_FILE

    @property
    def documents(self) -> Path:
        return self.corpus / DOCUMENTS_FILE

    @property
    def embeddings_cache(self) -> Path:
        return self.index / CACHE_DIR / EMBEDDINGS_CACHE

    @property
    def references_cache(self) -> Path:
        return self.index / CACHE_DIR / REFERENCES_CACHE

    @property
    def lock(self) -> Path:
        return self.home / LOCK_FILE

    @property
    def schedule_lock(self) -> Path:
        return self.home / SCHEDULE_LOCK_FILE

    @property
    def ray_temp(self) -> Path:
        return self.home / RAY_DIR
