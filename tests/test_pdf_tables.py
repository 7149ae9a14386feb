"""PDF tables become quotable rows with their headers (extract/tables.py), on PDFs the tests draw with fpdf2."""

from __future__ import annotations

import pytest
from fixtures_docs import prose

from dmlqa.extract.documents import extract_bytes, to_document
from dmlqa.extract.sentences import ROW, split_document
from dmlqa.extract.table_layout import aligned_tables
from dmlqa.extract.tables import caption_labels, table_rows
from dmlqa.models import Resource

fpdf = pytest.importorskip("fpdf", reason="fpdf2 (test extra) draws the table PDFs")

HEADER = ("model", "GPUs", "throughput")
ROWS = (("GPT-3 175B", "1024", "140 TFLOPs"), ("Megatron 530B", "2240", "113 TFLOPs"), ("T5 11B", "256", "98 TFLOPs"))


def _table_pdf(caption: str | None, *, table_page: int = 2) -> bytes:
    """Pages of prose; on ``table_page`` a ruled table (``HEADER`` over ``ROWS``) under ``caption``."""
    pdf = fpdf.FPDF(unit="pt")
    pdf.set_font("Helvetica", size=10)
    for number in range(1, 4):
        pdf.add_page()
        pdf.multi_cell(0, 13, prose(6, number))
        if number == table_page:
            pdf.ln(10)
            if caption:
                pdf.multi_cell(0, 13, caption)
            with pdf.table(col_widths=(60, 30, 40), width=300) as table:
                for cells in (HEADER, *ROWS):
                    row = table.row()
                    for cell in cells:
                        row.cell(cell)
            pdf.ln(10)
            pdf.multi_cell(0, 13, prose(3, 9))
    return bytes(pdf.output())


def _expected(label: str) -> list[str]:
    return [f"{label}: {' · '.join(HEADER)} — {' · '.join(row)}" for row in ROWS]


def test_a_captioned_table_gives_one_row_a_line_with_its_headers_on_its_page() -> None:
    ex = extract_bytes(_table_pdf("Table 3: Throughput per GPU of three models."), "application/pdf",
                       url="https://example.org/t.pdf")
    tables = [b for b in ex.blocks if b.section == "Table 3"]
    assert len(tables) == 1
    assert tables[0].page == 2 and tables[0].text.split("\n") == _expected("Table 3")
    # the page text is all still there, page by page, the table block right after its page
    assert [b.page for b in ex.blocks] == [1, 2, 2, 3]
    assert prose(3, 9)[:40] in " ".join(ex.blocks[1].text.split())


def test_table_rows_are_quotable_row_sentences() -> None:
    ex = extract_bytes(_table_pdf("Table 3: Throughput per GPU of three models."), "application/pdf")
    doc = to_document(Resource(id="t", url="https://example.org/t.pdf", title="Throughput"), ex,
                      source_url="https://example.org/t.pdf", sha256="")
    rows = [s for s in split_document(doc) if s.section == "Table 3"]
    assert [s.text for s in rows] == _expected("Table 3")
    assert all(s.role == ROW and s.quotable and s.page == 2 for s in rows)
    for s in rows:  # the offsets point at the row in the document's text
        assert " ".join(doc.text[s.start : s.end].split()) == s.text


def test_a_table_without_a_caption_adds_nothing() -> None:
    ex = extract_bytes(_table_pdf(None), "application/pdf")
    assert all(b.section is None for b in ex.blocks)
    assert [b.page for b in ex.blocks] == [1, 2, 3]


def test_stacked_cells_become_one_row_each_and_a_lone_cell_holds_for_all() -> None:
    grid = [["Model", "Batch\nsize", "Learning\nrate"],
            ["336M\n1.3B\n3.8B", "128", "1e-5\n2e-5\n3e-5"]]
    assert table_rows("Table 6", grid) == [
        "Table 6: Model · Batch size · Learning rate — 336M · 128 · 1e-5",
        "Table 6: Model · Batch size · Learning rate — 1.3B · 128 · 2e-5",
        "Table 6: Model · Batch size · Learning rate — 3.8B · 128 · 3e-5",
    ]


def test_a_spanning_cell_is_carried_down_and_wrapped_compounds_rejoined() -> None:
    grid = [["Scheme", "Tensor model-\nparallel size", "GPUs"],
            ["ZeRO-3 without\nModel Parallelism", "1", "384"],
            [None, None, "768"]]
    assert table_rows("Table 2", grid) == [
        "Table 2: Scheme · Tensor model-parallel size · GPUs — ZeRO-3 without Model Parallelism · 1 · 384",
        "Table 2: Scheme · Tensor model-parallel size · GPUs — ZeRO-3 without Model Parallelism · 1 · 768",
    ]


