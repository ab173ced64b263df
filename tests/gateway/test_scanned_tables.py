"""Ruled tables on scanned pages and image uploads (issue 29): found in the image
(scan_grid), read cell by cell (scan_tables) and stored as table chunks, as a text PDF's are;
a page without one is read whole as before."""

from __future__ import annotations

import numpy as np
import pytest

from bench import docset
from services.gateway.documents.ingest import scan_grid
from services.gateway.documents.ingest.context import ParseContext
from services.gateway.documents.ingest.parsers import parse_document
from services.gateway.documents.ingest.scan_tables import consistent_case, consistent_numbers

# One small report: two prose pages and a ruled table of six rows under a header.
REPORT = docset.build_reports(1, seed=7, rows=6)[0]
_, CAPTION, ROWS = REPORT.tables[0]


@pytest.fixture(scope="module")
def pages() -> list:
    return docset.page_images(docset.report_pdf(REPORT), dpi=200)


@pytest.fixture(scope="module")
def noisy(pages: list) -> list:
    """The pages as a worn scanner gives them: skewed (up to 1.5 degrees), blurred, speckled,
    JPEG-compressed."""
    return [docset.degrade(page, seed=40 + k) for k, page in enumerate(pages)]


def test_a_small_letter_a_column_of_capitals_contradicts_is_mended() -> None:
    rows = [["Segment", "2021"], ["industrial sensors", "12"], ["Ports", "8"], ["Rail", "9"]]
    assert consistent_case(rows)[1][0] == "Industrial sensors"
    names = [["Shop"], ["eBay"], ["Amazon"], ["Zalando"]]
    assert consistent_case(names) == names  # e is not a capital drawn small
    two = [["Name"], ["iPhone"], ["iPad"], ["Mac"]]
    assert consistent_case(two) == two  # two small starts: the column's own style


def _levelled(image) -> np.ndarray:  # type: ignore[no-untyped-def]
    gray = np.asarray(image)
    return scan_grid.levelled(gray, scan_grid.paper_level(gray))


def test_the_grid_of_a_skewed_noisy_table_is_found(noisy: list) -> None:
    gray = _levelled(noisy[2])
    applied = float(np.random.default_rng(42).uniform(-1.5, 1.5))  # degrade's rotation
    angle = scan_grid.skew_angle(gray)
    assert angle == pytest.approx(-applied, abs=0.1)
    from PIL import Image

    level = np.asarray(Image.fromarray(gray).rotate(angle, fillcolor=255))
    grids, rules = scan_grid.find_grids(level)
    assert len(grids) == 1
    grid = grids[0]
    assert (len(grid.cells), len(grid.cells[0])) == (len(ROWS), len(ROWS[0]))
    assert all(box is not None for row in grid.cells for box in row)
    # Each cell's box holds no rule pixel: nothing of a rule is read beside its text.
    for row in grid.cells:
        for left, top, right, bottom in filter(None, row):
            assert not rules[top:bottom, left:right].any()
    caption = scan_grid.caption_box(level, grid, rules)
    assert caption is not None and caption[3] >= grid.bbox[1] > caption[1]


def test_a_prose_page_has_no_grid(noisy: list) -> None:
    gray = _levelled(noisy[0])
    assert scan_grid.find_grids(gray)[0] == []


def test_numbers_a_column_contradicts_are_mended() -> None:
    rows = [
        ["Segment", "2021", "Share"],
        ["Freight", "§,212", "1.5"],
        ["Ports", "8.803", "2.125"],
        ["Rail", "9,001", "§ 4"],
    ]
    assert consistent_numbers(rows) == [
        ["Segment", "2021", "Share"],
        ["Freight", "5,212", "1.5"],
        ["Ports", "8,803", "2.125"],  # no thousands commas in that column: decimals stay
        ["Rail", "9,001", "§ 4"],
    ]


def test_thousands_commas_a_column_implies_are_restored() -> None:
    rows = [
        ["Segment", "2021", "2022", "Share"],
        ["Freight", "6.155", "1177", "1.5"],
        ["Ports", "2,579", "3,878", "0.125"],
        ["Rail", "8.289", "2,178", "2.5"],
        ["Air", "553", "9,001", "4.0"],
    ]
    assert consistent_numbers(rows) == [
        ["Segment", "2021", "2022", "Share"],  # a year in the header is not an amount
        ["Freight", "6,155", "1,177", "1.5"],
        ["Ports", "2,579", "3,878", "0.125"],  # no comma in that column: decimals stay
        ["Rail", "8,289", "2,178", "2.5"],
        ["Air", "553", "9,001", "4.0"],
    ]
    mixed = [["Item", "Value"], ["a", "1,234"], ["b", "2.125"], ["c", "1.5"]]
    assert consistent_numbers(mixed) == mixed  # one comma beside decimals: they stay


def _check_cells(rows: list[list[str]]) -> None:
    """The header and every figure read right; the row labels but two at most (the noise
    leaves a t's crossbar faint: "Data cenires")."""
    assert len(rows) == len(ROWS) and all(len(r) == len(ROWS[0]) for r in rows), rows
    assert rows[0] == ROWS[0]
    assert [r[1:] for r in rows] == [r[1:] for r in ROWS]
    assert sum(got[0] == want[0] for got, want in zip(rows, ROWS, strict=True)) >= len(ROWS) - 2


def test_a_scanned_table_becomes_a_markdown_table(noisy: list) -> None:
    doc = parse_document(docset.png(noisy[2]), "table.png")
    assert len(doc.tables) == 1
    table = doc.tables[0]
    assert table.page == 1 and table.caption.startswith("Table 1:")
    assert REPORT.company.split()[0] in table.caption
    _check_cells(table.rows)
    markdown = table.markdown().splitlines()
    assert (
        markdown[1] == "| Segment | 2021 | 2022 | 2023 |"
        and markdown[2] == "| --- | --- | --- | --- |"
    )
    # The page's prose is read without the table: its sentence above it, no cell values.
    assert "reports its" in doc.text
    assert not any(v in doc.text for row in ROWS[1:] for v in row[1:])


def test_a_scanned_pdf_page_cites_its_table_and_tables_off_reads_it_whole(noisy: list) -> None:
    scan = docset.images_pdf(noisy[1:])
    doc = parse_document(scan, "scan.pdf")
    assert doc.metadata["ocr_pages"] == [1, 2]
    assert [t.page for t in doc.tables] == [2]
    _check_cells(doc.tables[0].rows)

    whole = parse_document(docset.png(noisy[2]), "table.png", ctx=ParseContext(find_tables=False))
    assert whole.tables == []
    assert ROWS[1][0] in whole.text  # the table's text is in the page's, as before
