"""Documents as users have them (issue 29), through the running gateway, embedder and
retriever: a scanned PDF and a PNG become searchable through OCR, a table is stored as a table
chunk that answers a question about one of its cells, hits and citations carry page numbers,
a job reports pages, and a PDF with one corrupt page ingests the others with a warning."""

from __future__ import annotations

import io
import re
import time

import pytest

from bench import docset

pytestmark = pytest.mark.integration
COLLECTION = "documents29"
# One small report: two prose pages (a fact each) and a table page.
REPORT = docset.build_reports(1, seed=7, rows=6)[0]
FACTS = [q for q in REPORT.questions if q.kind == "scan"]
CELLS = [q for q in REPORT.questions if q.kind == "table"]


def _corrupt_second_page(pdf: bytes) -> bytes:
    """The PDF with page 2's content stream replaced by bytes its filter cannot decode."""
    from pypdf import PdfReader

    number = PdfReader(io.BytesIO(pdf)).pages[1].raw_get("/Contents").idnum
    head = re.search(rb"\n%d 0 obj\s*<<.*?>>\s*stream\r?\n" % number, pdf, re.DOTALL)
    assert head is not None
    end = pdf.index(b"endstream", head.end())
    return pdf[: head.end()] + b"\xff" * (end - head.end()) + pdf[end:]


def _ingest(suite, files: list) -> dict:  # type: ignore[no-untyped-def]
    reply = suite.http.post("/v1/documents", data={"collection": COLLECTION}, files=files)
    assert reply.status_code == 200, reply.text
    return {d["name"]: d for d in reply.json()["documents"]}


def _pages_holding(pdf: bytes, text: str) -> list[int]:
    """The pages of `pdf` that a chunk's `text` holds characters of: where the text sits in
    the document's text (parsed here as the gateway parses it) against where pages start."""
    from services.gateway.documents.ingest.parsers import parse_document

    doc = parse_document(pdf, "report.pdf")
    start = doc.text.index(text)
    bounds = [*doc.metadata["page_starts"], len(doc.text)]
    return [
        n
        for n in range(1, len(bounds))
        if doc.text[max(bounds[n - 1], start) : min(bounds[n], start + len(text))].strip()
    ]


@pytest.fixture(scope="module")
def ingested(suite) -> dict:  # type: ignore[no-untyped-def]
    """The report as a text PDF, and with a corrupt page (no OCR needed)."""
    reply = suite.http.post("/v1/collections", json={"name": COLLECTION})
    assert reply.status_code == 201, reply.text
    text_pdf = docset.report_pdf(REPORT)
    files = [
        ("files", ("report.pdf", text_pdf)),
        ("files", ("broken.pdf", _corrupt_second_page(text_pdf))),
    ]
    return _ingest(suite, files)


@pytest.fixture(scope="module")
def scanned(suite, ingested) -> dict:  # type: ignore[no-untyped-def]
    """Its first two pages as a scanned PDF, and page 2 as a PNG (read with OCR)."""
    scans = docset.page_images(docset.report_pdf(REPORT), dpi=200)
    files = [
        ("files", ("scan.pdf", docset.images_pdf(scans[:2]))),
        ("files", ("page2.png", docset.png(scans[1]))),
    ]
    return _ingest(suite, files)