@pytest.mark.parametrize("grid", [
    [["1", "2"], ["3", "4"]],  # no column names
    [["Model", "GPUs"]],  # a header alone
    [["Model", "Notes"], ["GPipe", "pipeline stages"]],  # no figure in any row: not data
])
def test_grids_that_are_no_data_table_give_no_rows(grid: list[list[str]]) -> None:
    assert table_rows("Table 1", grid) == []


def _caption(top: float, label: str, x0: float = 100.0, x1: float = 200.0) -> tuple[float, float, float, float, str]:
    return (top, top + 10.0, x0, x1, label)


def test_each_caption_names_one_table_on_the_side_the_page_sets_its_captions() -> None:
    """Boxes are (x0, top, x1, bottom) in PDF points, top down. Captions over their tables: the caption under the
    first table is the second table's, never the first's, however close (the snapshot's "Table 4" over Table 3's
    rows)."""
    over = [(100, 300, 500, 400), (100, 460, 500, 600)]
    assert caption_labels(over, [_caption(285, "Table 3"), _caption(445, "Table 4")]) == ["Table 3", "Table 4"]
    # captions under their tables: the same by the other side
    under = [(100, 100, 500, 200), (100, 260, 500, 400)]
    assert caption_labels(under, [_caption(205, "Table 1"), _caption(405, "Table 2")]) == ["Table 1", "Table 2"]
    # one caption names one box: a figure's boxes beside the table get none
    boxes = [(100, 100, 300, 200), (100, 210, 300, 260), (100, 300, 500, 400)]
    assert caption_labels(boxes, [_caption(285, "Table 3")]) == [None, None, "Table 3"]
    # the closest pair of the page first, whichever box comes first: a figure across the page's other column does
    # not take the caption under the table of its own column
    boxes = [(307, 67, 539, 134), (74, 134, 268, 230)]
    assert caption_labels(boxes, [_caption(240, "Table 6", 139, 168)]) == [None, "Table 6"]
    # no caption within reach: no table
    assert caption_labels([(100, 100, 500, 200)], [_caption(700, "Table 9")]) == [None]


def _drawn_pdf(caption: str, lines: tuple[tuple[str, ...], ...]) -> bytes:
    """A page of prose, a caption, then ``lines`` drawn as words at four columns' places with no rule at all, then
    more prose."""
    pdf = fpdf.FPDF(unit="pt")
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.multi_cell(0, 13, prose(6, 1))
    y = pdf.get_y() + 20
    pdf.text(60, y, caption)
    for row, cells in enumerate(lines):
        for x, cell in zip((60, 220, 300, 380), cells, strict=True):
            pdf.text(x, y + 20 + 14 * row, cell)
    pdf.set_y(y + 30 + 14 * len(lines))
    pdf.multi_cell(0, 13, prose(3, 9))
    return bytes(pdf.output())


def _unruled_pdf(caption: str) -> bytes:
    return _drawn_pdf(caption, (("Model", "GLUE", "SQuAD", "SuperGLUE"), ("T5-Base", "82.9", "83.5", "72.4"),
                                ("Switch-Base", "84.7", "83.7", "73.0"), ("Switch-Large", "86.8", "87.0", "77.1")))


def test_a_table_ruled_by_no_line_is_read_by_its_columns() -> None:
    """Most papers rule a table across only: the finder sees no cells, and the text layer holds bare figures. The
    words' columns say which figure is which: each row is quoted with its headers, its bare twin never."""
    ex = extract_bytes(_unruled_pdf("Table 4: Fine-tuning results of three models."), "application/pdf",
                       url="https://example.org/u.pdf")
    tables = [b for b in ex.blocks if b.section == "Table 4"]
    assert len(tables) == 1 and tables[0].text.split("\n") == [
        "Table 4: Model · GLUE · SQuAD · SuperGLUE — T5-Base · 82.9 · 83.5 · 72.4",
        "Table 4: Model · GLUE · SQuAD · SuperGLUE — Switch-Base · 84.7 · 83.7 · 73.0",
        "Table 4: Model · GLUE · SQuAD · SuperGLUE — Switch-Large · 86.8 · 87.0 · 77.1"]
    doc = to_document(Resource(id="u", url="https://example.org/u.pdf", title="Unruled"), ex,
                      source_url="https://example.org/u.pdf", sha256="")
    rows = [s for s in split_document(doc) if s.role == ROW]
    assert [s.text for s in rows] == tables[0].text.split("\n")  # no bare "Switch-Base 84.7 83.7 73.0"
    # without a caption it is no table
    assert not [b for b in extract_bytes(_unruled_pdf("Results of three models."), "application/pdf").blocks
                if b.section]


