"""Bad local input is isolated: ``dmlqa add`` and the build skip and report it, the rest is indexed.

Real files in ``tmp_path``, real ``dmlqa add`` and ``dmlqa build`` runs (in process, offline,
replaying a one-page WARC) of a tiny home; the published version is read back to check what got in.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from rebuild_fixtures import build_json, cli, make_home, page_markdown, write_archive

from dmlqa.catalog.local import parse_record
from dmlqa.errors import ExtractError
from dmlqa.extract.documents import extract_file
from dmlqa.pipeline.runs import published_documents
from dmlqa.settings import load_settings

GOOD_A = {"id": "good-a", "title": "Sequence parallelism", "text": "Sequence parallelism splits activations.",
          "year": 2022, "authors": ["Vijay Korthikanti"]}
GOOD_B = {"_id": "good-b", "text": "Selective activation recomputation saves memory.", "year": "2021"}
#: (line, reason) for each bad line of RECORDS, exactly as the build reports it.
BAD = [
    (json.dumps({"id": "sup", "text": "t", "year": "²"}, ensure_ascii=False),
     'record sup: bad "year" "²": not a whole number from 1000 to 2100'),
    ('{"id": "e25", "text": "t", "year": 1e25}', 'record e25: bad "year" 1e+25: not a whole number from 1000 to 2100'),
    ('{"id": "big", "text": "t", "year": 10000000000000000000000000}',
     'record big: bad "year" 10000000000000000000000000: not a whole number from 1000 to 2100'),
    ('{"id": "abc", "text": "t", "year": "abc"}', 'record abc: bad "year" "abc": not a whole number from 1000 to 2100'),
    ('{"id": "neg", "text": "t", "year": -5}', 'record neg: bad "year" -5: not a whole number from 1000 to 2100'),
    ('{"id": "far", "text": "t", "year": 99999}', 'record far: bad "year" 99999: not a whole number from 1000 to 2100'),
    ("not json at all", "invalid JSON: Expecting value: line 1 column 1 (char 0)"),
    ("[1, 2]", "record is not a JSON object (it is a list)"),
    ('{"id": "nt"}', 'record nt has no "text"'),
    ('{"id": "et", "text": "   "}', 'record et has no "text"'),
    ('{"text": "no id"}', 'record has no "id" (or "_id")'),
    ('{"id": "tt", "text": "t", "title": ["a"]}', 'record tt: "title" must be a string, not a list'),
    ('{"id": "ta", "text": "t", "authors": [1, 2]}',
     'record ta: "authors" must be a string or a list of strings, not a list'),
    ('{"id": "tu", "text": "t", "url": {"href": "x"}}', 'record tu: "url" must be a string, not an object'),
    ('{"id": "good-a", "text": "again"}', "duplicate record id good-a"),
]


def records_file(path: Path) -> Path:
    lines = [json.dumps(GOOD_A)] + [line for line, _ in BAD] + [json.dumps(GOOD_B)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def expected_failures(label: str) -> list[tuple[str, str]]:
    return [(f"{label}:{n}", reason) for n, (_, reason) in enumerate(BAD, start=2)]


@pytest.fixture()
def home(tmp_path: Path) -> tuple[Path, Path]:
    """An initialised home whose catalog has one page, and the archive that page replays from."""
    root = tmp_path / "home"
    make_home(root, ["zero"])
    archive = write_archive(tmp_path / "archive", {"zero": page_markdown("zero")})
    return root, archive


def local_failures(report: dict) -> list[tuple[str, str]]:
    assert all(f["stage"] == "local" for f in report["failed"] if f["url"].startswith("local/")), report["failed"]
    return [(f["url"], f["error"]) for f in report["failed"] if f["stage"] == "local"]


def published_ids(root: Path) -> set[str]:
    return set(published_documents(load_settings(root).index_dir))


def test_bad_records_are_listed_by_add_and_skipped_by_build(home: tuple[Path, Path], tmp_path: Path) -> None:
    root, archive = home
    src = records_file(tmp_path / "records.jsonl")
    added = cli("--home", str(root), "add", str(src))
    assert added.exit_code == 0, added.output
    lines = added.stderr.splitlines()
    assert lines[:10] == [f"bad record {where}: {reason} (the build skips it)"
                          for where, reason in expected_failures(str(src))[:10]]
    assert lines[10] == f"bad record … and {len(BAD) - 10} more (the build lists them all)"
    assert (root / "corpus" / "local" / "records.jsonl").read_bytes() == src.read_bytes()  # copied whole

    report = build_json(root, archive)  # used to crash with ValueError: invalid literal for int(): '²'
    assert local_failures(report) == expected_failures("local/records.jsonl")
    assert report["local_documents"] == 2
    assert published_ids(root) == {"web:zero", "good-a", "good-b"}
    hits = json.loads(cli("--home", str(root), "search", "selective activation recomputation", "--json").stdout)
    assert hits[0]["doc_id"] == "good-b"


def test_add_refuses_a_jsonl_file_without_one_good_record(home: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = home
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "text": "t", "year": "²"}\nnope\n', encoding="utf-8")
    good = tmp_path / "notes.md"
    good.write_text("# Notes\nPipeline bubbles shrink with more micro-batches.\n")
    result = cli("--home", str(root), "add", str(bad), str(good))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f'error: {bad}: not JSON Lines: no valid record (line 1: record x: bad "year" "²": '
        "not a whole number from 1000 to 2100)"
    ]
    assert sorted(p.name for p in (root / "corpus" / "local").iterdir()) == ["notes.md"]


def test_add_of_a_missing_path_adds_the_others_and_exits_1(home: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = home
    good = tmp_path / "notes.md"
    good.write_text("# Notes\nTensor parallelism splits matrices.\n")
    missing = tmp_path / "nope.pdf"
    result = cli("--home", str(root), "add", str(missing), str(good))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"error: {missing}: no such file or folder"]
    assert "Added 1 file(s)" in result.stdout
    assert (root / "corpus" / "local" / "notes.md").is_file()
    assert cli("--home", str(root), "add", str(missing)).exit_code == 1  # alone: nothing added, still 1


def test_size_cap_at_add_and_at_build(home: tuple[Path, Path], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root, archive = home
    monkeypatch.setenv("DMLQA_FETCH_MAX_BYTES", "4096")
    big = tmp_path / "big.txt"
    big.write_text("Gradient compression. " * 300)  # 6,600 bytes
    small = tmp_path / "small.md"
    small.write_text("# Small\nRing allreduce is bandwidth optimal.\n")
    result = cli("--home", str(root), "add", str(big), str(small))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {big}: too large: 6.4 KB is over the 4 KB limit (setting fetch.max_bytes)"]
    local = root / "corpus" / "local"
    assert sorted(p.name for p in local.iterdir()) == ["small.md"]

    # Files already there (added before the cap was lowered, or copied by hand) are skipped at build.
    shutil.copyfile(big, local / "big.txt")
    (local / "big.jsonl").write_text(json.dumps({"id": "huge", "text": "x" * 5000}) + "\n")
    report = build_json(root, archive)
    assert local_failures(report) == [
        ("local/big.jsonl", "too large: 4.9 KB is over the 4 KB limit (setting fetch.max_bytes)"),
        ("local/big.txt", "too large: 6.4 KB is over the 4 KB limit (setting fetch.max_bytes)"),
    ]
    assert published_ids(root) == {"web:zero", "local:small.md"}


def test_extract_file_refuses_a_file_over_the_cap_without_reading_it(tmp_path: Path) -> None:
    f = tmp_path / "big.md"
    f.write_text("# Big\n" + " ".join(f"w{i:03d}" for i in range(1000)))  # not one word repeated: filler is refused
    with pytest.raises(ExtractError) as info:
        extract_file(f, max_bytes=1024)
    assert info.value.reason == "too large: 4.9 KB is over the 1 KB limit (setting fetch.max_bytes)"
    assert extract_file(f, max_bytes=10_000).blocks


def test_symlinks_out_of_an_added_folder_are_not_followed(home: tuple[Path, Path], tmp_path: Path) -> None:
    root, archive = home
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("root:x:0:0:root:/root:/bin/bash\n")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\nFully sharded data parallel gathers parameters per layer.\n")
    os.symlink(outside / "secret.txt", folder / "passwd.txt")
    os.symlink(outside, folder / "etc")
    os.symlink(folder / "notes.md", folder / "alias.md")  # inside the folder: followed
    result = cli("--home", str(root), "add", str(folder))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"skipped {folder / 'etc'}: symlink to {outside}: it leads outside the added folder",
        f"skipped {folder / 'passwd.txt'}: symlink to {outside / 'secret.txt'}: it leads outside the added folder",
    ]
    local = root / "corpus" / "local"
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*")) == [
        "mine", "mine/alias.md", "mine/notes.md"]
    assert not any(p.is_symlink() for p in local.rglob("*"))

    # At build: a symlink put under corpus/local by hand that leads outside it is skipped and reported.
    os.symlink(outside / "secret.txt", local / "mine" / "planted.txt")
    os.symlink(outside, local / "planted-dir")
    report = build_json(root, archive)
    assert local_failures(report) == [
        ("local/planted-dir", f"symlink to {outside}: it leads outside corpus/local"),
        ("local/mine/planted.txt", f"symlink to {outside / 'secret.txt'}: it leads outside corpus/local"),
    ]
    ids = published_ids(root)
    assert "web:zero" in ids and ids & {"local:mine/alias.md", "local:mine/notes.md"}  # one copy of one work
    assert not {i for i in ids if "planted" in i}


@pytest.mark.parametrize(("record", "reason"), [
    ({"id": "y", "text": "t", "year": True}, 'record y: bad "year" true: not a whole number from 1000 to 2100'),
    ({"id": "y", "text": "t", "year": 2021.5}, 'record y: bad "year" 2021.5: not a whole number from 1000 to 2100'),
    ({"id": "y", "text": "t", "year": ["2021"]}, 'record y: bad "year" a list: not a whole number from 1000 to 2100'),
    ({"id": "y", "text": 5}, 'record y: "text" must be a string, not a number'),
    ({"id": {"a": 1}, "text": "t"}, '"id" must be a string or an integer, not an object'),
    ({"id": "y", "text": "t", "kind": 3}, 'record y: "kind" must be a string, not a number'),
    ({"id": "y", "text": "t", "authors": {"n": "A"}},
     'record y: "authors" must be a string or a list of strings, not an object'),
    ("text", "record is not a JSON object (it is a string)"),
])
def test_parse_record_reasons(record: object, reason: str) -> None:
    assert parse_record(record, "r.jsonl") == reason


def test_parse_record_accepts_what_it_can_read() -> None:
    doc = parse_record({"id": 7, "text": "a \ud800 b", "year": "2020", "authors": "Ann", "title": None,
                        "url": None}, "r.jsonl")
    assert not isinstance(doc, str)
    assert (doc.doc_id, doc.year, doc.authors, doc.title, doc.url) == ("7", 2020, ("Ann",), "7", "r.jsonl#7")
    assert doc.blocks[0].text == "a \ufffd b"  # a lone surrogate (valid JSON, not UTF-8) is replaced
    assert parse_record({"id": "z", "text": "t", "year": ""}, "r.jsonl").year is None  # type: ignore[union-attr]
    assert parse_record({"id": "z", "text": "t", "year": 2021.0}, "r.jsonl").year == 2021  # type: ignore[union-attr]
