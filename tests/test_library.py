"""``dmlqa add library.bib`` / ``library.json``: reference-manager exports become documents and catalog entries.

Small hand-written exports in ``tmp_path`` (a Zotero "Export with files" with a generated PDF, Better
BibTeX's ``eprint``, LaTeX accents and braces, broken entries, a missing attachment, a duplicate key,
CSL-JSON and JSON that is not CSL-JSON); expectations come from those files, never from the output.
The last test adds a Zotero-style export of a real paper from ../shared/websnap and builds it offline.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import bibtexparser
import pytest
from bibtexparser import middlewares as mw
from fixtures_docs import build_pdf
from rebuild_fixtures import cli

import dmlqa
from dmlqa.catalog.bibformats import parse_file_field, read_library
from dmlqa.catalog.library import SIDECAR, library_metadata
from dmlqa.catalog.store import read_catalog
from dmlqa.errors import LibraryError
from dmlqa.index.docstore import DocStore, with_text
from dmlqa.models import Block, Document
from dmlqa.pipeline import stages
from dmlqa.pipeline.works import merge_works
from dmlqa.query.bibtex import to_bibtex

PDF_REL = "files/12/Huang et al. - 2019 - GPipe.pdf"
#: What the PDF's first page says: a title and authors the library's must win over.
PDF_PAGES = [
    "Draft submission 417\nAnonymous Authors\nWe fill the pipeline with micro-batches to shrink the bubble.",
    "Re-materialization recomputes activations in the backward pass to save accelerator memory.",
]
GPIPE_AUTHORS = ["Yanping Huang", "Youlong Cheng", "Ankur Bapna", "Jörg Müller", "Barnes and Noble"]
GPIPE_TITLE = "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism"
ZERO_AUTHORS = ["Samyam Rajbhandari", "Jeff Rasley", "Olatunji Ruwase", "Yuxiong He"]

ZOTERO_BIB = r"""
@inproceedings{huang_gpipe_2019,
	title = {{GPipe}: {Efficient} {Training} of {Giant} {Neural} {Networks} using {Pipeline} {Parallelism}},
	booktitle = {Advances in {Neural} {Information} {Processing} {Systems}},
	author = {Huang, Yanping and Cheng, Youlong and Bapna, Ankur and M{\"u}ller, J{\"o}rg and {Barnes and Noble}},
	year = {2019},
	eprint = {1811.06965},
	archivePrefix = {arXiv},
	file = {Full Text PDF:files/12/Huang et al. - 2019 - GPipe.pdf:application/pdf;Snapshot:files/12/s.html:text/html},
}

@misc{rajbhandari_zero_2020,
  title = {{ZeRO}: Memory Optimizations Toward Training Trillion Parameter Models},
  author = {Rajbhandari, Samyam and Rasley, Jeff and Ruwase, Olatunji and He, Yuxiong},
  year = {2020},
  eprint = {1910.02054v3},
  archivePrefix = {arXiv},
  primaryClass = {cs.LG},
}

@inproceedings{narayanan_pipedream_2019,
  title = {{PipeDream}: Generalized Pipeline Parallelism for {DNN} Training},
  author = {Narayanan, Deepak and Harlap, Aaron},
  booktitle = {Proceedings of the 27th {ACM} Symposium on Operating Systems Principles},
  year = {2019},
  doi = {10.1145/3341301.3359646},
  file = {Full Text PDF:files/99/missing.pdf:application/pdf},
}

@article{lost_2020,
  title = {A Paper Whose {PDF} Went Missing},
  author = {Nobody, Anne},
  year = {2020},
  file = {Full Text PDF:files/98/gone.pdf:application/pdf},
}

@article{broken_2021,
  title = {Unclosed brace,
  author = {Someone, A}

@misc{horovod_repo,
  title = {Horovod},
  author = {{The Horovod Authors}},
  howpublished = {\url{https://github.com/horovod/horovod}},
  year = {2017},
}

@misc{rajbhandari_zero_2020,
  title = {A second entry under the same key},
  eprint = {2101.06840},
  archivePrefix = {arXiv},
}
"""

CSL_JSON = [
    {"id": "http://zotero.org/users/1/items/ABC", "type": "article-journal",
     "title": "Switch Transformers: Scaling to Trillion Parameter Models", "container-title": "JMLR",
     "author": [{"family": "Fedus", "given": "William"}, {"family": "Zoph", "given": "Barret"},
                {"literal": "Google Brain"}],
     "issued": {"date-parts": [[2022, 1]]}, "DOI": "10.48550/arXiv.2101.03961"},
    {"id": "ddp", "type": "paper-conference", "title": "PyTorch Distributed", "URL": "http://www.vldb.org/pvldb/vol13/p3005-li.pdf",
     "issued": {"raw": "2020"}},
    {"id": "nothing", "type": "webpage", "title": "Notes without any address"},
    {"id": "bad-author", "type": "article", "title": "x", "author": "Smith"},
    ["not", "an", "item"],
]


def zotero_export(root: Path, bib: str = ZOTERO_BIB, name: str = "My Library.bib") -> Path:
    """A Zotero "Export with files" folder: the .bib and files/<n>/<pdf> relative to it."""
    (root / "files" / "12").mkdir(parents=True, exist_ok=True)
    (root / PDF_REL).write_bytes(build_pdf(PDF_PAGES))
    (root / "files" / "12" / "s.html").write_text("<html><body>snapshot</body></html>", encoding="utf-8")
    path = root / name
    path.write_text(bib, encoding="utf-8")
    return path


@pytest.fixture()
def kb(tmp_path: Path) -> dmlqa.KnowledgeBase:
    return dmlqa.KnowledgeBase(tmp_path / "home", create=True)


# -- reading -----------------------------------------------------------------------------------------


def test_zotero_export_is_read_entry_by_entry(tmp_path: Path) -> None:
    lib = read_library(zotero_export(tmp_path))
    by_key = {e.key: e for e in lib.entries}
    gpipe = by_key["huang_gpipe_2019"]
    assert gpipe.title == GPIPE_TITLE  # braces gone, LaTeX decoded
    assert list(gpipe.authors) == GPIPE_AUTHORS  # "Last, First" turned, accents decoded, braced name kept whole
    assert (gpipe.year, gpipe.venue, gpipe.arxiv_id, gpipe.kind) == (
        2019, "Advances in Neural Information Processing Systems", "1811.06965", "paper")
    assert gpipe.attachments == (tmp_path / PDF_REL, tmp_path / "files/12/s.html")
    zero = by_key["rajbhandari_zero_2020"]
    assert (zero.arxiv_id, list(zero.authors)) == ("1910.02054", ZERO_AUTHORS)  # the version is dropped
    assert zero.title.startswith("ZeRO: Memory Optimizations")  # the first entry of the duplicated key
    assert by_key["narayanan_pipedream_2019"].doi == "10.1145/3341301.3359646"
    assert by_key["horovod_repo"].url == "https://github.com/horovod/horovod"
    assert by_key["horovod_repo"].kind == "repo"
    assert by_key["horovod_repo"].authors == ("The Horovod Authors",)
    skipped = {p.where: p.reason for p in lib.skipped}
    broken = next(w for w in skipped if "(broken_2021)" in w)
    assert broken.startswith("My Library.bib:") and skipped[broken].startswith("not a valid BibTeX entry")
    dup = next(w for w in skipped if "(rajbhandari_zero_2020)" in w)
    assert "duplicate key rajbhandari_zero_2020" in skipped[dup] and "the first entry" in skipped[dup]
    assert len(lib.entries) == 5


@pytest.mark.parametrize(("value", "paths"), [
    ("Full Text PDF:files/12/x.pdf:application/pdf", ["files/12/x.pdf"]),
    ("Full Text PDF:files/1/a.pdf:application/pdf;Snapshot:files/2/b.html:text/html",
     ["files/1/a.pdf", "files/2/b.html"]),
    (r"Full Text:C\:\\Users\\me\\Zotero\\storage\\AB\\x.pdf:application/pdf", [r"C:\Users\me\Zotero\storage\AB\x.pdf"]),
    ("/home/me/Zotero/storage/AB/x.pdf;/home/me/Zotero/storage/CD/y.pdf",
     ["/home/me/Zotero/storage/AB/x.pdf", "/home/me/Zotero/storage/CD/y.pdf"]),  # Better BibTeX
    (":papers/x.pdf:PDF", ["papers/x.pdf"]),  # JabRef
    (r":C$\backslash$:/Users/me/x.pdf:pdf", ["C:/Users/me/x.pdf"]),  # Mendeley
    ("", []),
])
def test_file_field_spellings(value: str, paths: list[str]) -> None:
    assert parse_file_field(value) == paths


@pytest.mark.parametrize("fields", [
    "eprint = {1910.02054}",  # no archivePrefix: shaped like an arXiv id
    "eprinttype = {arxiv}, eprint = {1910.02054v2}",  # BibLaTeX
    "arxivId = {1910.02054}",  # Mendeley
    "journal = {arXiv preprint arXiv:1910.02054}",  # Google Scholar
    "note = {arXiv:1910.02054 [cs, stat]}",  # Zotero 7
    "doi = {10.48550/arXiv.1910.02054}",
    "url = {https://arxiv.org/pdf/1910.02054v3.pdf}",
])
def test_arxiv_id_from_every_spelling(tmp_path: Path, fields: str) -> None:
    path = tmp_path / "one.bib"
    path.write_text(f"@misc{{k, title = {{ZeRO}}, {fields}}}\n", encoding="utf-8")
    assert read_library(path).entries[0].arxiv_id == "1910.02054"


def test_csl_json_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps(CSL_JSON), encoding="utf-8")
    lib = read_library(path)
    switch, ddp, nothing = lib.entries
    assert switch.authors == ("William Fedus", "Barret Zoph", "Google Brain")
    assert (switch.year, switch.venue, switch.arxiv_id, switch.kind) == (2022, "JMLR", "2101.03961", "paper")
    assert (ddp.year, ddp.url) == (2020, "http://www.vldb.org/pvldb/vol13/p3005-li.pdf")
    assert nothing.identity_urls == ()
    skipped = {p.where: p.reason for p in lib.skipped}
    assert skipped == {
        "export.json item 4 (bad-author)": '"author" must be a list of names, not a JSON str',
        "export.json item 5": "not a CSL-JSON item: a JSON list, not an object",
    }


@pytest.mark.parametrize(("content", "message"), [
    ('{"name": "x", "dependencies": {}}', 'not CSL-JSON: expected a list of items with "id" and "type", '
                                          "found an object with keys dependencies, name"),
    ('[{"name": "a"}, {"name": "b"}]', "not CSL-JSON: bad.json item 1: not a CSL-JSON item: no 'id' and no 'type' "
                                       "(its keys: name)"),
    ("{not json", "not CSL-JSON: not valid JSON"),
    ("[]", "no usable CSL-JSON entry"),
])
def test_json_that_is_not_csl_json_is_refused_by_name(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LibraryError) as exc:
        read_library(path)
    assert str(exc.value).startswith(f"{path}: {message}")


def test_bib_without_entries_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.bib"
    path.write_text("just some notes, no entries\n", encoding="utf-8")
    with pytest.raises(LibraryError, match="not BibTeX: no @entry"):
        read_library(path)
    path.write_text("@article{only, title = {never closed\n", encoding="utf-8")
    with pytest.raises(LibraryError, match=r"no usable BibTeX entry \(notes.bib:1 \(only\): not a valid BibTeX"):
        read_library(path)


# -- adding --------------------------------------------------------------------------------------------


def test_add_zotero_export(kb: dmlqa.KnowledgeBase, tmp_path: Path) -> None:
    bib = zotero_export(tmp_path / "export")
    rep = kb.add([bib])
    assert rep.added == (f"My Library.bib/{PDF_REL}",)
    assert rep.failed == () and rep.skipped == ()
    assert rep.catalog_lists == ("library:My Library.bib",)
    assert set(rep.cataloged) == {"arxiv:1910.02054", "doi:10.1145/3341301.3359646", "github:horovod/horovod"}
    bad = dict(rep.bad_entries)
    lost = next(w for w in bad if "(lost_2020)" in w)
    assert bad[lost] == "attachment files/98/gone.pdf not found, and no arXiv id, DOI or url to fetch it from"
    assert any("(broken_2021)" in w for w in bad) and any("duplicate key" in r for r in bad.values())
    notes = dict(rep.entry_notes)
    pipedream = next(w for w in notes if "(narayanan_pipedream_2019)" in w)
    assert notes[pipedream] == ("attachment files/99/missing.pdf not found: the next build fetches "
                                "https://doi.org/10.1145/3341301.3359646 instead")

    local = kb.settings.paths.local_dir / "My Library.bib"
    assert (local / PDF_REL).read_bytes() == (bib.parent / PDF_REL).read_bytes()
    sidecar = json.loads((local / SIDECAR).read_text(encoding="utf-8"))
    assert sidecar["list"] == "library:My Library.bib"
    assert sidecar["files"][PDF_REL]["authors"] == GPIPE_AUTHORS
    catalog = {r.id: r for r in read_catalog(kb.settings.catalog_path)}
    zero = catalog["arxiv:1910.02054"]
    assert (zero.url, zero.address, list(zero.authors), zero.year, zero.lists) == (
        "https://arxiv.org/abs/1910.02054", "https://arxiv.org/abs/1910.02054", ZERO_AUTHORS, 2020,
        ("library:My Library.bib",))
    assert "arxiv:1811.06965" not in catalog  # the attached PDF is the document: nothing to fetch

    # idempotent: the same files, the same catalog, nothing twice
    before = kb.settings.catalog_path.read_bytes()
    again = kb.add([bib])
    assert again.added == rep.added and again.cataloged == rep.cataloged
    assert kb.settings.catalog_path.read_bytes() == before
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()) == sorted(
        [PDF_REL, SIDECAR])


def test_readding_after_the_export_moved_a_pdf_leaves_one_copy(kb: dmlqa.KnowledgeBase, tmp_path: Path) -> None:
    bib = zotero_export(tmp_path / "export")
    kb.add([bib])
    moved = "files/15/Huang et al. - 2019 - GPipe.pdf"
    (bib.parent / moved).parent.mkdir(parents=True)
    (bib.parent / PDF_REL).rename(bib.parent / moved)
    bib.write_text(ZOTERO_BIB.replace(PDF_REL, moved), encoding="utf-8")
    rep = kb.add([bib])
    local = kb.settings.paths.local_dir / "My Library.bib"
    assert rep.added == (f"My Library.bib/{moved}",)
    assert not (local / PDF_REL).exists() and not (local / "files/12").exists()
    assert set(library_metadata(kb.settings.corpus_dir)[0]) == {f"My Library.bib/{moved}"}


def test_unreadable_libraries_fail_by_name(kb: dmlqa.KnowledgeBase, tmp_path: Path) -> None:
    notcsl = tmp_path / "package.json"
    notcsl.write_text('{"name": "x", "version": "1.0"}', encoding="utf-8")
    lost = tmp_path / "lost.bib"
    lost.write_text("@article{a, title = {Only a title}}\n", encoding="utf-8")
    good = zotero_export(tmp_path / "export")
    rep = kb.add([notcsl, lost, good])
    assert rep.failed == (str(notcsl), str(lost))
    reasons = dict(rep.skipped)
    assert reasons[str(notcsl)].startswith('not CSL-JSON: expected a list of items with "id" and "type"')
    assert reasons[str(lost)] == "no entry of this BibTeX library could be added"
    assert dict(rep.bad_entries)["lost.bib:1 (a)"] == "no attached file, and no arXiv id, DOI or url to fetch it from"
    assert rep.added == (f"My Library.bib/{PDF_REL}",)  # the good library is added all the same


def test_a_library_inside_an_added_folder_is_named_not_guessed(kb: dmlqa.KnowledgeBase, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    zotero_export(folder)
    rep = kb.add([folder])
    reasons = dict(rep.skipped)
    assert reasons[str(folder / "My Library.bib")].startswith("a library is added by name")
    assert "export/files/12/Huang et al. - 2019 - GPipe.pdf" in rep.added


def test_cli_add_reports_every_entry(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dmlqa.KnowledgeBase(home, create=True)
    bib = zotero_export(tmp_path / "export")
    result = cli("--home", str(home), "add", str(bib))
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "Added 1 file(s)" in out
    assert 'Added 3 library entries to the catalog (list library:My Library.bib)' in out
    assert "(lost_2020): attachment files/98/gone.pdf not found" in out
    assert "skipped entry My Library.bib:" in out and "(broken_2021): not a valid BibTeX entry" in out


# -- building ------------------------------------------------------------------------------------------


def _local_docs(kb: dmlqa.KnowledgeBase) -> dict[str, Document]:
    """The local documents as a build makes them: stored as they are extracted, their texts read back."""
    with DocStore(kb.settings.paths.documents) as store:
        result = stages.local_documents(kb.settings, store)
        return {d.doc_id: with_text(d, store) for d in result.documents}


def test_library_metadata_wins_over_the_pdf(kb: dmlqa.KnowledgeBase, tmp_path: Path) -> None:
    bib = zotero_export(tmp_path / "export")
    kb.add([bib])
    doc = _local_docs(kb)[f"local:My Library.bib/{PDF_REL}"]
    assert doc.title == GPIPE_TITLE and "Draft submission" not in doc.title
    assert list(doc.authors) == GPIPE_AUTHORS
    assert (doc.year, doc.venue, doc.kind, doc.url) == (
        2019, "Advances in Neural Information Processing Systems", "paper", "https://arxiv.org/abs/1811.06965")
    assert [b.page for b in doc.blocks] == [1, 2] and "micro-batches" in doc.text
    assert doc.lists == ("library:My Library.bib",)

    # an edited entry shows on the next build, though the PDF is unchanged (its text is reused)
    bib.write_text(ZOTERO_BIB.replace("{GPipe}: {Efficient}", "{GPipe} Revisited: {Efficient}"), encoding="utf-8")
    kb.add([bib])
    assert _local_docs(kb)[doc.doc_id].title.startswith("GPipe Revisited: Efficient")

    # BibTeX written back carries every author
    parsed = bibtexparser.parse_string(to_bibtex([doc]), append_middleware=[mw.SeparateCoAuthors()])
    (entry,) = parsed.entries
    assert entry["eprint"] == "1811.06965"
    assert len(entry["author"]) == len(GPIPE_AUTHORS)


def test_attached_pdf_of_a_catalog_paper_is_one_document(kb: dmlqa.KnowledgeBase, tmp_path: Path) -> None:
    kb.add([zotero_export(tmp_path / "export")])
    local = _local_docs(kb)[f"local:My Library.bib/{PDF_REL}"]
    fetched = Document(  # what the build makes of a list's entry for the same arXiv paper
        doc_id="arxiv:1811.06965", url="https://arxiv.org/abs/1811.06965", title="GPipe", kind="paper",
        blocks=(Block("GPipe text from arXiv", page=1),), source_url="https://arxiv.org/pdf/1811.06965",
        content_type="pdf", sha256="other-bytes", lists=("awesome",),
    )
    merged, duplicates = merge_works([fetched, local])
    assert [d.doc_id for d in merged] == ["arxiv:1811.06965"]
    assert [d.doc_id for d in duplicates] == [local.doc_id]
    assert set(merged[0].lists) == {"awesome", "library:My Library.bib"}
    assert list(merged[0].authors) == GPIPE_AUTHORS


# -- end to end on the real snapshot --------------------------------------------------------------------

#: A real paper PDF of the snapshot, and the arXiv paper the arXiv-only entry names (its PDF is there too).
E2E_PDF_URL = "https://arxiv.org/pdf/1802.05799"
E2E_ARXIV = "1604.06174"
#: Deliberately not what the PDF's first page says ("Horovod: fast and easy distributed deep learning in
#: TensorFlow", two authors): the library's title and its third author must be what the index shows.
E2E_TITLE = "Ring Allreduce Tensor Fusion Notes from the Horovod Library Copy"
E2E_BIB = r"""
@article{sergeev_horovod_2018,
	title = {Ring {Allreduce} {Tensor} {Fusion} {Notes} from the {Horovod} {Library} {Copy}},
	author = {Sergeev, Alexander and Del Balso, Mike and Gr{\"u}newald, {\"A}nne},
	journal = {Journal of Library Tests},
	year = {2018},
	file = {Full Text PDF:files/7/Sergeev and Del Balso - 2018 - Horovod.pdf:application/pdf},
}

@misc{chen_training_2016,
	title = {Training {Deep} {Nets} with {Sublinear} {Memory} {Cost}},
	author = {Chen, Tianqi and Xu, Bing and Zhang, Chiyuan and Guestrin, Carlos},
	year = {2016},
	eprint = {1604.06174},
	archivePrefix = {arXiv},
}
"""
E2E_AUTHORS = {"Alexander Sergeev", "Mike Del Balso", "Änne Grünewald"}
CHEN_AUTHORS = {"Tianqi Chen", "Bing Xu", "Chiyuan Zhang", "Carlos Guestrin"}


def _warc_body(warc: Path, url: str) -> bytes:
    from warcio.archiveiterator import ArchiveIterator

    with warc.open("rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "response" and rec.rec_headers.get_header("WARC-Target-URI") == url:
                return rec.content_stream().read()
    raise AssertionError(f"{url} is not in {warc}")


def _bib_authors(bibtex: str) -> list[set[str]]:
    parsed = bibtexparser.parse_string(bibtex, append_middleware=[
        mw.SeparateCoAuthors(), mw.SplitNameParts(), mw.MergeNameParts(style="first"), mw.LatexDecodingMiddleware()])
    return [{" ".join(str(a).split()) for a in e["author"]} for e in parsed.entries if "author" in e]


@pytest.mark.snapshot
def test_zotero_export_builds_offline_from_the_snapshot(shared_dir: Path, tmp_path: Path) -> None:
    warc = shared_dir / "websnap" / "snapshot.warc.gz"
    manifest = [json.loads(line) for line in (shared_dir / "websnap" / "manifest.jsonl").read_text().splitlines()]
    stored = {m["url"]: m for m in manifest if m.get("in_warc")}
    assert E2E_PDF_URL in stored and f"https://arxiv.org/pdf/{E2E_ARXIV}" in stored
    export = tmp_path / "export"
    pdf = export / "files/7/Sergeev and Del Balso - 2018 - Horovod.pdf"
    pdf.parent.mkdir(parents=True)
    pdf.write_bytes(_warc_body(warc, E2E_PDF_URL))
    from pypdf import PdfReader

    first_page = PdfReader(io.BytesIO(pdf.read_bytes())).pages[0].extract_text()
    assert E2E_TITLE.split()[0] not in first_page.split("\n")[0] and "Grünewald" not in first_page
    bib = export / "Exported Items.bib"
    bib.write_text(E2E_BIB, encoding="utf-8")

    kb = dmlqa.KnowledgeBase(tmp_path / "home", create=True)
    rep = kb.add([bib])
    assert rep.added and rep.cataloged == (f"arxiv:{E2E_ARXIV}",) and not rep.bad_entries
    report = kb.build(offline=True, archives=[warc])
    assert not [f for f in report.failed if f.stage in ("fetch", "extract", "local")], report.failed

    hits = kb.search(E2E_TITLE, k=10)
    mine = [h for h in hits if h.doc_id.startswith("local:Exported Items.bib/")]
    assert mine and mine[0].title == E2E_TITLE and all(h.page for h in mine)
    doc = kb.document(mine[0].doc_id)
    assert set(doc.authors) == E2E_AUTHORS and doc.year == 2018 and doc.content_type == "pdf"
    chen = kb.documents()[f"arxiv:{E2E_ARXIV}"]
    assert not chen.is_card and chen.content_type == "pdf" and "library:Exported Items.bib" in chen.lists
    assert set(chen.authors) >= CHEN_AUTHORS

    # written back in BibTeX with all its authors, the way `dmlqa related X --format bibtex` writes it
    items = kb.related(f"arxiv:{E2E_ARXIV}", k=5).items
    ours = [i for i in items if i.doc_id == doc.doc_id]
    assert ours, [i.doc_id for i in items]
    assert _bib_authors(kb.bibtex(ours)) == [E2E_AUTHORS]
    back = [i for i in kb.related(doc.doc_id, k=5).items if i.doc_id == chen.doc_id]
    assert _bib_authors(kb.bibtex(back))[0] >= CHEN_AUTHORS