def _words(*lines: tuple[float, list[tuple[float, str]]]) -> list[dict]:
    """pdfplumber's words: each line's top and its words' left edges (6 points a character)."""
    return [{"text": t, "x0": x, "x1": x + 6 * len(t), "top": top, "bottom": top + 9} for top, ws in lines
            for x, t in ws]


def test_columns_give_each_figure_its_header_and_a_guess_gives_no_table() -> None:
    header = (100, [(60, "Model"), (200, "GLUE"), (260, "SQuAD")])
    rows = [(114, [(60, "T5-Base"), (200, "82.9"), (262, "83.5")]), (128, [(60, "Switch-Base"), (201, "84.7"),
                                                                        (260, "83.7")])]
    [(box, grid)] = aligned_tables(_words(header, *rows))
    assert grid == [["Model", "GLUE", "SQuAD"], ["T5-Base", "82.9", "83.5"], ["Switch-Base", "84.7", "83.7"]]
    assert box == (60, 100, 290, 137)
    # a header over two lines, each naming every column; a name over one column of several spans them: left out
    over = (88, [(60, "Model"), (200, "Dev"), (260, "Test")])
    assert aligned_tables(_words(over, header, *rows))[0][1][0] == ["Model Model", "Dev GLUE", "Test SQuAD"]
    span = (88, [(230, "Accuracy")])
    assert aligned_tables(_words(span, header, *rows))[0][1][0] == ["Model", "GLUE", "SQuAD"]
    # a header word between two columns, figures out of their column, one row, a row short of a figure: no table
    assert aligned_tables(_words((100, [(60, "Model"), (200, "GLUE"), (239, "x"), (260, "SQuAD")]), *rows)) == []
    assert aligned_tables(_words(header, *rows, (142, [(60, "Switch-Large"), (140, "86.8"), (260, "87.0")]))) == []
    assert aligned_tables(_words(header, rows[0])) == []
    assert aligned_tables(_words(header, rows[0], (128, [(60, "Switch-Base"), (201, "84.7")]))) == []


def test_a_bracketed_pair_is_one_cell_and_a_size_in_the_header_is_part_of_a_name() -> None:
    """GPipe's Table 1: "(18," "208)" are one cell, and "(8GB each)" in the header names the labels' column."""
    words = _words((100, [(122, "NVIDIA"), (156, "GPUs"), (179, "(8GB"), (201, "each)"), (251, "Naive-1"),
                          (294, "Pipeline-1"), (343, "Pipeline-2")]),
                   (114, [(122, "AmoebaNet-D"), (249, "(18,"), (265, "208)"), (296, "(18,"), (312, "416)"),
                          (345, "(18,"), (361, "544)")]),
                   (128, [(122, "#"), (128, "of"), (138, "Parameters"), (257, "82M"), (301, "318M"), (350, "542M")]))
    [(_, grid)] = aligned_tables(words)
    assert grid == [["NVIDIA GPUs (8GB each)", "Naive-1", "Pipeline-1", "Pipeline-2"],
                    ["AmoebaNet-D", "(18, 208)", "(18, 416)", "(18, 544)"],
                    ["# of Parameters", "82M", "318M", "542M"]]
    # a line mostly of figures is no header
    assert aligned_tables(_words((100, [(122, "Batch"), (251, "16"), (294, "32"), (343, "64")]), *[
        (114 + 14 * k, [(122, f"run{k}"), (251, "1.0"), (294, "2.0"), (343, "3.0")]) for k in range(2)])) == []


def _stacked_pdf() -> bytes:
    """One caption over two tables, the second right under the first."""
    return _drawn_pdf("Table 1: Maximum model size under different scenarios.", (
        ("GPUs", "Naive-1", "Pipeline-2", "Pipeline-8"), ("Layers", "18", "36", "72"),
        ("Parameters", "82M", "542M", "1.8B"), ("TPUs", "Naive-1", "Pipeline-8", "Pipeline-32"),
        ("Layers", "3", "103", "415"), ("Parameters", "282M", "5.3B", "21.0B")))


def test_a_table_stacked_right_under_another_shares_its_caption() -> None:
    ex = extract_bytes(_stacked_pdf(), "application/pdf", url="https://example.org/s.pdf")
    rows = [line for b in ex.blocks if b.section == "Table 1" for line in b.text.split("\n")]
    assert rows == ["Table 1: GPUs · Naive-1 · Pipeline-2 · Pipeline-8 — Layers · 18 · 36 · 72",
                    "Table 1: GPUs · Naive-1 · Pipeline-2 · Pipeline-8 — Parameters · 82M · 542M · 1.8B",
                    "Table 1: TPUs · Naive-1 · Pipeline-8 · Pipeline-32 — Layers · 3 · 103 · 415",
                    "Table 1: TPUs · Naive-1 · Pipeline-8 · Pipeline-32 — Parameters · 282M · 5.3B · 21.0B"]
