"""Documents bench (issue 29): scans, tables and page citations, against today's parser in the
same run.

    python bench/documents.py                 # 6 reports
    python bench/documents.py --reports 2     # a quick look
    python bench/documents.py --reports 4 --quality-only --seed 31   # OCR and answers only

It builds its set (bench/docset.py: annual reports of invented companies as text PDFs with
ruled tables, the same pages rasterised as clean and as noisy scans, DOCX and HTML), starts
the suite, and a second gateway on the same embedder and retriever with today's parser
(RAGRAIL_GATEWAY_TABLES=false, RAGRAIL_GATEWAY_OCR=false: the pypdf text layer, tables
flattened, no OCR). Each format goes into a collection of its own on each gateway, one file a
request (today's parser refuses a scanned PDF, which would fail the others with it). It prints:
  * OCR character error rate of the clean and the noisy scans (prose pages, against their
    text layer; whitespace runs count as one space);
  * ingest pages/s of text PDFs (--speed-reports of them: today's parser, issue 29's, and issue
    29's with tables off, alternating, best of --repeats) and of the scans (OCR);
  * for questions whose answer is a table cell and questions whose answer is on a scanned page:
    the share whose answer-bearing chunk (one holding the answer and its row label or subject)
    is in the top 5 of /v1/search, and the share where that chunk also cites the answer's page.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import docset
from bench.common import REPO, free_port, running_suite

TODAY = {"RAGRAIL_GATEWAY_TABLES": "false", "RAGRAIL_GATEWAY_OCR": "false"}
# Issue 29's parser without table detection: what tables cost (pdfplumber, their chunks).
NO_TABLES = {"RAGRAIL_GATEWAY_TABLES": "false"}
TOP_K = 5


@contextlib.contextmanager
def second_gateway(env: dict[str, str]) -> Iterator[str]:
    """Another gateway process on the running suite's services, with `env` on top."""
    with gateway_process(env) as (url, _):
        yield url


@contextlib.contextmanager
def gateway_process(env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """`second_gateway`, yielding its URL and process id."""
    port = free_port()
    overrides = {"RAGRAIL_GATEWAY_PORT": str(port), **env}
    process = subprocess.Popen(
        [sys.executable, "-m", "services.gateway"],
        cwd=REPO,
        env={**os.environ, **overrides},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{url}/v1/health", timeout=5)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the baseline gateway did not start") from None
                time.sleep(0.2)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def cer(hypothesis: str, truth: str) -> tuple[int, int]:
    """(edit distance, length of truth) after collapsing whitespace."""
    a, b = " ".join(hypothesis.split()), " ".join(truth.split())
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1], len(b)


class Gateway:
    def __init__(self, url: str, name: str) -> None:
        self.name = name
        self.http = httpx.Client(base_url=url, timeout=900)

    def collection(self, name: str) -> str:
        self.http.delete(f"/v1/collections/{name}")
        reply = self.http.post("/v1/collections", json={"name": name})
        reply.raise_for_status()
        return name

    def ingest(self, collection: str, files: dict[str, bytes], **form: str) -> dict[str, dict]:
        """name -> its IngestedDocument, or {'error': message} for one refused."""
        out = {}
        for name, data in files.items():
            reply = self.http.post(
                "/v1/documents",
                data={"collection": collection, **form},
                files=[("files", (name, data))],
            )
            if reply.status_code == 200:
                out[name] = reply.json()["documents"][0]
            else:
                out[name] = {"error": reply.json()["error"]["message"][:120]}
        return out

    def search(self, collection: str, query: str, **extra: object) -> list[dict]:
        body = {"collection": collection, "query": query, "top_k": TOP_K, **extra}
        reply = self.http.post("/v1/search", json=body)
        reply.raise_for_status()
        return reply.json()["hits"]


def retrieval(
    gw: Gateway, collection: str, questions: list[docset.Question], suffix: str, paged: bool
) -> tuple[float, float | None]:
    """(share answered in the top 5, share also citing the page) over `questions`."""
    found = cited = 0
    for q in questions:
        hits = gw.search(collection, q.text)
        good = [
            h
            for h in hits
            if h["document_name"] == q.document + suffix
            and q.answer in h["text"]
            and q.label in h["text"]
        ]
        found += bool(good)
        cited += any(q.page in (h.get("pages") or [h["metadata"].get("page")]) for h in good)
    n = max(len(questions), 1)
    return found / n, (cited / n if paged else None)