def _search(suite, query: str, **extra: object) -> list[dict]:  # type: ignore[no-untyped-def]
    body = {"collection": COLLECTION, "query": query, "top_k": 5, **extra}
    reply = suite.http.post("/v1/search", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()["hits"]


def test_a_scanned_pdf_and_a_png_become_searchable_text(suite, ingested, scanned) -> None:  # type: ignore[no-untyped-def]
    assert scanned["scan.pdf"]["pages"] == 2 and scanned["scan.pdf"]["ocr_pages"] == 2
    assert scanned["page2.png"]["pages"] == 1 and scanned["page2.png"]["ocr_pages"] == 1
    assert ingested["report.pdf"]["ocr_pages"] == 0
    for fact in FACTS:
        hits = _search(suite, fact.text, filter={"document_id": "scan.pdf"})
        top = hits[0]
        assert fact.answer in top["text"] and fact.label in top["text"], top
        # A page read by OCR is chunked on its own: its chunks cite it alone.
        assert top["page"] == fact.page and top["pages"] == [fact.page]
        assert top["metadata"]["ocr"] is True
    second = FACTS[1]
    hits = _search(suite, second.text, filter={"document_id": "page2.png"})
    assert second.answer in hits[0]["text"] and hits[0]["page"] == 1


def test_a_table_question_is_answered_from_its_table_chunk(suite, ingested) -> None:  # type: ignore[no-untyped-def]
    assert ingested["report.pdf"]["tables"] == 1
    for cell in CELLS:
        hits = _search(suite, cell.text, filter={"document_id": "report.pdf"})
        tables = [h for h in hits if h["metadata"].get("kind") == "table"]
        assert tables, [h["text"][:80] for h in hits]
        table = tables[0]
        # The cell's row is whole, under the header and caption.
        row = next(r for r in table["text"].splitlines() if r.startswith(f"| {cell.label} |"))
        assert f" {cell.answer} |" in row
        assert table["text"].splitlines()[1].startswith("| Segment | 2021 | 2022 | 2023 |")
        assert table["text"].startswith("Table 1:")
        assert table["page"] == cell.page == 3 and table["pages"] == [3]


def test_chat_citations_carry_the_page(suite, ingested) -> None:  # type: ignore[no-untyped-def]
    fact = FACTS[1]
    body = {
        "model": "any",
        "messages": [{"role": "user", "content": fact.text}],
        "collection": COLLECTION,
        "answer_mode": "extractive",
        "filter": {"document_id": "report.pdf"},
        "max_tokens": 16,
    }
    reply = suite.http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    citations = reply.json()["citations"]
    assert citations and all(c["document_name"] == "report.pdf" for c in citations)
    assert all(isinstance(c["page"], int) and c["page"] == c["pages"][0] for c in citations)
    assert fact.page in citations[0]["pages"], citations[0]


def test_hits_name_every_page_their_text_is_on(suite, ingested) -> None:  # type: ignore[no-untyped-def]
    # Chunks run across text pages, as text runs on; each names all the pages it holds.
    pdf = docset.report_pdf(REPORT)
    for fact in FACTS:
        hits = _search(suite, fact.text, filter={"document_id": "report.pdf"})
        assert any(fact.page in h["pages"] and fact.answer in h["text"] for h in hits), hits
        for hit in hits:
            if hit["metadata"].get("kind") == "table":
                assert hit["pages"] == [3]
            else:
                assert hit["pages"] == _pages_holding(pdf, hit["text"]), hit
            assert hit["page"] == hit["pages"][0]


def test_a_corrupt_page_is_skipped_with_a_warning_and_the_rest_ingests(suite, ingested) -> None:  # type: ignore[no-untyped-def]
    broken = ingested["broken.pdf"]
    assert broken["pages"] == 3
    assert any("page 2 of 'broken.pdf' skipped" in w for w in broken["warnings"]), broken
    first, table = FACTS[0], CELLS[0]
    hits = _search(suite, first.text, filter={"document_id": "broken.pdf"})
    assert first.answer in hits[0]["text"] and hits[0]["page"] == 1
    hits = _search(suite, table.text, filter={"document_id": "broken.pdf"})
    assert any(h["page"] == 3 and table.answer in h["text"] for h in hits)
    assert all(2 not in h["pages"] for h in hits)


def test_a_job_reports_pages_done_out_of_total(suite, ingested) -> None:  # type: ignore[no-untyped-def]
    scans = docset.page_images(docset.report_pdf(REPORT), dpi=150)
    files = [("files", ("job-scan.pdf", docset.images_pdf(scans, dpi=150)))]
    reply = suite.http.post("/v1/ingest/jobs", data={"collection": COLLECTION}, files=files)
    assert reply.status_code == 202, reply.text
    job_id = reply.json()["id"]
    seen = []
    deadline = time.monotonic() + 300
    while True:
        job = suite.http.get(f"/v1/ingest/jobs/{job_id}").json()
        seen.append((job["pages_done"], job["pages_total"]))
        if job["state"] in ("succeeded", "failed", "cancelled"):
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    assert job["state"] == "succeeded", job
    assert (job["pages_done"], job["pages_total"]) == (3, 3)
    assert all(done <= total for done, total in seen)
    assert job["result"]["documents"][0]["ocr_pages"] == 3
    # The scanned table page's ruled table is found in the image and stored as a table.
    assert job["result"]["documents"][0]["tables"] == 1


def test_ragrail_ask_lists_each_source_with_its_page(suite, ingested) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from ragrail.cli import app

    fact = FACTS[1]
    args = ["ask", fact.text, "-c", COLLECTION, "--gateway", suite.gateway_url]
    args += ["--answer-mode", "extractive", "--top-k", "3", "--no-rails"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    sources = result.output.split("Sources", 1)[1]
    top = re.search(r"\[1\] (\S+), (p\. \d+|pp\. \d+-\d+|pp\. [\d, ]+\d)\b", sources)
    assert top is not None, sources
    # The fact is on page 2 of the PDFs (a chunk may run on from page 1 or onto page 3), and
    # on the only page of page2.png.
    numbers = [int(n) for n in re.findall(r"\d+", top.group(2))]
    if top.group(1) == "page2.png":
        assert numbers == [1], sources
    else:
        assert numbers[0] <= fact.page <= numbers[-1], sources


@pytest.mark.parametrize(
    ("pages", "note"),
    [([2], ", p. 2"), ([2, 3], ", pp. 2-3"), ([1, 2, 3], ", pp. 1-3"), ([1, 3], ", pp. 1, 3")],
)
def test_ask_writes_the_pages_a_source_holds(pages: list[int], note: str) -> None:
    from ragrail.show import page_note

    assert page_note({"page": pages[0], "pages": pages}) == note
    assert page_note({"page": None}) == ""
