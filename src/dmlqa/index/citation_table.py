"""The ``citations`` table of an index version's ``store.sqlite``: the citation graph, link by link.

Kept apart from :mod:`dmlqa.index.versions` because the next build reads it too (references that
name a paywalled paper's arXiv copy: :func:`dmlqa.pipeline.graph.arxiv_hints`), and that must not
load the version's FAISS and BM25 indexes, which grow with the collection.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dmlqa.errors import IndexDamagedError
from dmlqa.models import CitationLink, Reference
from dmlqa.paths import VERSIONS

STORE = "store.sqlite"


@dataclass(frozen=True)
class CitationRecord:
    """A stored citation link and the work it names (``doc:<doc id>``, or the group key of an outside work)."""

    link: CitationLink
    work: str


def write_citations(version_dir: Path, citations: Sequence[tuple[CitationLink, str]]) -> None:
    """Insert the links (with their work keys) into a version being written."""
    db = sqlite3.connect(str(version_dir / STORE))
    db.executemany(
        "INSERT INTO citations VALUES (?,?,?,?,?,?,?,?)",
        [(i, c.citing, c.reference.ordinal, json.dumps(c.reference.to_json(), ensure_ascii=False), c.cited,
          c.context, c.how, work) for i, (c, work) in enumerate(citations)],
    )
    db.commit()
    db.close()


def has_citations(db: sqlite3.Connection) -> bool:
    """Versions built before the citation graph have no ``citations`` table: they read as citing nothing."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='citations'").fetchone() is not None


def read_citations(db: sqlite3.Connection, name: str, *, citing: str | None = None,
                   cited: str | None = None) -> list[CitationRecord]:
    """The links of version ``name`` (all, or those of one citing or one cited document), in list order."""
    if not has_citations(db):
        return []
    where, args = [], []
    for column, value in (("citing", citing), ("cited", cited)):
        if value is not None:
            where.append(f"{column}=?")
            args.append(value)
    sql = "SELECT citing, ordinal, reference, cited, context, how, work FROM citations"
    sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY row"
    try:
        rows = db.execute(sql, args).fetchall()
    except sqlite3.DatabaseError as exc:
        raise IndexDamagedError(name, f"{STORE} cannot be read ({str(exc)[:200]})") from None
    return [CitationRecord(CitationLink(r[0], Reference.from_json(json.loads(r[2])), r[3], r[4] or "", r[5] or ""),
                           r[6] or "") for r in rows]


def published_citations(index_dir: Path, name: str | None) -> list[CitationRecord]:
    """Every link of version ``name`` (the published one, say) read from its store alone; none when the
    version or its store is missing or damaged: a caller that only wants hints goes on without them."""
    if name is None or not (index_dir / VERSIONS / name / STORE).is_file():
        return []
    try:
        db = sqlite3.connect(f"file:{index_dir / VERSIONS / name / STORE}?mode=ro", uri=True)
        try:
            return read_citations(db, name)
        finally:
            db.close()
    except (sqlite3.Error, IndexDamagedError, ValueError, TypeError, KeyError):
        return []