def page_texts_via_search(gw: Gateway, collection: str, name: str) -> dict[int, str]:
    """A document's prose text per page, from its chunks (ingested without overlap)."""
    hits = gw.search(
        collection, name.split(".")[0], top_k=200, mode="dense", filter={"document_id": name}
    )
    pages: dict[int, list[tuple[int, str]]] = {}
    for h in hits:
        if h["metadata"].get("kind") == "table" or h.get("page") is None:
            continue
        pages.setdefault(h["page"], []).append((h["chunk_index"], h["text"]))
    return {p: " ".join(t for _, t in sorted(chunks)) for p, chunks in pages.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3, help="timed text-PDF ingests")
    parser.add_argument(
        "--speed-reports",
        type=int,
        default=16,
        help="text PDFs timed (more than --reports: a few seconds of ingest is noise here)",
    )
    parser.add_argument(
        "--speed-only", action="store_true", help="only the text-PDF speed (no OCR or retrieval)"
    )
    parser.add_argument(
        "--quality-only",
        action="store_true",
        help="only OCR and retrieval (no text-PDF speed; scan pages/s are still printed)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=29,
        help="the set's seed (reports and scan noise); 29 is the set docs/benchmarks.md quotes",
    )
    args = parser.parse_args()

    from pypdf import PdfReader

    print(f"building {args.reports} reports ...", flush=True)
    reports = docset.build_reports(args.reports, seed=args.seed)
    noise_base = (args.seed - 29) * 1000  # seed 29 keeps the noise the first runs had
    files: dict[str, dict[str, bytes]] = {k: {} for k in ("pdf", "scan", "noisy", "docx", "html")}
    truth: dict[str, list[str]] = {}
    for i, r in enumerate(reports):
        slug = r.questions[0].document
        pdf = docset.report_pdf(r)
        files["pdf"][f"{slug}.pdf"] = pdf
        images = docset.page_images(pdf, dpi=200)
        files["scan"][f"{slug}.pdf"] = docset.images_pdf(images)
        noisy = [docset.degrade(im, seed=noise_base + i * 10 + k) for k, im in enumerate(images)]
        files["noisy"][f"{slug}.pdf"] = docset.images_pdf(noisy)
        files["docx"][f"{slug}.docx"] = docset.report_docx(r)
        files["html"][f"{slug}.html"] = docset.report_html(r)
        truth[slug] = [p.extract_text() or "" for p in PdfReader(io.BytesIO(pdf)).pages]
    pdf_pages = sum(len(t) for t in truth.values())
    questions = [q for r in reports for q in r.questions]
    tables = [q for q in questions if q.kind == "table"]
    facts = [q for q in questions if q.kind == "scan"]
    print(f"{pdf_pages} pages; {len(tables)} table questions, {len(facts)} scanned-page ones")

    speed_reports = 0 if args.quality_only else args.speed_reports
    timed = {
        f"{r.questions[0].document}-{i}.pdf": docset.report_pdf(r)
        for i, r in enumerate(docset.build_reports(speed_reports, seed=30))
    }
    timed_pages = sum(len(PdfReader(io.BytesIO(d)).pages) for d in timed.values())

    rows: list[tuple[str, str, str]] = []
    third = contextlib.nullcontext("") if args.quality_only else second_gateway(NO_TABLES)
    with running_suite() as url, second_gateway(TODAY) as today_url, third as no_tables_url:
        new, today = Gateway(url, "issue 29"), Gateway(today_url, "today")
        no_tables = Gateway(no_tables_url, "issue 29, tables off")
        # Text-PDF ingest speed, alternating the parsers: best and median of --repeats (on a
        # shared CPU one run can be far off either way).
        speed: dict[str, list[float]] = {}
        for _ in range(0 if args.quality_only else args.repeats):
            for i, gw in enumerate((today, new, no_tables)):
                name = gw.collection(f"speed{i}")
                started = time.perf_counter()
                done = gw.ingest(name, timed)
                rate = timed_pages / (time.perf_counter() - started)
                speed.setdefault(gw.name, []).append(rate)
                chunks = sum(d.get("chunks", 0) for d in done.values())
                print(f"  {gw.name}: text PDFs {rate:.1f} pages/s, {chunks} chunks", flush=True)
        base = speed.get("today", [])
        for gw in (new, no_tables) if base else ():
            rates = speed[gw.name]
            for label, pick in (("best", max), ("median", statistics.median)):
                a, b = pick(base), pick(rates)
                rows.append(
                    (
                        f"text-PDF ingest, pages/s, {label} ({gw.name})",
                        f"{a:.1f}",
                        f"{b:.1f} ({b / a - 1:+.0%})",
                    )
                )
        results: dict[str, dict[str, tuple[float, float | None]]] = {}
        for gw in () if args.speed_only else (today, new):
            res: dict[str, tuple[float, float | None]] = {}
            for kind, docs in files.items():
                name = gw.collection(f"{kind}{gw is new:d}")
                started = time.perf_counter()
                outcome = gw.ingest(name, docs, chunk_overlap="0")
                took = time.perf_counter() - started
                refused = sum("error" in o for o in outcome.values())
                print(
                    f"  {gw.name}: {kind} ingested in {took:.1f} s, {refused} refused", flush=True
                )
                if kind in ("scan", "noisy") and gw is new:
                    rows.append(
                        (f"{kind} scans ingest (OCR), pages/s", "-", f"{pdf_pages / took:.2f}")
                    )
                    errors = total = 0
                    for slug, pages in truth.items():
                        read = page_texts_via_search(gw, name, f"{slug}.pdf")
                        for number, text in enumerate(pages, start=1):
                            if number == len(pages):
                                continue  # the table page: its cells' reading order differs
                            e, n = cer(read.get(number, ""), text)
                            errors, total = errors + e, total + n
                    rows.append((f"OCR CER, {kind} scans", "-", f"{errors / max(total, 1):.2%}"))
                suffix = {"docx": ".docx", "html": ".html"}.get(kind, ".pdf")
                paged = kind in ("pdf", "scan", "noisy")
                res[f"{kind} tables"] = retrieval(gw, name, tables, suffix, paged)
                if kind in ("pdf", "scan", "noisy"):
                    res[f"{kind} facts"] = retrieval(gw, name, facts, suffix, paged)
            results[gw.name] = res
        for key in results.get("today", {}):
            for which, label in ((0, "top-5"), (1, "top-5 with the page cited")):
                a, b = results["today"][key][which], results["issue 29"][key][which]
                if a is None or b is None:
                    continue
                rows.append((f"{key}: answer chunk {label}", f"{a:.2f}", f"{b:.2f}"))
    width = max(len(r[0]) for r in rows)
    print(f"\n{'':{width}}  {'today':>8}  {'issue 29':>14}")
    for label, a, b in rows:
        print(f"{label:{width}}  {a:>8}  {b:>14}")


if __name__ == "__main__":
    main()
