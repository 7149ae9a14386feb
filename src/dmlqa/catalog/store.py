"""The catalog file and list imports: the only code of the catalog stage that touches the disk.

:func:`import_lists` keeps a copy of every list in the home (``corpus/lists/<name>.md``), records
where it came from in ``corpus/lists.toml`` so a later refresh can re-read it, and merges the
resources :func:`~dmlqa.catalog.lists.parse_list` found into ``corpus/catalog.jsonl``, one JSON
object a line, written atomically so a reader never sees half a catalog.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dmlqa.catalog.lists import ParsedList, combine, list_name_for, parse_list
from dmlqa.catalog.markdown import ParseIssue
from dmlqa.errors import CatalogError
from dmlqa.fsutil import atomic_write_text
from dmlqa.media import looks_binary
from dmlqa.models import Resource
from dmlqa.paths import CATALOG_FILE, LISTS_DIR, LISTS_FILE


@dataclass(frozen=True)
class ImportReport:
    lists: tuple[str, ...]
    added: int
    updated: int
    total: int
    issues: tuple[ParseIssue, ...]


# -- merging -------------------------------------------------------------------------------------


def merge(existing: Iterable[Resource], incoming: Iterable[Resource]) -> list[Resource]:
    """Fold ``incoming`` into ``existing`` by id (topics and lists unioned), sorted by id for stable diffs."""
    by_id: dict[str, Resource] = {}
    for res in (*existing, *incoming):
        by_id[res.id] = combine(by_id[res.id], res) if res.id in by_id else res
    return [by_id[k] for k in sorted(by_id)]


# -- files ---------------------------------------------------------------------------------------

def read_catalog(path: Path) -> list[Resource]:
    """The catalog's resources in file order; a missing file is an empty catalog."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(str(path), f"cannot read catalog: {exc}") from exc
    out: list[Resource] = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, got {type(data).__name__}")
            out.append(Resource.from_json(data))
        except (ValueError, KeyError, TypeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise CatalogError(f"{path}:{no}", f"bad catalog line {no}: {detail}") from exc
    return out


def write_catalog(path: Path, resources: Iterable[Resource]) -> None:
    """Write one JSON object a line (UTF-8, not escaped), atomically."""
    body = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in resources)
    atomic_write_text(Path(path), body)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # A JSON string is a valid TOML basic string (same escapes, \uXXXX included).
    return json.dumps(str(value), ensure_ascii=False)


def read_lists(corpus_dir: Path) -> dict[str, dict]:
    """``lists.toml`` as ``{name: {"title", "file", "upstream"?, ...}}``; missing file → {}."""
    path = Path(corpus_dir) / LISTS_FILE
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(str(path), f"cannot read lists file: {exc}") from exc
    lists = data.get("lists", {})
    if not isinstance(lists, dict):
        raise CatalogError(str(path), "'lists' must be a table of tables")
    return {k: dict(v) for k, v in lists.items() if isinstance(v, dict)}


def _write_lists(corpus_dir: Path, lists: dict[str, dict]) -> None:
    out = ["# Lists imported into catalog.jsonl (written by `dmlqa catalog import`).",
           "# upstream: where the list lives, only where the list text shows it; a refresh re-reads it.", ""]
    for name in sorted(lists):
        key = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)
        out.append(f"[lists.{key}]")
        entry = lists[name]
        for k in ("title", "file", "upstream", "imported_from"):
            if entry.get(k) is not None:
                out.append(f"{k} = {_toml_value(entry[k])}")
        for k, v in entry.items():
            if k not in ("title", "file", "upstream", "imported_from") and isinstance(v, str | int | float | bool):
                out.append(f"{k} = {_toml_value(v)}")
        out.append("")
    atomic_write_text(Path(corpus_dir) / LISTS_FILE, "\n".join(out))


def _read_list_file(path: Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CatalogError(str(path), f"cannot read list file: {exc.strerror or exc}") from exc
    if looks_binary(data):
        raise CatalogError(str(path), "binary data, not a markdown list of links: nothing imported")
    return data.decode("utf-8", errors="replace")


def _check_has_links(path: Path, text: str, pl: ParsedList) -> None:
    """Refuse a file that names no resource: importing it would register an empty list and report
    success, which hides a wrong file name (``/etc/hostname``, a README without links)."""
    if pl.resources:
        return
    if not text.strip():
        why = "the file is empty"
    elif pl.skipped or pl.issues:
        parts = [f"{len(pl.skipped)} link{'s' * (len(pl.skipped) != 1)} skipped as badges, anchors or list upkeep",
                 f"{len(pl.issues)} unreadable line{'s' * (len(pl.issues) != 1)}"]
        why = f"no resource links ({', '.join(x for x in parts if not x.startswith('0 '))})"
    else:
        why = "no links found (a list names resources as markdown links [title](https://...) or bare URLs)"
    raise CatalogError(str(path), f"{why}: nothing imported")


def import_lists(paths: Sequence[Path], corpus_dir: Path, *, replace_lists: bool = False) -> ImportReport:
    """Parse list files and fold them into the home's catalog; re-importing the same file changes nothing.

    Every file is read before anything is written, so a missing file, a binary one or one that names
    no resource (:class:`CatalogError`) fails the import cleanly. Each list is copied to
    ``corpus_dir/lists/<name>.md`` and named in ``lists.toml`` (title, file, upstream when its text
    shows one). With ``replace_lists`` the re-imported lists' previous entries
    are withdrawn first (an entry no other list names disappears), so a refreshed list that dropped
    a link drops it from the catalog too; otherwise the import only adds and enriches.
    """
    corpus_dir = Path(corpus_dir)
    parsed: list[tuple[Path, str, ParsedList]] = []
    names: set[str] = set()
    for path in paths:
        text = _read_list_file(path)
        name = list_name_for(Path(path), text)
        base, n = name, 2
        while name in names:  # two different files with the same title in one import
            name, n = f"{base}-{n}", n + 1
        names.add(name)
        pl = parse_list(text, name)
        _check_has_links(Path(path), text, pl)
        parsed.append((Path(path), text, pl))

    catalog_path = corpus_dir / CATALOG_FILE
    before = read_catalog(catalog_path)
    old = {r.id: r for r in before}
    base_entries = before
    if replace_lists:
        base_entries = []
        for r in before:
            kept = tuple(x for x in r.lists if x not in names)
            if kept or not r.lists:
                base_entries.append(replace(r, lists=kept))
    incoming = [r for _, _, pl in parsed for r in pl.resources]
    after = merge(base_entries, incoming)
    added = sum(1 for r in after if r.id not in old)
    updated = sum(1 for r in after if r.id in old and r != old[r.id])

    lists = read_lists(corpus_dir)
    for path, text, pl in parsed:
        rel = f"{LISTS_DIR}/{pl.name}.md"
        dest = corpus_dir / rel
        entry = dict(lists.get(pl.name, {}))
        entry.update(title=pl.title, file=rel)
        if pl.upstream:
            entry["upstream"] = pl.upstream
        if dest.resolve() != path.resolve():  # re-importing the stored copy itself needs no copy
            atomic_write_text(dest, text)
            entry["imported_from"] = path.name
        lists[pl.name] = entry
    write_catalog(catalog_path, after)
    _write_lists(corpus_dir, lists)
    return ImportReport(
        lists=tuple(pl.name for _, _, pl in parsed),
        added=added,
        updated=updated,
        total=len(after),
        issues=tuple(i for _, _, pl in parsed for i in pl.issues),
    )

